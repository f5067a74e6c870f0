"""Trained models on disk: every node's output matrices, and scoring them again.

A node's network is fully given by its ``O_0 .. O_L`` plus the run's seed,
width and class count (the random blocks are regenerated from the seed), so a
model file stores only those. Layout: root attributes ``dataset``,
``n_features``, ``n_classes``, ``hidden``, ``layers``, ``seed``, ``nodes``,
``mode``; datasets ``/node_00003/O_07`` (Q x d). Layers and nodes are read
back by the number in their name, not by name order (``O_100`` sorts before
``O_11`` as a string), so files of any depth load in layer order.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..datasets import Dataset
from ..errors import UserError, require
from ..fileio import atomic_write
from .model import accuracy, forward

__all__ = ["Model", "evaluate_model", "load_model", "save_model", "save_run_model"]


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


def save_run_model(cfg: Any, dataset: str, n_features: int, n_classes: int, hidden: int,
                   nodes: list[list[np.ndarray]], simulated: bool = False) -> None:
    """Write a run's model to ``cfg.save_model``: every node's weights and the run's
    settings (the one saver of train and simulate)."""
    import json

    attrs = {"dataset": dataset, "n_features": n_features, "n_classes": n_classes,
             "hidden": hidden, "layers": cfg.layers, "seed": cfg.seed, "nodes": len(nodes),
             "mode": cfg.mode, "config": json.dumps(cfg.to_dict())}
    if simulated:
        attrs["simulated"] = True
    save_model(cfg.save_model, attrs, nodes)


def _by_index(names: Any, prefix: str, source: Path) -> list[str]:
    """``names`` of the form ``<prefix><digits>`` in numeric order (any zero padding)."""
    pattern = re.compile(rf"{prefix}(\d+)")
    indexed = []
    for name in names:
        match = pattern.fullmatch(name)
        require(match is not None, f"{source}: unexpected entry {name!r} in a model file")
        indexed.append((int(match.group(1)), name))
    indexed.sort()
    require([i for i, _ in indexed] == list(range(len(indexed))),
            f"{source}: the model file's {prefix}* entries are not numbered 0, 1, 2, ...")
    return [name for _, name in indexed]


def load_model(path: str | os.PathLike) -> Model:
    """Read a model written by :func:`save_model` (any version of it)."""
    p = Path(path)
    require(p.is_file(), f"{p}: no such model file (write one with train --save-model)")
    try:
        with h5py.File(p, "r") as f:
            attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()}
            nodes = [[f[g][name][()] for name in _by_index(f[g], "O_", p)]
                     for g in _by_index(f, "node_", p)]
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
    hidden, seed = int(a["hidden"]), int(a["seed"])
    out = np.empty((len(model.nodes[0]), len(model.nodes)))
    for m, Os in enumerate(model.nodes):
        for layer, Y in enumerate(forward(ds.X_test, Os, seed, hidden)):
            out[layer, m] = accuracy(Os[layer], Y, ds.y_test)
    return out
