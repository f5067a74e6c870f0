#!/usr/bin/env bash
# A throwaway one-node Slurm cluster on localhost, for testing the templates.
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
# The node declares TESTCLUSTER_CPUS CPUs (default 20; SlurmdParameters=config_overrides
# lets it declare more than it has), so 20-task templates run oversubscribed.
set -euo pipefail

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() {
    local dir=$1 host cpus=${TESTCLUSTER_CPUS:-20}
    host=$(hostname -s)
    mkdir -p "$dir"/{key,munge,state,spool,log,run,tmp}
    # munged wants its socket folder searchable by all and its key private.
    chmod 0755 "$dir" "$dir/munge"
    chmod 0700 "$dir/key"
    dd if=/dev/urandom of="$dir/key/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$dir/key/munge.key"
    : > "$dir/plugstack.conf"   # not the system's /etc/slurm/plugstack.conf
    cat > "$dir/slurm.conf" <<EOF
# Written by slurm/testcluster.sh: a one-node test cluster living in $dir.
ClusterName=dssfntest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket.2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    # The PMIx plugin's per-job folders go under the spool folder, not /tmp.
    echo "PMIxCliTmpDirBase=$dir/tmp" > "$dir/mpi.conf"
}

print_env() {
    local dir=$1
    printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf"
    # Open MPI's session folders of the jobs go here too.
    printf 'export TMPDIR=%q\n' "$dir/tmp"
}

pid_of() { [[ -s $1 ]] && cat "$1" || true; }

stop_cluster() {
    local dir=$1 name pid i
    [[ -f $dir/slurm.conf ]] || return 0
    export SLURM_CONF=$dir/slurm.conf
    if [[ -n $(pid_of "$dir/run/slurmctld.pid") ]]; then
        # Jobs first: their slurmstepd processes outlive slurmd otherwise.
        scancel --quiet --full --partition=debug 2>/dev/null || true
        for i in $(seq 60); do
            [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
            sleep 1
        done
    fi
    for name in slurmd slurmctld munged; do
        pid=$(pid_of "$dir/run/$name.pid")
        [[ -n $pid ]] || continue
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$dir/run/$name.pid"
    done
}

start_cluster() {
    local dir=$1 i state
    for tool in munged slurmctld slurmd sbatch; do
        command -v "$tool" >/dev/null || {
            echo "testcluster: $tool not found (apt-get install slurm-wlm munge libpmix2)" >&2
            exit 1
        }
    done
    write_config "$dir"
    munged --key-file="$dir/key/munge.key" --socket="$dir/munge/munge.socket.2" \
        --pid-file="$dir/run/munged.pid" --seed-file="$dir/key/munged.seed" \
        --log-file="$dir/log/munged.log"
    export SLURM_CONF=$dir/slurm.conf
    # -c: no state from an earlier cluster; the pid files come from slurm.conf.
    slurmctld -c -f "$SLURM_CONF" -L "$dir/log/slurmctld.log"
    slurmd -f "$SLURM_CONF" -L "$dir/log/slurmd.log"
    for i in $(seq 60); do
        state=$(sinfo -h -N -o %t 2>/dev/null || true)
        [[ $state == idle ]] && return 0
        sleep 1
    done
    echo "testcluster: the node did not come up (state '${state:-?}'); logs in $dir/log" >&2
    tail -n 20 "$dir"/log/*.log >&2 || true
    return 1
}

cmd=${1:-}
shift || true
case $cmd in
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
        # On every exit path: stop the daemons; a folder made here goes too unless
        # something failed (then its logs are worth a look).
        trap 'rc=$?; stop_cluster "$dir"
              if [[ -n $made && $rc == 0 ]]; then rm -rf "$made"
              else echo "testcluster: logs in $dir/log" >&2; fi' EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
        start_cluster "$dir"
        eval "$(print_env "$dir")"
        echo "testcluster: one-node Slurm in $dir ($(sinfo -h -N -o '%N %c CPUs'))" >&2
        "$@"
        ;;
    *) usage ;;
esac
