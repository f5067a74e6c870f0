"""The plain-text summary of a run log or sweep file (``dssfn-mpi report``).

Reads through :mod:`dssfn_mpi.runlog` and prints numbers with
:mod:`dssfn_mpi.fmt`, so an unmeasured value reads ``-``.
"""

from __future__ import annotations

import math

import numpy as np

from .fmt import MISSING, number, percent, setting
from .runlog import PathLike, RunLog, is_sweep, read_runlog, read_sweep

__all__ = ["format_report"]


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
        f"(layers done {done})",
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
        f"passive put {setting(a.get('mpi_passive_put'))}{timed}",
    ]


def _layer_cells(L: dict[str, np.ndarray], l: int) -> list[str]:
    return [
        str(l),
        number(_stat(L["total_seconds"][l], "median"), ".3f"),
        number(_stat(L["total_seconds"][l], "max"), ".3f"),
        number(_stat(L["solve_seconds"][l], "median"), ".3f"),
        number(_stat(L["rel_distance"][l], "max"), ".3e"),
        number(_stat(L["objective_gap"][l], "max"), ".3e"),
        number(_stat(L["train_cost"][l], "sum"), ".4g"),
        percent(_stat(L["train_accuracy"][l], "mean"), ".2f"),
        _accuracies(L["test_accuracy"][l]),
        number(_stat(L["staleness_mean"][l], "mean"), ".2f"),
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
