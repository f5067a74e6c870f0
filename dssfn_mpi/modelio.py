"""Trained models on disk: every node's output matrices, and scoring them again.

A node's network is fully given by its ``O_0 .. O_L`` plus the run's seed,
width and class count (the random blocks are regenerated from the seed), so a
model file stores only those. Layout: root attributes ``dataset``,
``n_features``, ``n_classes``, ``hidden``, ``layers``, ``seed``, ``nodes``,
``mode``; datasets ``/node_00003/O_07`` (Q x d).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .datasets import Dataset
from .errors import UserError, require
from .fileio import atomic_write
from .model import accuracy, hidden_rows, next_features, random_matrix

__all__ = ["Model", "evaluate_model", "load_model", "save_model"]


@dataclass
class Model:
    """Per-node output matrices and what is needed to rebuild the networks."""

    attrs: dict[str, Any]
    nodes: list[list[np.ndarray]]  # nodes[m][l] = O_l of node m


def save_model(path: str | os.PathLike, attrs: dict[str, Any],
               nodes: list[list[np.ndarray]]) -> None:
    """Write a model file atomically (:func:`dssfn_mpi.fileio.atomic_write`)."""

    def write(tmp: Path) -> None:
        with h5py.File(tmp, "w") as f:
            for key, value in attrs.items():
                f.attrs[key] = value
            for m, Os in enumerate(nodes):
                g = f.create_group(f"node_{m:05d}")
                for i, O in enumerate(Os):
                    g.create_dataset(f"O_{i:02d}", data=O)

    atomic_write(path, write)


def load_model(path: str | os.PathLike) -> Model:
    """Read a model written by :func:`save_model`."""
    p = Path(path)
    require(p.is_file(), f"{p}: no such model file (write one with train --save-model)")
    try:
        with h5py.File(p, "r") as f:
            attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()}
            nodes = [[g[name][()] for name in sorted(g)] for _, g in sorted(f.items())]
    except OSError as exc:
        raise UserError(f"{p}: not a readable model file ({exc})") from None
    require("n_classes" in attrs and nodes, f"{p}: not a dssfn-mpi model file")
    return Model(attrs=attrs, nodes=nodes)


def evaluate_model(model: Model, ds: Dataset) -> np.ndarray:
    """Test accuracy of every node at every layer, shape (L+1, M).

    Refuses a dataset whose feature or class count differs from the model's.
    """
    a = model.attrs
    require(
        ds.n_features == int(a["n_features"]) and ds.n_classes == int(a["n_classes"]),
        f"the model was trained on {a.get('dataset')} (P={a['n_features']}, "
        f"Q={a['n_classes']}) but {ds.name} has P={ds.n_features}, Q={ds.n_classes}: "
        "evaluate it on a dataset of the same shape",
    )
    Q, hidden, seed = int(a["n_classes"]), int(a["hidden"]), int(a["seed"])
    out = np.empty((len(model.nodes[0]), len(model.nodes)))
    for m, Os in enumerate(model.nodes):
        Y = ds.X_test
        for layer, O in enumerate(Os):
            if layer > 0:
                R = random_matrix(seed, layer, hidden_rows(hidden, Q), Y.shape[0])
                Y = next_features(Y, Os[layer - 1], R)
            out[layer, m] = accuracy(O, Y, ds.y_test)
    return out
