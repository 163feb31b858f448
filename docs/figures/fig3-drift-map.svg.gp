set terminal svg enhanced size 1300,620 font 'DejaVu Sans,11' background rgb 'white'
set output 'fig3-drift-map.svg'
set multiplot layout 1,2 title 'Figure 3. Drift map: where numerical rank != certified exact rank (bars), per recipe x policy'
set title 'two-token: S = a qk^T, attention'
set logscale x
set format x '10^{%L}'
set xrange [1e-20:100]
set yrange [-1:21]
set ytics ('fp16  numpy' 20, 'fp16  relative:0.001' 19, 'fp16  absolute:1e-06' 18, 'bf16  numpy' 17, 'bf16  relative:0.001' 16, 'bf16  absolute:1e-06' 15, 'fp16-fp32acc  numpy' 14, 'fp16-fp32acc  relative:0.001' 13, 'fp16-fp32acc  absolute:1e-06' 12, 'bf16-fp32acc  numpy' 11, 'bf16-fp32acc  relative:0.001' 10, 'bf16-fp32acc  absolute:1e-06' 9, 'fp32  numpy' 8, 'fp32  relative:0.001' 7, 'fp32  absolute:1e-06' 6, 'fp64  numpy' 5, 'fp64  relative:0.001' 4, 'fp64  absolute:1e-06' 3, 'mpfr256  numpy' 2, 'mpfr256  relative:0.001' 1, 'mpfr256  absolute:1e-06' 0) font ',9'
set xlabel 'score scale a'
set grid x
set key off
set lmargin 30
plot 'fig3-drift-map.two-token.dat' using 2:1:($3-$2):(0):($4) with vectors nohead lw 7 lc variable
set title 'causal: S = -a I, causal mask (n = 4), attention'
set logscale x
set format x '10^{%L}'
set xrange [0.01:1000]
set yrange [-1:21]
set ytics ('fp16  numpy' 20, 'fp16  relative:0.001' 19, 'fp16  absolute:1e-06' 18, 'bf16  numpy' 17, 'bf16  relative:0.001' 16, 'bf16  absolute:1e-06' 15, 'fp16-fp32acc  numpy' 14, 'fp16-fp32acc  relative:0.001' 13, 'fp16-fp32acc  absolute:1e-06' 12, 'bf16-fp32acc  numpy' 11, 'bf16-fp32acc  relative:0.001' 10, 'bf16-fp32acc  absolute:1e-06' 9, 'fp32  numpy' 8, 'fp32  relative:0.001' 7, 'fp32  absolute:1e-06' 6, 'fp64  numpy' 5, 'fp64  relative:0.001' 4, 'fp64  absolute:1e-06' 3, 'mpfr256  numpy' 2, 'mpfr256  relative:0.001' 1, 'mpfr256  absolute:1e-06' 0) font ',9'
set xlabel 'score scale a'
set grid x
set key off
set lmargin 30
plot 'fig3-drift-map.causal.dat' using 2:1:($3-$2):(0):($4) with vectors nohead lw 7 lc variable
unset multiplot
unset output
