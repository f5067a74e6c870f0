"""The algorithms are objects: the registry resolves --mode and --update, and code outside
the algorithms package asks the algorithm rather than testing mode names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mode_tests import count

from dssfn_mpi.algorithms import lookup, names, penalty_matrix
from dssfn_mpi.errors import UserError
from dssfn_mpi.ssfn.metric import Metric

PACKAGE = Path(__file__).resolve().parents[1] / "dssfn_mpi"


def test_mode_names_are_tested_almost_nowhere_outside_the_algorithms():
    """The whole package, the benchmarks included, asks the registry (at most 10 tests of
    a mode's name, most of them of a data file's kind that shares a mode's name)."""
    found = count(PACKAGE)
    assert any(f.startswith("bench/") for f in found)  # the counter sees bench/
    assert sum(found.values()) <= 10, found


def test_the_registry_resolves_modes_and_updates():
    assert names() == ("async", "sync", "sync-graph", "lockstep", "oneshot", "oneshot-graph",
                       "central", "hood", "hood-lockstep", "hood-jacobi")
    assert lookup("async").update == "edge" and lookup("async", "paper").update == "paper"
    assert lookup("sync", "paper") is lookup("sync")  # one update only: it answers to any
    assert lookup("sync-graph").mixes and lookup("oneshot").collective
    assert lookup("oneshot-graph").direct and not lookup("central").decentralized
    with pytest.raises(UserError, match="choose one of async, sync"):
        lookup("nope")


@pytest.mark.parametrize("mode, degree, rounds, want", [
    ("async", 3, 0, (30, 30 * 80)), ("lockstep", 3, 0, (0, 30 * 80)), ("sync", 3, 0, (0, 10 * 80)),
    ("sync-graph", 3, 4, (0, 10 * 4 * 3 * 80)), ("oneshot-graph", 2, 5, (0, 1 * 5 * 2 * 80)),
])
def test_bytes_sent_are_the_payload(mode, degree, rounds, want):
    acts = 1 if lookup(mode).direct else 10
    assert lookup(mode).sent(acts, degree, rounds, 80) == want


def test_penalty_matrix_is_the_penalties_times_their_metrics():
    S1, S2 = np.diag([1.0, 2.0]), np.array([[2.0, 1.0], [1.0, 2.0]])
    metrics = [Metric(S1), Metric(S2)]
    assert np.allclose(penalty_matrix(np.array([3.0, 0.5]), metrics), 3 * S1 + 0.5 * S2)
    assert np.allclose(penalty_matrix(2.0, metrics[:1]), 2 * S1)
