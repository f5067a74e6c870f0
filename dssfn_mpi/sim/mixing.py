"""Rounds of neighbour mixing for all M simulated nodes at once, and what they cost a node.

``rounds`` synchronous rounds of ``x_m <- W_mm x_m + sum_n W_mn x_n`` (Metropolis weights,
:meth:`dssfn_mpi.graph.topology.Graph.metropolis_weights`; the sync-graph engine's
:func:`~dssfn_mpi.graph.mixing.mix_round` on every node) are ``X <- W^rounds X`` on the
stacked values. Whichever costs the simulator fewer operations runs:

- one sparse product per round (``rounds x nnz(W)`` per value);
- the product with the dense ``W^rounds`` (``M^2`` per value; ``W^rounds`` formed once per
  graph by repeated squaring);
- the spectral form of the symmetric ``W``: ``W^rounds X = 1 mean(X) + sum_i lam_i^rounds
  v_i (v_i^T X)`` over the eigenpairs with ``|lam_i|^rounds`` above 1e-20 (``M (2 k + 1)`` per
  value for k of them; the other eigenpairs' terms are below rounding). With the rounds the
  spectral gap asks for, ``k`` is a handful.

All three are the same sums up to rounding (1e-13 relative, ``tests/test_sim_stacked.py``).

The compute a node is charged for the rounds (:meth:`Mixer.compute_seconds`) is what a live
node runs, not what the simulator spent: ``rounds`` calls of ``mix_round`` on its value with
its neighbours' (timed once per value shape and degree).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import scipy.sparse

from ..graph.mixing import mix_round
from ..graph.spectrum import eigenpairs_beyond

__all__ = ["BLOCK", "Mixer", "mixer", "round_seconds"]

_MIXERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: Nodes whose mixed values :meth:`Mixer.blocks` forms at a time through ``W^rounds`` (memory).
BLOCK = 64

#: The spectral form drops the eigenpairs whose ``|lam|^rounds`` is below this.
SPECTRAL_FLOOR = 1e-20


def mixer(graph: Any, rounds: int) -> Mixer:
    """The graph's :class:`Mixer` of ``rounds`` rounds (one per graph and count)."""
    per_graph = _MIXERS.setdefault(graph, {})
    if rounds not in per_graph:
        per_graph[rounds] = Mixer(graph.metropolis_weights(), rounds)
    return per_graph[rounds]


def round_seconds(shape: tuple[int, ...], degree: int, clock: Callable[[], float],
                  repeat: int = 5) -> float:
    """Seconds of one :func:`~dssfn_mpi.graph.mixing.mix_round` on a value of ``shape``
    with ``degree`` neighbours, by ``clock`` (the median of ``repeat`` calls)."""
    x = np.ones(shape)
    received = np.ones((degree,) + tuple(shape))
    w = np.full(degree, 1.0 / (degree + 1))
    times = []
    for _ in range(repeat):
        c0 = clock()
        mix_round(x, received, 1.0 / (degree + 1), w)
        times.append(clock() - c0)
    return float(np.median(times))


class Mixer:
    """``rounds`` rounds of mixing with the weights ``W`` (M x M), on stacked values.

    Parameters
    ----------
    W : ndarray, shape (M, M)
        The mixing matrix.
    rounds : int
        Rounds per application (>= 0).
    """

    def __init__(self, W: np.ndarray, rounds: int) -> None:
        self.rounds = int(rounds)
        self.nodes = W.shape[0]
        self._W = W
        self._sparse = scipy.sparse.csr_matrix(W)
        self._power: np.ndarray | None = None
        self._spectral: tuple[np.ndarray, np.ndarray] | bool | None = None
        # Each node's neighbours: its row's nonzeros off the diagonal (no dense copy of W).
        self.degrees = np.diff(self._sparse.indptr) - (self._sparse.diagonal() != 0)
        self._round_cost: dict[tuple, np.ndarray] = {}

    def compute_seconds(self, shape: tuple[int, ...], clock: Callable[[], float]) -> np.ndarray:
        """Each node's compute for the rounds on a value of ``shape``, shape (M,): ``rounds``
        times one ``mix_round`` with its degree, as a live node runs them."""
        key = tuple(shape)
        if key not in self._round_cost:
            per_degree = {int(d): round_seconds(key, int(d), clock)
                          for d in np.unique(self.degrees)}
            self._round_cost[key] = np.array([per_degree[int(d)] for d in self.degrees])
        return self.rounds * self._round_cost[key]

    def _costs(self, values: int) -> dict[str, float]:
        """Operations of each way to mix ``values`` numbers per node."""
        M = self.nodes
        squarings = math.ceil(math.log2(max(self.rounds, 2)))
        power = 0 if self._power is not None else 2 * M ** 3 * squarings
        costs = {"rounds": float(self.rounds * self._sparse.nnz * values),
                 "dense": float(M * M * values + power)}
        spectrum = self.spectrum() if costs["rounds"] > M * M * values else None
        if spectrum is not None:
            costs["spectral"] = float(M * (2 * spectrum[0].shape[1] + 1) * values)
        return costs

    def way(self, values: int) -> str:
        """How :meth:`apply` mixes ``values`` numbers per node: rounds, dense or spectral."""
        if self.rounds == 0:
            return "rounds"
        costs = self._costs(values)
        return min(costs, key=costs.get)

    def power(self) -> np.ndarray:
        """``W^rounds`` (dense), by repeated squaring."""
        if self._power is None:
            result, base, r = np.eye(self.nodes), self._W.copy(), self.rounds
            while r:
                if r & 1:
                    result = result @ base
                r >>= 1
                if r:
                    base = base @ base
            self._power = result
        return self._power

    def spectrum(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The spectral form's eigenvectors (M x k) and their ``lam^rounds`` (k,), formed
        once; None where it does not apply (``W`` not symmetric, or its eigenvalue 1 not
        simple or some other of modulus 1: a graph that is not connected)."""
        if self._spectral is None:
            self._spectral = False
            if self.rounds > 0 and np.array_equal(self._W, self._W.T):
                cut = SPECTRAL_FLOOR ** (1.0 / self.rounds)
                lam, V = eigenpairs_beyond(self._W, cut)
                top = int(np.argmax(lam))
                rest = np.delete(lam, top)
                if abs(lam[top] - 1.0) < 1e-12 and not np.any(np.abs(rest) >= 1 - 1e-9):
                    with np.errstate(under="ignore"):
                        self._spectral = (np.ascontiguousarray(np.delete(V, top, axis=1)),
                                          rest ** self.rounds)
        return self._spectral or None

    def _spectral_rows(self, mean: np.ndarray, projected: np.ndarray, rows: slice
                       ) -> np.ndarray:
        """Rows ``rows`` of ``W^rounds X`` from ``mean(X)`` and ``V^T X``."""
        V, scale = self.spectrum()
        out = np.empty((len(range(self.nodes)[rows]), mean.size))
        out[...] = mean
        if V.shape[1]:
            out += (V[rows] * scale) @ projected
        return out

    def blocks(self, X: np.ndarray, block: int = BLOCK) -> Iterator[tuple[int, np.ndarray]]:
        """The rows of :meth:`apply` ``(X)`` (``X``: one row per node), ``block`` nodes at a
        time where the mixing goes through a dense product (memory: one block of mixed
        rows), else all at once: ``(first node, rows)``."""
        way = self.way(X.shape[1])
        if way == "rounds":
            yield 0, self.apply(X)
            return
        if way == "spectral":
            mean, projected = X.mean(axis=0), self.spectrum()[0].T @ X
        for lo in range(0, self.nodes, block):
            rows = slice(lo, lo + block)
            yield lo, (self.power()[rows] @ X if way == "dense"
                       else self._spectral_rows(mean, projected, rows))

    def apply(self, X: np.ndarray) -> np.ndarray:
        """The values ``X`` (first axis: the M nodes) after the rounds (a new array)."""
        flat = X.reshape(self.nodes, -1)
        way = self.way(flat.shape[1])
        if way == "spectral":
            rows = self._spectral_rows(flat.mean(axis=0), self.spectrum()[0].T @ flat,
                                       slice(None))
            return rows.reshape(X.shape)
        if way == "dense":
            return (self.power() @ flat).reshape(X.shape)
        if self.rounds == 0:
            return X.copy()
        for _ in range(self.rounds):
            flat = self._sparse @ flat
        return np.asarray(flat).reshape(X.shape)
