# shellcheck shell=bash
# Shared part of the sbatch templates in this folder (sourced, not run). Everything a
# site needs comes from the environment; no template needs editing.
#
# DSSFN_VENV        virtualenv holding dssfn_mpi (default: $SLURM_SUBMIT_DIR/.venv, as made in
#                   the README's cluster section); without one, dssfn-mpi must be on PATH
# DSSFN_MPI_MODULE  modules to load first, in order, space- or comma-separated, e.g.
#                   "gcc/13 openmpi/5.0" (default: none); loaded only when a module system exists
# DSSFN_DATA_DIR    dataset folder (default: dssfn-mpi's per-user folder, where
#                   `dssfn-mpi data fetch` writes: ${XDG_DATA_HOME:-~/.local/share}/dssfn-mpi)
# DSSFN_SRUN_MPI    srun --mpi= plugin: pmix (default; Open MPI 5, MPICH 4), pmi2 (older
#                   MPIs; Intel MPI, with I_MPI_PMI_LIBRARY) or cray_shasta (Cray MPICH);
#                   `srun --mpi=list` shows what your Slurm has
# DSSFN_DOCTOR      0 skips the `dssfn-mpi doctor` check every template runs first
# RESULTS           results folder (default: results, in the submission directory; the job
#                   outputs go to results/ there whatever RESULTS says: #SBATCH --output)
# EXTRA_ARGS        more `dssfn-mpi train` options, e.g. "--hidden 500 --seed 3"
# Account, partition, QOS: sbatch -A/-p/-q, or SBATCH_ACCOUNT, SBATCH_PARTITION, SBATCH_QOS.
# DRY_RUN=1         print the commands instead of running them (no Slurm needed)
#
# Written for bash >= 4.2 with set -u: a possibly empty array is expanded as
# ${a[@]+"${a[@]}"} (before bash 4.4, "${a[@]}" of an empty array is an unbound variable).

DSSFN_VENV=${DSSFN_VENV:-${SLURM_SUBMIT_DIR:-$PWD}/.venv}
DSSFN_MPI_MODULE=${DSSFN_MPI_MODULE:-}
DSSFN_SRUN_MPI=${DSSFN_SRUN_MPI:-pmix}
RESULTS=${RESULTS:-results}
EXTRA_ARGS=${EXTRA_ARGS:-}
NTASKS=${SLURM_NTASKS:-20}   # = M, the number of graph nodes
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1  # one BLAS thread per rank
# Timing placement (the templates ask sbatch for it): the job alone on its nodes, one task
# per core. Exported for the run log (dssfn_mpi.run.mpifacts.mpi_facts records it).
export DSSFN_PLACEMENT="sbatch --exclusive --hint=nomultithread;\
 srun --mpi=$DSSFN_SRUN_MPI --cpus-per-task=1"
# --cpus-per-task is not inherited by srun from sbatch (Slurm >= 22.05): repeated here.
SRUN=(srun "--mpi=$DSSFN_SRUN_MPI" --cpus-per-task=1)
NNODES=${SLURM_JOB_NUM_NODES:-1}
if (( NNODES > 1 )); then
    # Across nodes, Open MPI's one-sided puts over TCP are passive only with the TCP
    # transport's progress thread (without it a put waits for its target to enter MPI: the
    # doctor's put between two nodes took 0.9 s of the target's 1 s sleep); it sleeps in
    # the kernel when idle. Other MPIs ignore the variable.
    export OMPI_MCA_btl_tcp_progress_thread=${OMPI_MCA_btl_tcp_progress_thread:-1}
    if [[ ${OMPI_MCA_osc:-} == sm ]]; then
        echo "dssfn-slurm: OMPI_MCA_osc=sm is the single-node component and this job spans" \
            "$NNODES nodes: unset for this job" >&2
        unset OMPI_MCA_osc
    fi
fi
# Exit status of dssfn-mpi train stopped by the time-limit signal (dssfn_mpi.run.jobstop).
EXIT_STOPPED=75
STATUS=0

say() { echo "dssfn-slurm: $*" >&2; }
run() { if [[ ${DRY_RUN:-0} == 1 ]]; then printf '%q ' "$@"; echo; else "$@"; fi; }

setup_env() {
    local module modules=()
    read -r -a modules <<< "${DSSFN_MPI_MODULE//,/ }"
    if (( ${#modules[@]} > 0 )); then
        if ! type module >/dev/null 2>&1 && [[ -f /etc/profile.d/modules.sh ]]; then
            set +u; source /etc/profile.d/modules.sh; set -u
        fi
        if type module >/dev/null 2>&1; then
            for module in ${modules[@]+"${modules[@]}"}; do
                set +u
                module load "$module" || {
                    say "error: 'module load $module' failed (DSSFN_MPI_MODULE=$DSSFN_MPI_MODULE)"
                    exit 2
                }
                set -u
            done
        else
            say "no module system here: DSSFN_MPI_MODULE=$DSSFN_MPI_MODULE not loaded"
        fi
    fi
    if [[ -f $DSSFN_VENV/bin/activate ]]; then
        set +u; source "$DSSFN_VENV/bin/activate"; set -u
    elif ! command -v dssfn-mpi >/dev/null; then
        say "error: no virtualenv at $DSSFN_VENV and no dssfn-mpi on PATH: create it" \
            "(README, cluster section) or set DSSFN_VENV"
        exit 2
    fi
}

# The async engine needs passive puts: stop before any training if they are not.
doctor_gate() {
    [[ ${DSSFN_DOCTOR:-1} == 0 ]] && return 0
    # Two ranks, on two nodes when the job has them (the puts that cross the network; the
    # doctor itself picks a pair on different hosts, see mpi_passive_put_pair).
    local spread=()
    (( NNODES > 1 && NTASKS > 1 )) && spread=(-N 2)
    if ! run "${SRUN[@]}" -n "$(( NTASKS < 2 ? NTASKS : 2 ))" ${spread[@]+"${spread[@]}"} \
            --distribution=cyclic dssfn-mpi doctor; then
        say "stopping before any training: 'dssfn-mpi doctor' failed (report above):" \
            "one-sided puts are not passive with this MPI, or MPI did not start; see the" \
            "README's cluster section (DSSFN_DOCTOR=0 runs anyway)"
        exit 1
    fi
}

# step LABEL COMMAND...: one training run. A failure is reported and the next step runs
# (the job's status says something failed); the time limit stops the loop (step returns 1),
# and so does a lost node (the steps after it could not run on the allocation).
step() {
    local label=$1 rc=0 lost
    shift
    run "$@" || rc=$?
    case $rc in
        0) return 0 ;;
        "$EXIT_STOPPED")
            say "$label: stopped by the time limit; its run log is kept, marked incomplete"
            STATUS=$EXIT_STOPPED
            return 1 ;;
    esac
    STATUS=1
    lost=$(lost_nodes)
    if [[ -n $lost ]]; then
        say "$label: failed (exit status $rc): $(lost_report "$lost" "$@")"
        return 1
    fi
    say "$label: failed with exit status $rc; going on with the next one"
}

# lost_nodes: the job's nodes that no longer run a one-task step (a job spanning nodes only;
# a node that is down or unreachable fails within Slurm's MessageTimeout).
lost_nodes() {
    local node lost=()
    (( NNODES > 1 )) || return 0
    for node in $(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null); do
        timeout 30 srun --overlap -N 1 -n 1 -w "$node" --mpi=none --cpus-per-task=1 true \
            >/dev/null 2>&1 || lost+=("$node")
    done
    echo ${lost[@]+"${lost[@]}"}
}

# lost_report NODES COMMAND...: the one line on a run that lost NODES (its ranks there, the
# layers its run log keeps, how to continue), from the run's --out (dssfn_mpi.run.jobstop).
lost_report() {
    local nodes=$1 out="" prev=""
    shift
    for arg in "$@"; do [[ $prev == --out ]] && out=$arg; prev=$arg; done
    if [[ -z $out ]]; then echo "lost node(s) $nodes"; return; fi
    "${DSSFN_PYTHON:-python}" -c 'import sys
from dssfn_mpi.run.jobstop import report_lost
print(report_lost(sys.argv[1], sys.argv[2].split()))' "$out" "$nodes" ||
        echo "lost node(s) $nodes; $out could not be marked (above)"
}

# finish: the job's exit status, with a summary line when something did not work.
finish() {
    case $STATUS in
        0) ;;
        "$EXIT_STOPPED") say "time limit reached: the steps after the stopped one did not run" ;;
        *) say "some steps failed (see above); the others' results are in $RESULTS" ;;
    esac
    exit "$STATUS"
}

[[ ${DRY_RUN:-0} == 1 ]] || setup_env
