#!/usr/bin/env bash
# A throwaway Slurm cluster on this machine, for testing the templates.
#
#   slurm/testcluster.sh run [DIR] -- COMMAND...   # start, run COMMAND with the cluster's
#                                                  # environment, stop (on every exit path)
#   slurm/testcluster.sh start [DIR]               # start; prints DIR
#   eval "$(slurm/testcluster.sh env DIR)"         # SLURM_CONF etc. for sbatch/squeue/srun
#   slurm/testcluster.sh stop DIR                  # cancel its jobs, stop its daemons
#
# Needs Debian/Ubuntu's slurm-wlm, munge and libpmix2 (apt-get install slurm-wlm munge
# libpmix2) and root (slurmd starts jobs). Everything lives in DIR (default: a new
# mktemp -d folder): slurm.conf, the munge key and socket, the state, spool, log and pid
# files. Nothing outside DIR is written; the daemons it started are stopped by pid.
# Each node declares TESTCLUSTER_CPUS CPUs (default 20; SlurmdParameters=config_overrides
# lets it declare more than it has), so 20-task templates run oversubscribed.
#
# TESTCLUSTER_HOSTS=N (1 to 4; unset: one node on localhost) emulates N hosts instead
# (slurm/hosts.sh): node1..nodeN, each a network namespace with its own address and hostname
# on a private bridge, running its own slurmd (slurmd -N nodeI); slurmctld runs on a host
# "ctl" of its own, and so does COMMAND (`run`; the login node). The filesystem is shared,
# as on a cluster. `env` then also exports TESTCLUSTER_PREFIX (slurm/hosts.sh's PREFIX, for
# `hosts.sh link PREFIX node2 down`, `hosts.sh kill PREFIX node2`); `stop` removes the
# hosts as well. The traffic between nodes crosses the bridge, never loopback.
#   slurm/testcluster.sh revive DIR NODE           # after `hosts.sh link ... down` or
#                                                  # `hosts.sh kill`: the node back in service
set -euo pipefail

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HOSTS_SH=$HERE/hosts.sh

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The emulated hosts of the cluster in DIR (hosts mode): the namespace prefix, the nodes.
prefix_of() { if [[ -s $1/hosts ]]; then head -n 1 "$1/hosts"; fi; }
nodes_of() { if [[ -s $1/hosts ]]; then tail -n +2 "$1/hosts"; fi; }

write_config() {
    local dir=$1 hosts=$2 cpus=${TESTCLUSTER_CPUS:-20} ctl nodelist i prefix nodes host
    mkdir -p "$dir"/{key,munge,state,spool,log,run,tmp}
    # munged wants its socket folder searchable by all and its key private.
    chmod 0755 "$dir" "$dir/munge"
    chmod 0700 "$dir/key"
    dd if=/dev/urandom of="$dir/key/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$dir/key/munge.key"
    : > "$dir/plugstack.conf"   # not the system's /etc/slurm/plugstack.conf
    local shape="CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1"
    shape+=" RealMemory=1000 State=UNKNOWN"
    if (( hosts > 0 )); then
        prefix=$(prefix_of "$dir")
        ctl="ctl($("$HOSTS_SH" addr "$prefix" ctl))" nodes="" nodelist="node[1-$hosts]"
        for i in $(seq "$hosts"); do
            nodes+="NodeName=node$i NodeAddr=$("$HOSTS_SH" addr "$prefix" "node$i") $shape"
            nodes+=$'\n'
        done
    else
        host=$(hostname -s)
        ctl="$host(127.0.0.1)" nodes="NodeName=$host NodeAddr=127.0.0.1 $shape" nodelist=$host
    fi
    # Per node (%n): several slurmd share this machine's filesystem.
    cat > "$dir/slurm.conf" <<EOF
# Written by slurm/testcluster.sh: a test cluster living in $dir.
ClusterName=dssfntest
SlurmctldHost=$ctl
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket.2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
PlugStackConfig=$dir/plugstack.conf
TmpFS=$dir/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
InactiveLimit=0
KillWait=30
SlurmdTimeout=${TESTCLUSTER_SLURMD_TIMEOUT:-60}
$nodes
PartitionName=debug Nodes=$nodelist Default=YES MaxTime=INFINITE State=UP
EOF
    # The PMIx plugin's per-job folders go under the spool folder, not /tmp.
    echo "PMIxCliTmpDirBase=$dir/tmp" > "$dir/mpi.conf"
}

print_env() {
    local dir=$1
    printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf"
    # Open MPI's session folders of the jobs go here too.
    printf 'export TMPDIR=%q\n' "$dir/tmp"
    if [[ -n $(prefix_of "$dir") ]]; then
        printf 'export TESTCLUSTER_PREFIX=%q\n' "$(prefix_of "$dir")"
    fi
}

pid_of() { if [[ -s $1 ]]; then cat "$1"; fi; }

stop_pid() {  # stop_pid PIDFILE: TERM, up to 10 s, then KILL
    local pid i
    pid=$(pid_of "$1")
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$1"
}

# host_exec DIR HOST COMMAND...: COMMAND on an emulated host, whose DIR/tmp is its own
# (node-local, as /tmp on a cluster: the PMIx plugin's per-step folders have the same name
# on every node).
host_exec() {
    local dir=$1 host=$2
    shift 2
    HOSTS_LOCAL_DIR=$dir/tmp "$HOSTS_SH" exec "$(prefix_of "$dir")" "$host" -- "$@"
}

# slurm_cmd DIR COMMAND...: a Slurm client command; on the login host "ctl" in hosts mode.
slurm_cmd() {
    local dir=$1 prefix
    shift
    prefix=$(prefix_of "$dir")
    if [[ -n $prefix ]]; then host_exec "$dir" ctl "$@"; else "$@"; fi
}

stop_cluster() {
    local dir=$1 node i
    # Every step is tried, whatever failed before it (errexit off until return).
    local -
    set +e
    if [[ -f $dir/slurm.conf ]]; then
        export SLURM_CONF=$dir/slurm.conf
        if [[ -n $(pid_of "$dir/run/slurmctld.pid") ]]; then
            # Jobs first: their slurmstepd processes outlive slurmd otherwise.
            slurm_cmd "$dir" scancel --quiet --full --partition=debug 2>/dev/null || true
            for i in $(seq 60); do
                [[ -z $(slurm_cmd "$dir" squeue -h -o %i 2>/dev/null) ]] && break
                sleep 1
            done
        fi
        for node in $(nodes_of "$dir"); do stop_pid "$dir/run/slurmd-$node.pid"; done
        [[ -n $(prefix_of "$dir") ]] || stop_pid "$dir/run/slurmd-$(hostname -s).pid"
        stop_pid "$dir/run/slurmctld.pid"
        stop_pid "$dir/run/munged.pid"
    fi
    # What is left on the emulated hosts (a job's processes on a host whose slurmd was
    # killed) goes with them, by pid; then the namespaces, links and bridge.
    if [[ -n $(prefix_of "$dir") ]]; then
        "$HOSTS_SH" down "$(prefix_of "$dir")"
        rm -f "$dir/hosts"
    fi
}

start_cluster() {
    local dir=$1 hosts=${TESTCLUSTER_HOSTS:-0} i state prefix="" node want tool
    for tool in munged slurmctld slurmd sbatch; do
        command -v "$tool" >/dev/null || {
            echo "testcluster: $tool not found (apt-get install slurm-wlm munge libpmix2)" >&2
            exit 1
        }
    done
    if [[ ! $hosts =~ ^[0-4]$ ]]; then
        echo "testcluster: TESTCLUSTER_HOSTS must be 1 to 4 (or unset), got '$hosts'" >&2
        exit 2
    fi
    mkdir -p "$dir"
    if (( hosts > 0 )); then
        # Short: the namespace names (PREFIX-node4) must stay within 15 characters.
        prefix=dc$(basename "$dir" | tr -dc 'a-zA-Z0-9' | tail -c 6)
        { echo "$prefix"; for i in $(seq "$hosts"); do echo "node$i"; done; } > "$dir/hosts"
        # shellcheck disable=SC2046
        "$HOSTS_SH" up "$prefix" ctl $(nodes_of "$dir")
    fi
    write_config "$dir" "$hosts"
    munged --key-file="$dir/key/munge.key" --socket="$dir/munge/munge.socket.2" \
        --pid-file="$dir/run/munged.pid" --seed-file="$dir/key/munged.seed" \
        --log-file="$dir/log/munged.log"
    export SLURM_CONF=$dir/slurm.conf
    # -c: no state from an earlier cluster; the pid files come from slurm.conf.
    slurm_cmd "$dir" slurmctld -c -f "$SLURM_CONF"
    if [[ -n $prefix ]]; then
        for node in $(nodes_of "$dir"); do
            mkdir -p "$dir/spool/$node"
            host_exec "$dir" "$node" slurmd -N "$node" -f "$SLURM_CONF"
        done
        want=$(for i in $(seq "$hosts"); do echo idle; done)
    else
        mkdir -p "$dir/spool/$(hostname -s)"
        slurmd -f "$SLURM_CONF"
        want=idle
    fi
    for i in $(seq 60); do
        state=$(slurm_cmd "$dir" sinfo -h -N -o %t 2>/dev/null || true)
        [[ $state == "$want" ]] && return 0
        sleep 1
    done
    echo "testcluster: the nodes did not come up (state '${state:-?}'); logs in $dir/log" >&2
    tail -n 20 "$dir"/log/*.log >&2 || true
    return 1
}

# revive_node DIR NODE: cable plugged in, its slurmd running, the node back in service.
revive_node() {
    local dir=$1 node=$2 i state
    export SLURM_CONF=$dir/slurm.conf
    "$HOSTS_SH" link "$(prefix_of "$dir")" "$node" up
    if ! kill -0 "$(pid_of "$dir/run/slurmd-$node.pid")" 2>/dev/null; then
        rm -f "$dir/run/slurmd-$node.pid"
        host_exec "$dir" "$node" slurmd -N "$node" -f "$SLURM_CONF"
    fi
    for i in $(seq 120); do
        state=$(slurm_cmd "$dir" sinfo -h -N -n "$node" -o %t 2>/dev/null || true)
        [[ $state == idle ]] && return 0
        if [[ $state == down* || $state == drain* ]]; then
            slurm_cmd "$dir" scontrol update NodeName="$node" State=RESUME 2>/dev/null || true
        fi
        sleep 1
    done
    echo "testcluster: $node did not come back (state '${state:-?}')" >&2
    return 1
}

cmd=${1:-}
shift || true
case $cmd in
    revive)
        [[ $# -eq 2 && -n $(prefix_of "$1") ]] || usage
        revive_node "$1" "$2"
        ;;
    start)
        dir=${1:-$(mktemp -d "${TMPDIR:-/tmp}/dssfn-slurm.XXXXXX")}
        trap 'stop_cluster "$dir"' ERR
        start_cluster "$dir"
        echo "$dir"
        ;;
    env)
        [[ -n ${1:-} ]] || usage
        print_env "$1"
        ;;
    stop)
        [[ -n ${1:-} ]] || usage
        stop_cluster "$1"
        ;;
    run)
        dir=""
        if [[ ${1:-} != -- ]]; then dir=${1:-}; shift || true; fi
        [[ ${1:-} == -- ]] || usage
        shift
        [[ $# -gt 0 ]] || usage
        made=""
        if [[ -z $dir ]]; then made=$(mktemp -d "${TMPDIR:-/tmp}/dssfn-slurm.XXXXXX"); fi
        dir=${dir:-$made}
        # On every exit path: stop the daemons and remove the hosts; a folder made here
        # goes too unless something failed (then its logs are worth a look).
        # shellcheck disable=SC2154  # rc is assigned inside the trap itself
        trap 'rc=$?; stop_cluster "$dir"
              if [[ -n $made && $rc == 0 ]]; then rm -rf "$made"
              else echo "testcluster: logs in $dir/log" >&2; fi' EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
        start_cluster "$dir"
        eval "$(print_env "$dir")"
        echo "testcluster: Slurm in $dir: $(slurm_cmd "$dir" sinfo -h -N -o '%N (%c CPUs)' |
              paste -sd ' ')" >&2
        slurm_cmd "$dir" "$@"
        ;;
    *) usage ;;
esac
