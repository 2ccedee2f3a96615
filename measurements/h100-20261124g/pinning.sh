# ucx_perftest's spread by placement of its two processes (pinning.py), and the host's CPU layout.
. measurements/window-20261124/prefix.sh
lscpu -e > $OUT/lscpu-e.txt 2>&1
timeout -s KILL 500 python3 measurements/h100-20261124g/pinning.py $OUT/pinning.json 2>&1 | tee $OUT/pinning.txt
