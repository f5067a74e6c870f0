"""The edge-form activation's per-neighbour arithmetic as compiled loops (numba).

:class:`dssfn_mpi.algorithms.updates.EdgeStep` does an activation's work outside
the local inverse in two parts. In numpy that is five BLAS calls per neighbour
(each a pass over its ``Q x n`` block and a Python call) plus one update for
all; here it is one compiled loop over the neighbours with two passes over each
block while it is in cache, and one pass for the final dual update:

``edge_rhs``, for each neighbour ``i`` (``Z_i`` this node's ``Z_{m,n_i}``,
``Zr_i`` the copy read from ``n_i``)::

    s    = ||Z_i + Zr_i||^2                        pass 1
    t    = min(1, sqrt(eps) / max(sqrt(s) h_i, tiny))      h_i = 1 / (2 gamma_i)
    rhs += Z_i - t (Z_i + Zr_i)                    pass 2, with
    Z_i += c t (Z_i + Zr_i)                        c = -eta / 2

``edge_dual``: ``Z_i += b_i O`` (``b_i = -eta gamma_i``).

These are the numpy path's formulas (:meth:`EdgeStep.rhs`, :meth:`EdgeStep.dual`,
the reference, tested against each other to 1e-12); only the order of the
additions differs (the norm's sum is vectorised, products may fuse), so results
agree to rounding, not bit for bit. numba is optional (the ``fast`` extra): its
wheels exist for every Python and numpy version it supports, and without it
(or on a Python or numpy it does not support yet) the numpy path runs.
:data:`AVAILABLE` says which one a process has; :func:`compiled_status` says it
with the mailbox's compiled seqlock, for ``doctor`` and the run log.

The functions are compiled once per machine and cached beside this file (or in
numba's cache folder where the package is read-only), so a rank loads them in
a fraction of a second. They take 2-D C-contiguous arrays and row offsets,
never lists, so that the loops see unit-stride memory.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["AVAILABLE", "NUMBA_VERSION", "compiled_status", "edge_dual", "edge_rhs"]

try:  # the optional compiled path
    import numba
except ImportError:  # pragma: no cover - depends on the install
    numba = None

#: True when numba imported and the kernels compiled (or loaded from its cache).
AVAILABLE = False
#: numba's version, or "" without it.
NUMBA_VERSION = "" if numba is None else str(numba.__version__)

edge_rhs: Any = None
edge_dual: Any = None


def _edge_rhs(Z, off, N, table, rows, b2, h, sqrt_eps, c, rhs):  # pragma: no cover
    d = Z.shape[0]
    for j in range(N):
        rhs[j] = b2[j]
    for i in range(d):
        z = Z[i, off : off + N]
        zr = table[rows[i], :N]
        s = 0.0
        for j in range(N):
            x = z[j] + zr[j]
            s += x * x
        t = min(1.0, sqrt_eps / max(math.sqrt(s) * h[i], 1e-300))
        a = c * t
        for j in range(N):
            zj = z[j]
            x = zj + zr[j]
            rhs[j] += zj - t * x
            z[j] = zj + a * x


def _edge_dual(Z, off, N, O, b):  # pragma: no cover - compiled
    d = Z.shape[0]
    for i in range(d):
        z = Z[i, off : off + N]
        bi = b[i]
        for j in range(N):
            z[j] += bi * O[j]


if numba is not None:
    try:
        # Reassociation lets the norm's sum vectorise; no finite-math assumptions, so a
        # diverging run still ends in inf/NaN, which the engine reports.
        _opts = {"cache": True, "nogil": True, "boundscheck": False,
                 "fastmath": {"reassoc", "contract", "nsz"}}
        _f2, _f1, _i1 = numba.float64[:, ::1], numba.float64[::1], numba.intp[::1]
        _n = numba.intp
        edge_rhs = numba.njit(
            numba.void(_f2, _n, _n, _f2, _i1, _f1, _f1, numba.float64, numba.float64, _f1),
            **_opts)(_edge_rhs)
        edge_dual = numba.njit(numba.void(_f2, _n, _n, _f1, _f1), **_opts)(_edge_dual)
        AVAILABLE = True
    except Exception:  # pragma: no cover - a broken numba install: use numpy
        edge_rhs = edge_dual = None


def compiled_status() -> str:
    """Whether this process has numba's compiled kernels, in one phrase.

    Returns
    -------
    str
        ``"on (numba X)"`` when the activation's loops here and the mailbox's
        seqlock (:data:`dssfn_mpi.mailbox.seqlock.AVAILABLE`) compiled, else ``"off (...)"``
        with the reason: then the same steps run in numpy and Python, the async
        update about twice as costly.
    """
    from ..mailbox import seqlock

    if numba is None:
        return "off (numba not importable: pip install -e '.[fast]')"
    if not (AVAILABLE and seqlock.AVAILABLE):
        return f"off (numba {NUMBA_VERSION} imported but did not compile them)"
    return f"on (numba {NUMBA_VERSION})"
