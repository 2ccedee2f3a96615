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
#   launch/netns-cluster.sh down [2]         # every host of the prefix without a count
#
# UCX_TLS=tcp,self keeps UCX off shared memory: the namespaces share one kernel, so UCX would
# otherwise still reach across them with cma. Each rail is its own bridge and subnet (a rail-optimised
# fabric); a host reaches another host's rail r through its own eth<r>. RDMABENCH_NETNS_PREFIX names
# the namespaces; RDMABENCH_NETNS_SUBNET (default 0) moves rail r to 10.213.<SUBNET+r>.0/24, so that
# two clusters can be up at once (each bridge's address is a route of this machine's own namespace).
set -euo pipefail
prefix=${RDMABENCH_NETNS_PREFIX:-rdmb}
subnet=${RDMABENCH_NETNS_SUBNET:-0}
bridge="$prefix-br"
here=$(cd "$(dirname "$0")" && pwd)

# One line and exit 2 for a count out of range or names the kernel would refuse (15 characters).
check() {
  local n=$1 rails=$2
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 253)) || { echo "$0: hosts must be 1 to 253, not '$n'" >&2; exit 2; }
  [[ $rails =~ ^[0-9]+$ ]] && ((rails >= 1 && rails <= 8)) || { echo "$0: rails must be 1 to 8, not '$rails'" >&2; exit 2; }
  local longest="$prefix-v$((n - 1))-$((rails - 1))"
  ((${#longest} <= 15)) || { echo "$0: interface name $longest is over 15 characters: shorten RDMABENCH_NETNS_PREFIX" >&2; exit 2; }
  [[ $subnet =~ ^[0-9]+$ ]] && ((subnet + rails <= 254)) || { echo "$0: RDMABENCH_NETNS_SUBNET must be 0 to $((254 - rails)), not '$subnet'" >&2; exit 2; }
}

up() {
  local n=$1 rails=${2:-1} i r
  check "$n" "$rails"
  for ((r = 0; r < rails; r++)); do
    ip link add "$bridge$r" type bridge
    ip addr add "10.213.$((subnet + r)).254/24" dev "$bridge$r"
    ip link set "$bridge$r" up
  done
  for ((i = 0; i < n; i++)); do
    ip netns add "$prefix-h$i"
    ip -n "$prefix-h$i" link set lo up
    for ((r = 0; r < rails; r++)); do
      ip link add "$prefix-v$i-$r" type veth peer name "eth$r" netns "$prefix-h$i"
      ip link set "$prefix-v$i-$r" master "$bridge$r" up
      ip -n "$prefix-h$i" addr add "10.213.$((subnet + r)).$((i + 1))/24" dev "eth$r"
      ip -n "$prefix-h$i" link set "eth$r" up
    done
    # UCX connects through an interface only where it has a best (longest-prefix) route to the peer:
    # each interface gets one, at a low priority, to the other rails' subnets and to this host's own
    # addresses on them. The kernel still routes by the lowest metric, so cross-rail bytes leave
    # through the destination's rail (the wire check shows it). Each rail's routes get a metric of
    # their own: the kernel refuses two routes to one prefix at one metric.
    for ((r = 0; r < rails; r++)); do
      for ((q = 0; q < rails; q++)); do
        ((q == r)) && continue
        ip -n "$prefix-h$i" route add "10.213.$((subnet + q)).0/24" dev "eth$r" metric $((1000 + r))
        ip -n "$prefix-h$i" route add "10.213.$((subnet + q)).$((i + 1))/32" dev "eth$r" metric $((1000 + r))
      done
    done
  done
}

# Whatever an `up` of this prefix left, also from the single-rail layout of earlier versions
# ($prefix-br, $prefix-v<i>): hosts 0 to N-1, or every host of the prefix when N is left out; the
# bridges once no host of the prefix is left.
down() {
  local n=${1:-} name i
  for name in $(ip netns list | awk '{print $1}'); do
    i=${name#"$prefix-h"}
    if [[ $name == "$prefix-h"* && $i =~ ^[0-9]+$ ]] && { [[ -z $n ]] || ((i < n)); }; then
      ip netns del "$name" 2>/dev/null || true
    fi
  done
  for name in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1); do
    i=${name#"$prefix-v"}
    i=${i%%-*}
    if [[ $name == "$prefix-v"* && $i =~ ^[0-9]+$ ]] && { [[ -z $n ]] || ((i < n)); }; then
      ip link del "$name" 2>/dev/null || true
    fi
  done
  if ! ip netns list | awk '{print $1}' | grep -q "^$prefix-h[0-9]*$"; then
    for name in "$bridge" "$bridge"{0..7}; do ip link del "$name" 2>/dev/null || true; done
  fi
}

# Open MPI calls its ssh agent as: AGENT [options] HOST COMMAND; this one enters HOST's namespace
# (HOST is its address, 10.213.<SUBNET>.<i+1>) under the hostname PREFIX-h<i> and runs COMMAND there.
agent() {
  while [[ ${1:-} == -* ]]; do shift; done
  local host=$1
  shift
  local name="$prefix-h$((${host##*.} - 1))"
  exec ip netns exec "$name" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$name" "$@"
}

mpiexec_options() {
  local n=$1 per_host=$2 i hosts=()
  for ((i = 0; i < n; i++)); do hosts+=("10.213.$subnet.$((i + 1)):$per_host"); done
  local joined
  joined=$(IFS=,; echo "${hosts[*]}")
  # The namespaces share this machine's cores: ranks are not bound to any.
  echo "--host $joined --bind-to none --prtemca plm_ssh_agent $here/netns-cluster.sh" \
    "--prtemca oob_tcp_if_include 10.213.$subnet.0/24 --mca btl_tcp_if_include 10.213.$subnet.0/24 -x PATH -x UCX_TLS"
}

case ${1:-} in
  up) up "${2:?number of hosts}" "${3:-1}" ;;
  down) down "${2:-}" ;;
  mpiexec-options) mpiexec_options "${2:?number of hosts}" "${3:?ranks per host}" ;;
  -* | 10.213.*) agent "$@" ;;
  *) echo "usage: $0 up N [RAILS] | down [N] | mpiexec-options N RANKS_PER_HOST" >&2; exit 2 ;;
esac
