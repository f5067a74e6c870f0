"""Test helpers: simulate a run with its saved model, and compare saved models."""

from __future__ import annotations

import numpy as np

from dssfn_mpi.cli import main
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.ssfn.modelio import load_model


def worst_gap(a_path, b_path) -> float:
    """The largest relative difference of two saved models' matrices, node by node."""
    a, b = load_model(a_path), load_model(b_path)
    return max(float(np.linalg.norm(x - y) / np.linalg.norm(x))
               for na, nb in zip(a.nodes, b.nodes) for x, y in zip(na, nb))


def simulate_saved(tmp_path, name: str, nodes: int, *argv: str):
    """``dssfn-mpi simulate`` on ``nodes`` nodes with ``argv``: its run log and model path."""
    out, model = tmp_path / f"{name}.h5", tmp_path / f"{name}-model.h5"
    assert main(["simulate", "--nodes", str(nodes), *argv, "--out", str(out),
                 "--save-model", str(model), "--overwrite"]) == 0
    return read_runlog(out), model

