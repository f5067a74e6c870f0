"""Neighbourhood consensus ADMM in its exact synchronous (Jacobi) form (``--mode hood-jacobi``).

The operator of :mod:`.hood`, every node activating once per round in two phases, each
ending with a neighbour exchange:

1. as member, node i solves ``x_i`` against the ``z_j`` of this round (``j`` in
   ``{i} + N(i)``), updates its ``v_ij`` and sends ``v_ij`` to each centre j;
2. as centre, node j forms ``z_j`` from the fresh ``v_ij`` of all its members and sends it
   to them.

Every member thus reads the ``z_j`` formed from the members' latest ``v``: synchronous ADMM
on the neighbourhood-consensus problem, which on the complete graph is global consensus
ADMM (``--mode sync``, ``rho = M rho_hood``, ``--relax`` = ``--eta``). A node's iterate is
its neighbourhood's ``z_i`` (feasible, as sync's is its ``Zbar``). ``hood-lockstep``
sends ``[v_ij, z_i]`` in one exchange a round, so the ``z_j`` a member reads there is one
round old. docs/ALGORITHMS.md, section "Neighbourhood consensus".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..drivers import LOCKSTEP
from .hood import HoodStep, NeighbourhoodADMM

__all__ = ["JacobiHoodStep", "JacobiNeighbourhoodADMM"]


class JacobiHoodStep:
    """One node's round of :class:`JacobiNeighbourhoodADMM`: :meth:`step_rows` (member
    phase), then :meth:`centre_rows` (centre phase), on the arithmetic of a
    :class:`~dssfn_mpi.algorithms.hood.HoodStep` (``core``, scalar or in the metric).

    Attributes
    ----------
    Z : ndarray, shape (d_i, Q, d)
        The member phase's messages: ``v_ij`` to each neighbour j.
    Zc : ndarray, shape (d_i, Q, d)
        The centre phase's messages: ``z_i`` to each neighbour.
    """

    def __init__(self, core: HoodStep) -> None:
        self.core = core
        Q = core.O.shape[0]
        self.Z, self.Zc = core.Z[:, :Q], core.Z[:, Q:]
        self._size = core.z.size

    @property
    def O(self) -> np.ndarray:  # noqa: E743 - the drivers' name for the iterate
        """The node's iterate: ``z_i`` of the last centre phase (``Q x d``)."""
        return self.core.z.reshape(self.core.O.shape)

    @property
    def rhs_buffer(self) -> np.ndarray:
        """The last member phase's right-hand side of ``x_i``."""
        return self.core.rhs_buffer

    def step_rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The member phase given each neighbour j's ``z_j`` of this round as the row
        ``table[rows[k], :Q d]`` (zeros in round 0); returns ``x_i``."""
        self.core.member(self._rows(table, rows))
        return self.core.O

    def centre_rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The centre phase given each neighbour k's fresh ``v_ki`` as the row
        ``table[rows[k], :Q d]``: ``z_i`` into :attr:`Zc`; returns it (:attr:`O`)."""
        self.core.centre(self._rows(table, rows))
        self.Zc[...] = self.O
        return self.O

    def _rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        if len(rows) != self.Z.shape[0]:
            raise ValueError(f"{len(rows)} neighbour values for {self.Z.shape[0]} neighbours")
        return table[np.asarray(rows, dtype=np.intp), : self._size]


class JacobiNeighbourhoodADMM(NeighbourhoodADMM):
    """Neighbourhood consensus ADMM, synchronous: two neighbour exchanges a round (exact:
    every node reaches ``O*``; global consensus ADMM on the complete graph)."""

    name = "hood-jacobi"
    driver = LOCKSTEP
    summary = ("neighbourhood consensus ADMM, exact synchronous form: members send v, "
               "centres return fresh z (two neighbour exchanges a round)")
    #: Deterministic Douglas-Rachford: relaxed like sync (docs/ALGORITHMS.md, "Default
    #: relaxations").
    step_size = 1.8
    exchanges = 2

    def phases(self, step: JacobiHoodStep) -> list[tuple[Any, np.ndarray]]:
        """The member phase (``v_ij`` to the centres), then the centre phase (``z_i`` to the
        members)."""
        return [(step.step_rows, step.Z), (step.centre_rows, step.Zc)]

    def step(self, B2: np.ndarray, rho: np.ndarray, eta: float, eps: float, inv: Any,
             metric: Any = None, store: tuple[np.ndarray, int] | None = None) -> JacobiHoodStep:
        """The node's round for one layer (:class:`JacobiHoodStep`; its messages in arrays
        of its own, ``store`` unused)."""
        return JacobiHoodStep(super().step(B2, rho, eta, eps, inv, metric))
