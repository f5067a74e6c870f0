"""Rounds of neighbour mixing for all M simulated nodes at once.

``rounds`` synchronous rounds of ``x_m <- W_mm x_m + sum_n W_mn x_n`` (Metropolis weights,
:meth:`dssfn_mpi.topology.Graph.metropolis_weights`; the sync-graph engine's
:func:`~dssfn_mpi.engines.updates.mix_round` on every node) are ``X <- W^rounds X`` on the
stacked values. Whichever costs fewer operations runs: one sparse product per round
(``rounds x nnz(W)`` per value), or the product with the dense ``W^rounds`` (``M^2`` per value,
``W^rounds`` formed once per graph by repeated squaring). Both are the same sums up to
rounding (1e-15 relative).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse

__all__ = ["BLOCK", "Mixer", "mixer"]

_MIXERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: Nodes whose mixed values :meth:`Mixer.blocks` forms at a time through ``W^rounds`` (memory).
BLOCK = 64


def mixer(graph: Any, rounds: int) -> Mixer:
    """The graph's :class:`Mixer` of ``rounds`` rounds (one per graph and count)."""
    per_graph = _MIXERS.setdefault(graph, {})
    if rounds not in per_graph:
        per_graph[rounds] = Mixer(graph.metropolis_weights(), rounds)
    return per_graph[rounds]


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

    def dense(self, values: int) -> bool:
        """Whether mixing ``values`` numbers per node is cheaper through ``W^rounds``."""
        M = self.nodes
        power = 0 if self._power is not None else 2 * M ** 3 * math.ceil(math.log2(
            max(self.rounds, 2)))
        return M * M * values + power < self.rounds * self._sparse.nnz * values

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

    def blocks(self, X: np.ndarray, block: int = BLOCK) -> Iterator[tuple[int, np.ndarray]]:
        """The rows of :meth:`apply` ``(X)`` (``X``: one row per node), ``block`` nodes at a
        time through ``W^rounds`` when that is cheaper (memory: one block of mixed rows),
        else all at once: ``(first node, rows)``."""
        if self.rounds and self.dense(X.shape[1]):
            for lo in range(0, self.nodes, block):
                yield lo, self.power()[lo:lo + block] @ X
        else:
            yield 0, self.apply(X)

    def apply(self, X: np.ndarray) -> np.ndarray:
        """The values ``X`` (first axis: the M nodes) after the rounds (a new array)."""
        flat = X.reshape(self.nodes, -1)
        if self.rounds == 0:
            return X.copy()
        if self.dense(flat.shape[1]):
            return (self.power() @ flat).reshape(X.shape)
        for _ in range(self.rounds):
            flat = self._sparse @ flat
        return np.asarray(flat).reshape(X.shape)
