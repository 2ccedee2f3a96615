#!/bin/bash
# Session 8, call A: the merged tree (signals9, defects9, house9, answer9, stats9) on GPUs.
# 4 GPUs: GPUs 0,1 (cores 0-15) the beside benchmark then the anchor; GPUs 2,3 (the other cores) the GPU suite.
# 2 GPUs: the benchmark, the anchor, then the suite as time allows.
set -u
T0=$(date +%s); END=$((T0 + ${LIMIT:-585}))
left() { local r=$((END - $(date +%s))); [ $r -gt 5 ] && echo $r || echo 5; }
tar xzf .carry/site-lite.tgz -C /tmp
export PYTHONPATH=/tmp/site:$PWD LD_LIBRARY_PATH=/tmp/site/libucx/lib PYTHONUNBUFFERED=1
{ nvidia-smi -L; nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current,power.limit --format=csv; nproc; date -u; } > $OUT/info.txt 2>&1
for m in "devapi.load()" "armed.load()" "gpuload.load()"; do
  timeout -s KILL 150 python3 -c "from rdmabench.wire import devapi, armed, gpuload; print($m.note)" >> $OUT/info.txt 2>&1 &
done; wait; echo "built t=$(( $(date +%s) - T0 ))" >> $OUT/info.txt
PT="python3 -u -m pytest -v -n0 -p no:cacheprovider -o faulthandler_timeout=170 --timeout 170 --durations=15 -m gpu"
SUITE="tests/test_beside.py tests/test_postings.py tests/test_armed.py tests/test_nixl.py tests/test_gpu.py"
NC=$(nproc); HALF=$((NC / 2))
bench() {
  mkdir -p $OUT/bench
  timeout -s KILL 260 python3 -u -m devtools.besidebench --out $OUT/bench --timeout 250 > $OUT/bench-after.txt 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/bench-after.txt
  [ -f $OUT/bench/besidebench.json ] && timeout -s KILL 30 python3 -m rdmabench report $OUT/bench/besidebench.json > $OUT/bench/report.txt 2>&1
  [ -f $OUT/bench/besidebench.json ] && timeout -s KILL 30 python3 -m rdmabench report $OUT/bench/besidebench.json --format html -o $OUT/bench/report.html >> $OUT/bench/report.txt 2>&1
  (cd $OUT && tar czf bench-after.tgz bench && rm -rf bench)
}
anchor() { timeout -s KILL 100 python3 -u -m rdmabench anchor --mode device --sizes 64KiB,1MiB --test bw,put -o $OUT/anchor-after.json > $OUT/anchor-after.txt 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/anchor-after.txt; }
NG=$(nvidia-smi -L | wc -l)
if [ "$NG" -ge 4 ]; then
  ( export CUDA_VISIBLE_DEVICES=0,1; taskset -c 0-$((HALF - 1)) bash -c "$(declare -f bench anchor); T0=$T0; OUT=$OUT; bench; anchor" ) &
  ( export CUDA_VISIBLE_DEVICES=2,3; taskset -c $HALF-$((NC - 1)) timeout -s KILL $(( $(left) - 3 )) $PT $SUITE > $OUT/gpu-suite.log 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/gpu-suite.log ) &
  wait
else
  bench; anchor; timeout -s KILL $(( $(left) - 3 )) $PT $SUITE > $OUT/gpu-suite.log 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/gpu-suite.log
fi
echo "end t=$(( $(date +%s) - T0 ))" >> $OUT/info.txt
