"""One layer's step, by the rules training and the simulator share.

A layer is: features -> statistics -> penalty -> solve -> observation. Training
runs the step once per rank, for its own node (:mod:`dssfn_mpi.run.train`, with
:mod:`dssfn_mpi.run.observers`); the simulator runs it for all M nodes in one process
(:mod:`dssfn_mpi.sim.layerloop`, :mod:`dssfn_mpi.sim.nodes`). How each one
communicates, times and stores differs; what a step computes and what it
records of itself is defined here, once:

- :func:`layer_inputs`: the node's features ``Y_l`` from its own ``O_{l-1}``, and
  ``G_m = Y Y^T``, ``B_m = T Y^T``;
- :func:`aims_at_target`: whether the solve needs the exact solution first
  (``--stop eps``);
- :func:`layer_row`: the node's log row of the layer, built once, with the step's
  penalty in it (:func:`penalty_fields`, :func:`metric_bytes`: ``gamma``,
  ``metric_bytes``);
- :func:`test_features`, :func:`accuracy_fields`: the untimed evaluation, whose fields
  complete the row.

A row is a record of :data:`dssfn_mpi.runlog.schema.ROW_DTYPE`, stored as it is in the
rows of the run, whose fields are the ``/layers`` of its
:class:`dssfn_mpi.runlog.RunLog` (:func:`dssfn_mpi.runlog.schema.layer_arrays`).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np

from ..runlog import schema
from ..ssfn.gramstats import StatsLayout
from ..ssfn.model import accuracy, layer_features

__all__ = ["accuracy_fields", "aims_at_target", "layer_inputs", "layer_row", "metric_bytes",
           "penalty_fields", "progress_line", "stop_note", "test_features"]


def layer_inputs(O_prev: np.ndarray | None, seed: int, layer: int, hidden: int,
                 Y: np.ndarray, T: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A node's features of ``layer`` and its statistics ``(Y, G, B)``.

    ``Y`` holds the features of ``layer - 1`` (the shard at layer 0, which is
    returned as it is); ``O_prev`` is the node's own solution of ``layer - 1``.
    """
    if layer > 0:
        (Y,) = layer_features(O_prev, seed, layer, hidden, Y)
    return Y, Y @ Y.T, T @ Y.T


def aims_at_target(cfg: Any) -> bool:
    """Whether each layer's solve is given the exact solution ``O*`` (``--stop eps``).

    Computed before the solve, outside the layer's timings: an oracle of the
    benchmark, not a cost of the method. Exactly solved modes need none.
    """
    return not cfg.algorithm.direct and cfg.stop_rule.needs_target


def metric_bytes(alg: Any, width: int, metric: bool) -> int:
    """The bytes a node sends each neighbour in the Gram metric's exchanges at the start of a
    ``width``-wide layer solved in it (``metric``), else 0: one packed ``width x width``
    matrix per exchange, :attr:`~dssfn_mpi.algorithms.Algorithm.metric_exchanges` of them
    (``alg``). The layer's ``metric_bytes``, and what the shared timeline
    (:mod:`dssfn_mpi.analysis.timeline`) costs."""
    return alg.metric_exchanges * StatsLayout(width, 0).nbytes if metric else 0


def penalty_fields(penalty: float | np.ndarray, metric_bytes: int) -> dict[str, Any]:
    """The log row's ``gamma`` (the mean of a node's penalties: one per neighbour in
    async) and ``metric_bytes`` (:func:`metric_bytes`'s)."""
    return {"gamma": float(np.mean(penalty)), "metric_bytes": int(metric_bytes)}


def layer_row(stats: Any, features_seconds: float, setup_seconds: float, total_seconds: float,
              cpu_seconds: float, penalty: float | np.ndarray,
              metric_bytes: int) -> np.ndarray:
    """One node's log row of a layer, built once: the one place train and simulate build it.

    A record of :data:`~dssfn_mpi.runlog.schema.ROW_DTYPE` (0-d) whose observation
    fields (accuracies, cost, ``eval_seconds``) are "not measured" until the
    observation sets them; then it is stored, as it is, in the rank's rows (train) or
    the run's (simulate), whose fields are the run log's ``/layers``.

    ``stats`` is the solve's :class:`~dssfn_mpi.engines.base.SolveStats` (the engine's
    fields, live or simulated); ``setup_seconds`` the layer-start time outside the
    solve's own factorisation (the penalty's) that ``factor_seconds`` includes; the
    penalty fields are :func:`penalty_fields`'.
    """
    row = schema.set_fields(schema.blank_rows(()), **asdict(stats))
    return schema.set_fields(row, factor_seconds=stats.factor_seconds + setup_seconds,
                             features_seconds=features_seconds, total_seconds=total_seconds,
                             cpu_seconds=cpu_seconds, **penalty_fields(penalty, metric_bytes))


def progress_line(cfg: Any, layer: int, clock: str, seconds: float, rel: float,
                  rows: np.ndarray) -> str:
    """The per-layer progress line of train and simulate: the layer's time (``clock``:
    ``max time`` live, ``simulated``), the largest distance to O*, the nodes' test
    accuracies and how the layer ended under ``--stop eps``/``local`` (``rows``: the
    nodes' rows of the layer, :func:`layer_row`'s)."""
    from ..fmt import number

    acc = list(rows["test_accuracy"])
    return (f"layer {layer:>3}/{cfg.layers}  {cfg.mode:<10} {clock} {seconds:8.3f} s  "
            f"max rel dist {number(rel, '.2e')}  test acc min/mean/max "
            f"{number(100 * min(acc), '.1f')}/{number(100 * float(np.mean(acc)), '.1f')}/"
            f"{number(100 * max(acc), '.1f')} %{stop_note(cfg, rows)}")


def stop_note(cfg: Any, rows: np.ndarray) -> str:
    """How the layer ended under --stop eps / local (nothing to say for a fixed count);
    ``rows``: the nodes' rows of the layer (:func:`layer_row`'s), one or all."""
    from ..algorithms.stoprule import REASONS

    if cfg.stop_rule.fixed or cfg.algorithm.direct:
        return ""
    acts = [int(r["activations"]) for r in rows]
    span = f"{min(acts)}" if min(acts) == max(acts) else f"{min(acts)}-{max(acts)}"
    capped = [m for m, r in enumerate(rows) if REASONS[int(r["stop_reason"])] == "cap"]
    if capped:
        who = "rank 0" if len(rows) == 1 else f"{len(capped)} of {len(rows)} ranks"
        return f"  CAP: {who} reached --iters {cfg.iters} before {cfg.stop}"
    return f"  {cfg.stop} after {span} activations"


def test_features(cfg: Any, layer: int, hidden: int, O_prev: np.ndarray | None,
                  Yt: np.ndarray) -> np.ndarray:
    """The test set's features of ``layer`` through a node's own weights, from those of
    ``layer - 1``; advanced only when the run evaluates (``--no-eval``: kept as they are)."""
    if cfg.evaluate and layer > 0:
        (Yt,) = layer_features(O_prev, cfg.seed, layer, hidden, Yt)
    return Yt


def accuracy_fields(evaluate: bool, O: np.ndarray, Y: np.ndarray, y: np.ndarray,
                    Yt: np.ndarray, yt: np.ndarray) -> dict[str, float]:
    """A node's ``train_accuracy`` (on its shard) and ``test_accuracy``; NaN under
    ``--no-eval``."""
    if not evaluate:
        return {"train_accuracy": math.nan, "test_accuracy": math.nan}
    return {"train_accuracy": accuracy(O, Y, y), "test_accuracy": accuracy(O, Yt, yt)}
