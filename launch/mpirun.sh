#!/usr/bin/env bash
# rdmabench over several hosts with a site Open MPI: one rank per GPU, each bound to its GPU's NUMA
# node, UCX_* settings passed to every rank. Results go to results/mpirun-<date>/.
#
#   launch/mpirun.sh HOSTFILE GPUS_PER_HOST [rdmabench run options...]
#   launch/mpirun.sh hosts.txt 8 --pattern all-pairs --concurrent --mode device --sizes 64MiB
#
# HOSTFILE lists one host per line (Open MPI syntax: "node01 slots=8"). $MPIRUN picks the launcher.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 HOSTFILE GPUS_PER_HOST [rdmabench run options...]" >&2; exit 2; }
hostfile=$1 per_host=$2
shift 2
hosts=$(grep -cv '^\s*\(#\|$\)' "$hostfile")
out="results/mpirun-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
exports=()
for name in $(env | grep -o '^UCX_[A-Z_]*' || true); do exports+=(-x "$name"); done
"${MPIRUN:-mpirun}" -n $((hosts * per_host)) --hostfile "$hostfile" --map-by "ppr:$per_host:node" --bind-to none \
  "${exports[@]}" "$(dirname "$0")/bind-gpu-numa.sh" rdmabench run -o "$out/run.json" "$@"
echo "results in $out"
