"""A layer's statistics as one message: the one-shot modes' packing, sizes and limits.

The layer problem depends on the data only through ``G = sum_m Y_m Y_m^T`` and
``B = sum_m T_m Y_m^T`` (docs/ALGORITHMS.md section 2), so one exchange of the
nodes' statistics and an exact solve on every node give ``O*``
(``--mode oneshot``; ``oneshot-graph`` averages them by neighbour mixing).
``G_m`` is symmetric: only its upper triangle travels, row by row, followed by
``B_m``, in one float64 buffer of ``d (d + 1) / 2 + Q d`` numbers.

This module holds what the engine, the simulator, the replay and the set-up
share: the buffer's layout and size, the payload of any mode's message, the
mixing rounds of ``oneshot-graph`` and the memory a rank needs (checked before
a run starts). It does not import MPI.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import require

__all__ = [
    "SOLVE_OVERHEAD",
    "StatsLayout",
    "available_memory",
    "check_memory",
    "memory_bytes",
    "stats_bytes",
    "stats_rounds",
]

_F8 = 8  # bytes of a float64
#: Bytes beyond the arrays in :func:`memory_bytes`: small Python objects (measured
#: 10 - 30 kB at d = 20 - 40).
SOLVE_OVERHEAD = 1 << 16


def stats_bytes(d: int, n_classes: int) -> int:
    """Bytes of one rank's packed statistics: ``(d (d + 1) / 2 + Q d) * 8``."""
    return (d * (d + 1) // 2 + n_classes * d) * _F8


class StatsLayout:
    """Packing of ``(G, B)`` into one flat buffer and back, for one width ``d``.

    Parameters
    ----------
    d : int
        Rows of ``G`` (the layer's input width).
    n_classes : int
        Q, rows of ``B``.
    """

    def __init__(self, d: int, n_classes: int) -> None:
        self.d, self.q = d, n_classes
        # Row-major upper triangle (diagonal included): d^2 bytes, 1/8 of G.
        self._upper = np.triu(np.ones((d, d), dtype=bool))
        self.tri = d * (d + 1) // 2
        self.size = self.tri + n_classes * d

    @property
    def nbytes(self) -> int:
        """Bytes of the packed buffer."""
        return self.size * _F8

    def pack(self, G: np.ndarray, B: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``G``'s upper triangle, then ``B`` row by row, into ``out`` (or a new buffer)."""
        buf = np.empty(self.size) if out is None else out
        buf[: self.tri] = G[self._upper]
        buf[self.tri :] = B.ravel()
        return buf

    def unpack(self, buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The symmetric ``G`` (a new array) and ``B`` (a view of ``buf``) of a packed buffer."""
        G = np.empty((self.d, self.d))
        G[self._upper] = buf[: self.tri]
        G.T[self._upper] = buf[: self.tri]  # the lower triangle mirrors the upper
        return G, buf[self.tri :].reshape(self.q, self.d)


def stats_rounds(graph, tol: float, rounds: int | None = None) -> int:
    """Mixing rounds of ``oneshot-graph``: the smallest ``r`` with ``M rho_W^r <= tol``.

    After ``r`` rounds of Metropolis mixing, node m's copy ``x_m`` of the
    averaged statistics satisfies ``||x_m - xbar|| <= rho_W^r ||x - 1 xbar||``
    (the disagreement over all nodes). For ``G`` (positive semi-definite
    parts) and for ``B`` at every hidden layer (non-negative features and
    targets) the parts' pairwise inner products are >= 0, so
    ``||x - 1 xbar||^2 <= sum_m ||x_m||^2 <= ||sum_m x_m||^2 = M^2 ||xbar||^2``:
    this ``r`` makes every node's ``G`` and ``B`` within relative ``tol`` of the
    network averages, whatever the data. At layer 0 with signed inputs ``B``'s
    parts may cancel, and the bound on ``B`` is relative to
    ``sqrt(sum_m ||B_m||^2) / M`` instead.

    Parameters
    ----------
    graph : Graph
        The communication graph (:meth:`~dssfn_mpi.graph.topology.Graph.mixing_rounds`).
    tol : float
        Relative accuracy of the averaged statistics, in (0, 1).
    rounds : int, optional
        ``--mix-rounds``: use this count instead.

    Returns
    -------
    int
    """
    if rounds:
        return int(rounds)
    return graph.mixing_rounds(tol / graph.n_nodes)


def memory_bytes(d: int, n_classes: int, degree: int = 0) -> int:
    """What a rank of a one-shot mode holds at the peak of a layer of width ``d``, in bytes.

    The local ``G_m`` (every mode has it), the summed ``G``, the exact solve's
    copy of it and its eigenvectors (with the copy of those it keeps): five
    ``d x d`` float64 matrices; the packing's ``d x d`` boolean mask; packed
    buffers (:func:`stats_bytes`): send, receive, MPI's own and one temporary,
    plus, in ``oneshot-graph``, one receive buffer per neighbour (``degree``);
    the eigensolver's workspace (LAPACK's ``dsyevr`` takes 36 d numbers; 64 d
    counted) and :data:`SOLVE_OVERHEAD` for Python's objects. An upper bound of
    the run log's measured ``stats_peak_bytes`` plus the ``G_m`` and MPI buffers
    it leaves out.
    """
    return (5 * d * d * _F8 + d * d + (4 + degree) * stats_bytes(d, n_classes)
            + 64 * d * _F8 + SOLVE_OVERHEAD)


def available_memory() -> int | None:
    """``MemAvailable`` of this host in bytes (Linux ``/proc/meminfo``), None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(algorithm: Any, d: int, n_classes: int, degree: int, ranks_here: int,
                 available: int | None) -> None:
    """Raise a one-line :class:`~dssfn_mpi.errors.UserError` if the statistics do not fit.

    Parameters
    ----------
    algorithm : Algorithm
        The run's algorithm (:mod:`dssfn_mpi.algorithms`; only those that exchange the
        statistics are checked).
    d : int
        The widest layer input, ``max(P, n)``.
    n_classes : int
        Q.
    degree : int
        The largest node degree (a mixing exchange receives one buffer per neighbour).
    ranks_here : int
        Ranks (or simulated nodes in one process) sharing this host's memory.
    available : int or None
        Bytes available on this host (:func:`available_memory`); None: not checked.
    """
    if not algorithm.exchanges_statistics or available is None:
        return
    each = memory_bytes(d, n_classes, degree if algorithm.mixes else 0)
    need = ranks_here * each
    require(need <= available,
            f"--mode {algorithm.name}: the {d} x {d} statistics need about {_gb(need)} on "
            f"this host ({ranks_here} x {_gb(each)}), but only {_gb(available)} are available: "
            "lower --hidden, run fewer ranks per host, or use an iterative mode (async, sync, "
            "sync-graph)")


def _gb(nbytes: float) -> str:
    if nbytes >= 1e11:
        return f"{nbytes / 1e9:.0f} GB"
    return f"{nbytes / 1e9:.3g} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.3g} MB"
