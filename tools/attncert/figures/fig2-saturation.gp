# Figure 2 of the README: tanh a and its derivative 1 - tanh^2 a (data: fig2-saturation.dat, written by
# `attncert figures`, lib/src/drift/figures.cpp).
set title 'Figure 2. Contrast transmission and its sensitivity to the score scale (two-token family)'
set xlabel 'score scale a (dimensionless)'
set ylabel 'dimensionless'
set grid
set yrange [0:1.05]
set key center right box opaque
plot 'fig2-saturation.dat' using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'contrast transmission tanh a', \
     '' using 1:3 with lines lw 2 dt 2 lc rgb '#d62728' title 'its derivative d/da tanh a = 1 - tanh^2 a'
