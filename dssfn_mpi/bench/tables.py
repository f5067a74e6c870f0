"""Markdown summary tables of degree, nodes, straggler and contention sweeps (``plot``
writes them next to the figures as ``<bench>.md``). Definitions in
:mod:`dssfn_mpi.bench.summary`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..fmt import number, percent
from ..runlog import RunLog
from .presets import WAIT_POLICIES
from .summary import RunSummary, summarize

__all__ = ["contention_markdown", "contention_rows", "straggler_markdown", "sweep_markdown"]


def _ok(runs: Mapping[str, RunLog]) -> dict[str, RunLog]:
    return {k: r for k, r in runs.items() if r.attrs.get("bench_status", "ok") == "ok"}


def sweep_markdown(runs: Mapping[str, RunLog], bench: str) -> str:
    """One row per swept value (degree or node count), per mode: training time [s]
    (``*``: measured at fewer iterations, solver time scaled to the sweep's K) and
    test accuracy [%] (mean over nodes, last layer)."""
    cells: dict[tuple[float, str], RunSummary] = {}
    modes: list[str] = []
    central = None
    for name, run in _ok(runs).items():
        a = run.attrs
        mode = str(a.get("bench_mode", a.get("mode")))
        s = summarize(name, run, int(a.get("bench_target_iters", 0) or 0) or None)
        if mode == "central":
            central = s
            continue
        if mode not in modes:
            modes.append(mode)
        cells[(float(a.get("bench_value", -1)), mode)] = s
    values = sorted({v for v, _ in cells})
    head = "d" if bench == "degree" else "M"
    lines = [
        "| " + head + " | " + " | ".join(f"{m} time [s]" for m in modes) + " | "
        + " | ".join(f"{m} acc [%]" for m in modes) + " |",
        "|---" * (1 + 2 * len(modes)) + "|",
    ]
    for v in values:
        times, accs = [], []
        for m in modes:
            s = cells.get((v, m))
            if s is None:
                times.append("-")
                accs.append("-")
                continue
            scaled = s.iters != int(runs[s.name].attrs.get("bench_target_iters", s.iters))
            times.append(number(s.scaled_seconds, ".2f") + "*" if scaled
                         else number(s.train_seconds, ".2f"))
            accs.append(percent(s.acc_mean) + ("*" if scaled else ""))
        lines.append(f"| {v:g} | " + " | ".join(times) + " | " + " | ".join(accs) + " |")
    if central is not None:
        lines.append("")
        lines.append(f"central (1 process, exact): {number(central.train_seconds, '.2f')} s, "
                     f"{percent(central.acc_mean)} %")
    if any(s.iters != int(runs[s.name].attrs.get("bench_target_iters", s.iters))
           for s in cells.values()):
        lines.append("")
        lines.append("`*`: run with fewer iterations; time = solver time scaled linearly to "
                     "the sweep's K, accuracy as measured at the smaller K.")
    return "\n".join(lines)


def straggler_markdown(runs: Mapping[str, RunLog]) -> str:
    """One row per (case, variant): slowest-rank and median-rank training time, the
    largest total wait of a rank, max relative distance and accuracy at the last layer."""
    lines = [
        "| slowed | factor | variant | slowest rank [s] | median rank [s] | max wait [s] "
        "| max rel. distance | test acc [%] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    order = {"none": 0, "one": 1, "several": 2}
    for name, run in _ok(runs).items():
        a = run.attrs
        s = summarize(name, run)
        rows.append(((order.get(str(a.get("bench_pattern")), 3), float(a.get("bench_factor", 1)),
                      str(a.get("bench_mode"))), a, s))
    for _key, a, s in sorted(rows, key=lambda r: r[0]):
        ranks = a.get("bench_slow_ranks", "") or "-"
        lines.append(
            f"| {a.get('bench_pattern')} ({ranks}) | {float(a.get('bench_factor', 1)):g} "
            f"| {a.get('bench_mode')} | {number(s.train_seconds, '.2f')} "
            f"| {number(s.median_rank_seconds, '.2f')} | {number(s.wait_seconds, '.2f')} "
            f"| {number(s.rel_distance, '.1e')} | {percent(s.acc_mean)} |"
        )
    return "\n".join(lines)


_MODE_ORDER = ("async", "sync", "sync-graph")


def contention_rows(runs: Mapping[str, RunLog]) -> list[dict[str, Any]]:
    """One row per successful contention run, ordered by mode, wait policy and busy count.

    Each row: ``mode``, ``wait`` (policy), ``busy`` (busy processes beside the
    job), ``summary`` (:class:`~dssfn_mpi.bench.summary.RunSummary`) and
    ``slowdown``: its solve time over the solve time of the idle run (busy = 0)
    of the same mode and policy (NaN without one).
    """
    rows = []
    for name, run in _ok(runs).items():
        a = run.attrs
        rows.append({"mode": str(a.get("bench_mode", a.get("mode"))),
                     "wait": str(a.get("bench_wait", "")), "busy": int(a.get("bench_busy", 0)),
                     "summary": summarize(name, run)})
    idle = {(r["mode"], r["wait"]): r["summary"].solve_seconds for r in rows if r["busy"] == 0}
    for r in rows:
        base = idle.get((r["mode"], r["wait"]), math.nan)
        r["slowdown"] = r["summary"].solve_seconds / base if base > 0 else math.nan

    def order(r: dict[str, Any]) -> tuple:
        m, w = r["mode"], r["wait"]
        return (_MODE_ORDER.index(m) if m in _MODE_ORDER else len(_MODE_ORDER), m,
                WAIT_POLICIES.index(w) if w in WAIT_POLICIES else len(WAIT_POLICIES), w,
                r["busy"])

    return sorted(rows, key=order)


def contention_markdown(runs: Mapping[str, RunLog]) -> str:
    """The contention table: per mode, wait policy and busy-process count, the solve
    time, the slowdown against idle, CPU and wait time, accuracy; failed runs listed."""
    lines = [
        "| mode | wait | busy | solve [s] | slowdown [x] | CPU [s per rank] | max wait [s] "
        "| test acc [%] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in contention_rows(runs):
        s = r["summary"]
        cells = [r["mode"], r["wait"] or "-", str(r["busy"]), number(s.solve_seconds, ".2f"),
                 number(r["slowdown"], ".1f"), number(s.cpu_seconds, ".2f"),
                 number(s.wait_seconds, ".2f"), percent(s.acc_mean)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "solve: the slowest rank's solver time, summed over layers (measured wall "
              "time); slowdown: solve / solve of the same mode and policy with no busy process; "
              "CPU: mean over ranks of the CPU time in the layers; max wait: the largest rank's "
              "summed wait time."]
    failed = [f"{k} ({r.attrs.get('bench_error', '')})" for k, r in runs.items()
              if r.attrs.get("bench_status", "ok") != "ok"]
    if failed:
        lines += ["", "failed: " + "; ".join(failed)]
    return "\n".join(lines)
