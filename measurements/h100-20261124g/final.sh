# The anchor on the session's final code (completion by callback), 5 rounds, host memory.
. results/window-20261124/prefix.sh
timeout -s KILL 540 python3 -m rdmabench anchor --mode host --sizes 8,4KiB,16KiB,64KiB,1MiB --tests bw --repeat 5 \
  -o $OUT/bw-final-r5.json > $OUT/bw-final-r5.txt 2>&1
echo "rc=$?" >> $OUT/bw-final-r5.txt
tail -13 $OUT/bw-final-r5.txt
