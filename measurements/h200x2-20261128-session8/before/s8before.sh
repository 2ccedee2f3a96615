#!/bin/bash
# Session 8, call 1: main at 62473c8 (the last session's tree) before this session's changes:
# rdmabench anchor (device) and the beside benchmark, each alone on a quiet host.
set -u
T0=$(date +%s)
tar xzf .carry/site-lite.tgz -C /tmp
export PYTHONPATH=/tmp/site:$PWD LD_LIBRARY_PATH=/tmp/site/libucx/lib PYTHONUNBUFFERED=1
{ nvidia-smi -L; nvidia-smi --query-gpu=name,pcie.link.gen.max,pcie.link.gen.current,pcie.link.width.current,power.limit,clocks.max.sm --format=csv; nvidia-smi topo -m; nproc; date -u; } > $OUT/info.txt 2>&1
for m in "devapi.load()" "armed.load()" "gpuload.load()"; do
  timeout -s KILL 150 python3 -c "from rdmabench.wire import devapi, armed, gpuload; print($m.note)" >> $OUT/info.txt 2>&1 &
done; wait; echo "built t=$(( $(date +%s) - T0 ))" >> $OUT/info.txt
timeout -s KILL 120 python3 -u -m rdmabench anchor --mode device --sizes 64KiB,1MiB --test bw,put -o $OUT/anchor-before.json > $OUT/anchor-before.txt 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/anchor-before.txt
mkdir -p $OUT/bench
timeout -s KILL 280 python3 -u -m devtools.besidebench --out $OUT/bench --timeout 270 > $OUT/bench-before.txt 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/bench-before.txt
(cd $OUT && tar czf bench-before.tgz bench && rm -rf bench)
echo "end t=$(( $(date +%s) - T0 ))" >> $OUT/info.txt
