#!/bin/bash
# Session 7, last device call: on GPUs 0,1 the GPU suite's test_gpu.py; on GPUs 2,3 the beside benchmark
# with the settle past the power limit, rdmabench anchor, then the rest of the GPU suite. (Two GPUs only:
# the benchmark, then the suite, as time allows.)
set -u
T0=$(date +%s); END=$((T0 + 575))
left() { local r=$((END - $(date +%s))); [ $r -gt 5 ] && echo $r || echo 5; }
[ -d /tmp/site ] || tar xzf .carry/site.tgz -C /tmp
export PYTHONPATH=/tmp/site:$PWD LD_LIBRARY_PATH=/tmp/site/libucx/lib PYTHONUNBUFFERED=1
{ nvidia-smi -L; date -u; } > $OUT/info.txt 2>&1
for m in "devapi.load()" "armed.load()" "gpuload.load()"; do
  timeout -s KILL 120 python3 -c "from rdmabench.wire import devapi, armed, gpuload; print($m.note)" >> $OUT/info.txt 2>&1 &
done; wait; echo "built t=$(( $(date +%s) - T0 ))" >> $OUT/info.txt
PT="python3 -u -m pytest -v -n0 -p no:cacheprovider -o faulthandler_timeout=150 --timeout 150 --durations=10 -m gpu"
A="tests/test_gpu.py"; B="tests/test_postings.py tests/test_armed.py tests/test_beside.py tests/test_nixl.py"
bench() {
  mkdir -p $OUT/bench
  timeout -s KILL 260 python3 -u -m devtools.besidebench --out $OUT/bench --timeout 250 > $OUT/bench.txt 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/bench.txt
  [ -f $OUT/bench/besidebench.json ] && timeout -s KILL 20 python3 -m rdmabench report $OUT/bench/besidebench.json --format html -o $OUT/bench/report.html >> $OUT/bench.txt 2>&1
  (cd $OUT && tar czf bench.tgz bench && rm -rf bench)
}
anchor() { timeout -s KILL 90 python3 -u -m rdmabench anchor --mode device --sizes 64KiB,1MiB --test bw,put -o $OUT/anchor.json > $OUT/anchor.txt 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/anchor.txt; }
NG=$(nvidia-smi -L | wc -l)
if [ "$NG" -ge 4 ]; then
  ( export CUDA_VISIBLE_DEVICES=0,1; timeout -s KILL $(( $(left) - 3 )) $PT $A > $OUT/gpu-suite-a.log 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/gpu-suite-a.log ) &
  ( export CUDA_VISIBLE_DEVICES=2,3; bench; anchor; timeout -s KILL $(( $(left) - 3 )) $PT $B > $OUT/gpu-suite-b.log 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/gpu-suite-b.log ) &
  wait
else
  bench; timeout -s KILL $(( $(left) - 3 )) $PT tests/test_beside.py $A > $OUT/gpu-suite-a.log 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/gpu-suite-a.log
fi
echo "end t=$(( $(date +%s) - T0 ))" >> $OUT/info.txt
