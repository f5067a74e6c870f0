"""Async ``--resume``: it restarts at the right layer, from exactly the saved weights.

An async run is killed at the start of a layer; ``--resume`` continues it from
the per-rank checkpoints. Checked here:

* the resume layer (run log ``resumed_at_layer``) is the number of layers
  every rank had checkpointed, read from the checkpoints before the resume;
* the layers before it are restored, not recomputed: every node's weights in
  the resumed run's ``--save-model`` equal its checkpointed ones bit for bit,
  and the log rows of those layers equal the interrupted run's log;
* the layers after it are built on the restored weights: the async edge
  update reaches the exact layer solution (to ~1e-14 here), so the resumed
  network must still equal :func:`dssfn_mpi.ssfn.central.train_central`'s, which
  a wrong feature rebuild or a wrong restored weight would break.

Which layers the ranks have checkpointed when rank 0 dies at the start of
layer F: rank 0 exactly F (it saves each layer before starting the next). Its
neighbours cannot finish layer F without rank 0's puts (bounded delay), and
rank 0 could not finish layer F - 1 before they had nearly finished it too,
so they saved F - 1 or F layers (with the per-layer equivalence check on, F).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from mpitools import run_cli

from dssfn_mpi.datasets import load_dataset
from dssfn_mpi.run.checkpoint import RankCheckpoint, checkpoint_dir
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.ssfn.central import train_central
from dssfn_mpi.ssfn.modelio import load_model

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(300)]

N_TRAIN, N_TEST = 300, 100
PROBLEM = {"dataset": "synthetic", "dataset_options": {"n_train": N_TRAIN, "n_test": N_TEST},
           "layers": 3, "hidden": 30, "seed": 7}
NODES, FAIL_LAYER = 4, 2


def test_async_resume_restores_the_checkpointed_weights_and_ends_at_the_central_network(
        tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(PROBLEM))
    out, model_path = tmp_path / "run.h5", tmp_path / "model.h5"
    # gamma 1 at layer 0 is in units of its Gram metric (--metric gram), 3 beyond.
    res = run_cli(NODES, "train", "--config", str(cfg), "--mode", "async", "--degree", "2",
                  "--iters", "2000", "--gamma", "1,3", "--out", str(out),
                  "--save-model", str(model_path), "--quiet",
                  "--fail-at", f"0:{FAIL_LAYER}:kill")
    assert res.returncode != 0
    assert not model_path.exists()
    partial = read_runlog(out)
    assert not partial.complete and partial.layers_done == FAIL_LAYER

    saved = [RankCheckpoint(out, rank).load()[0] for rank in range(NODES)]
    counts = [len(Os) for Os in saved]
    assert counts[0] == FAIL_LAYER, counts
    assert all(FAIL_LAYER - 1 <= c <= FAIL_LAYER for c in counts), counts
    first = min(counts)

    res = run_cli(NODES, "train", "--resume", str(out), "--quiet")
    assert res.returncode == 0, res.stderr[-3000:]
    log = read_runlog(out)
    assert log.complete and log.layers_done == PROBLEM["layers"] + 1
    assert log.attrs["resumed_at_layer"] == first
    assert not checkpoint_dir(out).exists()

    model = load_model(model_path)
    assert len(model.nodes) == NODES
    for m in range(NODES):
        assert len(model.nodes[m]) == PROBLEM["layers"] + 1
        for layer in range(first):
            assert np.array_equal(model.nodes[m][layer], saved[m][layer]), (m, layer)
    for key, rows in partial.layers.items():
        np.testing.assert_array_equal(log.layers[key][:first], rows[:first], err_msg=key)
    # The trace covers the resumed run's own layers; those before the resume are NaN.
    start, end = log.trace["start"], log.trace["end"]
    assert start.shape == (PROBLEM["layers"] + 1, NODES, 2000)
    assert np.all(np.isnan(start[:first])) and np.all(log.trace["versions"][:first] == -1)
    assert np.all(start[first:] < end[first:]) and np.all(start[first:] >= 0)
    assert np.all(np.isnan(log.trajectory["rel_distance"][:first]))
    np.testing.assert_array_equal(log.trajectory["rel_distance"][first:, :, -1],
                                  log.layers["rel_distance"][first:])

    ds = load_dataset("synthetic", seed=PROBLEM["seed"], n_train=N_TRAIN, n_test=N_TEST)
    central = train_central(ds, PROBLEM["layers"], PROBLEM["hidden"], seed=PROBLEM["seed"])
    rel = np.array([[np.linalg.norm(Os[layer] - central.O[layer]) / np.linalg.norm(
        central.O[layer]) for Os in model.nodes] for layer in range(PROBLEM["layers"] + 1)])
    assert rel.max() <= 1e-6, rel
