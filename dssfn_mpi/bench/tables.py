"""Markdown summary tables of degree, nodes and straggler sweeps (``plot`` writes them
next to the figures as ``<bench>.md``). Definitions in :mod:`dssfn_mpi.bench.summary`."""

from __future__ import annotations

from collections.abc import Mapping

from ..fmt import number, percent
from ..runlog import RunLog
from .summary import RunSummary, summarize

__all__ = ["straggler_markdown", "sweep_markdown"]


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
