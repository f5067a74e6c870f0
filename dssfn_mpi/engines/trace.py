"""Per-activation traces and trajectories: what each rank records while it solves a layer.

A :class:`LayerTrace` is one rank's record of one layer (docs/RUNLOG.md,
``/trace`` and ``/trajectory``): for every activation (async) or iteration
(sync, sync-graph) k its wall start and end, the thread CPU time of its compute
and, for async, the neighbour versions it read; the layer-start phases
(:data:`PHASES`); and a copy of the rank's estimate every ``snapshot_every``
activations. Its arrays are allocated when the layer starts, so recording an
activation is a few array stores; snapshots are copied after the activation's
recorded end.

After the layer, outside its timed part, the snapshots become distances to the
exact solution (:meth:`LayerTrace.export`) and rank 0 stacks every rank's
exports into the run log's ``(L, M, K[, D])`` arrays (:class:`TraceTables`).
Times are stored relative to the run's origin: each rank's
``time.perf_counter()`` right after the barrier that starts the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ssfn.equivalence import relative_distance

__all__ = ["PHASES", "LayerTrace", "TracePlan", "TraceTables", "snapshot_points", "trace_plan"]

#: The layer-start phases, in order (features and penalty: the loop; the others: the engine).
PHASES = ("features", "penalty", "parity_wait", "factor")

_BYTES = 8  # every traced number is a float64 or an int64
_PER_ACTIVATION = 4  # start, end, cpu, comm_start


def snapshot_points(iters: int, every: int) -> np.ndarray:
    """Activations done at each snapshot: ``every, 2 every, ...`` and always ``iters``.

    Parameters
    ----------
    iters : int
        K, activations (or iterations) per layer.
    every : int
        Snapshot spacing, >= 1.

    Returns
    -------
    ndarray of int64
        Increasing, ending with ``iters``.
    """
    points = np.arange(every, iters + 1, every, dtype=np.int64)
    if points.size == 0 or points[-1] != iters:
        points = np.append(points, np.int64(iters))
    return points


@dataclass(frozen=True)
class TracePlan:
    """What a run records: the same on every rank (it reads only the settings and graph).

    Attributes
    ----------
    active : bool
        Whether layers are traced at all (not in central mode: no iterations).
    record : bool
        Whether the per-activation times are kept (else only trajectories).
    why : str
        Why they are not (``""`` when they are).
    iters, snapshot_every : int
        K and the snapshot spacing.
    width : int
        D, the columns of ``versions``: the largest degree for async, 0 otherwise.
    """

    active: bool
    record: bool
    why: str
    iters: int
    snapshot_every: int
    width: int

    def layer_trace(self, degree: int, origin: float) -> LayerTrace | None:
        """A fresh trace of one layer for a rank with ``degree`` neighbours (None: inactive)."""
        if not self.active:
            return None
        return LayerTrace(self.iters, degree if self.width else 0, self.snapshot_every,
                          record=self.record, origin=origin)


def trace_plan(cfg: Any, graph: Any) -> TracePlan:
    """The run's :class:`TracePlan`: the trace is skipped if it would exceed ``--trace-limit``.

    Parameters
    ----------
    cfg : TrainConfig
        ``mode``, ``iters``, ``layers``, ``snapshot_every`` and ``trace_limit_mb``.
    graph : Graph
        The communication graph (its node count and degrees).

    Returns
    -------
    TracePlan
    """
    # The one-shot modes' layer is one step: the exchange and the exact solve.
    alg = cfg.algorithm
    K, M = (1 if alg.direct else cfg.iters), graph.n_nodes
    every = cfg.snapshot_every or max(1, K // 20)
    width = max(graph.degree(m) for m in range(M)) if alg.one_sided else 0
    if not alg.decentralized:
        return TracePlan(False, False, "central mode has no iterations", K, every, 0)
    size = (cfg.layers + 1) * M * K * (_PER_ACTIVATION + width) * _BYTES
    why = ""
    if cfg.trace_limit_mb <= 0:
        why = "--trace-limit 0"
    elif size > cfg.trace_limit_mb * 1e6:
        why = (f"the trace would take {size / 1e6:.0f} MB, more than --trace-limit "
               f"{cfg.trace_limit_mb:g} MB")
    return TracePlan(True, not why, why, K, every, width)


class LayerTrace:
    """One rank's record of one layer: per-activation times, phases and snapshots.

    Parameters
    ----------
    iters : int
        K, the activations (iterations) of the layer.
    degree : int
        Neighbour versions recorded per activation (0: none, as in the sync modes).
    snapshot_every : int
        Snapshot spacing s: after activations s, 2s, ... and the last one.
    record : bool
        Keep per-activation times and phases; without, only snapshots are taken.
    origin : float
        ``time.perf_counter()`` of the run's start, subtracted on export.
    """

    def __init__(self, iters: int, degree: int, snapshot_every: int, record: bool = True,
                 origin: float = 0.0) -> None:
        n = iters if record else 0
        self.iters, self.record, self.origin = iters, record, origin
        self.start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.cpu = np.full(n, np.nan)
        self.comm_start = np.full(n, np.nan)
        self.versions = np.full((n, degree), -1, dtype=np.int64)
        self.phases = np.full((3, len(PHASES)), np.nan)  # rows: start, end, cpu
        self.points = snapshot_points(iters, snapshot_every)
        self.snapshots: np.ndarray | None = None  # (S, Q, d), allocated by the first snapshot
        self._taken = 0

    def activation(self, k: int, start: float, end: float, cpu: float,
                   versions: np.ndarray | None = None, comm: float | None = None) -> None:
        """Record activation ``k``: ``perf_counter`` start/end, thread CPU seconds, extras."""
        if not self.record:
            return
        self.start[k], self.end[k], self.cpu[k] = start, end, cpu
        if versions is not None:
            self.versions[k] = versions
        if comm is not None:
            self.comm_start[k] = comm

    def snapshot(self, k: int, O: np.ndarray) -> None:
        """Copy ``O`` if activation ``k`` ends a snapshot interval (else do nothing)."""
        if self._taken >= self.points.size or k + 1 != self.points[self._taken]:
            return
        if self.snapshots is None:
            self.snapshots = np.empty((self.points.size,) + O.shape)
        self.snapshots[self._taken] = O
        self._taken += 1

    def record_activation(self, k: int, O: np.ndarray, start: float, cpu_start: float,
                          versions: np.ndarray | None = None, comm: float | None = None) -> None:
        """Record activation ``k`` as ending now, with ``cpu_start`` its thread-CPU start,
        then take its snapshot if one is due: the engines' one call per activation."""
        self.activation(k, start, time.perf_counter(), time.thread_time() - cpu_start,
                        versions, comm)
        self.snapshot(k, O)

    def close(self, done: int, O: np.ndarray) -> None:
        """The layer ended after ``done`` activations (``--stop`` eps / local may end it
        before K): the final ``O`` becomes the next due snapshot, and later ones stay NaN."""
        if self._taken < self.points.size and self.points[self._taken] > done:
            if self.snapshots is None:
                self.snapshots = np.empty((self.points.size,) + O.shape)
            self.snapshots[self._taken] = O
            self._taken += 1

    def phase(self, name: str, start: float, end: float, cpu: float) -> None:
        """Record a layer-start phase (one of :data:`PHASES`)."""
        if self.record:
            self.phases[:, PHASES.index(name)] = start, end, cpu

    def export(self, width: int, O_star: np.ndarray | None) -> dict[str, np.ndarray]:
        """The layer's record as stored: times relative to the origin, versions padded to
        ``width`` columns, and each snapshot's distance to ``O_star`` (NaN without it).

        Drops the snapshots: they are not needed once measured.
        """
        versions = np.full((self.start.size, width), -1, dtype=np.int64)
        versions[:, : self.versions.shape[1]] = self.versions
        rel = np.full(self.points.size, np.nan)
        if O_star is not None and self.snapshots is not None:
            rel[: self._taken] = [relative_distance(s, O_star)
                                  for s in self.snapshots[: self._taken]]
        self.snapshots = None
        return {"start": self.start - self.origin, "end": self.end - self.origin,
                "cpu": self.cpu, "comm_start": self.comm_start - self.origin,
                "versions": versions, "phase_start": self.phases[0] - self.origin,
                "phase_end": self.phases[1] - self.origin, "phase_cpu": self.phases[2].copy(),
                "rel_distance": rel}


class TraceTables:
    """Rank 0's stack of every rank's exported layers, as the run log's arrays.

    Parameters
    ----------
    plan : TracePlan
        What was recorded.
    nodes : int
        M.
    """

    def __init__(self, plan: TracePlan, nodes: int) -> None:
        self.plan, self.nodes = plan, nodes
        self.layers: dict[int, list[dict[str, np.ndarray]]] = {}  # layer -> one export per rank

    def add(self, layer: int, exports: list[dict[str, np.ndarray]]) -> None:
        """Keep every rank's export of ``layer`` (index = rank)."""
        self.layers[layer] = exports

    def arrays(self, rows: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """``/trace`` and ``/trajectory`` datasets for layers ``0 .. rows - 1``.

        Layers without a record (before a resume) are NaN (versions -1). Without
        recorded times, ``/trace`` is empty; central mode has neither.
        """
        plan, M = self.plan, self.nodes
        if not plan.active:
            return {}, {}
        points = snapshot_points(plan.iters, plan.snapshot_every)
        trajectory = {"activation": points,
                      "rel_distance": np.full((rows, M, points.size), np.nan)}
        trace: dict[str, np.ndarray] = {}
        if plan.record:
            K, P = plan.iters, len(PHASES)
            trace = {name: np.full((rows, M, K), np.nan)
                     for name in ("start", "end", "cpu", "comm_start")}
            trace.update({f"phase_{x}": np.full((rows, M, P), np.nan)
                          for x in ("start", "end", "cpu")})
            if plan.width:
                trace["versions"] = np.full((rows, M, K, plan.width), -1, dtype=np.int64)
        for layer, exports in self.layers.items():
            if layer >= rows:
                continue
            for m, ex in enumerate(exports):
                trajectory["rel_distance"][layer, m] = ex["rel_distance"]
                for name in trace:
                    trace[name][layer, m] = ex[name]
        return trace, trajectory
