#!/usr/bin/env bash
# Point-to-point matrix on one node: every test for several memory-mode pairs between ranks 0 and 1
# (one GPU each where the node has GPUs). Results land in DIR (default results/), one file per run.
#
#   launch/node-p2p-matrix.sh [DIR]
#   SIZES=8,1MiB,64MiB,256MiB MODES="device:device pinned:pinned" TESTS="bw lat" launch/node-p2p-matrix.sh
#
# PYTHON picks the interpreter (default python3); RDMABENCH_MPIEXEC picks the launcher.
set -euo pipefail
dir=${1:-results}
sizes=${SIZES:-8,1MiB,64MiB,256MiB}
modes=${MODES:-"device:device pinned:pinned device:pinned pinned:device pageable:pageable pageable:device"}
tests=${TESTS:-"bw bibw lat"}
python=${PYTHON:-python3}
mkdir -p "$dir"
status=0
for pair in $modes; do
  src=${pair%%:*}
  dst=${pair##*:}
  for test in $tests; do
    out="$dir/p2p-$test-$src-to-$dst.json"
    echo "== $test $src -> $dst"
    # A stuck run is killed; the others still run and the script exits non-zero at the end.
    timeout -s KILL "${RUN_TIMEOUT:-600}" "$python" -m rdmabench run --np 2 --test "$test" \
      --src-mode "$src" --dst-mode "$dst" --sizes "$sizes" -o "$out" --force || status=1
  done
done
exit $status
