# Figure 5: the rank-heads trade-off (proofs/L4) for d = 4 and d = 8, against the number H of rank-one heads.
# Data (checks/rank_heads_tradeoff.cpp, rank_heads_figure): per d, fig5-rank-heads.d<d>.one-layer.dat (H, the
# lower end of LB for every one-layer network without and with a residual path), .two-layers.dat (H, the ends of
# the vote construction's mean MSE) and .full-rank.dat (lambda, the upper end of one full-rank head's MSE).
# Parameters: dims (blank-separated).
set multiplot layout 1,2 title 'Rank-one heads against one full-rank head: certified MSE on the N = 2 distribution'
set logscale x 2
set logscale y
set format x '2^{%L}'
set xtics 4
set format y '10^{%L}'
set xlabel 'rank-one heads H'
set ylabel 'MSE'
set grid
set key bottom left box opaque
set datafile missing 'NaN'
do for [i=1:words(dims)] {
  d = word(dims, i)
  stem = 'fig5-rank-heads.d'.d
  set title 'd = '.d
  full = stem.'.full-rank.dat'
  f100 = real(system("awk '$1 == 100 { print $2 }' ".full))
  f1000 = real(system("awk '$1 == 1000 { print $2 }' ".full))
  set yrange [1e-6:1]
  plot stem.'.one-layer.dat' using 1:($2 > 0 ? $2 : NaN) with linespoints lw 2 pt 7 lc rgb '#d62728' title 'one layer: every network >= (no residual)', \
       stem.'.one-layer.dat' using 1:($3 > 0 ? $3 : NaN) with linespoints lw 1 dt 2 pt 6 lc rgb '#d62728' title 'one layer: every network >= (residual)', \
       stem.'.two-layers.dat' using 1:3 with linespoints lw 2 pt 5 lc rgb '#1f77b4' title 'two layers: some network <= (vote)', \
       f100 with lines lw 2 dt 3 lc rgb '#2ca02c' title 'one full-rank head, lambda = 100', \
       f1000 with lines lw 2 dt 4 lc rgb '#9467bd' title 'one full-rank head, lambda = 1000'
}
unset multiplot
