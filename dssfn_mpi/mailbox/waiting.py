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
    Spin (up to :data:`AUTO_SPIN_MAX`) while nothing outside the job competes
    for the node's cores; when something does (a busy process, another job),
    spin at most :data:`CONTENDED_SPIN`, then sleep as ``hybrid``.
    Contention is measured, not guessed, by :class:`LoadMonitor` from the CPU
    time the node's cores spent outside this job's ranks. With more ranks
    than cores one-sided waits always sleep (the async engine never
    busy-spins there). Where the load cannot be read (no Linux ``/proc``),
    ranks per core decide: a core per rank counts as uncontended, more ranks
    than cores as contended.

Why a spin of half a millisecond under contention (measured with
``tests/waitcheck.py``: 4 ranks and one busy process started from the same
session, so in one Linux autogroup, on 2 cores, Linux 6.18; sync's busy /
idle solve time): sleeping after a 30 us spin, 4.3x; after a 0.3 - 2 ms
spin, 1.9 - 2.5x; after 10 ms, 25x; never sleeping, 22x (a rank that spins
that long is one more busy process to the scheduler and loses the core
whenever it waits). ``sched_yield`` between polls made no difference at
0.5 ms and, without foreign load, made auto slower than spin (20 ranks on 2
cores, sync: 1.35x); shorter sleeps (timer slack cut to 1 us: 22x) and
shorter scheduler slices for the ranks (``sched_setattr``) did not help.

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
from typing import Any, NamedTuple

__all__ = [
    "BACKOFF_MAX",
    "BACKOFF_MIN",
    "CONTENDED_SPIN",
    "POLICIES",
    "PROGRESS_SLEEP",
    "SPIN_BUDGET",
    "LoadMonitor",
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
#: Hybrid's spin before its first sleep.
SPIN_BUDGET = 30e-6
#: Auto's longest spin in one wait before it sleeps: a partner this late is
#: computing or descheduled, and a spinning rank would take its core.
AUTO_SPIN_MAX = 10e-3
#: Auto's longest spin in one wait while something outside the job
#: competes for the cores (see the module notes for the measurements).
CONTENDED_SPIN = 0.5e-3


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
    """Poll ``ready()`` without sleeping until true or ``limit`` seconds after ``t0``.

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


class LoadMonitor:
    """Whether something outside this job competes for the node's cores (Linux ``/proc``).

    Every ``interval`` seconds (checked when a wait starts) it compares the
    busy time of the node's cores (``/proc/stat``: user, nice, system, irq,
    softirq and steal) with the CPU time of the job's ranks on the node
    (``/proc/PID/stat``). The rest is *foreign* load; the node is contended
    when the foreign load is at least :attr:`FOREIGN_MIN` cores and the job's
    ranks plus the foreign load exceed the cores.

    Parameters
    ----------
    pids : list of int
        Process ids of the job's ranks on this node (this one included).
    cores : list of int
        The node's cores the ranks may use.
    interval : float
        Seconds between two readings.
    """

    #: Foreign load, in cores, below which the node counts as the job's own.
    FOREIGN_MIN = 0.25

    def __init__(self, pids: list[int], cores: list[int], interval: float = 0.25) -> None:
        self.pids, self.cores, self.interval = list(pids), sorted(cores), interval
        self.foreign = 0.0  # foreign load of the last window, in cores
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._last = self._reading()

    @property
    def available(self) -> bool:
        """Whether this system lets the load be read."""
        return self._last is not None

    def contended(self) -> bool:
        """Whether the last complete window had foreign load competing with the ranks."""
        now = time.perf_counter()
        if self._last is not None and now - self._last[0] >= self.interval:
            reading = self._reading()
            if reading is not None:
                (t0, busy0, job0), (t1, busy1, job1) = self._last, reading
                load = max(0.0, (busy1 - busy0) - (job1 - job0)) / self._hz / (t1 - t0)
                # Tick counts of a short window can overshoot (1 tick = 10 ms): at most
                # every core.
                self.foreign = min(load, float(len(self.cores)))
                self._last = reading
        return (self.foreign >= self.FOREIGN_MIN
                and len(self.pids) + self.foreign > len(self.cores))

    def _reading(self) -> tuple[float, int, int] | None:
        """(time, busy ticks of the cores, CPU ticks of the ranks), or None without /proc."""
        try:
            with open("/proc/stat") as f:
                busy = sum(_busy_ticks(line) for line in f if _core_of(line) in self.cores)
            job = sum(_process_ticks(pid) for pid in self.pids)
        except (OSError, ValueError, IndexError):
            return None
        return time.perf_counter(), busy, job


def _core_of(line: str) -> int:
    """The core a ``/proc/stat`` line is about (``cpu3 ...`` -> 3), -1 for other lines."""
    head = line.split(" ", 1)[0]
    return int(head[3:]) if head.startswith("cpu") and head[3:].isdigit() else -1


def _busy_ticks(line: str) -> int:
    """Busy ticks of a ``cpuN`` line: user nice system (idle iowait) irq softirq steal."""
    v = [int(x) for x in line.split()[1:9]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


def _process_ticks(pid: int) -> int:
    """User + system CPU ticks of a process (gone: 0)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0
    return int(fields[11]) + int(fields[12])


class NodeShare(NamedTuple):
    """How this rank's node is shared: the job's ranks on it and the cores they may use."""

    ranks: int
    cores: int
    pids: tuple[int, ...] = ()  # process ids of those ranks
    core_ids: tuple[int, ...] = ()  # and of the cores

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
    """The ranks of ``comm`` on this rank's node and the cores they may use (collective).

    The ranks of a node are found with ``MPI_Comm_split_type(COMM_TYPE_SHARED)``;
    their cores are the union of their CPU affinities (``os.sched_getaffinity``),
    so ranks bound to one core each count one core each.
    """
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        mine = (os.getpid(), sorted(_usable_cores()))
        peers = local.allgather(mine)
    finally:
        local.Free()
    cores = sorted(set().union(*(c for _, c in peers)))
    return NodeShare(len(peers), len(cores), tuple(p for p, _ in peers), tuple(cores))


class WaitPolicy:
    """How this rank waits for others: one object per run (see the module notes).

    Parameters
    ----------
    name : str
        ``spin``, ``hybrid`` or ``auto``.
    share : NodeShare, optional
        The node's ranks and cores (``auto`` only; default: one rank per core).
    monitor : LoadMonitor, optional
        ``auto``'s measure of foreign load (default: one on ``share``'s ranks
        and cores when they are known).

    Attributes
    ----------
    name : str
        The policy as configured.
    resolved : str
        What it does on this rank: ``spin``, ``hybrid``, or for ``auto``
        ``measured`` (uncontended or contended waits as the load monitor says)
        or, where the load cannot be read, from the ranks per core: ``spin``
        (uncontended) or ``hybrid`` (contended: spin at most
        :data:`CONTENDED_SPIN`, then sleep).
    waits : int
        Waits whose first poll was not ready.
    slept : int
        Waits that slept at least once (0 under ``spin``).
    """

    def __init__(self, name: str, share: NodeShare | None = None,
                 monitor: LoadMonitor | None = None) -> None:
        if name not in POLICIES:
            raise ValueError(f"unknown wait policy {name!r}; choose one of {', '.join(POLICIES)}")
        self.name = name
        self.share = share or NodeShare(1, 1)
        self.waits = 0
        self.slept = 0
        self.monitor: LoadMonitor | None = None
        self.resolved = name
        if name == "auto":
            if monitor is None and self.share.pids:
                monitor = LoadMonitor(list(self.share.pids), list(self.share.core_ids),
                                      interval=max(0.25, 0.05 * self.share.ranks))
            if monitor is not None and monitor.available:
                self.monitor, self.resolved = monitor, "measured"
            else:
                self.resolved = "spin" if self.share.ranks_per_core <= 1.0 else "hybrid"

    def _spin_limit(self, progress: bool, timeout: float) -> float:
        """How long the next wait polls before it sleeps."""
        if self.name == "spin":
            return timeout
        if self.name == "hybrid":
            return SPIN_BUDGET
        if not progress and self.share.ranks_per_core > 1.0:
            return 0.0  # one-sided waits of an oversubscribed node: sleep at once
        if self.monitor is None:
            contended = self.resolved == "hybrid"
        else:
            contended = self.monitor.contended()
        return CONTENDED_SPIN if contended else AUTO_SPIN_MAX

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
        done, waited = _spin(t0, ready, min(self._spin_limit(progress, timeout), timeout))
        if done or waited >= timeout:
            return Waited(done, waited)
        self.slept += 1
        cap = min(max_delay, PROGRESS_SLEEP) if progress else max_delay
        return _sleep_from(t0, ready, timeout, cap, polled=True)

    def wait_request(self, request: Any, timeout: float) -> Waited:
        """Wait for an MPI request (a non-blocking collective) to complete."""
        return self.wait(request.Test, timeout, progress=True)

    def resolution(self) -> str:
        """What the policy does here and why, e.g. ``measured (4 ranks on 2 cores)``."""
        if self.name != "auto":
            return self.resolved
        return f"{self.resolved} ({self.share.ranks} ranks on {self.share.cores} cores)"


def make_policy(name: str, comm: Any | None = None) -> WaitPolicy:
    """The run's :class:`WaitPolicy`; collective over ``comm`` when ``name`` is ``auto``.

    Every rank of ``comm`` must call it with the same ``name``.
    """
    share = node_share(comm) if name == "auto" and comm is not None else None
    return WaitPolicy(name, share)
