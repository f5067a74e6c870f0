"""Test helpers: simulate a run with its saved model, and compare saved models."""

from __future__ import annotations

import numpy as np
import pytest

from dssfn_mpi.analysis.network import parse_network
from dssfn_mpi.analysis.replay import project
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


def assert_timed_is_projection(tmp_path, live_path, log) -> None:
    """A live run simulated on its own trace takes the replay's projected time (shm)."""
    out = tmp_path / "timed.h5"
    assert main(["simulate", "--schedule", str(live_path), "--speed", f"trace:{live_path}",
                 "--out", str(out), "--quiet"]) == 0
    proj = project(log, parse_network("shm"))
    assert read_runlog(out).attrs["sim_total_seconds"] == pytest.approx(proj.total_seconds,
                                                                        rel=1e-9)
