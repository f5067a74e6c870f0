"""Everything that watches the layer loop without steering it.

After each layer's solve the loop hands a :class:`LayerStep` to every
observer, in the order :func:`default_observers` gives, and after the last
layer it calls :meth:`Observer.finish` on each, in the same order:

1. :class:`Evaluation`: train/test accuracy and the shard's cost;
2. :class:`Equivalence`: distances to the exact solution (with the check);
3. :class:`LogRow`: the time spent observing so far, then this rank's row;
4. :class:`Checkpointing`: each rank's checkpoint (before anything that waits
   for other ranks, so a rank that fails elsewhere cannot cost it);
5. :class:`RankRows`: rank 0 gathers every rank's rows when someone needs them;
6. :class:`Tracing`: the trajectories' distances to the exact solution, and
   rank 0's copy of every rank's traces (gathered when the run log needs them);
7. :class:`Progress`: rank 0's progress line;
8. :class:`ModelSaver`: every node's weights (at the end, with ``--save-model``);
9. :class:`LogWriter`: the run log, every ``--log-every`` layers and at the end,
   when it also removes the checkpoints.

Observers never change the model. Some communicate (the check reduces to rank
0, rows are gathered to rank 0): always collectively, in the same order on
every rank, and after the layer's timed part.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engines.base import LayerProblem
from ..engines.trace import PHASES, LayerTrace, TraceTables, trace_plan
from ..runlog.schema import set_fields
from ..ssfn.equivalence import measure_equivalence
from ..ssfn.solver import objective
from . import checkpoint
from .layerstep import accuracy_fields, progress_line, stop_note, test_features
from .runstate import RunState

__all__ = [
    "Checkpointing",
    "Equivalence",
    "Evaluation",
    "LayerStep",
    "LogRow",
    "LogWriter",
    "ModelSaver",
    "Observer",
    "Progress",
    "RankRows",
    "Tracing",
    "default_observers",
]


@dataclass
class LayerStep:
    """One solved layer, as the loop hands it to the observers."""

    problem: LayerProblem  # the layer's features, targets, statistics and penalty
    O: np.ndarray  # this rank's solution
    O_prev: np.ndarray | None  # the previous layer's (None at layer 0)
    row: np.ndarray  # this rank's log row (layerstep.layer_row): the loop's and engine's
    # fields, completed by the observers
    solved_at: float  # time.perf_counter() when the solve returned
    trace: LayerTrace | None = None  # the layer's trace (None in central mode)
    O_star: np.ndarray | None = None  # rank 0, with the check: the exact solution

    @property
    def layer(self) -> int:
        return self.problem.layer


class Observer:
    """Something that watches the run after each layer and once at the end."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def after_layer(self, step: LayerStep) -> None:
        """Called on every rank after each layer's solve."""

    def finish(self) -> None:
        """Called on every rank after the last layer (the engine is closed)."""


class Evaluation(Observer):
    """Accuracy on the rank's shard and on the test set (``--no-eval``: NaN), and its cost."""

    def __init__(self, state: RunState) -> None:
        super().__init__(state)
        self.Yt = state.Yt  # test features of the last layer seen

    def after_layer(self, step: LayerStep) -> None:
        s, p = self.state, step.problem
        self.Yt = test_features(s.cfg, step.layer, s.hidden, step.O_prev, self.Yt)
        set_fields(step.row, **accuracy_fields(s.cfg.evaluate, step.O, p.Y, s.y, self.Yt, s.yt),
                   train_cost=objective(step.O, p.G, p.B, s.tt))


class Equivalence(Observer):
    """The centralized-equivalence check (:mod:`dssfn_mpi.ssfn.equivalence`); rows on rank 0."""

    def after_layer(self, step: LayerStep) -> None:
        s, p = self.state, step.problem
        res = measure_equivalence(s.comm, p.G, p.B, s.tt, step.O, p.eps, s.wait_policy,
                                  s.cfg.timeout, solution=p.target)
        if res is not None:
            fields, step.O_star = res
            for k, v in fields.items():
                s.checks[k].append(v)


class LogRow(Observer):
    """Completes this rank's row with the observation time so far and stores it, once, in
    the rank's rows (``state.rows``)."""

    def after_layer(self, step: LayerStep) -> None:
        step.row["eval_seconds"] = time.perf_counter() - step.solved_at
        self.state.rows[step.layer] = step.row


class RankRows(Observer):
    """Rank 0's copy of every rank's rows (``state.history``).

    Gathered after a layer only when something needs it there (the progress
    line with the check, or a run log write), and once more at the end.
    """

    def __init__(self, state: RunState) -> None:
        super().__init__(state)
        self.sent = 0  # rows already gathered; the same on every rank

    def after_layer(self, step: LayerStep) -> None:
        if self.state.checking or self.state.log_due(step.layer):
            self._gather(step.layer + 1)

    def finish(self) -> None:
        self._gather(self.state.n_layers)

    def _gather(self, done: int) -> None:
        """Rank 0 appends the rows of layers ``sent .. done - 1`` of every rank."""
        s = self.state
        s.barrier("gathering the log rows")  # then the gather itself waits for nobody
        tables = s.comm.gather(s.rows[self.sent:done], root=0)
        if s.rank == 0:
            s.history = np.concatenate([s.history, np.stack(tables, axis=1)])
        self.sent = done


class Tracing(Observer):
    """Each layer's trajectory distances, and rank 0's copy of every rank's traces.

    With the check, rank 0 broadcasts the exact solution ``O*`` and every rank
    measures its own snapshots against it (NaN without the check). The traces
    are gathered to rank 0 when the run log is written, like :class:`RankRows`.
    Without ``--out`` there is no run log, and it does nothing.
    """

    def __init__(self, state: RunState) -> None:
        super().__init__(state)
        self.plan = trace_plan(state.cfg, state.graph)
        self.tables = TraceTables(self.plan, state.size)  # rank 0
        self.pending: list[tuple[int, dict[str, np.ndarray]]] = []  # layers not yet gathered
        if state.rank == 0 and state.cfg.out and self.plan.active and not self.plan.record:
            _print(f"note: no per-activation trace recorded: {self.plan.why} "
                   "(the trajectories are kept)")

    def after_layer(self, step: LayerStep) -> None:
        s = self.state
        if step.trace is None or s.cfg.out is None:  # nothing to trace, or no run log
            return
        O_star = s.comm.bcast(step.O_star, root=0) if s.checking else None
        self.pending.append((step.layer, step.trace.export(self.plan.width, O_star)))
        if s.log_due(step.layer):
            self._gather()

    def finish(self) -> None:
        self._gather()

    def _gather(self) -> None:
        s = self.state
        if not self.plan.active or s.cfg.out is None:
            return
        gathered = s.comm.gather(self.pending, root=0)
        if s.rank == 0:
            for i, (layer, _) in enumerate(self.pending):
                self.tables.add(layer, [g[i][1] for g in gathered])
        self.pending = []

    def runlog_groups(self, rows: int) -> dict[str, Any]:
        """Rank 0: the ``trace``, ``trajectory`` and ``trace_attrs`` of the run log."""
        s, plan = self.state, self.plan
        trace, trajectory = self.tables.arrays(rows)
        attrs: dict[str, Any] = {"recorded": plan.record, "why": plan.why}
        if plan.active:
            widths = [s.X.shape[0]] + [s.hidden] * s.cfg.layers  # d_l, the input width
            mix = s.history["mix_rounds"][:, 0]
            attrs.update(
                phases=list(PHASES), origin="perf_counter after the start barrier",
                bytes_per_message=s.cfg.algorithm.message_bytes(s.n_classes, max(widths)),
                max_lead=-1 if s.cfg.max_lead is None else s.cfg.max_lead,
                mix_rounds=int(mix.max()) if mix.size else -1,
                snapshot_every=plan.snapshot_every)
            if plan.record:
                alg = s.cfg.algorithm
                trace["message_bytes"] = np.array(
                    [alg.message_bytes(s.n_classes, widths[i]) for i in range(rows)],
                    dtype=np.int64)
        return {"trace": trace, "trajectory": trajectory, "trace_attrs": attrs}


class Progress(Observer):
    """Rank 0's line per layer: every rank's numbers with the check, else its own time."""

    def __init__(self, state: RunState, quiet: bool) -> None:
        super().__init__(state)
        self.quiet = quiet

    def after_layer(self, step: LayerStep) -> None:
        s = self.state
        if self.quiet or s.rank != 0:
            return
        if not s.checking:
            _print(f"layer {step.layer:>3}/{s.cfg.layers}  rank 0 "
                   f"{float(step.row['total_seconds']):8.3f} s"
                   f"{stop_note(s.cfg, step.row.reshape(1))}")
            return
        table = s.history[-1]
        tot = max(table["total_seconds"])
        _print(progress_line(s.cfg, step.layer, "max time", tot,
                             s.checks["rel_distance"][-1].max(), table))


class ModelSaver(Observer):
    """At the end, every node's weights to ``--save-model`` (gathered to rank 0)."""

    def finish(self) -> None:
        from ..ssfn.modelio import save_run_model

        s = self.state
        s.barrier("gathering the model")
        all_Os = s.comm.gather(s.Os, root=0)
        if s.rank == 0:
            save_run_model(s.cfg, s.meta["name"], s.X.shape[0], s.n_classes, s.hidden, all_Os)


class LogWriter(Observer):
    """The run log (rank 0): incomplete every ``--log-every`` layers, complete at the end.

    Each write replaces the file atomically, so a run that dies leaves the
    log of the layers written so far. Once the complete log is on disk, the
    run's checkpoints are obsolete and removed.
    """

    def __init__(self, state: RunState, tracing: Tracing) -> None:
        super().__init__(state)
        self.tracing = tracing

    def after_layer(self, step: LayerStep) -> None:
        if self.state.rank == 0 and self.state.log_due(step.layer):
            self._write(complete=False)

    def finish(self) -> None:
        s = self.state
        if s.cfg.out is None:
            return
        if s.rank == 0:
            self._write(complete=True)
        s.barrier("writing the run log")  # the complete log is on disk before the checkpoints go
        if s.rank == 0:
            checkpoint.remove(s.cfg.out)

    def _write(self, complete: bool) -> None:
        s = self.state
        s.record(complete, **self.tracing.runlog_groups(len(s.history))).write(s.cfg.out)


class Checkpointing(Observer):
    """Each rank's checkpoint after every layer (:class:`LogWriter` removes them at the end)."""

    def __init__(self, state: RunState) -> None:
        super().__init__(state)
        self.ckpt = checkpoint.RankCheckpoint(state.cfg.out, state.rank)

    def after_layer(self, step: LayerStep) -> None:
        s = self.state
        self.ckpt.save(s.Os, s.rows[:step.layer + 1], s.checks)


def default_observers(state: RunState, quiet: bool = False) -> list[Observer]:
    """The observers of a training run, in the order they are called."""
    cfg = state.cfg
    observers: list[Observer] = [Evaluation(state)]
    if state.checking:
        observers.append(Equivalence(state))
    observers.append(LogRow(state))
    if cfg.out is not None:
        observers.append(Checkpointing(state))
    tracing = Tracing(state)
    observers += [RankRows(state), tracing, Progress(state, quiet)]
    if cfg.save_model is not None:
        observers.append(ModelSaver(state))
    observers.append(LogWriter(state, tracing))
    return observers


def _print(msg: str) -> None:
    print(msg, file=sys.stdout, flush=True)
