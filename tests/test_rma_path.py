"""train --rma: the async engine's write path is selectable and recorded in the run log."""

from __future__ import annotations

import json
import os

import pytest
from mpitools import run_cli, train_runs

from dssfn_mpi.runlog import read_runlog

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(180)]

SMALL = ("--dataset", "synthetic", "--layers", "1", "--hidden", "30", "--iters", "5",
         "--mode", "async", "--quiet")


CHOICES = [("auto", "store"), ("put", "put"), ("store", "store")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An async run at each --rma choice and a sync run, in one two-rank job."""
    assert os.environ.get("OMPI_MCA_osc", "sm") == "sm"
    runs = {rma: [*SMALL, "--rma", rma] for rma, _ in CHOICES}
    runs["sync"] = [*SMALL[:-3], "--mode", "sync"]
    return train_runs(tmp_path_factory.mktemp("rma"), 2, runs)


@pytest.mark.parametrize("rma, path", CHOICES)
def test_the_write_path_is_chosen_and_recorded(runs, rma, path):
    """On one node under osc/sm (the tests' setting) auto stores directly; put is MPI_Put."""
    out = runs[rma]
    log = read_runlog(out)
    assert log.attrs["rma_write_path"] == path
    assert json.loads(log.attrs["config"])["rma"] == rma
    report = run_cli(None, "report", str(out))
    assert f"write path {path}" in report.stdout
    obj = json.loads(run_cli(None, "report", str(out), "--json").stdout)
    assert obj["attrs"]["rma_write_path"] == path


def test_sync_runs_record_no_write_path(runs):
    assert read_runlog(runs["sync"]).attrs["rma_write_path"] == ""


def test_store_where_no_shared_window_is_a_user_error(tmp_path, monkeypatch):
    """osc/rdma makes no shared windows: --rma store stops before any work, on every rank."""
    monkeypatch.setenv("OMPI_MCA_osc", "rdma")
    out = tmp_path / "run.h5"
    res = run_cli(2, "train", *SMALL, "--rma", "store", "--out", str(out))
    assert res.returncode == 2, res.stderr[-2000:]
    ours = [ln for ln in res.stderr.splitlines() if ln.startswith("dssfn-mpi: error:")]
    assert len(ours) == 1 and "--rma store" in ours[0] and "--rma put" in ours[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not list(tmp_path.iterdir())  # no run log, no checkpoints
