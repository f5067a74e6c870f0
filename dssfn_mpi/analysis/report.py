"""The plain-text summary of a run log or sweep file (``dssfn-mpi report``).

Reads through :mod:`dssfn_mpi.runlog` and prints numbers with
:mod:`dssfn_mpi.fmt`, so an unmeasured value reads ``-``.
"""

from __future__ import annotations

import math

import numpy as np

from ..fmt import MISSING, number, percent, setting
from ..graph.topology import facts_line
from ..runlog import PathLike, RunLog, is_sweep, read_runlog, read_sweep

__all__ = ["format_report", "report_json"]


def _finite(values: np.ndarray) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64).ravel()
    return arr[np.isfinite(arr)]


def _stat(values: np.ndarray, how: str) -> float:
    """NaN-tolerant statistic; NaN if nothing was measured."""
    arr = _finite(values)
    if arr.size == 0:
        return math.nan
    funcs = {"min": np.min, "max": np.max, "mean": np.mean, "median": np.median, "sum": np.sum}
    return float(funcs[how](arr))


def format_report(path_or_runlog: PathLike | RunLog) -> str:
    """Summarise a run log as a plain-text table (``dssfn-mpi report RUN.h5``).

    One header block, one row per layer (median and max total time over ranks,
    median solve time, max relative distance to the exact solution, max
    objective gap, min/mean/max test accuracy in percent, mean staleness) and a
    final line with the total time (sum over layers of the slowest rank) and
    the final layer's test accuracy. Values that were not measured print as
    ``-``. A sweep file gives one such block per run.

    Parameters
    ----------
    path_or_runlog
        A run log or sweep file path, or a :class:`RunLog`.

    Returns
    -------
    str
        The report, lines separated by ``\\n``, without a trailing newline.
    """
    if isinstance(path_or_runlog, RunLog):
        return _format_run(path_or_runlog)
    if not is_sweep(path_or_runlog):
        return _format_run(read_runlog(path_or_runlog))
    runs = read_sweep(path_or_runlog)
    if not runs:
        return f"sweep {path_or_runlog}: no runs"
    return "\n\n".join(f"== run {name} ==\n{_format_run(run)}" for name, run in runs.items())


# Columns of the per-layer table: header and width.
_COLUMNS = (
    ("layer", 5),
    ("t_med[s]", 9),
    ("t_max[s]", 9),
    ("solve_med[s]", 12),
    ("max rel_dist", 12),
    ("max obj_gap", 12),
    ("cost", 10),
    ("train acc[%]", 12),
    ("test acc min/mean/max [%]", 25),
    ("stale", 6),
)


def _accuracies(values: np.ndarray) -> str:
    """min/mean/max over ranks, in percent."""
    return "/".join(percent(_stat(values, how), ".2f") for how in ("min", "mean", "max"))


def _header(run: RunLog) -> list[str]:
    a = run.attrs
    rows = run.layers_done
    expected = a.get("layers", -1)
    known = isinstance(expected, int) and not isinstance(expected, bool) and expected >= 0
    done = f"{rows}/{expected + 1}" if known else str(rows)
    return [
        f"run log: {run.source or MISSING}",
        f"mode {setting(a.get('mode'))}  update {setting(a.get('update'))}  "
        f"dataset {setting(a.get('dataset'))}  M {setting(a.get('nodes'))}  "
        f"topology {setting(a.get('topology'))}  degree {setting(a.get('degree'))}",
        f"layers {setting(a.get('layers'))}  hidden {setting(a.get('hidden'))}  "
        f"iters {setting(a.get('iters'))}  complete {'yes' if run.complete else 'no'}  "
        f"(layers done {done})  compiled kernels {setting(a.get('compiled_kernels'))}",
        f"graph {facts_line(a)}",
        *(_sim_lines(a) if a.get("simulated") else _mpi_lines(a)),
    ]


def _sim_lines(a: dict) -> list[str]:
    """A simulated run (dssfn-mpi simulate): its times are simulated seconds."""
    return [
        "simulated run (dssfn-mpi simulate): every time below is simulated seconds",
        f"speed {setting(a.get('sim_speed'))}  network {setting(a.get('sim_network'))}",
    ]


def _mpi_lines(a: dict) -> list[str]:
    """What the run measured about MPI at start-up (docs/RUNLOG.md, ``mpi_*``)."""
    seconds = a.get("mpi_passive_put_seconds")
    ms = number(seconds * 1e3 if isinstance(seconds, float) else None, ".3f")
    timed = f" ({ms} ms)" if ms != MISSING else ""
    return [
        f"MPI library: {setting(a.get('mpi_library'))}",
        f"one-sided {setting(a.get('mpi_osc'))}  thread level "
        f"{setting(a.get('mpi_thread_level'))}  window {setting(a.get('mpi_window_model'))}  "
        f"passive put {setting(a.get('mpi_passive_put'))}{timed}"
        + (f"  write path {a['rma_write_path']}" if a.get("rma_write_path") else ""),
    ]


#: One row of the per-layer table: (name, run-log dataset, statistic over ranks), in
#: the order of :data:`_COLUMNS` (the test accuracy is min, mean and max).
_ROW = (
    ("total_seconds_median", "total_seconds", "median"),
    ("total_seconds_max", "total_seconds", "max"),
    ("solve_seconds_median", "solve_seconds", "median"),
    ("rel_distance_max", "rel_distance", "max"),
    ("objective_gap_max", "objective_gap", "max"),
    ("train_cost", "train_cost", "sum"),
    ("train_accuracy_mean", "train_accuracy", "mean"),
    ("test_accuracy_min", "test_accuracy", "min"),
    ("test_accuracy_mean", "test_accuracy", "mean"),
    ("test_accuracy_max", "test_accuracy", "max"),
    ("staleness_mean", "staleness_mean", "mean"),
)


def _layer_values(L: dict[str, np.ndarray], l: int) -> dict[str, float]:
    """The statistics of layer ``l`` that the report prints (NaN: not measured)."""
    return {name: _stat(L[key][l], how) for name, key, how in _ROW}


def _layer_cells(L: dict[str, np.ndarray], l: int) -> list[str]:
    v = _layer_values(L, l)
    return [
        str(l),
        number(v["total_seconds_median"], ".3f"),
        number(v["total_seconds_max"], ".3f"),
        number(v["solve_seconds_median"], ".3f"),
        number(v["rel_distance_max"], ".3e"),
        number(v["objective_gap_max"], ".3e"),
        number(v["train_cost"], ".4g"),
        percent(v["train_accuracy_mean"], ".2f"),
        _accuracies(L["test_accuracy"][l]),
        number(v["staleness_mean"], ".2f"),
    ]


def _format_run(run: RunLog) -> str:
    lines = _header(run)
    rows, L = run.layers_done, run.layers
    if rows == 0:
        lines.append("no layers recorded")
        return "\n".join(lines)

    lines.append("  ".join(name.rjust(width) for name, width in _COLUMNS))
    for l in range(rows):
        cells = _layer_cells(L, l)
        lines.append("  ".join(c.rjust(width) for c, (_n, width) in zip(cells, _COLUMNS)))

    layer_max_time = [_stat(L["total_seconds"][l], "max") for l in range(rows)]
    timed = [t for t in layer_max_time if math.isfinite(t)]
    total = number(sum(timed), ".3f") if timed else MISSING
    if timed and len(timed) < rows:
        total += f" ({rows - len(timed)} layer(s) without timing)"
    lines.append(
        f"total time {total} s (sum over layers of the slowest rank); "
        f"final layer {rows - 1} test accuracy min/mean/max "
        f"{_accuracies(L['test_accuracy'][rows - 1])} %"
    )
    return "\n".join(lines)


#: Run attributes the JSON report carries (those the text header shows).
_JSON_ATTRS = ("mode", "update", "dataset", "nodes", "topology", "degree", "graph_min_degree",
               "graph_diameter", "graph_spectral_gap", "layers", "hidden",
               "iters", "simulated", "sim_speed", "sim_network", "mpi_library", "mpi_osc",
               "mpi_thread_level", "mpi_window_model", "mpi_passive_put",
               "mpi_passive_put_seconds", "rma_write_path", "compiled_kernels")


def _json_value(value: object) -> object:
    """A JSON-ready attribute: numpy scalars as Python ones, NaN and inf as null."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _run_json(run: RunLog, network: object | None, strict: bool = False) -> dict:
    L, rows = run.layers, run.layers_done
    layers = [{"layer": l, **{k: _json_value(v) for k, v in _layer_values(L, l).items()}}
              for l in range(rows)]
    timed = [t for t in (_stat(L["total_seconds"][l], "max") for l in range(rows))
             if math.isfinite(t)]
    return {
        "source": str(run.source) if run.source else None,
        "complete": bool(run.complete),
        "layers_done": rows,
        "attrs": {k: _json_value(run.attrs[k]) for k in _JSON_ATTRS if k in run.attrs},
        "layers": layers,
        "total_seconds": sum(timed) if timed else None,
        **({} if network is None else {"projection": _projection_json(run, network, strict)}),
    }


def _projection_json(run: RunLog, network: object, strict: bool) -> dict:
    """``replay --json``'s object for the run, or (not ``strict``) ``{"error": why not}``."""
    from ..errors import UserError
    from .replay import project

    try:
        return project(run, network).to_json()
    except UserError as exc:
        if strict:
            raise
        return {"error": str(exc)}


def report_json(path: PathLike, network: object | None = None) -> dict:
    """The numbers of :func:`format_report` as one JSON-ready object (``report --json``).

    Parameters
    ----------
    path
        A run log or sweep file.
    network : dssfn_mpi.analysis.network.Network, optional
        Also give each run's projection onto it (``report --network``).

    Returns
    -------
    dict
        For a run log: ``source``, ``complete``, ``layers_done``, ``attrs``
        (the settings and MPI facts of the header), ``layers`` (one object per
        layer: the table's statistics, accuracies as fractions) and
        ``total_seconds``; unmeasured values are null; with ``network``,
        ``projection`` (as ``replay --json``; in a sweep, a run that cannot be
        replayed gets ``{"error": ...}``). For a sweep file:
        ``{"runs": {name: that object}}``.
    """
    if not is_sweep(path):
        return _run_json(read_runlog(path), network, strict=True)
    return {"runs": {name: _run_json(run, network) for name, run in read_sweep(path).items()}}
