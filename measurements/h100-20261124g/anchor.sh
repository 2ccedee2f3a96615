# The anchor with ucx_perftest bracketing rdmabench (before and after), 5 rounds, host memory.
. results/window-20261124/prefix.sh
timeout -s KILL 540 python3 -m rdmabench anchor --mode host --sizes 4KiB,16KiB,64KiB,1MiB,64MiB --tests bw --repeat 5 \
  -o $OUT/bw-r5.json > $OUT/bw-r5.txt 2>&1
echo "rc=$?" >> $OUT/bw-r5.txt
tail -14 $OUT/bw-r5.txt
