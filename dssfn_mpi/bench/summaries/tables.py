"""Markdown summary tables of degree, nodes, straggler and contention sweeps (``plot``
writes them next to the figures as ``<bench>.md``). Definitions in
:mod:`dssfn_mpi.bench.summaries.summary`."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from ...fmt import number, percent
from ...mailbox.waiting import POLICIES
from ...runlog import RunLog
from ..variants import decentralized, order
from .projection import DEFAULT_EPS, DEFAULT_NETWORK, project_run, run_time_to_eps
from .summary import RunSummary, summarize

__all__ = ["contention_markdown", "contention_rows", "slowdown_markdown", "straggler_markdown",
           "straggler_rows", "sweep_markdown"]


#: The note under a table with a ``failed`` cell.
FAILED_NOTE = ("failed: the run did not finish (killed, timed out or crashed; the summary's "
               "record of it keeps the error), so it has no time.")


def _ok(runs: Mapping[str, RunLog]) -> dict[str, RunLog]:
    return {k: r for k, r in runs.items() if r.attrs.get("bench_status", "ok") == "ok"}


def _shortened(rec: Mapping[str, Any]) -> bool:
    """Whether a record's run was made at fewer iterations than its sweep's K
    (sync_graph_iters)."""
    return int(rec["iters"]) != int(rec.get("target_iters", rec["iters"]))


def sweep_markdown(summary: Mapping[str, Any]) -> str:
    """One row per swept value (degree or node count), per mode: measured training time
    [s], projected dedicated-core time [s] under the summary's network, projected time to
    its eps [s] and test accuracy [%] (mean over nodes, last layer), from a sweep summary
    (:mod:`dssfn_mpi.bench.summaries.records`). ``*``: measured at fewer iterations; both times are
    then scaled to the sweep's K (solver part only), the time to eps and the accuracy are
    not."""
    network, eps, bench = summary["network"], summary["eps"], summary["bench"]
    cells: dict[tuple[float, str], Mapping[str, Any]] = {}
    modes: list[str] = []
    central = None
    failed = {(r["value"], r["mode"]) for r in summary["records"]
              if r["status"] != "ok" and r["kind"] == "live"}
    for rec in summary["records"]:
        if rec["status"] != "ok" or rec["kind"] != "live":
            continue
        if not decentralized(rec["mode"]):
            central = rec
            continue
        if rec["mode"] not in modes:
            modes.append(rec["mode"])
        cells[(rec["value"], rec["mode"])] = rec
    modes += [m for _, m in sorted(failed) if m not in modes and decentralized(m)]
    values = sorted({v for v, _ in cells} | {v for v, m in failed if m in modes})
    head = "d" if bench == "degree" else "M"
    kinds = ("measured [s]", f"projected {network} [s]", f"to eps {eps:g} [s]", "acc [%]")
    lines = [
        "| " + head + " | " + " | ".join(f"{m} {k}" for k in kinds for m in modes) + " |",
        "|---" * (1 + len(kinds) * len(modes)) + "|",
    ]
    for v in values:
        cols: list[list[str]] = [[], [], [], []]
        for m in modes:
            s = cells.get((v, m))
            if s is None:
                for c in cols:
                    c.append("failed" if (v, m) in failed else "-")
                continue
            star = "*" if _shortened(s) else ""
            cols[0].append(number(s["scaled_seconds" if star else "train_seconds"], ".2f")
                           + star)
            cols[1].append(number(s["projected_scaled_seconds" if star else
                                    "projected_seconds"], ".3f") + star)
            cols[2].append(number(s["time_to_eps"], ".3f") + star)
            cols[3].append(percent(s["acc_mean"]) + star)
        lines.append(f"| {v:g} | " + " | ".join(" | ".join(c) for c in cols) + " |")
    lines += ["", f"measured = training time, slowest rank, as run on this machine (ranks "
              f"share its cores); projected = the same run replayed with one core per rank "
              f"and network {network} (dssfn-mpi replay); to eps = projected time until every "
              f"rank's last layer is within {eps:g} of O* (- = never within K, or no check). "
              f"Fixed K per layer, the paper's protocol."]
    if central is not None:
        lines.append("")
        lines.append(f"central (1 process, exact): {number(central['train_seconds'], '.2f')} "
                     f"s, {percent(central['acc_mean'])} %")
    if failed - set(cells):
        lines += ["", FAILED_NOTE]
    if any(_shortened(s) for s in cells.values()):
        lines.append("")
        lines.append("`*`: run with fewer iterations; measured and projected time = solver "
                     "time scaled linearly to the sweep's K; time to eps and accuracy as "
                     "measured at the smaller K.")
    return "\n".join(lines)


def _slow_of(a: Mapping) -> dict[int, float]:
    """The ``{rank: factor}`` of a straggler run, from its ``bench_*`` labels."""
    ranks = [int(r) for r in str(a.get("bench_slow_ranks", "") or "").split(",") if r]
    return {r: float(a.get("bench_factor", 1.0)) for r in ranks}


def straggler_rows(runs: Mapping[str, RunLog], network: str = DEFAULT_NETWORK,
                   eps: float = DEFAULT_EPS) -> list[dict]:
    """One row per (case, variant) of a straggler sweep, live and projected.

    Every case (pattern and factor) is paired with every variant that has an
    unslowed run, also when the variant was not run live with that straggler
    (sync-graph: its engine has no ``--slow``): the projection slows the
    unslowed run's trace in replay (``slow={rank: factor}``).

    Returns
    -------
    list of dict
        Keys ``pattern``, ``factor``, ``ranks`` (str), ``mode``, ``live``
        (RunSummary of the live run or None), ``projected`` and
        ``time_to_eps`` (from the unslowed run with the straggler applied in
        replay; NaN without a trace), ``projected_live`` (the live run's own
        projection, its ``--slow`` applied by replay: a check of the former),
        sorted by pattern, factor, variant.
    """
    order = {"none": 0, "one": 1, "several": 2}
    live: dict[tuple[str, float, str], tuple[dict, RunSummary]] = {}
    base: dict[str, RunLog] = {}
    for name, run in _ok(runs).items():
        a = run.attrs
        key = (str(a.get("bench_pattern", "none")), float(a.get("bench_factor", 1.0)),
               str(a.get("bench_mode", a.get("mode"))))
        live[key] = (a, summarize(name, run, network=network, eps=eps))
        if key[0] == "none":
            base[key[2]] = run
    cases = {(p, f): _slow_of(a) for (p, f, _m), (a, _s) in live.items()}
    modes = list(dict.fromkeys([m for *_c, m in live] + list(base)))
    rows = []
    for (pattern, factor), slow in cases.items():
        for mode in modes:
            got, unslowed = live.get((pattern, factor, mode)), base.get(mode)
            if got is None and unslowed is None:
                continue
            proj = (project_run(unslowed, network, slow=slow or None, eps=eps)
                    if unslowed is not None else None)
            rows.append({
                "pattern": pattern, "factor": factor,
                "ranks": ",".join(map(str, sorted(slow))), "mode": mode,
                "live": got[1] if got else None,
                "projected_live": got[1].projected_seconds if got else math.nan,
                "projected": float(proj.total_seconds) if proj is not None else math.nan,
                "time_to_eps": run_time_to_eps(proj),
            })
    rows.sort(key=lambda r: (order.get(r["pattern"], 3), r["factor"], modes.index(r["mode"])))
    return rows


def straggler_markdown(summary: Mapping[str, Any]) -> str:
    """One row per (case, variant) of a straggler summary's ``straggler`` table: the live
    run's slowest-rank and median-rank training time, largest total wait of a rank, max
    relative distance and accuracy at the last layer; next to them the projection of the
    same case from the unslowed run (straggler applied in replay) and its time to eps."""
    network, eps = summary["network"], summary["eps"]
    lines = [
        "| slowed | factor | variant | slowest rank [s] | median rank [s] | max wait [s] "
        f"| max rel. distance | test acc [%] | projected {network} [s] "
        f"| to eps {eps:g} [s] | projected, live run [s] |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["tables"].get("straggler", []):
        s = r["live"]
        live = (["-"] * 5 if s is None else [
            number(s["train_seconds"], ".2f"), number(s["median_rank_seconds"], ".2f"),
            number(s["wait_seconds"], ".2f"), number(s["rel_distance"], ".1e"),
            percent(s["acc_mean"])])
        lines.append(f"| {r['pattern']} ({r['ranks'] or '-'}) | {r['factor']:g} | {r['mode']} | "
                     + " | ".join(live) + f" | {number(r['projected'], '.3f')} "
                     f"| {number(r['time_to_eps'], '.3f')} "
                     f"| {number(r['projected_live'], '.3f')} |")
    lines += ["", "Left: the live runs (`--slow`, all ranks sharing this machine's cores). "
              f"Projected: the variant's unslowed run replayed with one core per rank, network "
              f"{network}, and the slowed ranks' compute multiplied by the factor (replay "
              "--slow); `-` on the left: no live run (sync-graph has no --slow). Projected, "
              "live run: the live run's own trace replayed likewise (its --slow re-applied by "
              "replay, since a sleep is not CPU time): it should match the column before."]
    stops = {str(r["stop"]) for r in summary["records"] if r["status"] == "ok"}
    if stops - {"iters"}:
        lines += ["", f"Runs to accuracy (`--stop {', '.join(sorted(stops))}`): replay moves "
                  "activations in time and adds none, so the projection from the unslowed run "
                  "keeps its activation counts; the live run's own projection (last column) is "
                  "the one in which the fast ranks go on while the slow one lags."]
    return "\n".join(lines)


def contention_rows(runs: Mapping[str, RunLog]) -> list[dict[str, Any]]:
    """One row per configuration of a contention sweep (its successful runs' medians),
    ordered by mode, wait policy and busy count.

    Each row: ``mode``, ``wait`` (policy), ``busy`` (busy processes beside the
    job), ``names`` (its runs), and over them the medians ``solve``, ``cpu``,
    ``wait_seconds`` and ``acc`` (see
    :class:`~dssfn_mpi.bench.summaries.summary.RunSummary`); ``slowdown``: the median
    solve time over the median solve time with no busy process (busy = 0) of
    the same mode and policy (NaN without one).
    """
    groups: dict[tuple[str, str, int], list[RunSummary]] = {}
    for name, run in _ok(runs).items():
        a = run.attrs
        key = (str(a.get("bench_mode", a.get("mode"))), str(a.get("bench_wait", "")),
               int(a.get("bench_busy", 0)))
        groups.setdefault(key, []).append(summarize(name, run))
    rows = [{"mode": m, "wait": w, "busy": b, "names": [s.name for s in got],
             "solve": statistics.median(s.solve_seconds for s in got),
             "cpu": statistics.median(s.cpu_seconds for s in got),
             "wait_seconds": statistics.median(s.wait_seconds for s in got),
             "acc": statistics.median(s.acc_mean for s in got)}
            for (m, w, b), got in groups.items()]
    idle = {(r["mode"], r["wait"]): r["solve"] for r in rows if r["busy"] == 0}
    for r in rows:
        base = idle.get((r["mode"], r["wait"]), math.nan)
        r["slowdown"] = r["solve"] / base if base > 0 else math.nan

    def key(r: dict[str, Any]) -> tuple:
        w = r["wait"]
        return (*order(r["mode"]), POLICIES.index(w) if w in POLICIES else len(POLICIES), w,
                r["busy"])

    return sorted(rows, key=key)


def contention_markdown(summary: Mapping[str, Any]) -> str:
    """The contention table of a contention summary: per mode, wait policy and
    busy-process count, the medians of the solve time, the slowdown against idle, CPU and
    wait time, accuracy; failed runs listed."""
    lines = [
        "| mode | wait | busy | runs | solve [s] | slowdown [x] | CPU [s per rank] "
        "| max wait [s] | test acc [%] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["tables"].get("contention", []):
        cells = [r["mode"], r["wait"] or "-", str(r["busy"]), str(len(r["names"])),
                 number(r["solve"], ".2f"), number(r["slowdown"], ".1f"),
                 number(r["cpu"], ".2f"), number(r["wait_seconds"], ".2f"), percent(r["acc"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Medians over the configuration's runs. solve: the slowest rank's solver time, "
              "summed over layers (measured wall time); slowdown: median solve / median solve "
              "of the same mode and policy with no busy process; CPU: mean over ranks of the "
              "CPU time in the layers; max wait: the largest rank's summed wait time."]
    failed = [f"{r['name']} ({r.get('error', '')})" for r in summary["records"]
              if r["status"] != "ok"]
    if failed:
        lines += ["", "failed: " + "; ".join(failed)]
    return "\n".join(lines)


def slowdown_markdown(summary: Mapping[str, Any]) -> str:
    """The contention table in short: per mode and wait policy, the median solve time idle
    and beside each number of busy processes, with its slowdown against idle."""
    rows = summary["tables"].get("contention", [])
    busy = sorted({r["busy"] for r in rows})
    cells: dict[tuple, dict[int, str]] = {}
    for r in rows:
        text = number(r["solve"], ".2f")
        if r["busy"] and math.isfinite(r["slowdown"]):
            text += f" ({number(r['slowdown'], '.1f')}x)"
        cells.setdefault((r["mode"], r["wait"] or "-"), {})[r["busy"]] = text
    head = " | ".join("idle [s]" if b == 0 else f"{b} busy [s]" for b in busy)
    lines = [f"| mode | wait | {head} |", "|---|---|" + "---|" * len(busy)]
    lines += [f"| {m} | {w} | " + " | ".join(c.get(b, "-") for b in busy) + " |"
              for (m, w), c in cells.items()]
    lines += ["", "Medians over each configuration's runs of the solve time: the slowest "
              "rank's solver time summed over layers (measured wall time); in brackets the "
              "slowdown against the same mode and policy with no busy process."]
    return "\n".join(lines)
