"""One round of neighbour mixing: the graph's averaging step, as every mixing driver runs it.

The live mixing engines (``sync-graph``, ``oneshot-graph``), the simulator's mixing
(:mod:`dssfn_mpi.sim.mixing`) and the benchmarks call this one function, so each node's
arithmetic is the same wherever it is run.
"""

from __future__ import annotations

import numpy as np

__all__ = ["mix_round"]


def mix_round(x: np.ndarray, received: np.ndarray, w_self: float, w_nbr: np.ndarray) -> None:
    """One round of neighbour mixing, ``x <- W_mm x + sum_n W_mn x_n``, in place.

    Parameters
    ----------
    x : ndarray
        This node's value; overwritten.
    received : ndarray, shape (d_m, *x.shape)
        The neighbours' values, in the order of ``w_nbr``.
    w_self : float
        ``W_mm``.
    w_nbr : ndarray, shape (d_m,)
        ``W_mn`` for each neighbour (Metropolis weights in the sync-graph engine).
    """
    np.multiply(x, w_self, out=x)
    # np.tensordot(w_nbr, received, axes=1)'s own product, without its Python overhead
    # (a quarter of the cost at these sizes; the same numbers, bit for bit).
    k = len(w_nbr)
    x += np.dot(w_nbr.reshape(1, k), received.reshape(k, -1)).reshape(x.shape)
