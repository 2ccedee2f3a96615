#!/usr/bin/env bash
# Point-to-point test between two hosts with a site MPI: one rank on each host.
#
#   launch/mpirun-p2p.sh HOST_A HOST_B [rdmabench run options...]
#   launch/mpirun-p2p.sh node01 node02 --mode device --test bibw
#
# Uses $MPIRUN (default mpirun). UCX_* variables are passed to both ranks with -x (Open MPI syntax).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 HOST_A HOST_B [rdmabench run options...]" >&2; exit 2; }
a=$1 b=$2
shift 2
exports=()
for name in $(env | grep -o '^UCX_[A-Z_]*' || true); do exports+=(-x "$name"); done
exec "${MPIRUN:-mpirun}" -n 2 --host "$a,$b" --map-by node "${exports[@]}" \
  rdmabench run "$@"
