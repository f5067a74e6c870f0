"""Eigenvalues of a graph's symmetric mixing matrix W (the Metropolis matrix).

Two questions are asked of them:

- the consensus contraction factor ``rho = ||W - 11^T / M||_2`` (:func:`contraction_factor`),
  which sets how many gossip rounds reach a tolerance
  (:meth:`dssfn_mpi.graph.topology.Graph.mixing_rounds`);
- the eigenpairs whose eigenvalue exceeds a cut in modulus (:func:`eigenpairs_beyond`), which
  the simulator's spectral form of ``W^rounds`` keeps (:class:`dssfn_mpi.sim.mixing.Mixer`).

On up to :data:`DENSE_MAX_NODES` nodes ``rho`` is read off the dense spectrum of
``W - 11^T / M``. On more nodes, when the graph's nodes can be ordered so that every edge joins
nodes at most ``M / BAND_RATIO`` apart (reverse Cuthill-McKee; the circular graph of degree d
has a band of about d), the eigenvalues come from that band form: ``M^2 x band`` operations
instead of ``M^3`` (a circular graph of degree 8 on 4,096 nodes: under a second instead of
several). Both agree to about 1e-14 (``tests/test_graph_spectrum.py``).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse
from scipy.sparse.csgraph import reverse_cuthill_mckee

__all__ = ["BAND_RATIO", "DENSE_MAX_NODES", "contraction_factor", "eigenpairs_beyond"]

#: Up to this many nodes :func:`contraction_factor` takes the dense spectrum.
DENSE_MAX_NODES = 1024

#: Beyond :data:`DENSE_MAX_NODES`, the band form is used when its half-width is at most
#: ``M / BAND_RATIO`` (there it costs fewer operations than the dense spectrum).
BAND_RATIO = 32


def _band_form(W: np.ndarray) -> np.ndarray | None:
    """``W`` in LAPACK's lower band storage after a reverse Cuthill-McKee reordering (the
    same eigenvalues), or None when its half-width exceeds ``M / BAND_RATIO``."""
    M = len(W)
    S = scipy.sparse.csr_matrix(W)
    order = reverse_cuthill_mckee(S, symmetric_mode=True)
    P = S[order][:, order].tocoo()
    lower = P.row >= P.col
    offset = (P.row - P.col)[lower]
    width = int(offset.max(initial=0))
    if width * BAND_RATIO > M:
        return None
    band = np.zeros((width + 1, M))
    band[offset, P.col[lower]] = P.data[lower]
    return band


def contraction_factor(W: np.ndarray) -> float:
    """``||W - 11^T / M||_2`` of a symmetric stochastic ``W`` (M x M).

    Parameters
    ----------
    W : ndarray, shape (M, M)
        Symmetric, doubly stochastic, eigenvalues in (-1, 1] (the Metropolis matrix).

    Returns
    -------
    float
        The largest ``|eigenvalue|`` of W once the consensus eigenvalue 1 is removed: below 1
        on a connected graph, 1 on a disconnected one, 0 on the complete graph and on a
        single node.
    """
    M = len(W)
    band = _band_form(W) if M > max(DENSE_MAX_NODES, 1) else None
    if band is None:
        return float(np.max(np.abs(np.linalg.eigvalsh(W - 1.0 / M))))
    lam = scipy.linalg.eigvals_banded(band, lower=True, check_finite=False)
    return float(np.max(np.abs(lam[:-1])))  # lam ascends; the last is the consensus 1


def eigenpairs_beyond(W: np.ndarray, cut: float) -> tuple[np.ndarray, np.ndarray]:
    """The eigenvalues of a symmetric ``W`` above ``cut`` in modulus and their eigenvectors.

    Parameters
    ----------
    W : ndarray, shape (M, M)
        A symmetric matrix.
    cut : float
        Positive modulus below which eigenpairs are left out.

    Returns
    -------
    lam : ndarray, shape (k,)
        The eigenvalues below ``-cut``, then those above ``cut`` (each part ascending).
    V : ndarray, shape (M, k)
        Their orthonormal eigenvectors, column by column.
    """
    parts = [scipy.linalg.eigh(W, subset_by_value=bounds, check_finite=False)
             for bounds in ((-np.inf, -cut), (cut, np.inf))]
    return (np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts], axis=1))
