# ucx_perftest's spread by placement of its two processes (pinning.py), and the host's CPU layout.
. results/window-20261124/prefix.sh
lscpu -e > $OUT/lscpu-e.txt 2>&1
timeout -s KILL 500 python3 results/h100-20261124g/pinning.py $OUT/pinning.json 2>&1 | tee $OUT/pinning.txt
