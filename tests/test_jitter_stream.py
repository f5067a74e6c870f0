"""Tests for dssfn_mpi.sim.speed.JitterStream: replay's jitter factors, drawn as asked for."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from dssfn_mpi.analysis.replay import jitter_factors
from dssfn_mpi.sim.speed import JitterStream, SpeedModel

SHAPE = (3, 5, 700)  # layers, nodes, activations: 700 is not a multiple of the block


@pytest.mark.parametrize("jitter", [("exp", 0.5), ("lognormal", 0.3), ("exp", 0.0)])
def test_stream_gives_the_up_front_factors_in_any_order(jitter):
    full = jitter_factors(jitter, SHAPE, seed=11)
    L, M, K = SHAPE
    # Node by node (the replayed schedule), then activation by activation (the lockstep
    # loops), then at random (the event loop; back and forth across windows and layers).
    stream = JitterStream(jitter, SHAPE, 11, block=64)
    by_node = np.array([[[stream.factor(layer, m, k) for k in range(K)] for m in range(M)]
                        for layer in range(L)])
    assert np.array_equal(by_node, full)
    stream = JitterStream(jitter, SHAPE, 11, block=64)
    by_k = np.array([[stream.factors(layer, k) for k in range(K)] for layer in (2, 0, 1)])
    assert np.array_equal(by_k.transpose(0, 2, 1), full[[2, 0, 1]])
    stream = JitterStream(jitter, SHAPE, 11, block=64)
    picks = np.random.default_rng(0).integers(0, [L, M, K], size=(400, 3))
    got = [stream.factor(int(layer), int(m), int(k)) for layer, m, k in picks]
    assert got == [full[layer, m, k] for layer, m, k in picks]


def test_stream_refuses_what_the_array_would():
    stream = JitterStream(("exp", 1.0), SHAPE, 0)
    for layer, m, k in ((3, 0, 0), (0, 5, 0), (0, 0, 700), (-1, 0, 0)):
        with pytest.raises(IndexError):
            stream.factor(layer, m, k)


def test_speed_model_activations_are_the_jittered_costs():
    speed = SpeedModel.build("const:1e-3", 5, 3, 700, {2: 4.0}, None, "exp:1", 5)
    full = jitter_factors(("exp", 1.0), SHAPE, 5)
    factor = np.array([1.0, 1.0, 4.0, 1.0, 1.0])
    assert np.array_equal(speed.activations(1, 650, np.zeros(5)), 1e-3 * full[1, :, 650] * factor)
    assert speed.activation(2, 2, 3, 0.0) == 1e-3 * full[2, 2, 3] * 4.0


def test_stream_memory_is_a_window_per_node_not_every_factor():
    shape = (3, 256, 100_000)  # up front: 614 MB of factors
    stream = JitterStream(("exp", 1.0), shape, 3)
    tracemalloc.start()
    try:
        last = [stream.factors(2, k) for k in (0, 99_999)][-1]
        for m in (0, 255):
            stream.factor(1, m, 50_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.01 * np.prod(shape) * 8, peak
    assert last.shape == (256,) and np.all(last >= 1.0)
