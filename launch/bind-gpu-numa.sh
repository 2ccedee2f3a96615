#!/usr/bin/env bash
# Runs one rank bound to the NUMA node of the GPU it will use, so host-device traffic never crosses
# the socket link. rdmabench gives local rank i the GPU i (mod the visible GPUs); this wrapper binds
# the same rank's CPUs and memory to that GPU's NUMA node, with numactl, where it is known.
#
#   mpirun -n 16 --map-by ppr:8:node launch/bind-gpu-numa.sh rdmabench run --pattern all-pairs
#   srun --ntasks-per-node 8 launch/bind-gpu-numa.sh rdmabench run --mode device
set -euo pipefail
local_rank=${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-${MPI_LOCALRANKID:-${PMI_LOCAL_RANK:-0}}}}
gpus=()
if command -v nvidia-smi >/dev/null 2>&1; then
  mapfile -t gpus < <(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null || true)
fi
if [ ${#gpus[@]} -gt 0 ] && command -v numactl >/dev/null 2>&1; then
  bus=${gpus[$((local_rank % ${#gpus[@]}))]}
  bus=$(echo "${bus#0000}" | tr 'A-F' 'a-f')  # nvidia-smi prints 00000000:19:00.0; sysfs 0000:19:00.0
  node=$(cat "/sys/bus/pci/devices/${bus: -12}/numa_node" 2>/dev/null || echo -1)
  if [ "$node" -ge 0 ]; then
    exec numactl --cpunodebind="$node" --membind="$node" "$@"
  fi
fi
exec "$@"  # no GPU, no numactl or no NUMA information: run unbound (rdmabench's metadata says so)
