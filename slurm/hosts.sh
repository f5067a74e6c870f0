#!/usr/bin/env bash
# Emulated hosts on this machine: each a network namespace with its own address on a private
# bridge (and its own hostname for what runs in it); the filesystem stays shared, as on a
# cluster with a shared home. Needs root and iproute2; no traffic can leave: the bridge lives
# in a namespace of its own with no route to anywhere.
#
#   slurm/hosts.sh up PREFIX NAME...          # one host per NAME, addresses 10.77.0.11, .12, ...
#   slurm/hosts.sh exec PREFIX NAME -- CMD... # run CMD on host NAME (its network, hostname NAME;
#                                             # with HOSTS_LOCAL_DIR=D set, D is node-local:
#                                             # D/.NAME seen as D, like a node's own /tmp)
#   slurm/hosts.sh addr PREFIX NAME           # host NAME's address
#   slurm/hosts.sh link PREFIX NAME up|down   # plug / unplug host NAME's cable (at the switch)
#   slurm/hosts.sh kill PREFIX NAME [SIGNAL]  # signal every process on host NAME (default KILL)
#   slurm/hosts.sh down PREFIX                # kill every process on the hosts, remove them all
#
# PREFIX names the namespaces (PREFIX-sw for the switch, PREFIX-NAME for each host; keep
# PREFIX-NAME within 15 characters); it must not be in use. Inside the switch namespace each
# host's cable is the interface NAME on the bridge br0, so a link can be shaped there:
#   ip netns exec PREFIX-sw tc qdisc add dev NAME root tbf rate 1gbit burst 1mb latency 50ms
# `down` leaves nothing behind (processes by pid, namespaces, links, bridge) and is safe to
# call twice or after a failed `up`.
set -euo pipefail

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

SUBNET=10.77.0

ns_exists() { [[ -e /run/netns/$1 ]]; }

host_index() {  # position of host NAME (1-based), from its address
    local prefix=$1 name=$2 addr
    ns_exists "$prefix-$name" || { echo "hosts.sh: no host $name under $prefix" >&2; exit 2; }
    addr=$(ip -n "$prefix-$name" -4 -o addr show dev eth0 | awk '{print $4}')
    addr=${addr%/*}
    echo "${addr##*.}"
}

up() {
    local prefix=$1 i=0 name
    shift
    [[ $# -ge 1 ]] || usage
    if ns_exists "$prefix-sw"; then echo "hosts.sh: $prefix is in use" >&2; exit 2; fi
    ip netns add "$prefix-sw"
    ip -n "$prefix-sw" link set lo up
    ip -n "$prefix-sw" link add br0 type bridge
    ip -n "$prefix-sw" link set br0 up
    for name in "$@"; do
        i=$((i + 1))
        ip netns add "$prefix-$name"
        ip -n "$prefix-sw" link add name "$name" type veth peer name eth0 netns "$prefix-$name"
        ip -n "$prefix-sw" link set dev "$name" master br0 up
        ip -n "$prefix-$name" link set lo up
        ip -n "$prefix-$name" addr add "$SUBNET.$((10 + i))/24" dev eth0
        ip -n "$prefix-$name" link set eth0 up
    done
}

pids_of() { ip netns pids "$1" 2>/dev/null || true; }

kill_host() {
    local ns=$1 sig=${2:-KILL} pid
    for pid in $(pids_of "$ns"); do kill "-$sig" "$pid" 2>/dev/null || true; done
}

down() {
    local prefix=$1 ns i
    local -
    set +e  # every host goes, whatever failed before
    for ns in /run/netns/"$prefix"-*; do
        [[ -e $ns ]] || continue
        ns=${ns##*/}
        kill_host "$ns" TERM
    done
    for i in $(seq 50); do
        local left=""
        for ns in /run/netns/"$prefix"-*; do
            [[ -e $ns ]] && left+=$(pids_of "${ns##*/}")
        done
        [[ -z $left ]] && break
        sleep 0.1
    done
    for ns in /run/netns/"$prefix"-*; do
        [[ -e $ns ]] || continue
        ns=${ns##*/}
        kill_host "$ns" KILL
        ip netns del "$ns" 2>/dev/null || true
    done
}

cmd=${1:-}
shift || true
case $cmd in
    up) [[ $# -ge 2 ]] || usage; up "$@" ;;
    down) [[ $# -eq 1 ]] || usage; down "$1" ;;
    addr) [[ $# -eq 2 ]] || usage; echo "$SUBNET.$(host_index "$1" "$2")" ;;
    link)
        [[ $# -eq 3 && ( $3 == up || $3 == down ) ]] || usage
        host_index "$1" "$2" >/dev/null
        ip -n "$1-sw" link set dev "$2" "$3" ;;
    kill) [[ $# -ge 2 ]] || usage; host_index "$1" "$2" >/dev/null; kill_host "$1-$2" "${3:-KILL}" ;;
    exec)
        [[ $# -ge 4 && $3 == -- ]] || usage
        prefix=$1 name=$2
        shift 3
        host_index "$prefix" "$name" >/dev/null
        # A UTS namespace per command, all named NAME: what runs there sees hostname NAME.
        # nsenter, not `ip netns exec`: that remounts /sys, hiding /sys/fs/cgroup from slurmd.
        if [[ -z ${HOSTS_LOCAL_DIR:-} ]]; then
            exec nsenter --net="/run/netns/$prefix-$name" unshare --uts \
                sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
        fi
        # A node-local folder: HOSTS_LOCAL_DIR/.NAME seen as HOSTS_LOCAL_DIR (a mount
        # namespace of its own; the rest of the filesystem stays shared).
        mkdir -p "$HOSTS_LOCAL_DIR/.$name"
        exec nsenter --net="/run/netns/$prefix-$name" unshare --uts --mount \
            sh -c 'hostname "$0" && mount --bind "$1/.$0" "$1" && shift && exec "$@"' \
            "$name" "$HOSTS_LOCAL_DIR" "$@" ;;
    *) usage ;;
esac
