"""Everything that watches the layer loop without steering it: an ordered pipeline.

After each layer's solve the loop hands a :class:`LayerStep` to every
observer, in the order of the run's :class:`Pipeline` (:func:`default_observers`),
and after the last layer it calls :meth:`Observer.finish` on each, in the same order:

1. :class:`Evaluation`: train/test accuracy and the shard's cost, into the row;
2. :class:`Equivalence`: distances to the exact solution (with the check);
3. :class:`LogRow`: the time spent observing so far, then this rank's row, stored;
4. :class:`Checkpointing`: each rank's checkpoint (before anything that waits
   for other ranks, so a rank that fails elsewhere cannot cost it);
5. :class:`RankRows`: rank 0 gathers every rank's rows when someone needs them;
6. :class:`Tracing`: the trajectories' distances to the exact solution, and
   rank 0's copy of every rank's traces (gathered when the run log needs them);
7. :class:`Progress`: rank 0's progress line;
8. :class:`ModelSaver`: every node's weights (at the end, with ``--save-model``);
9. :class:`LogWriter`: the run log, every ``--log-every`` layers and at the end,
   when it also removes the checkpoints.

Each stage declares what it reads and writes (:attr:`Observer.reads`,
:attr:`Observer.writes`), by these names; the run's set-up (settings,
communicator, shards, graph: :class:`~dssfn_mpi.run.runstate.RunState`) is every
stage's to read:

============  ===========================================  ==================
name          what, where                                  written by
============  ===========================================  ==================
problem       the layer's features, statistics, penalty    the loop
O, O_prev     this rank's solution, the previous layer's   the loop
row           this rank's row (``step.row``) as the loop   the loop
              and the engine filled it
solved_at     when the solve returned                      the loop
trace         the layer's trace (``step.trace``)           the loop
Os            this rank's solutions so far (``state.Os``)  the loop
evaluation    the row's accuracies and cost                :class:`Evaluation`
O_star        rank 0, with the check: the exact solution   :class:`Equivalence`
checks        rank 0: the check's rows (``state.checks``)  :class:`Equivalence`
rows          this rank's stored rows (``state.rows``)     :class:`LogRow`
history       rank 0: every rank's rows                    :class:`RankRows`
traces        rank 0: every rank's traces                  :class:`Tracing`
runlog        the run log file ``--out``                   :class:`LogWriter`
============  ===========================================  ==================

A :class:`Pipeline` refuses, when it is made, a stage that reads what neither the
loop nor an earlier stage writes, and a name written twice: a wrong order fails
before the first layer, not as a wrong run log.

Observers never change the model. Some communicate (the check reduces to rank
0, rows are gathered to rank 0): always collectively, in the same order on
every rank, and after the layer's timed part.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
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
    "LOOP_PROVIDES",
    "Checkpointing",
    "Equivalence",
    "Evaluation",
    "LayerStep",
    "LogRow",
    "LogWriter",
    "ModelSaver",
    "Observer",
    "Pipeline",
    "Progress",
    "RankRows",
    "Tracing",
    "check_order",
    "default_observers",
]

#: What the layer loop provides every stage (the names of the module's table).
LOOP_PROVIDES: tuple[str, ...] = ("problem", "O", "O_prev", "row", "solved_at", "trace", "Os")


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
    """Something that watches the run after each layer and once at the end.

    Attributes
    ----------
    reads : tuple of str
        The names (module table) it reads: the loop's or an earlier stage's.
    writes : tuple of str
        The names it writes, for the stages after it; no other stage writes them.
    """

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    def __init__(self, state: RunState) -> None:
        self.state = state

    def after_layer(self, step: LayerStep) -> None:
        """Called on every rank after each layer's solve."""

    def finish(self) -> None:
        """Called on every rank after the last layer (the engine is closed)."""


def check_order(stages: Sequence[Any], provided: Sequence[str] = LOOP_PROVIDES) -> None:
    """Refuse stages in an order where one reads what is not yet written.

    Parameters
    ----------
    stages : sequence
        Observers (or their classes), in the order they run; each has ``reads``
        and ``writes``.
    provided : sequence of str
        What the loop provides before the first stage.

    Raises
    ------
    ValueError
        A stage reads a name that neither the loop nor an earlier stage writes (the
        message names the stage that writes it, if any), or writes a name the loop or
        an earlier stage writes: a bug in whoever made the pipeline.
    """
    def name(stage: Any) -> str:
        return stage.__name__ if isinstance(stage, type) else type(stage).__name__

    writer = {fact: "the loop" for fact in provided}
    for i, stage in enumerate(stages):
        for fact in stage.reads:
            if fact not in writer:
                later = [name(t) for t in stages[i + 1:] if fact in t.writes]
                where = (f"{later[0]} writes it: put it before {name(stage)}" if later
                         else "no stage writes it")
                raise ValueError(f"observer {name(stage)} reads {fact!r} before it is "
                                 f"written ({where})")
        for fact in stage.writes:
            if fact in writer:
                raise ValueError(f"observer {name(stage)} writes {fact!r}, which "
                                 f"{writer[fact]} writes already")
            writer[fact] = name(stage)


class Pipeline:
    """The observers of a run in their order, checked when made (:func:`check_order`).

    Parameters
    ----------
    stages : sequence of Observer
        In the order they run, after each layer and at the end.
    provided : sequence of str
        What the loop provides (:data:`LOOP_PROVIDES`).

    Raises
    ------
    ValueError
        As :func:`check_order`: a stage before what it reads.
    """

    def __init__(self, stages: Sequence[Observer],
                 provided: Sequence[str] = LOOP_PROVIDES) -> None:
        check_order(stages, provided)
        self.stages = list(stages)

    def __iter__(self) -> Iterator[Observer]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def after_layer(self, step: LayerStep) -> None:
        """Every stage's :meth:`Observer.after_layer`, in order."""
        for stage in self.stages:
            stage.after_layer(step)

    def finish(self) -> None:
        """Every stage's :meth:`Observer.finish`, in order."""
        for stage in self.stages:
            stage.finish()


class Evaluation(Observer):
    """Accuracy on the rank's shard and on the test set (``--no-eval``: NaN), and its cost,
    into the row."""

    reads = ("problem", "O", "O_prev", "row")
    writes = ("evaluation",)

    def __init__(self, state: RunState) -> None:
        super().__init__(state)
        self.Yt = state.Yt  # test features of the last layer seen

    def after_layer(self, step: LayerStep) -> None:
        s, p = self.state, step.problem
        self.Yt = test_features(s.cfg, step.layer, s.hidden, step.O_prev, self.Yt)
        set_fields(step.row, **accuracy_fields(s.cfg.evaluate, step.O, p.Y, s.y, self.Yt, s.yt),
                   train_cost=objective(step.O, p.G, p.B, s.tt))


class Equivalence(Observer):
    """The centralized-equivalence check (:mod:`dssfn_mpi.ssfn.equivalence`); rows on rank 0.

    Without the check (``--no-check``, or a mode solved exactly) it does nothing:
    ``O_star`` stays None and ``checks`` empty.
    """

    reads = ("problem", "O")
    writes = ("O_star", "checks")

    def after_layer(self, step: LayerStep) -> None:
        s, p = self.state, step.problem
        if not s.checking:
            return
        res = measure_equivalence(s.comm, p.G, p.B, s.tt, step.O, p.eps, s.wait_policy,
                                  s.cfg.timeout, solution=p.target)
        if res is not None:
            fields, step.O_star = res
            for k, v in fields.items():
                s.checks[k].append(v)


class LogRow(Observer):
    """Completes this rank's row with the observation time so far (after the evaluation
    and the check, which ``eval_seconds`` counts) and stores it, once, in the rank's rows
    (``state.rows``)."""

    reads = ("row", "solved_at", "evaluation", "checks")
    writes = ("rows",)

    def after_layer(self, step: LayerStep) -> None:
        step.row["eval_seconds"] = time.perf_counter() - step.solved_at
        self.state.rows[step.layer] = step.row


class RankRows(Observer):
    """Rank 0's copy of every rank's rows (``state.history``).

    Gathered after a layer only when something needs it there (the progress
    line with the check, or a run log write), and once more at the end.
    """

    reads = ("rows",)
    writes = ("history",)

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

    reads = ("trace", "O_star")
    writes = ("traces",)

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

    reads = ("row", "history", "checks")

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

    reads = ("Os",)

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

    reads = ("history", "checks", "traces")
    writes = ("runlog",)

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

    reads = ("Os", "rows", "checks")

    def __init__(self, state: RunState) -> None:
        super().__init__(state)
        self.ckpt = checkpoint.RankCheckpoint(state.cfg.out, state.rank)

    def after_layer(self, step: LayerStep) -> None:
        s = self.state
        self.ckpt.save(s.Os, s.rows[:step.layer + 1], s.checks)


def default_observers(state: RunState, quiet: bool = False) -> Pipeline:
    """The observers of a training run, in the order they are called (checked)."""
    cfg = state.cfg
    stages: list[Observer] = [Evaluation(state), Equivalence(state), LogRow(state)]
    if cfg.out is not None:
        stages.append(Checkpointing(state))
    tracing = Tracing(state)
    stages += [RankRows(state), tracing, Progress(state, quiet)]
    if cfg.save_model is not None:
        stages.append(ModelSaver(state))
    stages.append(LogWriter(state, tracing))
    return Pipeline(stages)


def _print(msg: str) -> None:
    print(msg, file=sys.stdout, flush=True)
