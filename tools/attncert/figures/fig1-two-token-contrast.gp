# Figure 1 of the README: the two-token family's contrast eigenvalue and det A, exact and formed.
# Data: fig1-two-token-contrast.exact.dat (the certified enclosure of tanh a, P01) and
# fig1-two-token-contrast.points.dat (A formed in fp32 and fp64), written by `attncert figures`
# (lib/src/drift/figures.cpp), which runs this script after the terminal and output lines.
set multiplot layout 1,2 title 'Figure 1. Two-token family S = a qk^T: contrast eigenvalue and det A (both tanh a)'
set datafile missing 'NaN'
set grid
set key right bottom box opaque
set title 'linear scales'
set xlabel 'score scale a'
set ylabel 'contrast eigenvalue, det A'
set yrange [0:1.05]
plot 'fig1-two-token-contrast.exact.dat' index 0 using 1:(($2+$3)/2) with lines lc rgb 'black' lw 2 title 'exact tanh a (certified)', \
     'fig1-two-token-contrast.points.dat' index 0 using 1:4 with points lc rgb '#1f77b4' pt 6 ps 1.2 title 'eigenvalue, fp64', \
     '' index 0 using 1:5 with points lc rgb '#1f77b4' pt 2 ps 0.8 title 'det, fp64', \
     '' index 0 using 1:2 with points lc rgb '#d62728' pt 7 ps 0.5 title 'eigenvalue, fp32', \
     '' index 0 using 1:3 with points lc rgb '#d62728' pt 1 ps 0.8 title 'det, fp32'
set key left top box opaque
set logscale xy
set format x '10^{%L}'
set format y '10^{%L}'
set yrange [1e-13:2]
set title 'near a = 0 (log scales; a computed 0 is not drawn)'
plot 'fig1-two-token-contrast.exact.dat' index 1 using 1:(($2+$3)/2) with lines lc rgb 'black' lw 2 title 'exact tanh a (certified)', \
     'fig1-two-token-contrast.points.dat' index 1 using 1:($4>0?$4:NaN) with points lc rgb '#1f77b4' pt 6 ps 1.2 title 'eigenvalue, fp64', \
     '' index 1 using 1:($5>0?$5:NaN) with points lc rgb '#1f77b4' pt 2 ps 0.8 title 'det, fp64', \
     '' index 1 using 1:($2>0?$2:NaN) with points lc rgb '#d62728' pt 7 ps 0.5 title 'eigenvalue, fp32', \
     '' index 1 using 1:($3>0?$3:NaN) with points lc rgb '#d62728' pt 1 ps 0.8 title 'det, fp32'
unset multiplot
