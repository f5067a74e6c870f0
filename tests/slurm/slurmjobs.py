"""Submitting the sbatch templates and following their jobs, for the tests on a Slurm cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SLURM = REPO / "slurm"
TINY = "--hidden 60"


def job_env(**extra: str) -> dict[str, str]:
    """This process's environment for a job: no inherited sbatch settings, this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH_", "SLURM_JOB"))}
    env.setdefault("DSSFN_VENV", sys.prefix)  # the venv running these tests
    env["PYTHONPATH"] = str(REPO)  # this checkout's package, in the jobs too
    env.update(extra)
    return env


def sbatch(cwd: Path, options: list[str], script: str | None = None, **env: str) -> str:
    """Submit ``slurm/SCRIPT`` (or ``options`` alone, e.g. ``--wrap``) from ``cwd``; the job id."""
    cmd = ["sbatch", "--parsable", *options] + ([str(SLURM / script)] if script else [])
    (cwd / "results").mkdir(exist_ok=True)  # the templates' job outputs; Slurm makes no folder
    res = subprocess.run(cmd, cwd=cwd, env=job_env(**env), capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().split(";")[0]


def job_info(job_id: str) -> dict[str, str]:
    """``scontrol show job``'s fields of a job (JobState, BatchHost, ExitCode, ...)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                         text=True, timeout=60).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def wait_for(job_ids: list[str], limit: float, poll: float = 2.0) -> None:
    """Wait until none of the jobs is queued or running; fail the test after ``limit`` s."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        left = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)],
                              capture_output=True, text=True, timeout=60).stdout.split()
        if not left:
            return
        time.sleep(poll)
    pytest.fail(f"jobs still queued or running after {limit:g} s: {job_ids}")


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m dssfn_mpi ARGS`` in ``cwd`` with the jobs' environment."""
    return subprocess.run([sys.executable, "-m", "dssfn_mpi", *args], cwd=cwd, env=job_env(),
                          capture_output=True, text=True, timeout=600)
