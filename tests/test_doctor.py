"""``dssfn-mpi doctor`` as a gate, and :func:`dssfn_mpi.doctor.mpi_facts`, under mpirun."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from mpitools import run_cli

from dssfn_mpi.launch import mpi_env, mpirun_path

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(180)]


def test_doctor_passes_at_the_training_thread_level():
    res = run_cli(2, "doctor")
    assert res.returncode == 0, res.stderr
    assert "passive put: PASS" in res.stdout
    # the level training initialises MPI at too (cli._init_mpi)
    assert "thread level: MPI_THREAD_FUNNELED" in res.stdout
    assert "window memory model (Win.Allocate): unified" in res.stdout


def _python(code: str, n: int | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", textwrap.dedent(code)]
    if n is not None:
        if mpirun_path() is None:
            pytest.skip("no mpirun")
        cmd = [mpirun_path(), "-n", str(n), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=mpi_env(),
                          check=False)


def test_doctor_exits_nonzero_when_puts_are_not_passive():
    res = _python("""
        import dssfn_mpi.doctor as d
        measured = d.mpi_facts
        d.mpi_facts = lambda comm, sleep=0.5: {**measured(comm, sleep), "mpi_passive_put": "fail"}
        from dssfn_mpi.cli import main
        raise SystemExit(main(["doctor"]))
    """)
    assert res.returncode == 1, res.stderr
    assert "passive put: FAIL" in res.stdout
    assert res.stderr.strip().splitlines()[-1].startswith(
        "dssfn-mpi: error: puts into MPI-allocated windows are not passive with this MPI")


def test_one_rank_doctor_is_untested_not_failed():
    res = run_cli(None, "doctor")
    assert res.returncode == 0, res.stderr
    assert "passive put: run with 2 ranks" in res.stdout


def test_mpi_facts_are_the_same_on_every_rank_and_storable():
    res = _python("""
        import json
        from dssfn_mpi.cli import _init_mpi
        MPI = _init_mpi()
        from dssfn_mpi.doctor import mpi_facts
        facts = mpi_facts(MPI.COMM_WORLD, sleep=0.2)
        print(json.dumps(facts, sort_keys=True), flush=True)
    """, n=3)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 3 and rows[0] == rows[1] == rows[2]
    facts = rows[0]
    assert all(isinstance(v, (str, int, float)) for v in facts.values())
    assert facts["mpi_library"].startswith("Open MPI")
    assert facts["mpi_thread_level"] == "MPI_THREAD_FUNNELED"
    assert facts["mpi_window_model"] == "unified"
    assert facts["mpi_osc"] == "sm"  # mpi_env() asks for it
    assert facts["mpi_passive_put"] == "pass" and 0 <= facts["mpi_passive_put_seconds"] < 0.05
    assert len(json.loads(facts["cpu_affinity"])) == 3
