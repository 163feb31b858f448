set terminal pngcairo enhanced size 900,560 font 'DejaVu Sans,11' background rgb 'white'
set output 'fig4-sigma-min.png'
set title "Figure 4. Two-token family: smallest singular value of A per recipe (exact zeros: bottom row)"
set logscale xy
set format x '10^{%L}'
set format y '10^{%L}'
set xlabel 'score scale a'
set ylabel 'smallest singular value'
set key left top box opaque
set grid
set datafile missing 'NaN'
set yrange [1.0000000000000001e-23:*]
set label 'exact 0 (formed matrix rank-deficient over Q)' at graph 0.99, first 3e-22 right font ',9'
plot 'fig4-sigma-min.dat' using 1:2:3 with filledcurves lc rgb '#bbbbbb' title 'certified enclosure (exact {/Symbol s}_{min})', \
     '' using 1:(sqrt($2*$3)) with lines lc rgb 'black' lw 1 notitle, \
     '' using 1:4 with points lc rgb '#d62728' pt 7 ps 0.8 title 'mpfr256', \
     '' using 1:5 with points lc rgb '#1f77b4' pt 5 ps 0.8 title 'fp64', \
     '' using 1:6 with points lc rgb '#2ca02c' pt 9 ps 0.8 title 'fp32', \
     '' using 1:7 with points lc rgb '#9467bd' pt 11 ps 0.8 title 'bf16-fp32acc', \
     '' using 1:8 with points lc rgb '#ff7f0e' pt 13 ps 0.8 title 'fp16', \
     '' using 1:($9 > 0 ? 1e-22 / 1 : NaN) with points lc rgb '#d62728' pt 7 ps 0.5 notitle, \
     '' using 1:($10 > 0 ? 1e-22 / 1.6 : NaN) with points lc rgb '#1f77b4' pt 5 ps 0.5 notitle, \
     '' using 1:($11 > 0 ? 1e-22 / 2.5600000000000005 : NaN) with points lc rgb '#2ca02c' pt 9 ps 0.5 notitle, \
     '' using 1:($12 > 0 ? 1e-22 / 4.096000000000001 : NaN) with points lc rgb '#9467bd' pt 11 ps 0.5 notitle, \
     '' using 1:($13 > 0 ? 1e-22 / 6.553600000000001 : NaN) with points lc rgb '#ff7f0e' pt 13 ps 0.5 notitle
unset output
