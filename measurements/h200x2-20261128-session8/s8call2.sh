#!/bin/bash
# Session 8, offload9's call 2 (one script: every process under timeout -s KILL, logs under $OUT as it goes).
set -u
O=$OUT
K="timeout -s KILL"
B="--blocks 1024 --layout random --block-size 4KiB,64KiB"
cd "$(dirname "$0")"
git_commit=$(cat COMMIT 2>/dev/null); echo "commit $git_commit" > $O/info.txt
nvidia-smi --query-gpu=index,name,pcie.link.gen.max,pcie.link.width.max,power.limit,clocks.max.sm --format=csv >> $O/info.txt 2>&1
$K 85 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_offload.py tests/test_offload_run.py > $O/tests.log 2>&1; echo "rc=$?" >> $O/tests.log
run() { name=$1; shift; $K $1 python3 -m rdmabench run --np 2 "${@:2}" -o $O/$name.json > $O/$name.txt 2>&1; echo "rc=$?" >> $O/$name.txt; }
run out-kernel 70 --test swap-out $B --posting kernel --pace 8x1x32,4x1x128 --beside gemm,carveout=8
run out-ce 55 --test swap-out $B --posting ce-batch,ce-armed,direct --beside gemm
run in-kernel 40 --test swap-in $B --posting kernel --beside gemm,carveout=8
run in-ce 55 --test swap-in $B --posting ce-batch,ce-armed,direct --beside gemm
$K 45 python3 -m devtools.probes.offload --directions out --paths kernel --paces 1x1x32,2x1x32,4x1x32,8x1x32,12x1x32,4x1x64,2x1x128 --pairs 2 --window 0.2 --json $O/probe-out.jsonl > $O/probe-out.log 2>&1; echo "rc=$?" >> $O/probe-out.log
tail -3 $O/tests.log; for f in $O/*.txt $O/*.log; do echo "== $f"; tail -2 $f; done
