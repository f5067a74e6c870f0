"""A run stopped by the scheduler's signal leaves an incomplete run log (dssfn_mpi.run.jobstop)."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import numpy as np
import pytest

from dssfn_mpi.launch import mpi_env, mpirun_path, train_command
from dssfn_mpi.run.checkpoint import RankCheckpoint, save_config
from dssfn_mpi.run.jobstop import EXIT_STOPPED, salvage_runlog
from dssfn_mpi.runlog import read_runlog, schema, write_runlog


def _config(**over) -> dict:
    cfg = {"mode": "async", "update": "edge", "dataset": "digits", "topology": "circular",
           "degree": 2, "layers": 5, "hidden": 40, "iters": 10, "seed": 0, "eps": None,
           "edges": None}
    cfg.update(over)
    return cfg


def _checkpoint(out, ranks_layers: list[int], q: int = 10) -> None:
    save_config(out, _config(), len(ranks_layers))
    for rank, n in enumerate(ranks_layers):
        rows = schema.set_fields(schema.blank_rows(n), **{
            k: [float(rank + i) for i in range(n)] for k in schema.ROW_FIELDS})
        Os = [np.zeros((q, 64 if i == 0 else 40)) for i in range(n)]
        RankCheckpoint(out, rank).save(Os, rows, {})


def test_salvage_writes_the_layers_every_rank_finished(tmp_path):
    out = str(tmp_path / "run.h5")
    _checkpoint(out, [3, 2, 3, 3])  # rank 1 is a layer behind
    assert salvage_runlog(out, "dssfn-mpi train ...", stopped_by="SIGTERM") == 2
    run = read_runlog(out)
    assert not run.complete and run.layers_done == 2 and run.nodes == 4
    assert run.attrs["stopped_by"] == "SIGTERM" and run.attrs["degree"] == 2
    assert run.attrs["mode"] == "async" and run.attrs["hidden"] == 40
    assert run.attrs["n_classes"] == 10 and run.attrs["command_line"] == "dssfn-mpi train ..."
    assert json.loads(run.attrs["config"])["iters"] == 10
    np.testing.assert_array_equal(run.layers["total_seconds"][:, 1], [1.0, 2.0])
    assert run.layers["activations"].dtype == np.int64
    assert list(run.ranks["neighbors"][0][:2]) == [1, 3]


def test_salvage_keeps_a_run_log_that_is_already_as_long(tmp_path):
    out = str(tmp_path / "run.h5")
    _checkpoint(out, [2, 2])
    layers = {"total_seconds": np.ones((2, 2))}
    write_runlog(out, {"mode": "sync", "nodes": 2, "complete": False}, layers)
    assert salvage_runlog(out) == 2
    assert read_runlog(out).attrs["mode"] == "sync"  # untouched


def test_salvage_without_checkpoint_or_log(tmp_path):
    assert salvage_runlog(str(tmp_path / "none.h5")) is None


@pytest.mark.mpirun
@pytest.mark.timeout(300)
def test_signal_stops_training_with_an_incomplete_log_that_resumes(tmp_path):
    if mpirun_path() is None:
        pytest.skip("no mpirun")
    out = tmp_path / "run.h5"
    cmd = train_command(4, ["train", "--dataset", "digits", "--mode", "async", "--degree", "2",
                            "--layers", "10", "--hidden", "60", "--iters", "600", "--no-check",
                            "--out", str(out)])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=mpi_env())
    for line in proc.stdout:
        if line.startswith("layer   1/"):
            proc.send_signal(signal.SIGUSR1)  # mpirun forwards it to every rank, as Slurm does
            break
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_STOPPED, err
    assert time.monotonic() - t0 < 30
    assert "dssfn-mpi: error: stopped by SIGUSR1" in err and "--resume" in err
    run = read_runlog(out)
    assert not run.complete and 2 <= run.layers_done < 11
    assert run.attrs["stopped_by"] == "SIGUSR1"
    res = subprocess.run(train_command(4, ["train", "--resume", str(out), "--quiet"]),
                         capture_output=True, text=True, timeout=240, env=mpi_env())
    assert res.returncode == 0, res.stderr
    assert read_runlog(out).complete
