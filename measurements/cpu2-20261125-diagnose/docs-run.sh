#!/bin/bash
# The namespace screen docs/cluster.md shows, as run on 2026-11-25 (as root, from the repository root,
# with Open MPI's mpiexec on PATH): 8 hosts x 2 rails, every lo, eth0 and eth1 at 200 Mbit/s and
# rdmb-h5's eth1 at 150 Mbit/s on its way out; a screen; check with a drain list. DIR gets
# screen.json, run.txt, check.txt and drain.txt.
set -u
dir=${1:?a folder for the results}
here=$(pwd)
export RDMABENCH_NETNS_SUBNET=120  # apart from other namespace clusters on the machine (10.213.0.0/24)
launch/netns-cluster.sh up 8 2
for i in $(seq 0 7); do
  for dev in lo eth0 eth1; do
    rate=200mbit
    [[ $i == 5 && $dev == eth1 ]] && rate=150mbit
    ip netns exec rdmb-h$i tc qdisc replace dev $dev root handle 1: htb default 10
    ip netns exec rdmb-h$i tc class replace dev $dev parent 1: classid 1:10 htb rate $rate ceil $rate quantum 65536
  done
done
(cd "$dir" && UCX_TLS=tcp,self OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
  mpiexec -n 16 $("$here"/launch/netns-cluster.sh mpiexec-options 8 2) "$(command -v python3)" -m rdmabench run \
  --pattern screen --nics eth0,eth1 --sizes 1MiB --window 4 --samples 7 --sample-time 0.08 --remeasure-below 0.9 \
  --progress rounds -o screen.json > run.txt 2>&1)
launch/netns-cluster.sh down 8
python3 -m rdmabench check "$dir/screen.json" --expect default --drain "$dir/drain.txt" > "$dir/check.txt"
