#!/usr/bin/env bash
# A cluster without a cluster: N "hosts" on this machine, each a network namespace with its own
# hostname and one interface per rail (eth<r>, 10.213.<r>.<i+1>/24) on that rail's bridge
# (10.213.<r>.254), and Open MPI starting its daemons in them as if over ssh. Links between hosts
# then cross a real network (veth, through the kernel's TCP stack), and rdmabench labels them
# inter-node. Needs root.
#
#   launch/netns-cluster.sh up 2 [RAILS]      # RAILS interfaces a host (default 1)
#   UCX_TLS=tcp,self mpiexec -n 4 $(launch/netns-cluster.sh mpiexec-options 2 2) \
#       "$(command -v python3)" -m rdmabench run --pattern all-pairs [--nics eth0,eth1]
#   launch/netns-cluster.sh down 2
#
# UCX_TLS=tcp,self keeps UCX off shared memory: the namespaces share one kernel, so UCX would
# otherwise still reach across them with cma. Each rail is its own bridge and subnet (a rail-optimised
# fabric); a host reaches another host's rail r through its own eth<r>. RDMABENCH_NETNS_PREFIX names
# the namespaces.
set -euo pipefail
prefix=${RDMABENCH_NETNS_PREFIX:-rdmb}
bridge="$prefix-br"
here=$(cd "$(dirname "$0")" && pwd)

up() {
  local n=$1 rails=${2:-1} i r
  for ((r = 0; r < rails; r++)); do
    ip link add "$bridge$r" type bridge
    ip addr add "10.213.$r.254/24" dev "$bridge$r"
    ip link set "$bridge$r" up
  done
  for ((i = 0; i < n; i++)); do
    ip netns add "$prefix-h$i"
    ip -n "$prefix-h$i" link set lo up
    for ((r = 0; r < rails; r++)); do
      ip link add "$prefix-v$i-$r" type veth peer name "eth$r" netns "$prefix-h$i"
      ip link set "$prefix-v$i-$r" master "$bridge$r" up
      ip -n "$prefix-h$i" addr add "10.213.$r.$((i + 1))/24" dev "eth$r"
      ip -n "$prefix-h$i" link set "eth$r" up
    done
    # UCX connects through an interface only where it has a best (longest-prefix) route to the peer:
    # each interface gets one, at a low priority, to the other rails' subnets and to this host's own
    # addresses on them. The kernel still routes by the lowest metric, so cross-rail bytes leave
    # through the destination's rail (the wire check shows it).
    for ((r = 0; r < rails; r++)); do
      for ((q = 0; q < rails; q++)); do
        ((q == r)) && continue
        ip -n "$prefix-h$i" route add "10.213.$q.0/24" dev "eth$r" metric 1000
        ip -n "$prefix-h$i" route add "10.213.$q.$((i + 1))/32" dev "eth$r" metric 1000
      done
    done
  done
}

down() {
  local n=$1 i r
  for ((i = 0; i < n; i++)); do
    ip netns del "$prefix-h$i" 2>/dev/null || true
    for ((r = 0; r < 8; r++)); do ip link del "$prefix-v$i-$r" 2>/dev/null || true; done
  done
  for ((r = 0; r < 8; r++)); do ip link del "$bridge$r" 2>/dev/null || true; done
}

# Open MPI calls its ssh agent as: AGENT [options] HOST COMMAND; this one enters HOST's namespace
# (HOST is its address, 10.213.0.<i+1>) under the hostname PREFIX-h<i> and runs COMMAND there.
agent() {
  while [[ ${1:-} == -* ]]; do shift; done
  local host=$1
  shift
  local name="$prefix-h$((${host##*.} - 1))"
  exec ip netns exec "$name" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$name" "$@"
}

mpiexec_options() {
  local n=$1 per_host=$2 i hosts=()
  for ((i = 0; i < n; i++)); do hosts+=("10.213.0.$((i + 1)):$per_host"); done
  local joined
  joined=$(IFS=,; echo "${hosts[*]}")
  # The namespaces share this machine's cores: ranks are not bound to any.
  echo "--host $joined --bind-to none --prtemca plm_ssh_agent $here/netns-cluster.sh" \
    "--prtemca oob_tcp_if_include 10.213.0.0/24 --mca btl_tcp_if_include 10.213.0.0/24 -x PATH -x UCX_TLS"
}

case ${1:-} in
  up) up "${2:?number of hosts}" "${3:-1}" ;;
  down) down "${2:?number of hosts}" ;;
  mpiexec-options) mpiexec_options "${2:?number of hosts}" "${3:?ranks per host}" ;;
  -* | 10.213.0.*) agent "$@" ;;
  *) echo "usage: $0 up N [RAILS] | down N | mpiexec-options N RANKS_PER_HOST" >&2; exit 2 ;;
esac
