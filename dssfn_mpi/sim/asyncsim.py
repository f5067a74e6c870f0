"""The async engine in simulated time: a priority queue of activations.

Per node m and activation k (the rules of :mod:`dssfn_mpi.engines.async_arock`
and of the replay, docs/REPLAY.md): it starts when the node's activation k-1
ended and, under ``--max-lead s``, version k-s of every neighbour has arrived
(that neighbour's activation k-s-1 ended); it reads the latest ``Z_{n,m}`` that
has arrived from each neighbour; it runs :class:`~dssfn_mpi.engines.updates.EdgeStep`
(the engine's own step, compiled when numba is installed, as live); it lasts
its compute (:mod:`.speed`) plus its puts, one message of the network model,
and its new ``Z`` arrives at its neighbours when it ends.

Activations are executed in order of their start times. Each node runs one
activation at a time, so when a node reads at time t each neighbour has at most
one activation that started before t and has not ended: its outbox is double
buffered (the delivered ``Z`` and the one in flight with its arrival time).

Under ``--stop eps:E`` / ``local:TOL`` each activation ends with the node's
:class:`~dssfn_mpi.stoprule.NodeCheck`; the first moment at which every
node's latest check says done, the layer ends for all: the signal arrives one
small-message latency (alpha) later, and no activation starts after that.
``--iters`` K caps the activations (reason ``cap``).
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..engines.updates import EdgeStep
from ..network import Network
from ..stoprule import NodeCheck, StopRule

__all__ = ["AsyncResult", "NodeRun", "solve_async", "staleness"]


@dataclass
class NodeRun:
    """What one node did in one simulated layer."""

    O: np.ndarray
    end: float  # when the node left the layer
    activations: int = 0
    compute: float = 0.0  # simulated seconds of compute (puts excluded)
    wait: float = 0.0  # simulated seconds waiting between activations
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    versions: list[np.ndarray] = field(default_factory=list)  # each read's versions


@dataclass
class AsyncResult:
    """A simulated async layer: every node's run and why it ended."""

    nodes: list[NodeRun]
    all_done: bool


def staleness(versions: list[np.ndarray], degree: int) -> tuple[float, float]:
    """Mean and largest number of neighbour versions skipped per read (the engine's measure)."""
    last = np.zeros(degree, dtype=np.int64)
    skipped, worst, reads = 0, 0, 0
    for v in versions:
        new = v > last
        if new.any():
            gap = v[new] - last[new] - 1
            skipped += int(gap.sum())
            worst = max(worst, int(gap.max()))
            last[new] = v[new]
        reads += degree
    return skipped / max(reads, 1), float(worst)


class _Outbox:
    """A node's ``Z_{m,n}`` rows as its neighbours see them: delivered, and in flight."""

    def __init__(self, rows: np.ndarray) -> None:
        self.delivered = np.zeros_like(rows)
        self.flight = np.zeros_like(rows)
        self.version, self.flight_version, self.arrives = 0, 0, math.inf

    def deliver(self, t: float) -> None:
        if self.arrives <= t:
            self.delivered, self.flight = self.flight, self.delivered
            self.version, self.arrives = self.flight_version, math.inf

    def send(self, rows: np.ndarray, version: int, arrives: float, now: float) -> None:
        self.deliver(now)
        self.flight[...] = rows
        self.flight_version, self.arrives = version, arrives


def solve_async(layer: int, steps: list[EdgeStep], checks: list[NodeCheck | None],
                neighbors: list[tuple[int, ...]], begin: np.ndarray, rule: StopRule,
                iters: int, max_lead: int | None, speed, network: Network,
                message_bytes: float) -> AsyncResult:
    """Simulate one async layer.

    Parameters
    ----------
    layer : int
        Index of the layer (for the speed model).
    steps : list of EdgeStep
        Each node's edge step, its ``Z`` at zero.
    checks : list of NodeCheck or None
        Each node's own test under ``rule`` (None under ``iters``).
    neighbors : list of tuple
        ``graph.neighbors(m)`` of each node.
    begin : ndarray, shape (M,)
        When each node may start its first activation.
    rule : StopRule
        The layer's stopping rule.
    iters : int
        K: the activations (the cap under eps / local).
    max_lead : int or None
        The bounded delay s (None: unbounded).
    speed : SpeedModel
        Compute seconds of each activation.
    network : Network
        Message cost of a put (``alpha + bytes / beta``); alpha is the stop signal's.
    message_bytes : float
        Bytes of one Z put.

    Returns
    -------
    AsyncResult
    """
    M = len(steps)
    put = network.message_seconds(message_bytes)
    slot = [{n: i for i, n in enumerate(nb)} for nb in neighbors]
    # Row of Z_{n,m} in n's outbox, for each node m and neighbour index i.
    rows = [[slot[n][m] for n in neighbors[m]] for m in range(M)]
    shape = steps[0].O.shape
    boxes = [_Outbox(s.Z.reshape(len(neighbors[m]), -1)) for m, s in enumerate(steps)]
    runs = [NodeRun(O=np.zeros(shape), end=float(begin[m])) for m in range(M)]
    prev_end = [float(b) for b in begin]
    blocked = [False] * M
    queue: list[tuple[float, int, int]] = []
    flags: list[tuple[float, int, bool]] = []
    state = np.zeros(M, dtype=bool)
    stop_at = math.inf
    passed: list[np.ndarray | None] = [None] * M

    def schedule(m: int) -> None:
        k = runs[m].activations
        if k >= iters:
            return
        start, j = prev_end[m], k - (max_lead if max_lead is not None else k) - 1
        if j >= 0:
            need = [runs[n].ends for n in neighbors[m]]
            if any(len(e) <= j for e in need):
                blocked[m] = True
                return
            start = max([start] + [e[j] for e in need])
        blocked[m] = False
        heapq.heappush(queue, (start, m, k))

    def flags_until(t: float) -> float:
        """Apply the done-flag changes up to ``t``; the first all-done moment, or inf."""
        while flags and flags[0][0] <= t:
            when, m, done = heapq.heappop(flags)
            state[m] = done
            if state.all():
                return when
        return math.inf

    for m in range(M):
        schedule(m)
    while queue:
        t, m, k = heapq.heappop(queue)
        if not rule.fixed and stop_at == math.inf:
            hit = flags_until(t)
            if hit < math.inf:
                stop_at = hit + network.alpha
        if t >= stop_at:
            continue
        run = runs[m]
        for n in neighbors[m]:
            boxes[n].deliver(t)
        Zr = [boxes[n].delivered[r].reshape(shape) for n, r in zip(neighbors[m], rows[m])]
        c0 = time.thread_time()
        O = steps[m](Zr)
        measured = time.thread_time() - c0
        done = checks[m].async_done(O, steps[m]._rhs) if checks[m] is not None else False
        cost = speed.activation(layer, m, k, measured)
        end = t + cost + put
        run.O[...] = O
        if done:  # as live: a node returns the last iterate its own test accepted
            passed[m] = O.copy()
        run.versions.append(np.array([boxes[n].version for n in neighbors[m]], dtype=np.int64))
        run.wait += t - prev_end[m]
        run.compute += cost
        run.starts.append(t)
        run.ends.append(end)
        run.activations += 1
        prev_end[m] = end
        boxes[m].send(steps[m].Z.reshape(len(neighbors[m]), -1), k + 1, end, t)
        if not rule.fixed:
            heapq.heappush(flags, (end, m, done))
        schedule(m)
        for n in neighbors[m]:
            if blocked[n]:
                schedule(n)
    if not rule.fixed and stop_at == math.inf:
        hit = flags_until(math.inf)
        if hit < math.inf:
            stop_at = hit + network.alpha
    for m, run in enumerate(runs):
        run.end = prev_end[m] if stop_at == math.inf else max(prev_end[m], stop_at)
        if stop_at < math.inf and passed[m] is not None:
            run.O[...] = passed[m]
    return AsyncResult(nodes=runs, all_done=stop_at < math.inf)
