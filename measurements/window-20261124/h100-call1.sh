# H100 call 1: host bw by window depth at 64 KiB (5 rounds against ucx_perftest), then the device
# anchor at 1 MiB (bw, both ranks on the one GPU), three runs.
. measurements/window-20261124/prefix.sh
nproc; lscpu | grep -E "Model name|L2 cache" > $OUT/env.txt
timeout -s KILL 330 python3 measurements/window-20261124/window_sweep.py 5 64KiB 2,4,8,16 $OUT/h100-win64.json 2>&1 | tee $OUT/h100-win64.txt
for i in 1 2 3; do
  timeout -s KILL 80 python3 -m rdmabench anchor --mode device --sizes 1MiB --tests bw -o $OUT/anchor-dev-$i.json > $OUT/anchor-dev-$i.txt 2>&1; grep -E "^bw" $OUT/anchor-dev-$i.txt
done
