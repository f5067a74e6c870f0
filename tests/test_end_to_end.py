"""End to end: a decentralized run's saved network equals the centralized network.

The equivalence check of the run log (``rel_distance``) compares each layer
with the exact solution of the problem the ranks stacked from *their own*
features, so a bug in how those features are built (the random blocks' seeds,
the layer-to-layer map) or in how the training set reaches the ranks (the
shard scatter) passes it unnoticed. Here the only thing shared with the
decentralized run is the data and :mod:`dssfn_mpi.ssfn.model`: the reference is
:func:`dssfn_mpi.ssfn.central.train_central` on the whole training set, and every
node's weights at every layer, read back from ``--save-model``, must match it.

Why that can hold exactly: the uniform shards are disjoint and together are
the whole training set (``partition``), the stacked statistics
``sum_m Y_m Y_m^T`` and ``sum_m T_m Y_m^T`` are those of the whole set (the
features are built column by column), and the exact layer solution depends on
those statistics only. So once each layer's decentralized solution is within
rounding of the exact one, the next layer's features are too, and the whole
network is. Distances compound from layer to layer, hence penalties and
iteration counts chosen (measured here: ~1e-14 at every layer) far below the
1e-6 bound, on a problem small enough to take a few seconds.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from mpitools import run_cli

from dssfn_mpi.datasets import load_dataset
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.ssfn.central import train_central
from dssfn_mpi.ssfn.modelio import load_model

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(300)]

N_TRAIN, N_TEST = 300, 100
# A seed other than the default, so a code path that forgets cfg.seed shows.
PROBLEM = {"dataset": "synthetic", "dataset_options": {"n_train": N_TRAIN, "n_test": N_TEST},
           "layers": 3, "hidden": 30, "seed": 7}
BOUND = 1e-6


@pytest.fixture(scope="module")
def central():
    ds = load_dataset("synthetic", seed=PROBLEM["seed"], n_train=N_TRAIN, n_test=N_TEST)
    ref = train_central(ds, PROBLEM["layers"], PROBLEM["hidden"], seed=PROBLEM["seed"])
    # The norm constraint is active beyond layer 0: the case where a wrong
    # decentralized fixed point would show.
    assert all(lam > 0 for lam in ref.lam[1:]), ref.lam
    return ref


def _train_and_load(tmp_path, n: int, *args: str):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(PROBLEM))
    out, model = tmp_path / "run.h5", tmp_path / "model.h5"
    res = run_cli(n, "train", "--config", str(cfg), "--out", str(out),
                  "--save-model", str(model), "--quiet", *args)
    assert res.returncode == 0, res.stderr[-3000:]
    return read_runlog(out), load_model(model)


def _assert_network_matches(log, model, central, n: int) -> None:
    # The premise: the shards together are the whole training set.
    assert log.nodes == n and int(np.sum(log.attrs["shard_sizes"])) == N_TRAIN
    a = model.attrs
    assert (a["nodes"], a["layers"], a["hidden"], a["seed"]) == (
        n, PROBLEM["layers"], PROBLEM["hidden"], PROBLEM["seed"])
    assert len(model.nodes) == n
    rel = np.empty((PROBLEM["layers"] + 1, n))
    for m, Os in enumerate(model.nodes):
        assert len(Os) == PROBLEM["layers"] + 1
        for layer, O in enumerate(Os):
            ref = central.O[layer]
            assert O.shape == ref.shape, (m, layer, O.shape, ref.shape)
            rel[layer, m] = np.linalg.norm(O - ref) / np.linalg.norm(ref)
    assert rel.max() <= BOUND, rel


def test_sync_network_equals_the_centralized_network(tmp_path, central):
    log, model = _train_and_load(tmp_path, 3, "--mode", "sync", "--iters", "1000",
                                 "--rho", "100,10,10,5")
    _assert_network_matches(log, model, central, 3)


def test_async_edge_network_equals_the_centralized_network(tmp_path, central):
    # A ring of 4 (not complete), so information needs two hops.
    # gamma 1 at layer 0 is in units of its Gram metric (--metric gram), 3 beyond.
    log, model = _train_and_load(tmp_path, 4, "--mode", "async", "--update", "edge",
                                 "--degree", "2", "--iters", "2000", "--gamma", "1,3")
    assert np.all(log.layers["activations"] == 2000)
    _assert_network_matches(log, model, central, 4)
