set terminal pngcairo enhanced size 1300,620 font 'DejaVu Sans,11' background rgb 'white'
set output 'fig3-drift-map.png'
load 'fig3-drift-map.params.gp'
# Figure 3 of the README: the drift map, one panel per family.  The parameters (loaded before this
# script, from fig3-drift-map.params.gp, lib/src/drift/figures.cpp) give per panel its title, data
# file, x range, number of rows (recipe x policy) and the rows' labels (a gnuplot tics list).
set multiplot layout 1,2 title 'Figure 3. Drift map: where numerical rank != certified exact rank (bars), per recipe x policy'
do for [p=1:2] {
  set title panel_title[p]
  set logscale x
  set format x '10^{%L}'
  set xrange [panel_from[p]:panel_to[p]]
  set yrange [-1:panel_rows[p]]
  eval 'set ytics ' . panel_ytics[p] . " font ',9'"
  set xlabel 'score scale a'
  set grid x
  set key off
  set lmargin 30
  plot panel_data[p] using 2:1:($3-$2):(0):($4) with vectors nohead lw 7 lc variable
}
unset multiplot
unset output
