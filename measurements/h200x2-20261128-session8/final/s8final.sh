#!/bin/bash
# Session 8, the last call: the merged tree (all six branches). Alone, one after another: the offload's GPU
# tests, the offload engine's runs (swap-out, swap-in, every path, beside the GEMM), the beside benchmark.
set -u
T0=$(date +%s); END=$((T0 + ${LIMIT:-470}))
left() { local r=$((END - $(date +%s))); [ $r -gt 5 ] && echo $r || echo 5; }
tar xzf .carry/site-lite.tgz -C /tmp
export PYTHONPATH=/tmp/site:$PWD LD_LIBRARY_PATH=/tmp/site/libucx/lib PYTHONUNBUFFERED=1
mkdir -p $OUT/r
{ nvidia-smi -L; nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current,power.limit --format=csv; nproc; date -u; } > $OUT/info.txt 2>&1
for m in devapi armed gpuload offload; do
  timeout -s KILL 150 python3 -c "from rdmabench.wire import $m; print('$m', $m.load().note)" >> $OUT/info.txt 2>&1 &
done; wait; echo "built t=$(( $(date +%s) - T0 ))" >> $OUT/info.txt
timeout -s KILL 100 python3 -u -m pytest -v -n0 -p no:cacheprovider --timeout 90 -m gpu tests/test_offload.py tests/test_offload_run.py > $OUT/gpu-offload.log 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/gpu-offload.log
B="--blocks 1024 --layout random --block-size 4KiB,64KiB"
run() { name=$1; lim=$2; shift 2; timeout -s KILL $lim python3 -u -m rdmabench run --np 2 "$@" -o $OUT/r/$name.json > $OUT/r/$name.txt 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/r/$name.txt; }
run out-kernel 70 --test swap-out $B --posting kernel --pace 2x1x128,12x1x32 --beside gemm,carveout=12
run out-ce 60 --test swap-out $B --posting ce-batch,ce-armed,direct --beside gemm
run in-kernel 45 --test swap-in $B --posting kernel --pace 8x1x128 --beside gemm,carveout=8
run in-ce 60 --test swap-in $B --posting ce-batch,ce-armed,direct --beside gemm
(cd $OUT && tar czf offload-runs.tgz r && rm -rf r)
mkdir -p $OUT/bench
L=$(( $(left) - 8 ))
timeout -s KILL $L python3 -u -m devtools.besidebench --out $OUT/bench --timeout $((L - 5)) > $OUT/bench-final.txt 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/bench-final.txt
(cd $OUT && tar czf bench-final.tgz bench && rm -rf bench)
echo "end t=$(( $(date +%s) - T0 ))" >> $OUT/info.txt
