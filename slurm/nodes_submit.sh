#!/usr/bin/env bash
# Submit slurm/nodes.sbatch once per node count M (paper figure 3).
#
#   bash slurm/nodes_submit.sh                    # M = 2, 4, ..., 20
#   NODE_COUNTS="2 4 8 16" bash slurm/nodes_submit.sh
#   bash slurm/nodes_submit.sh --time=01:00:00 -A myproject   # more sbatch options
#   DRY_RUN=1 bash slurm/nodes_submit.sh          # print sbatch and srun commands only
#
# Job names carry M (dssfn-nodes-M8), so do the job outputs (results/%x-%j.out) and results.
# Run it from the folder the jobs should write to (the repository root); it creates results/
# there, which Slurm needs before the job starts (it does not create an output's folder).
# Then: dssfn-mpi bench collect results/nodes-*.h5 --kind nodes --out nodes.h5
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run() { if [[ ${DRY_RUN:-0} == 1 ]]; then printf '%q ' "$@"; echo; else "$@"; fi; }

run mkdir -p results   # the templates' #SBATCH --output=results/%x-%j.out

for M in ${NODE_COUNTS:-2 4 6 8 10 12 14 16 18 20}; do
    run sbatch --ntasks="$M" --cpus-per-task=1 --job-name="dssfn-nodes-M$M" \
        --export=ALL "$@" "$HERE/nodes.sbatch"
    if [[ ${DRY_RUN:-0} == 1 ]]; then
        # What that job would run (no Slurm needed to print it).
        SLURM_NTASKS=$M SLURM_JOB_ID=dryrun bash "$HERE/nodes.sbatch"
    fi
done
