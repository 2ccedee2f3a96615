# Host bw by window depth against ucx_perftest, side by side in each round (5 rounds): would a
# 128 KiB in-flight budget (8 at 16 KiB, 32 at 4 KiB, 2 at 64 KiB) beat today's 256 KiB on this host?
#   bash sweep.sh "16KiB 4,8,c8" "4KiB 16,32,c32"      (SIZE WINDOWS per argument; cN: checked)
. measurements/window-20261124/prefix.sh
lscpu > $OUT/env.txt 2>&1
for spec in "$@"; do
  set -- $spec
  timeout -s KILL 250 python3 measurements/window-20261124/window_sweep.py 5 $1 $2 $OUT/sweep-$1.json > $OUT/sweep-$1.txt 2>&1
  tail -8 $OUT/sweep-$1.txt
done
