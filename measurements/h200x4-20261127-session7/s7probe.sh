#!/bin/bash
# Session 7, device call: the beside load alone from idle, on every GPU at once (devtools/probes/loadtrend.py).
set -u
[ -d /tmp/site ] || tar xzf .carry/site.tgz -C /tmp
export PYTHONPATH=/tmp/site:$PWD LD_LIBRARY_PATH=/tmp/site/libucx/lib PYTHONUNBUFFERED=1
{ nvidia-smi -L; date -u; } > $OUT/info.txt 2>&1
timeout -s KILL 120 python3 -c "from rdmabench.wire import gpuload; print(gpuload.load().note)" >> $OUT/info.txt 2>&1
NG=$(nvidia-smi -L | wc -l)
for g in $(seq 0 $((NG - 1))); do timeout -s KILL 60 python3 -m devtools.probes.loadtrend --gpu $g --seconds 6 --rest 1.5 --again 2 > $OUT/t$g.txt 2>&1 & done; wait
cat $OUT/t*.txt > $OUT/loadtrend.txt; rm $OUT/t*.txt
# the same with the GPUs idle 3 s before (as after a row's transfer-alone halves and its one-message rows)
for g in $(seq 0 $((NG - 1))); do timeout -s KILL 60 python3 -m devtools.probes.loadtrend --gpu $g --seconds 3 --rest 3 --again 3 --bucket 0.1 > $OUT/t$g.txt 2>&1 & done; wait
cat $OUT/t*.txt > $OUT/loadtrend-rest3.txt; rm $OUT/t*.txt
