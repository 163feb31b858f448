# The certified bound and the measured error at each block's output against depth (`attncert block-bound
# --plot`).  Parameters (loaded before this script, lib/src/report/block.cpp): plot_title, data_file (one data
# block per approximation: depth, measured lo, measured hi, bound with the article's local term, bound with the
# direct local term), napprox and approx_names (blank-separated).
set title plot_title
set logscale y
set format y '10^{%L}'
set xlabel 'block (depth)'
set ylabel 'max over tokens of ||x^ - x||_2'
set xtics 1
set key outside right top box
set grid
set datafile missing 'NaN'
colors = "#1f77b4 #d62728 #2ca02c #9467bd #ff7f0e #8c564b #e377c2 #7f7f7f"
plot for [i=0:napprox-1] data_file index i using 1:4 with linespoints lw 2 pt 7 lc rgb word(colors, i % 8 + 1) title word(approx_names, i+1).' bound (article)', \
     for [i=0:napprox-1] data_file index i using 1:5 with linespoints lw 1 dt 3 pt 6 lc rgb word(colors, i % 8 + 1) title word(approx_names, i+1).' bound (direct)', \
     for [i=0:napprox-1] data_file index i using 1:3 with linespoints lw 2 dt 2 pt 5 lc rgb word(colors, i % 8 + 1) title word(approx_names, i+1).' measured'
