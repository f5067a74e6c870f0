"""Numbers a benchmark reports about one run, computed from its run log only.

Definitions (used by the progress lines, tables and plots alike):

training time
    ``max_m sum_l total_seconds[l, m]``: the slowest rank's time in the
    layers (features, penalty, factorisation, solver, waits), excluding the
    untimed accuracy evaluation and equivalence check.
solve time
    ``max_m sum_l solve_seconds[l, m]``: the slowest rank's time in the
    decentralized solver iterations (compute, communication and waits).
CPU time
    ``mean_m sum_l cpu_seconds[l, m]``: CPU seconds per rank in the layers'
    timed part, including MPI's own polling; against the training time it
    shows how much of a rank's time was spent on a core.
scaled time
    The same with each rank's solver time multiplied by ``K_target / K_run``,
    for runs made with fewer iterations than the sweep's K (sync-graph in the
    ``mid`` preset). Only the solver scales; features and factorisation are
    per layer.
projected time, time to eps
    From :func:`dssfn_mpi.bench.summaries.projection.project_run` under the network
    named in the summary (default ``shm``): the dedicated-core replay of the
    run's trace, and that time cut where the last layer is within eps of O*
    (definitions in :mod:`dssfn_mpi.bench.summaries.projection`). NaN for runs without
    a trace. ``projected_scaled_seconds`` scales each layer's projected
    solve time to ``K_target`` as the scaled time does; the time to eps is
    never scaled (it is as measured at the run's own K).
accuracy
    Test accuracy of each rank's own model at the last layer; ``acc_mean`` is
    the mean over ranks (nodes), ``acc_min`` / ``acc_max`` the extremes.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from ...runlog import RunLog
from .projection import DEFAULT_EPS, DEFAULT_NETWORK, project_run, run_time_to_eps

__all__ = ["RunSummary", "summarize"]


@dataclass
class RunSummary:
    """Headline numbers of one run (NaN where not measured)."""

    name: str
    ok: bool
    train_seconds: float
    scaled_seconds: float
    wall_seconds: float
    layer_seconds: np.ndarray      # (layers,) slowest rank per layer
    median_rank_seconds: float     # median over ranks of the per-rank training time
    wait_seconds: float            # max over ranks of the summed wait time
    solve_seconds: float           # max over ranks of the summed solver time
    cpu_seconds: float             # mean over ranks of the summed CPU time
    acc_mean: float
    acc_min: float
    acc_max: float
    acc_per_layer: np.ndarray      # (layers,) mean over ranks
    rel_distance: float            # max over ranks at the last layer
    rel_per_layer: np.ndarray      # (layers,) max over ranks
    iters: int
    network: str = DEFAULT_NETWORK
    eps: float = DEFAULT_EPS
    projected_seconds: float = math.nan         # dedicated cores, ``network``
    projected_scaled_seconds: float = math.nan  # the same, solve scaled to K_target
    time_to_eps: float = math.nan               # projected, last layer within eps
    projected_per_layer: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tte_per_layer: np.ndarray = field(default_factory=lambda: np.zeros(0))  # NaN: not reached


def _per_layer(a: np.ndarray, how: str) -> np.ndarray:
    """Per-layer max or mean over ranks, NaN for a layer with nothing measured."""
    a = np.asarray(a, dtype=float)
    if a.size == 0:
        return np.zeros(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {"max": np.nanmax, "mean": np.nanmean}[how](a, axis=1)


def _projected(run: RunLog, factor: float, network: str, eps: float) -> dict:
    """The projection fields of :class:`RunSummary` (NaN without a trace)."""
    proj = project_run(run, network, eps=eps)
    if proj is None:
        return {}
    solve = sum(float(lp.solve_seconds) for lp in proj.layers)
    return {
        "projected_seconds": float(proj.total_seconds),
        "projected_scaled_seconds": float(proj.total_seconds + solve * (factor - 1.0)),
        "time_to_eps": run_time_to_eps(proj),
        "projected_per_layer": np.array([lp.seconds for lp in proj.layers], dtype=float),
        "tte_per_layer": np.array([math.nan if lp.time_to_eps is None else lp.time_to_eps
                                   for lp in proj.layers], dtype=float),
    }


def summarize(name: str, run: RunLog, target_iters: int | None = None,
              network: str = DEFAULT_NETWORK, eps: float = DEFAULT_EPS) -> RunSummary:
    """Reduce a run log to the numbers the benchmarks report.

    Parameters
    ----------
    name : str
        Group name of the run.
    run : RunLog
        As read by :func:`dssfn_mpi.runlog.read_runlog` or ``read_sweep``.
    target_iters : int, optional
        K to scale the solver time to (default: the run's own K, no scaling).
    network : str
        Network of the projected times (``shm``, ``ib``, ``eth10``,
        ``alpha=S,beta=B``).
    eps : float
        Target relative distance to O* of the time to eps.

    Returns
    -------
    RunSummary
    """
    L = run.layers
    tot = np.asarray(L["total_seconds"], dtype=float)
    solve = np.nan_to_num(np.asarray(L["solve_seconds"], dtype=float))
    iters = int(run.attrs.get("iters", -1))
    ok = bool(run.attrs.get("complete", False)) and run.attrs.get("bench_status", "ok") == "ok"
    factor = (target_iters / iters) if (target_iters and iters > 0) else 1.0
    if tot.size:
        per_rank = np.nansum(tot, axis=0)
        train = float(np.max(per_rank))
        median_rank = float(np.median(per_rank))
        scaled = float(np.max(np.nansum(tot + solve * (factor - 1.0), axis=0)))
        wait = float(np.max(np.nansum(np.asarray(L["wait_seconds"], dtype=float), axis=0)))
        solve_total = float(np.max(np.sum(solve, axis=0)))
        cpu = float(np.mean(np.nansum(np.asarray(L.get("cpu_seconds", np.nan * tot), dtype=float),
                                      axis=0)))
        acc = np.asarray(L["test_accuracy"], dtype=float)
        last = acc[-1]
        acc_mean = float(np.nanmean(last)) if np.isfinite(last).any() else math.nan
        acc_min = float(np.nanmin(last)) if np.isfinite(last).any() else math.nan
        acc_max = float(np.nanmax(last)) if np.isfinite(last).any() else math.nan
        rel_layers = _per_layer(L["rel_distance"], "max")
        acc_layers = _per_layer(acc, "mean")
        layer_secs = _per_layer(tot, "max")
    else:
        train = scaled = median_rank = wait = solve_total = cpu = math.nan
        acc_mean = acc_min = acc_max = math.nan
        rel_layers = acc_layers = layer_secs = np.zeros(0)
    return RunSummary(
        name=name,
        ok=ok,
        train_seconds=train,
        scaled_seconds=scaled,
        wall_seconds=float(run.attrs.get("wall_seconds", math.nan)),
        layer_seconds=layer_secs,
        median_rank_seconds=median_rank,
        wait_seconds=wait,
        solve_seconds=solve_total,
        cpu_seconds=cpu,
        acc_mean=acc_mean,
        acc_min=acc_min,
        acc_max=acc_max,
        acc_per_layer=acc_layers,
        rel_distance=float(rel_layers[-1]) if rel_layers.size else math.nan,
        rel_per_layer=rel_layers,
        iters=iters,
        network=network,
        eps=eps,
        **(_projected(run, factor, network, eps) if tot.size else {}),
    )
