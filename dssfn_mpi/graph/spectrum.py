"""Eigenvalues of a graph's symmetric mixing matrix W (the Metropolis matrix) and Laplacian.

Three questions are asked of them:

- the consensus contraction factor ``rho = ||W - 11^T / M||_2`` (:func:`contraction_factor`),
  which sets how many gossip rounds reach a tolerance
  (:meth:`dssfn_mpi.graph.topology.Graph.mixing_rounds`); ``1 - rho`` is the graph's
  spectral gap;
- the Laplacian's second-smallest eigenvalue (:func:`algebraic_connectivity`), which the
  ``auto`` penalties read;
- the eigenpairs whose eigenvalue exceeds a cut in modulus (:func:`eigenpairs_beyond`), which
  the simulator's spectral form of ``W^rounds`` keeps (:class:`dssfn_mpi.sim.mixing.Mixer`).

On up to :data:`DENSE_MAX_NODES` nodes the first two are read off the dense spectrum. On more
nodes (the matrix may then be sparse: no ``M x M`` copy), the first form that applies:

- the Fourier form: a circulant matrix (every row the first one shifted: the circular, ring,
  complete and exponential graphs') has the discrete Fourier transform of its first row as
  eigenvalues: ``M log M`` (milliseconds at M = 4,096);
- the band form: when the graph's nodes can be ordered so that every edge joins nodes at most
  ``M / BAND_RATIO`` apart (reverse Cuthill-McKee; the circular graph of degree d has a band of
  about d), the eigenvalues of that band: ``M^2 x band`` operations instead of ``M^3``;
- Lanczos (ARPACK) on the matrix with its consensus eigenvalue deflated, to machine
  precision: a few hundred sparse products (a random 8-regular graph on 4,096 nodes: 0.07 s
  against 11 s dense); the dense spectrum if it does not converge.

All agree with the dense spectrum to about 1e-14 (``tests/test_graph_spectrum.py``).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg
from scipy.sparse.csgraph import reverse_cuthill_mckee

__all__ = ["BAND_RATIO", "DENSE_MAX_NODES", "algebraic_connectivity", "circulant_row",
           "contraction_factor", "eigenpairs_beyond"]

#: Up to this many nodes :func:`contraction_factor` and :func:`algebraic_connectivity` take
#: the dense spectrum.
DENSE_MAX_NODES = 1024

#: Beyond :data:`DENSE_MAX_NODES`, the band form is used when its half-width is at most
#: ``M / BAND_RATIO`` (there it costs fewer operations than the dense spectrum).
BAND_RATIO = 32


def _band_form(W) -> np.ndarray | None:
    """``W`` (dense or sparse) in LAPACK's lower band storage after a reverse Cuthill-McKee
    reordering (the same eigenvalues), or None when its half-width exceeds ``M / BAND_RATIO``."""
    W = scipy.sparse.csr_matrix(W)
    M = W.shape[0]
    order = reverse_cuthill_mckee(W, symmetric_mode=True)
    P = W[order][:, order].tocoo()
    lower = P.row >= P.col
    offset = (P.row - P.col)[lower]
    width = int(offset.max(initial=0))
    if width * BAND_RATIO > M:
        return None
    band = np.zeros((width + 1, M))
    band[offset, P.col[lower]] = P.data[lower]
    return band


def circulant_row(W: scipy.sparse.csr_matrix) -> np.ndarray | None:
    """The first row of ``W`` (dense) when every row ``i`` is it shifted by ``i``
    (``W[i, j] = c[(j - i) mod M]``: a circulant matrix, up to rounding), else None.

    Parameters
    ----------
    W : scipy.sparse.csr_matrix, shape (M, M)

    Returns
    -------
    ndarray, shape (M,), or None
    """
    M = W.shape[0]
    W = W.tocsr()
    W.sum_duplicates()
    W.eliminate_zeros()
    counts = np.diff(W.indptr)
    if M == 0 or not (counts == counts[0]).all():
        return None
    k = int(counts[0])
    shifts = (W.indices.reshape(M, k) - np.arange(M)[:, None]) % M
    order = np.argsort(shifts, axis=1, kind="stable")
    shifts = np.take_along_axis(shifts, order, axis=1)
    values = np.take_along_axis(W.data.reshape(M, k), order, axis=1)
    # The pattern exactly, the values to rounding (a dense W's diagonal, one minus its row's
    # sum, can differ in the last bit from row to row).
    scale = float(np.abs(values[0]).max(initial=0.0))
    if not ((shifts == shifts[0]).all() and (np.abs(values - values[0]) <= 1e-14 * scale).all()):
        return None
    row = np.zeros(M)
    row[shifts[0]] = values[0]
    return row


def _lanczos_norm(A: scipy.sparse.csr_matrix, top: float) -> float | None:
    """``||A - top 11^T / M||_2`` by Lanczos on the deflated operator (ARPACK, to machine
    precision, a fixed start vector), or None if it does not converge."""
    M = A.shape[0]

    def apply(x: np.ndarray) -> np.ndarray:
        return A @ x - top * x.sum(axis=0) / M

    start = np.random.default_rng(0).standard_normal(M)
    op = scipy.sparse.linalg.LinearOperator((M, M), matvec=apply, dtype=np.float64)
    try:
        lam = scipy.sparse.linalg.eigsh(op, k=1, which="LM", tol=0.0, v0=start - start.mean(),
                                        return_eigenvectors=False)
    except scipy.sparse.linalg.ArpackNoConvergence:
        return None
    return float(np.abs(lam).max())


def _off_consensus_norm(A, top: float) -> float:
    """``||A - top 11^T / M||_2`` of a symmetric ``A`` (dense or sparse) whose consensus
    eigenvalue ``top`` (``A 1 = top 1``) is its largest: the largest ``|eigenvalue|`` of A
    once that one is removed. The dense spectrum on up to :data:`DENSE_MAX_NODES` nodes;
    beyond, the first that applies of a circulant's Fourier form, the band form and
    Lanczos, the dense spectrum as the last resort."""
    M = A.shape[0]
    if M <= max(DENSE_MAX_NODES, 1):
        dense = A.toarray() if scipy.sparse.issparse(A) else np.asarray(A)
        return float(np.max(np.abs(np.linalg.eigvalsh(dense - top / M))))
    S = scipy.sparse.csr_matrix(A)
    row = circulant_row(S)
    if row is not None:  # eigenvalues: the Fourier transform of the first row, 0 the consensus
        return float(np.max(np.abs(np.fft.fft(row).real[1:])))
    band = _band_form(S)
    if band is not None:
        lam = scipy.linalg.eigvals_banded(band, lower=True, check_finite=False)
        return float(np.max(np.abs(lam[:-1])))  # lam ascends; the last is the consensus
    rho = _lanczos_norm(S, top)
    if rho is None:
        return float(np.max(np.abs(np.linalg.eigvalsh(S.toarray() - top / M))))
    return rho


def contraction_factor(W) -> float:
    """``||W - 11^T / M||_2`` of a symmetric stochastic ``W`` (M x M).

    Parameters
    ----------
    W : ndarray or scipy sparse matrix, shape (M, M)
        Symmetric, doubly stochastic, eigenvalues in (-1, 1] (the Metropolis matrix).

    Returns
    -------
    float
        The largest ``|eigenvalue|`` of W once the consensus eigenvalue 1 is removed: below 1
        on a connected graph, 1 on a disconnected one, 0 on the complete graph and on a
        single node. ``1 -`` it is the graph's spectral gap.
    """
    return _off_consensus_norm(W, 1.0)


def algebraic_connectivity(laplacian) -> float:
    """The second-smallest eigenvalue of a graph Laplacian ``L = D - A``.

    Parameters
    ----------
    laplacian : ndarray or scipy sparse matrix, shape (M, M), M >= 2

    Returns
    -------
    float
        ``lambda_2(L)`` (0 for a disconnected graph; rounding below 0 is clipped). The dense
        spectrum on up to :data:`DENSE_MAX_NODES` nodes; beyond, ``c - ||cI - L - c 11^T /
        M||_2`` with ``c = 2 max_i L_ii >= lambda_max(L)`` (Gershgorin), by the forms of
        :func:`contraction_factor` (absolute error about ``1e-15 c``).
    """
    M = laplacian.shape[0]
    if M <= max(DENSE_MAX_NODES, 1):
        dense = laplacian.toarray() if scipy.sparse.issparse(laplacian) else laplacian
        return max(float(np.linalg.eigvalsh(dense)[1]), 0.0)
    L = scipy.sparse.csr_matrix(laplacian)
    c = 2.0 * float(L.diagonal().max())
    shifted = scipy.sparse.identity(M, format="csr") * c - L
    return max(c - _off_consensus_norm(shifted, c), 0.0)


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
