"""When a layer's solve ends: the stopping rules of ``--stop`` and what each node checks.

Three rules (the names are the interface scripts rely on):

``iters``
    every node runs ``--iters`` K activations (iterations): a fixed count.
``eps:E``
    to accuracy, for benchmarks: the layer's exact solution ``O*`` is computed
    before the layer (untimed) and every node keeps activating until every node
    is within ``E`` of it, ``||O_m - O*||_F / ||O*||_F <= E``, at one moment.
``local:TOL``
    without ``O*``, for real use: every node's estimate of its own distance to
    ``O*`` is at most ``TOL`` at one moment. The estimate is a gap plus the
    remaining path. The gap: async (edge form), the relative distance between
    ``O_m`` and the penalty-weighted mean of its edge variables ``Lam_mn`` (zero
    at the fixed point, where every ``Lam_mn = O_m``); sync engines, ADMM's
    primal residual ``||O_m - Zbar|| / ||Zbar||``. The remaining path: the
    relative changes of the iterate (``O_m`` over the node's activations;
    ``Zbar``) summed over the steps still to come, from their measured
    contraction (:func:`remaining_path`). A change alone says little: a large
    penalty makes every step small and the iteration slow, small steps far from
    ``O*``; the steps still to come do not depend on the penalty. A node passes
    when the median of its last :data:`RATE_WINDOW` estimates is within ``TOL``.

Under ``eps`` and ``local`` K is a cap, so nothing runs forever; a layer that
reaches it ends with the reason ``cap``. A node's own test (:class:`NodeCheck`)
is local arithmetic; the "all done" signal is the engine's: a board of done
flags in one rank's RMA window for async (:class:`dssfn_mpi.mailbox.doneboard.DoneBoard`),
a value carried in the collective the sync engines run anyway.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import UserError

__all__ = ["KINDS", "MAX_STEPS", "RATE_WINDOW", "REASONS", "NodeCheck", "StopRule", "parse_stop",
           "reason_code", "remaining_path"]

#: The rules, as ``--stop`` names them.
KINDS = ("iters", "eps", "local")
#: Why a layer ended, in the order of the run log's ``stop_reason`` codes 0, 1, 2, 3.
REASONS = ("iters", "eps", "local", "cap")


#: Checks per window over which the local rule measures how fast the changes shrink.
RATE_WINDOW = 8
#: The slowest contraction the local rule assumes: 1/e in this many steps.
MAX_STEPS = 1000
#: A relative change at most this is rounding, not a step (see :meth:`NodeCheck._path`).
NO_NEWS = 1e-12


def reason_code(name: str) -> int:
    """The run log's ``stop_reason`` code of a reason in :data:`REASONS`."""
    return REASONS.index(name)


@dataclass(frozen=True)
class StopRule:
    """A parsed ``--stop`` value.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    tol : float
        E for ``eps``, TOL for ``local``; NaN for ``iters``.
    """

    kind: str = "iters"
    tol: float = float("nan")

    def __str__(self) -> str:
        return self.kind if self.kind == "iters" else f"{self.kind}:{self.tol:g}"

    @property
    def needs_target(self) -> bool:
        """Whether the nodes need the layer's exact solution ``O*`` (the ``eps`` rule)."""
        return self.kind == "eps"

    @property
    def fixed(self) -> bool:
        """Whether the layer is a fixed count of activations (``iters``): no signal needed."""
        return self.kind == "iters"

    def reason(self, all_done: bool) -> int:
        """The ``stop_reason`` code of a layer that ended with (or without) every node done."""
        if self.fixed:
            return reason_code("iters")
        return reason_code(self.kind) if all_done else reason_code("cap")


def parse_stop(text: str | StopRule) -> StopRule:
    """Parse ``iters``, ``eps:E`` or ``local:TOL`` (E, TOL positive and finite).

    Raises :class:`~dssfn_mpi.errors.UserError` with what to write instead.
    """
    if isinstance(text, StopRule):
        return text
    kind, sep, value = str(text).strip().partition(":")
    kind = kind.lower()
    if kind == "iters" and not sep:
        return StopRule()
    if kind in ("eps", "local") and sep:
        try:
            tol = float(value)
        except ValueError:
            tol = float("nan")
        if math.isfinite(tol) and tol > 0:
            return StopRule(kind, tol)
        raise UserError(f"--stop {text!r}: {'E' if kind == 'eps' else 'TOL'} must be "
                        f"a positive number, e.g. --stop {kind}:1e-2")
    raise UserError(f"--stop {text!r}: choose iters, eps:E (e.g. eps:1e-2) or local:TOL "
                    "(e.g. local:1e-3)")


#: The smallest denominator of a relative measure (a zero norm stays finite).
_TINY = float(np.finfo(float).tiny)


def _ratio(num: float, den: float) -> float:
    return num / max(den, _TINY)


def remaining_path(changes: Sequence[float]) -> float:
    """The length of the steps still to come, from the last ``2 RATE_WINDOW`` changes.

    A linearly converging iteration with rate ``r`` has ``||x_k - x*|| <=
    sum_{j > k} ||x_j - x_{j-1}|| ~ c / (1 - r)`` for a recent change ``c``.
    Single steps go up and down (stale reads, which neighbours moved,
    oscillation), so ``c`` is the mean change over the last ``RATE_WINDOW``
    checks and ``r`` the ``RATE_WINDOW``-th root of its ratio to the mean over
    the window before. ``r`` is at most ``1 - 1 / MAX_STEPS``: changes that no
    longer shrink (rounding noise at the solution, or a transient) count as
    the slowest contraction assumed, so a run at its rounding floor still ends.

    Parameters
    ----------
    changes : sequence of float
        Relative changes of the iterate, oldest first; the last
        ``2 RATE_WINDOW`` are read.

    Returns
    -------
    float
        ``c / (1 - r)``; ``inf`` until ``2 RATE_WINDOW`` changes were seen.
    """
    w = RATE_WINDOW
    if len(changes) < 2 * w:
        return math.inf
    recent = list(changes)[-2 * w:]
    before, now = sum(recent[:w]) / w, sum(recent[w:]) / w
    slowest = 1.0 - 1.0 / MAX_STEPS
    rate = slowest if not 0.0 < now < before else min((now / before) ** (1.0 / w), slowest)
    return now / (1.0 - rate)


class NodeCheck:
    """One node's own test for one layer: is it done under the rule?

    The engines call :meth:`async_done` after each activation or
    :meth:`sync_done` after each iteration; both only read what they are
    given (and keep a copy of the previous ``O_m`` / ``Zbar`` for the change).

    Parameters
    ----------
    rule : StopRule
        The layer's rule (not ``iters``: nothing to check there).
    target : ndarray, optional
        ``O*`` under ``eps``.
    B2 : ndarray, optional
        ``2 B_m`` (async ``local``).
    gamma : ndarray, optional
        The node's edge penalties (async ``local``).
    eta : float
        The async step size (async ``local``).
    K : ndarray, optional
        In the metric form (``--metric gram``), the node's penalty matrix
        ``sum_n gamma_mn S_mn`` in place of ``sum_n gamma_mn I`` (async ``local``).

    Attributes
    ----------
    last : float
        The residual (``eps``: distance to ``O*``; ``local``: the estimated
        distance, gap plus remaining path) of the last check, NaN before the first.
    """

    def __init__(self, rule: StopRule, target: np.ndarray | None = None,
                 B2: np.ndarray | None = None, gamma: np.ndarray | None = None,
                 eta: float = 1.0, K: np.ndarray | None = None) -> None:
        if rule.fixed:
            raise ValueError("the iters rule has nothing to check")
        if rule.needs_target and target is None:
            raise ValueError("the eps rule needs the layer's exact solution")
        self.rule, self.tol, self._eps = rule, rule.tol, rule.needs_target
        self.last = float("nan")
        self._target = target
        self._target_norm = float(np.linalg.norm(target)) if target is not None else 0.0
        self._prev: np.ndarray | None = None  # O_m or Zbar of the previous check
        self._changes: deque[float] = deque(maxlen=2 * RATE_WINDOW)
        self._recent: deque[float] = deque(maxlen=RATE_WINDOW)  # the last estimates
        self._diff: np.ndarray | None = None
        # Async local: S = sum_n Z_mn, carried along (Z_mn starts at 0).
        self._B2 = None if B2 is None else np.asarray(B2, dtype=float)
        self._c = float(np.sum(gamma)) if gamma is not None else 0.0
        # The metric form's K: the gap is P - O K, measured in units of K's mean eigenvalue.
        self._K = K
        if K is not None:
            self._c = float(np.trace(K)) / K.shape[0]
        self._eta = float(eta)
        self._S: np.ndarray | None = None
        self._P: np.ndarray | None = None

    def _distance(self, O: np.ndarray) -> float:
        diff = np.subtract(O, self._target, out=self._diff)
        return _ratio(math.sqrt(float(np.vdot(diff, diff))), self._target_norm)

    def _steady(self) -> bool:
        """The local test: the median estimate of the last ``RATE_WINDOW`` checks within TOL.

        Async changes come in bursts (a neighbour's news, then steps on what is
        known), so one estimate swings both ways; the median of a window does not.
        """
        self._recent.append(self.last)
        return len(self._recent) == RATE_WINDOW and float(np.median(self._recent)) <= self.tol

    def _path(self, X: np.ndarray) -> float:
        """:func:`remaining_path` after the change ``||X - X_prev|| / ||X||``; keeps ``X``."""
        if self._prev is None:
            self._prev = X.copy()
            return math.inf
        np.subtract(X, self._prev, out=self._diff)
        self._prev[...] = X
        change = _ratio(math.sqrt(float(np.vdot(self._diff, self._diff))),
                        math.sqrt(float(np.vdot(X, X))))
        # An async O_m depends on its edges only through the neighbours' Z: an activation
        # with no news from them leaves it where it was (to rounding) and says nothing of
        # the network's progress, so only changes above rounding enter the windows.
        if change > NO_NEWS:
            self._changes.append(change)
        return remaining_path(self._changes)

    def async_done(self, O: np.ndarray, rhs: np.ndarray | None = None) -> bool:
        """After an async activation that produced ``O`` (``O_m``) from ``rhs``.

        ``rhs`` is the activation's right-hand side ``2 B_m + sum_n (Z_mn +
        2 gamma_mn Lam_mn)`` with the ``Z_mn`` before the activation (the edge
        step's buffer, :meth:`dssfn_mpi.algorithms.updates.EdgeStep.rhs_rows`);
        the ``local`` rule needs it.
        """
        if self._diff is None:
            self._diff = np.empty_like(O)
        if self._eps:
            self.last = self._distance(O)
            return self.last <= self.tol
        if rhs is None or self._B2 is None:
            raise ValueError("the async local rule needs the edge step's rhs, 2 B_m and gamma")
        if self._S is None:
            self._S, self._P = np.zeros_like(O), np.empty_like(O)
        # P = sum_n gamma_mn Lam_mn = (rhs - 2 B_m - S) / 2, and g = P - c O_m: the edge gap
        # is ||g|| / c and S += eta g, the sum of this activation's dual steps
        # Z_mn += eta gamma_mn (Lam_mn - O_m). In place: this runs after every activation.
        P, g = self._P, self._diff
        np.subtract(rhs, self._B2, out=P)
        P -= self._S
        P *= 0.5
        if self._K is None:
            np.multiply(O, self._c, out=g)
        else:
            np.matmul(O, self._K, out=g)
        np.subtract(P, g, out=g)
        edge = _ratio(math.sqrt(float(np.vdot(g, g))) / self._c,
                      math.sqrt(float(np.vdot(O, O))))
        np.multiply(g, self._eta, out=P)
        self._S += P
        self.last = edge + self._path(O)
        return self._steady()

    def sync_done(self, O: np.ndarray, Zbar: np.ndarray) -> bool:
        """After a consensus iteration that produced ``O`` (``O_m``) and then ``Zbar``."""
        if self._diff is None:
            self._diff = np.empty_like(Zbar)
        if self._eps:
            self.last = self._distance(Zbar)
            return self.last <= self.tol
        np.subtract(O, Zbar, out=self._diff)
        primal = _ratio(math.sqrt(float(np.vdot(self._diff, self._diff))),
                        math.sqrt(float(np.vdot(Zbar, Zbar))))
        self.last = primal + self._path(Zbar)
        return self._steady()
