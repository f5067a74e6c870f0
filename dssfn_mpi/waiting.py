"""Waiting for other ranks: the one place in the package where a rank waits.

Every wait (a non-blocking collective, a neighbour exchange, the async
engine's bounded delay, a neighbour's layer-end announcement, a barrier of the
layer loop, the exit handshake of a user error) is a poll of some readiness
test. How a rank polls is the run's *wait policy* (``--wait``), one
:class:`WaitPolicy` per run, used by every engine and by the layer loop, so
engines are compared under the same one:

``spin``
    Poll without pause, as a blocking MPI call does. Lowest latency when every
    rank has a core to itself; with a busy process on the machine each poll
    that waits for a descheduled partner loses a whole time slice to it.
``hybrid``
    Poll for :data:`SPIN_BUDGET`, then sleep between polls with exponential
    backoff (:func:`sleep_until`). A sleeping rank leaves its core to the
    ranks that still compute and, woken, preempts a busy process at once.
``auto`` (default)
    Decided per run from the ranks per core on the node (:func:`node_share`)
    and per wait from what the waits measure: spin while partners answer
    within the spin budget, sleep when they do not (:class:`AdaptiveBudget`).
    One-sided waits of an oversubscribed node sleep at once (the async engine
    never busy-spins there).

Two kinds of waits differ in how long a sleep may be. A *progress* wait (a
non-blocking collective or neighbour exchange) advances only inside this
rank's own polls when the MPI library has no progress thread: every sleep
stretches every step of the collective, so its sleeps stay at the shortest
the OS gives (:data:`PROGRESS_SLEEP`; a backoff to 10 ms made a 0.15 s solve
take 27 s). A *passive* wait (one-sided puts land without this rank's help)
may back off up to its ``max_delay``.

Nothing here imports numpy, and MPI only inside :func:`node_share`, so the
command line can use the module before either is loaded.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "BACKOFF_MAX",
    "BACKOFF_MIN",
    "POLICIES",
    "PROGRESS_SLEEP",
    "SPIN_BUDGET",
    "AdaptiveBudget",
    "NodeShare",
    "WaitPolicy",
    "Waited",
    "make_policy",
    "node_share",
    "sleep_until",
]

#: The wait policies of ``--wait``.
POLICIES = ("spin", "hybrid", "auto")
#: First sleep between two polls, in seconds.
BACKOFF_MIN = 50e-6
#: Default longest sleep between two polls, in seconds: the most a wait can
#: overshoot the moment it could have ended.
BACKOFF_MAX = 10e-3
#: Longest sleep of a progress wait: the shortest sleep worth asking the OS for
#: (Linux adds its 50 us timer slack, so a poll every ~0.1 ms).
PROGRESS_SLEEP = 50e-6
#: Hybrid's spin before its first sleep, and the least ``auto`` spins.
SPIN_BUDGET = 30e-6
#: Auto's longest spin before sleeping.
AUTO_BUDGET_MAX = 1e-3


class Waited(NamedTuple):
    """Outcome of a wait (unpacks as ``ready, seconds``).

    Attributes
    ----------
    ready : bool
        Whether the test became true before the timeout.
    seconds : float
        Seconds spent waiting: 0.0 if the first poll was already true.
    """

    ready: bool
    seconds: float


def sleep_until(
    ready: Callable[[], bool], timeout: float, *, max_delay: float = BACKOFF_MAX
) -> Waited:
    """Poll ``ready()`` until it is true or ``timeout`` seconds have passed.

    The first poll is immediate. After each false poll the caller sleeps,
    first :data:`BACKOFF_MIN` seconds, then twice as long each time up to
    ``max_delay`` (never past the timeout), and polls again. ``ready`` may do
    work, e.g. re-read a mailbox; the time it takes while waiting counts as
    waiting.

    Parameters
    ----------
    ready
        The readiness test; called at least once, and a last time once the
        timeout has passed (so a wait that ends just then still succeeds).
    timeout
        Seconds after which to give up (``float("inf")``: never).
    max_delay
        Longest sleep between two polls: a short one for waits that are
        usually brief and on the critical path (the async bounded delay), a
        long one for waits that only guard against a lost rank.

    Returns
    -------
    Waited
        ``(ready, seconds)``: whether ``ready()`` became true, and the time from
        the first poll to the start of the last one.
    """
    return _sleep_from(time.perf_counter(), ready, timeout, max_delay, polled=False)


def _sleep_from(t0: float, ready: Callable[[], bool], timeout: float, max_delay: float,
                polled: bool) -> Waited:
    """:func:`sleep_until` of a wait that began at ``t0``.

    ``polled``: a poll has just failed, so the wait starts with a sleep.
    """
    delay, first = min(BACKOFF_MIN, max_delay), not polled
    while True:
        waited = time.perf_counter() - t0
        if not polled and ready():
            return Waited(True, 0.0 if first else waited)
        if waited >= timeout:
            return Waited(False, waited)
        time.sleep(min(delay, timeout - waited))
        delay, first, polled = min(2.0 * delay, max_delay), False, False


def _spin(t0: float, ready: Callable[[], bool], limit: float) -> tuple[bool, float]:
    """Poll ``ready()`` without pause until true or ``limit`` seconds after ``t0``.

    Returns whether it became true and the seconds since ``t0`` at the last poll.
    """
    if limit <= 0.0:
        return False, time.perf_counter() - t0
    while True:
        waited = time.perf_counter() - t0
        if ready():
            return True, waited
        if waited >= limit:
            return False, waited


@dataclass
class AdaptiveBudget:
    """Auto's spin budget for one kind of wait: spin while partners answer within it.

    A wait that ends within the budget lets it grow (x :attr:`GROW`, up to
    ``hi``); one that outlasts it halves it (down to ``lo``): partners that
    are descheduled (a busy process, more ranks than cores) make spinning
    useless, so the rank soon sleeps at once. A low budget cannot see that
    the partners became fast again, so every ``probe_every`` waits one wait
    spins up to ``hi``; a probe that fails doubles the interval (up to
    :attr:`PROBE_MAX`), one that succeeds restores the budget.

    Attributes
    ----------
    lo, hi : float
        Bounds of the budget, in seconds.
    value : float
        The current budget (starts at ``hi``).
    """

    lo: float
    hi: float
    value: float = -1.0
    probe_every: int = 64
    GROW = 1.25
    PROBE_MIN = 64
    PROBE_MAX = 8192

    def __post_init__(self) -> None:
        if self.value < 0:
            self.value = self.hi
        self._since_probe = 0

    def next(self) -> tuple[float, bool]:
        """The budget of the next wait, and whether that wait is a probe."""
        if self.value >= self.hi:
            return self.hi, False
        self._since_probe += 1
        if self._since_probe >= self.probe_every:
            self._since_probe = 0
            return self.hi, True
        return self.value, False

    def record(self, within: bool, probe: bool) -> None:
        """Account for a wait that ended ``within`` its budget (or did not)."""
        if probe:
            if within:
                self.value, self.probe_every = self.hi, self.PROBE_MIN
            else:
                self.probe_every = min(2 * self.probe_every, self.PROBE_MAX)
            return
        factor = self.GROW if within else 0.5
        self.value = min(self.hi, max(self.lo, self.value * factor))


class NodeShare(NamedTuple):
    """How this rank's node is shared: ranks of the job on it and cores they may use."""

    ranks: int
    cores: int

    @property
    def ranks_per_core(self) -> float:
        return self.ranks / max(self.cores, 1)


def _usable_cores() -> set[int]:
    """The cores this process may run on (all of them where affinity is unknown)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def node_share(comm: Any) -> NodeShare:
    """Ranks of ``comm`` on this rank's node and the cores they may use (collective).

    The ranks of a node are found with ``MPI_Comm_split_type(COMM_TYPE_SHARED)``;
    their cores are the union of their CPU affinities (``os.sched_getaffinity``),
    so ranks bound to one core each count one core each.
    """
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        cores = set().union(*local.allgather(sorted(_usable_cores())))
        return NodeShare(local.Get_size(), len(cores))
    finally:
        local.Free()


class WaitPolicy:
    """How this rank waits for others: one object per run (see the module notes).

    Parameters
    ----------
    name : str
        ``spin``, ``hybrid`` or ``auto``.
    share : NodeShare, optional
        The node's ranks and cores (``auto`` only; default: one rank per core).

    Attributes
    ----------
    name : str
        The policy as configured.
    resolved : str
        What it does on this rank: ``spin``, ``hybrid``, or for ``auto``
        ``adaptive`` (ranks <= cores: every wait spins up to an adaptive budget)
        or ``adaptive-shared`` (more ranks than cores: progress waits as
        ``adaptive``, one-sided waits sleep at once).
    waits : int
        Waits whose first poll was not ready.
    slept : int
        Waits that slept at least once (0 under ``spin``).
    """

    def __init__(self, name: str, share: NodeShare | None = None) -> None:
        if name not in POLICIES:
            raise ValueError(f"unknown wait policy {name!r}; choose one of {', '.join(POLICIES)}")
        self.name = name
        self.share = share or NodeShare(1, 1)
        self.waits = 0
        self.slept = 0
        self._progress: AdaptiveBudget | None = None
        self._passive: AdaptiveBudget | None = None
        if name == "auto":
            self._progress = AdaptiveBudget(SPIN_BUDGET, AUTO_BUDGET_MAX)
            if self.share.ranks_per_core <= 1.0:
                self._passive = AdaptiveBudget(SPIN_BUDGET, AUTO_BUDGET_MAX)
                self.resolved = "adaptive"
            else:
                self.resolved = "adaptive-shared"
        else:
            self.resolved = name

    def wait(self, ready: Callable[[], bool], timeout: float, *, progress: bool = False,
             max_delay: float = BACKOFF_MAX) -> Waited:
        """Poll ``ready()`` under this policy until it is true or ``timeout`` passed.

        Parameters
        ----------
        ready
            The readiness test (e.g. ``request.Test``); called at least once.
        timeout
            Seconds after which to give up.
        progress
            True if the awaited operation advances only inside ``ready()``
            (non-blocking collectives): sleeps are then at most
            :data:`PROGRESS_SLEEP`.
        max_delay
            Longest sleep between polls of a passive wait.

        Returns
        -------
        Waited
            Whether ``ready()`` became true, and the seconds waited.
        """
        t0 = time.perf_counter()
        if ready():
            return Waited(True, 0.0)
        self.waits += 1
        budget = self._progress if progress else self._passive
        if self.name == "spin":
            limit, probe = timeout, False
        elif budget is not None:
            limit, probe = budget.next()
        else:
            limit, probe = (SPIN_BUDGET if self.name == "hybrid" else 0.0), False
        done, waited = _spin(t0, ready, min(limit, timeout))
        if budget is not None:
            budget.record(done, probe)
        if done or waited >= timeout:
            return Waited(done, waited)
        self.slept += 1
        cap = min(max_delay, PROGRESS_SLEEP) if progress else max_delay
        return _sleep_from(t0, ready, timeout, cap, polled=True)

    def wait_request(self, request: Any, timeout: float) -> Waited:
        """Wait for an MPI request (a non-blocking collective) to complete."""
        return self.wait(request.Test, timeout, progress=True)

    def resolution(self) -> str:
        """What the policy does here and why, e.g. ``adaptive-shared (4 ranks on 2 cores)``."""
        if self.name != "auto":
            return self.resolved
        return f"{self.resolved} ({self.share.ranks} ranks on {self.share.cores} cores)"


def make_policy(name: str, comm: Any | None = None) -> WaitPolicy:
    """The run's :class:`WaitPolicy`; collective over ``comm`` when ``name`` is ``auto``.

    Every rank of ``comm`` must call it with the same ``name``.
    """
    share = node_share(comm) if name == "auto" and comm is not None else None
    return WaitPolicy(name, share)
