"""The one-shot modes' statistics: packing, sizes, the mixing-rounds rule, the memory check."""

from __future__ import annotations

import numpy as np
import pytest

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.errors import UserError
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.sim.nodes import mix
from dssfn_mpi.ssfn.gramstats import (
    StatsLayout,
    check_memory,
    memory_bytes,
    stats_bytes,
    stats_rounds,
)
from dssfn_mpi.ssfn.solver import exact_solve


def _node_stats(rng, M: int, d: int, Q: int, signed: bool = False):
    """Every node's ``G_m``, ``B_m`` from skewed shards (sizes 5 .. 80 samples)."""
    out = []
    for m in range(M):
        J = 5 + (75 * m) // max(M - 1, 1)
        Y = rng.standard_normal((d, J)) if signed else np.maximum(rng.standard_normal((d, J)), 0)
        T = np.eye(Q)[:, rng.integers(0, Q, J)]
        out.append((Y @ Y.T, T @ Y.T))
    return out


def test_pack_and_unpack_round_trip_the_symmetric_statistics():
    rng = np.random.default_rng(0)
    (G, B), = _node_stats(rng, 1, 7, 3)
    lay = StatsLayout(7, 3)
    buf = lay.pack(G, B)
    assert buf.size == 7 * 8 // 2 + 3 * 7 and lay.nbytes == stats_bytes(7, 3) == buf.nbytes
    G2, B2 = lay.unpack(buf)
    assert np.array_equal(G2, G) and np.array_equal(B2, B)
    # A sum of packed buffers is the packed sum: what the allreduce relies on.
    (G3, B3), = _node_stats(rng, 1, 7, 3)
    G4, B4 = lay.unpack(buf + lay.pack(G3, B3))
    assert np.allclose(G4, G + G3, rtol=0, atol=1e-12) and np.allclose(B4, B + B3)


def test_message_bytes_per_mode():
    def message_bytes(mode, n_classes, d):
        return lookup(mode).message_bytes(n_classes, d)

    assert message_bytes("oneshot", 10, 1000) == (1000 * 1001 // 2 + 10 * 1000) * 8
    assert message_bytes("oneshot-graph", 10, 1000) == message_bytes("oneshot", 10, 1000)
    for mode in ("async", "sync", "sync-graph"):
        assert message_bytes(mode, 10, 1000) == 10 * 1000 * 8


@pytest.mark.parametrize("topology, degree", [("ring", None), ("circular", 4), ("complete", None)])
def test_mixing_rounds_reach_the_stated_accuracy_on_every_node(topology, degree):
    # The rule's bound holds whatever the data: check it on skewed shards, and check that it
    # is needed (half the rounds miss it on the sparse graphs).
    M, d, Q, tol = 12, 9, 3, 1e-6
    graph = make_topology(topology, M, degree=degree)
    rng = np.random.default_rng(1)
    stats = _node_stats(rng, M, d, Q)
    lay = StatsLayout(d, Q)
    packed = [lay.pack(G, B) for G, B in stats]
    mean = np.mean(packed, axis=0)
    Gbar, Bbar = lay.unpack(mean)
    r = stats_rounds(graph, tol)
    assert M * graph.mixing_rate() ** r <= tol < M * graph.mixing_rate() ** (r - 1) or r == 1

    def worst(rounds: int) -> float:
        errs = []
        for x in mix(graph, packed, rounds):
            G, B = lay.unpack(x)
            errs.append(max(np.linalg.norm(G - Gbar) / np.linalg.norm(Gbar),
                            np.linalg.norm(B - Bbar) / np.linalg.norm(Bbar)))
        return max(errs)

    assert worst(r) <= tol
    if topology != "complete":
        assert worst(r // 2) > tol
    # The exact solve of a node's averaged statistics is then close to O* (not equal).
    Ostar = exact_solve(Gbar, Bbar, 2.0 * Q).O
    O = exact_solve(*lay.unpack(mix(graph, packed, r)[0]), 2.0 * Q).O
    assert np.linalg.norm(O - Ostar) / np.linalg.norm(Ostar) < 1e-3
    assert stats_rounds(graph, tol, rounds=5) == 5


def test_memory_check_refuses_what_does_not_fit():
    need = memory_bytes(1000, 10)
    assert need == (5 * 8 + 1) * 1000**2 + 4 * stats_bytes(1000, 10) + 64 * 8000 + 65536
    assert memory_bytes(1000, 10, degree=8) == need + 8 * stats_bytes(1000, 10)
    oneshot, graph_form = lookup("oneshot"), lookup("oneshot-graph")
    check_memory(oneshot, 1000, 10, 8, 4, 4 * need)  # fits exactly
    with pytest.raises(UserError, match=r"--mode oneshot: the 1000 x 1000 statistics .* "
                       r"lower --hidden"):
        check_memory(oneshot, 1000, 10, 8, 4, 4 * need - 1)
    # The graph form also holds one received copy per neighbour.
    with pytest.raises(UserError, match="oneshot-graph"):
        check_memory(graph_form, 1000, 10, 8, 4, 4 * need)
    check_memory(lookup("sync"), 10**6, 10, 8, 4, 1)  # only the one-shot modes form n x n sums
    check_memory(oneshot, 10**6, 10, 8, 4, None)  # unknown: not checked
