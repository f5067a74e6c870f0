"""The progress lines inside a long simulated layer (``sim.heartbeat``): they say how far a
layer has come and never change what it computes."""

from __future__ import annotations

import io

import numpy as np
import pytest

from dssfn_mpi.analysis.network import parse_network
from dssfn_mpi.config import TrainConfig
from dssfn_mpi.sim.heartbeat import Heartbeat
from dssfn_mpi.sim.layerloop import SimOptions, simulate
from dssfn_mpi.sim.speed import SpeedModel


def test_a_line_when_due_and_none_before():
    out = io.StringIO()
    beat = Heartbeat("layer 0 async", every=3600.0, stream=out)
    beat(0.5, 100, 3, 10)
    assert out.getvalue() == ""
    beat = Heartbeat("layer 0 async", every=1e-9, stream=out)
    beat(0.5, 1000, 3, 10)
    line = out.getvalue()
    assert line.startswith("  layer 0 async: simulated 0.5 s, 1,000 activations (100 per node)")
    assert "3 of 10 nodes pass their stop test" in line
    Heartbeat("layer 1 sync", every=1e-9, stream=out)(1.0, 20, None, 10)
    assert "stop test" not in out.getvalue().splitlines()[-1]
    Heartbeat("off", every=0.0, stream=out)(1.0, 20, None, 10)
    assert "off" not in out.getvalue()


def _run(mode: str, heartbeat: float, quiet: bool = False):
    M = 6
    cfg = TrainConfig(dataset="digits", mode=mode, layers=1, hidden=60, iters=300,
                      stop="eps:1e-2", topology="ring")
    speed = SpeedModel.build("const:1e-3", M, cfg.layers + 1, cfg.iters, {}, None, None, 0)
    opts = SimOptions(nodes=M, speed=speed, network=parse_network("shm"),
                      heartbeat=heartbeat)
    return simulate(cfg, opts, quiet=quiet)


@pytest.mark.parametrize("mode", ["async", "sync", "sync-graph"])
def test_simulate_beats_inside_its_layers_and_computes_the_same(mode, capsys):
    quiet = _run(mode, 1e-9, quiet=True)
    assert "simulated" not in capsys.readouterr().err
    loud = _run(mode, 1e-9)
    err = capsys.readouterr().err
    assert f"  layer 0 {mode}: simulated" in err and f"  layer 1 {mode}: simulated" in err
    assert "nodes pass their stop test" in err
    for a, b in zip(quiet.Os, loud.Os):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
