"""Model files: layer order at any depth, old files, and scoring through the forward pass."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from dssfn_mpi.datasets import load_dataset
from dssfn_mpi.errors import UserError
from dssfn_mpi.ssfn.central import train_central
from dssfn_mpi.ssfn.modelio import evaluate_model, load_model, save_model

ATTRS = {"dataset": "digits", "n_features": 3, "n_classes": 2, "hidden": 7, "layers": 100,
         "seed": 0, "nodes": 2, "mode": "async"}


def _tiny_layers(count: int, node: int) -> list[np.ndarray]:
    # O_l holds its own layer number, so any reordering shows.
    return [np.full((2, 3 if i == 0 else 7), 1000.0 * node + i) for i in range(count)]


def test_101_layers_come_back_in_layer_order(tmp_path):
    path = tmp_path / "deep.h5"
    nodes = [_tiny_layers(101, 0), _tiny_layers(101, 1)]
    save_model(path, ATTRS, nodes)
    back = load_model(path).nodes
    assert len(back) == 2 and all(len(Os) == 101 for Os in back)
    for m in range(2):
        assert [float(O[0, 0]) for O in back[m]] == [1000.0 * m + i for i in range(101)]


def test_file_with_other_padding_reads_in_order(tmp_path):
    # Written by hand as an older writer might: unpadded names, created out of order.
    path = tmp_path / "old.h5"
    with h5py.File(path, "w") as f:
        for k, v in ATTRS.items():
            f.attrs[k] = v
        for m in (1, 0):
            g = f.create_group(f"node_{m:05d}")
            for i in (10, 2, 1, 0, 9, 3, 4, 5, 6, 7, 8):
                g.create_dataset(f"O_{i}", data=np.full((2, 7), 1000.0 * m + i))
    back = load_model(path).nodes
    assert [[float(O[0, 0]) for O in Os] for Os in back] == [
        [1000.0 * m + i for i in range(11)] for m in range(2)]


def test_gap_in_layer_numbers_is_a_user_error(tmp_path):
    path = tmp_path / "gap.h5"
    with h5py.File(path, "w") as f:
        f.attrs["n_classes"] = 2
        g = f.create_group("node_00000")
        g.create_dataset("O_00", data=np.zeros((2, 3)))
        g.create_dataset("O_02", data=np.zeros((2, 7)))
    with pytest.raises(UserError, match="numbered"):
        load_model(path)


def test_evaluate_reproduces_the_central_accuracies(tmp_path):
    ds = load_dataset("digits", seed=0)
    res = train_central(ds, layers=3, hidden=90, seed=4)
    path = tmp_path / "central.h5"
    attrs = {**ATTRS, "n_features": ds.n_features, "n_classes": ds.n_classes, "hidden": 90,
             "layers": 3, "seed": 4, "nodes": 1}
    save_model(path, attrs, [res.O])
    acc = evaluate_model(load_model(path), ds)
    assert acc.shape == (4, 1)
    assert np.array_equal(acc[:, 0], np.array(res.test_accuracy))
