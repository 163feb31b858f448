set terminal pngcairo enhanced size 900,560 font 'DejaVu Sans,11' background rgb 'white'
set output 'fig4-sigma-min.png'
load 'fig4-sigma-min.params.gp'
# The smallest singular value per recipe against the certified enclosure of the exact one: figure 4 of the
# README and `attncert drift --plot`.  The parameters (loaded before this script, lib/src/drift/figures.cpp):
# plot_title, data_file (columns: a, enclosure lo, hi, then one sigma_min per recipe, then with exact zeros
# one 0/1 flag per recipe), nrec and the arrays recipe, color, point; zeros_at > 0 draws the exact zeros
# apart at the bottom (recipe i at zero_y[i]), 0 draws none.
set title plot_title
set logscale xy
set format x '10^{%L}'
set format y '10^{%L}'
set xlabel 'score scale a'
set ylabel 'smallest singular value'
set key left top box opaque
set grid
set datafile missing 'NaN'
if (zeros_at > 0) {
  set yrange [zeros_low:*]
  set label 'exact 0 (formed matrix rank-deficient over Q)' at graph 0.99, first zeros_label_y right font ',9'
  plot data_file using 1:2:3 with filledcurves lc rgb '#bbbbbb' title 'certified enclosure (exact {/Symbol s}_{min})', \
       '' using 1:(sqrt($2*$3)) with lines lc rgb 'black' lw 1 notitle, \
       for [c=4:3+nrec] '' using 1:c with points lc rgb color[c-3] pt point[c-3] ps 0.8 title recipe[c-3], \
       for [c=4+nrec:3+2*nrec] '' using 1:(column(c) > 0 ? zero_y[c-3-nrec] : NaN) with points lc rgb color[c-3-nrec] pt point[c-3-nrec] ps 0.5 notitle
} else {
  plot data_file using 1:2:3 with filledcurves lc rgb '#bbbbbb' title 'certified enclosure (exact {/Symbol s}_{min})', \
       '' using 1:(sqrt($2*$3)) with lines lc rgb 'black' lw 1 notitle, \
       for [c=4:3+nrec] '' using 1:c with points lc rgb color[c-3] pt point[c-3] ps 0.8 title recipe[c-3]
}
unset output
