"""The Table 2 comparison: our central / sync / async results next to the paper's.

Reads a table2 sweep file only. For every dataset, setting and mode it
reports the test accuracy at the last layer as mean ± std over seeds of the
node-mean accuracy, the min / max over nodes (over all seeds), the largest
relative distance to the exact layer solution at the last layer, and the
times (means over seeds; definitions in :mod:`dssfn_mpi.bench.summaries.summary`):
measured training time, projected dedicated-core time, projected time to eps,
and the async speed-ups (projected sync-graph / async and sync / async) next
to the paper's sync / async ratio.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...fmt import MISSING, number
from ...runlog import RunLog
from ..variants import decentralized
from .projection import DEFAULT_EPS, DEFAULT_NETWORK
from .summary import summarize

__all__ = ["COLUMNS", "PAPER_TABLE2", "PAPER_SOURCE", "TIMED", "paper_accuracy", "paper_ratio",
           "table2_rows", "table2_markdown"]

PAPER_SOURCE = (
    "Liang, Javid, Skoglund, Chatterjee, \"Asynchronous Decentralized Learning of a Neural "
    "Network\", ICASSP 2020, Table 2 (M = 20, d = 8, K = 200; test accuracy in %, "
    "training time in s)"
)

#: Table 2 of the paper: dataset -> (central acc, sync acc, sync time, async acc, async time);
#: accuracies as (mean, std) in percent, times in seconds.
PAPER_TABLE2: dict[str, tuple[tuple[float, float], tuple[float, float], float,
                              tuple[float, float], float]] = {
    "vowel": ((61.9, 1.7), (61.3, 1.6), 34.9, (61.2, 1.7), 7.8),
    "satimage": ((88.7, 0.5), (89.2, 0.4), 16.3, (89.9, 0.2), 4.2),
    "caltech101": ((74.6, 0.7), (74.2, 0.6), 427.5, (75.4, 0.9), 27.4),
    "letter": ((95.7, 0.2), (93.1, 0.4), 43.6, (95.8, 0.5), 9.9),
    "norb": ((86.2, 1.1), (83.6, 0.9), 21.7, (86.0, 0.5), 11.9),
    "mnist": ((95.8, 0.2), (94.9, 0.2), 43.5, (95.0, 0.3), 11.7),
}


#: The modes of the comparison in its columns' order: the central reference, then the
#: decentralized ones (``TIMED``), whose times it compares.
COLUMNS = ("central", "sync", "sync-graph", "async")
TIMED = COLUMNS[1:]
#: Our mode of each accuracy column of the paper's Table 2 (its synchronous dSSFN is
#: consensus over the graph, our sync-graph).
_PAPER_COLUMNS = {"central": 0, "sync-graph": 1, "async": 3}


def paper_accuracy(dataset: str, mode: str) -> float | None:
    """The paper's Table 2 test accuracy [%] of our ``mode`` on ``dataset``; None where the
    paper has none."""
    column = _PAPER_COLUMNS.get(mode)
    if dataset not in PAPER_TABLE2 or column is None:
        return None
    return PAPER_TABLE2[dataset][column][0]


def paper_ratio(dataset: str) -> float:
    """The paper's sync / async training-time ratio of ``dataset`` (NaN if not in Table 2).

    The paper's "synchronous dSSFN" is consensus over the graph, our sync-graph.
    """
    if dataset not in PAPER_TABLE2:
        return math.nan
    _c, _s, sync_t, _a, async_t = PAPER_TABLE2[dataset]
    return sync_t / async_t


def _mean(values: list[float]) -> float:
    vals = [v for v in values if math.isfinite(v)]
    return float(np.mean(vals)) if vals else math.nan


def table2_rows(runs: Mapping[str, RunLog], network: str = DEFAULT_NETWORK,
                eps: float = DEFAULT_EPS) -> list[dict]:
    """Aggregate a table2 sweep into one row per (dataset, setting, mode).

    Parameters
    ----------
    runs : mapping of str to RunLog
        The sweep (``read_sweep``); runs without ``bench = "table2"`` are ignored.
    network : str
        Network of the projected times.
    eps : float
        Target of the time to eps.

    Returns
    -------
    list of dict
        Keys ``dataset``, ``setting``, ``mode``, ``seeds`` (successful runs),
        ``failed`` (failed runs), ``acc_mean``, ``acc_std`` (over seeds, of the
        node-mean), ``acc_min``, ``acc_max`` (over nodes and seeds),
        ``seconds`` (mean measured training time), ``projected`` (mean
        projected dedicated-core time under ``network``), ``time_to_eps``
        (mean over the seeds that reached eps), ``rel_distance`` (largest,
        last layer), ``iters`` (K of the runs) and ``shortened`` (run at
        fewer iterations than the sweep's K: both times scaled to it, time to
        eps and accuracy as measured).
    """
    groups: dict[tuple[str, str, str], list] = defaultdict(list)
    for name, run in runs.items():
        a = run.attrs
        if a.get("bench") != "table2" or a.get("simulated"):
            continue
        key = (str(a.get("bench_dataset", a.get("dataset", ""))),
               str(a.get("bench_setting", "exact")), str(a.get("bench_mode", a.get("mode", ""))))
        target = int(a.get("bench_target_iters", 0) or 0) or None
        groups[key].append(summarize(name, run, target, network=network, eps=eps))
    rows = []
    for (ds, setting, mode), sums in groups.items():
        good = [s for s in sums if s.ok]
        accs = np.array([s.acc_mean for s in good])
        target = int(runs[sums[0].name].attrs.get("bench_target_iters", 0) or 0)
        short = bool(good) and target > 0 and good[0].iters != target
        rows.append({
            "dataset": ds,
            "setting": setting,
            "mode": mode,
            "seeds": len(good),
            "failed": len(sums) - len(good),
            "acc_mean": float(accs.mean()) if accs.size else math.nan,
            "acc_std": float(accs.std()) if accs.size else math.nan,
            "acc_min": min((s.acc_min for s in good), default=math.nan),
            "acc_max": max((s.acc_max for s in good), default=math.nan),
            "seconds": _mean([s.scaled_seconds if short else s.train_seconds for s in good]),
            "projected": _mean([s.projected_scaled_seconds if short else s.projected_seconds
                                for s in good]),
            "time_to_eps": _mean([s.time_to_eps for s in good]),
            "rel_distance": max((s.rel_distance for s in good), default=math.nan),
            "iters": good[0].iters if good else -1,
            "shortened": short,
        })
    return rows


def _acc(row: dict | None) -> str:
    if row is None or not row["seeds"]:
        return "failed" if row is not None and row["failed"] else "-"
    txt = f"{100 * row['acc_mean']:.1f}"
    if row["seeds"] > 1:  # a spread over one seed would say nothing
        txt += f"±{100 * row['acc_std']:.1f}"
    if decentralized(row["mode"]):
        txt += f" [{100 * row['acc_min']:.1f}, {100 * row['acc_max']:.1f}]"
    return txt + _star(row)


def _star(row: dict | None) -> str:
    return "*" if row is not None and row.get("shortened") else ""


def _val(row: dict | None, key: str, spec: str) -> str:
    if row is None or not row["seeds"]:
        return MISSING
    return number(row.get(key, math.nan), spec) + _star(row)


def _ratio(num: dict | None, den: dict | None, key: str = "projected") -> str:
    if not (num and den and num["seeds"] and den["seeds"]):
        return MISSING
    return number(num.get(key, math.nan) / den.get(key, math.nan), ".2f") + _star(num)


def _datasets(rows: list[dict]) -> list[str]:
    paper_order = list(PAPER_TABLE2)
    return sorted({r["dataset"] for r in rows},
                  key=lambda d: (paper_order.index(d) if d in paper_order else 99, d))


def _accuracy_lines(layers_of: dict[str, Any], by: dict, datasets: list[str]) -> list[str]:
    lines = [
        "| dataset | setting | L | seeds | central acc | sync acc | sync-graph acc | async acc "
        "| sync rel | sync-graph rel | async rel |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for ds in datasets:
        layers = layers_of.get(ds, "?")
        for setting in ("exact", "paper"):
            got = [by.get((ds, setting, m)) for m in TIMED]
            if not any(got):
                continue
            # Each setting's own central model (the paper setting's is the authors'
            # ADMM); files from before it was run per setting have only the exact one.
            central = by.get((ds, setting, "central")) or by.get((ds, "exact", "central"))
            seeds = max((r["seeds"] for r in (central, *got) if r), default=0)
            lines.append(
                f"| {ds} | {setting} | {layers} | {seeds} | {_acc(central)} | "
                + " | ".join(_acc(r) for r in got) + " | "
                + " | ".join(_val(r, "rel_distance", ".1e") for r in got) + " |")
        if ds in PAPER_TABLE2:
            c, s, _st, a, _at = PAPER_TABLE2[ds]
            lines.append(f"| {ds} | **paper** | 20 | - | {c[0]:.1f}±{c[1]:.1f} | - "
                         f"| {s[0]:.1f}±{s[1]:.1f} | {a[0]:.1f}±{a[1]:.1f} | - | - | - |")
    return lines


def _time_lines(by: dict, datasets: list[str]) -> list[str]:
    lines = [
        "| dataset | setting | seeds | sync [s] | sync-graph [s] | async [s] "
        "| sync proj. [s] | sync-graph proj. [s] | async proj. [s] | sync to eps [s] "
        "| sync-graph to eps [s] | async to eps [s] | sync-graph / async proj. "
        "| sync / async proj. | paper sync / async |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for ds in datasets:
        paper = number(paper_ratio(ds), ".1f")
        for setting in ("exact", "paper"):
            sync, graph, asyn = (by.get((ds, setting, m)) for m in TIMED)
            if not any((sync, graph, asyn)):
                continue
            seeds = max((r["seeds"] for r in (sync, graph, asyn) if r), default=0)
            lines.append(
                f"| {ds} | {setting} | {seeds} | "
                + " | ".join(_val(r, k, f) for k, f in (("seconds", ".1f"), ("projected", ".3f"),
                                                        ("time_to_eps", ".3f"))
                             for r in (sync, graph, asyn))
                + f" | {_ratio(graph, asyn)} | {_ratio(sync, asyn)} | {paper} |")
        if ds in PAPER_TABLE2:
            _c, _s, st, _a, at = PAPER_TABLE2[ds]
            lines.append(f"| {ds} | **paper** | - | - | {st:.1f} | {at:.1f} | - | - | - | - | - "
                         f"| - | {paper} | - | {paper} |")
    return lines


def table2_markdown(summary: Mapping[str, Any], part: str | None = None) -> str:
    """The comparison of a table2 summary (:mod:`dssfn_mpi.bench.summaries.records`) in Markdown: an
    accuracy table and a time table, the paper's numbers on the line below ours.

    Accuracy: central, sync, sync-graph and async test accuracy (mean ± std
    over seeds [min, max over nodes]) and relative distance to O*. Time:
    measured training time, projected dedicated-core time under ``network``,
    projected time to ``eps``, the projected sync-graph / async and sync /
    async ratios and the paper's sync / async ratio (its synchronous dSSFN is
    consensus over the graph, our sync-graph). ``part`` ``"accuracy"`` or
    ``"times"`` gives that table alone (the results page's views).
    """
    network, eps, info = summary["network"], summary["eps"], summary["info"]
    rows = [r for r in summary["tables"].get("table2", []) if r["mode"] in COLUMNS]
    if not rows:
        return "(no table2 runs in this file)"
    by = {(r["dataset"], r["setting"], r["mode"]): r for r in rows}
    layers_of = {str(r.get("dataset")): r["layers"] for r in summary["records"]
                 if r["kind"] == "live"}
    datasets = _datasets(rows)
    accuracy = [
        f"M = {info.get('nodes', '?')}, d = {info.get('degree', '?')}, "
        f"K = {info.get('bench_target_iters', info.get('iters', '?'))} (per node per layer), "
        f"test accuracy at the last layer in %: mean (± std when more than one) over seeds "
        f"of the node-mean [min, max over nodes]; rel = max_m ||O_m − O*|| / ||O*|| at the "
        f"last layer. The paper's synchronous dSSFN is consensus over the graph: its row is "
        f"under sync-graph.",
        "",
        *_accuracy_lines(layers_of, by, datasets),
    ]
    times = [
        f"Time in s: measured = training time (slowest rank, layers only) as run on this "
        f"machine, ranks sharing its cores; proj. = the same run replayed with one core per "
        f"rank, network {network} (dssfn-mpi replay); to eps = projected time until every "
        f"rank's last layer is within {eps:g} of O*; ratios of projected times; mean over "
        f"seeds.",
        "",
        *_time_lines(by, datasets),
    ]
    lines = {None: [*accuracy, "", *times], "accuracy": accuracy, "times": times}[part]
    if any(r.get("shortened") for r in rows):
        lines += ["", "`*`: run at fewer iterations than K; measured and projected times with "
                  "the solver part scaled linearly to K, time to eps, accuracy and rel as "
                  "measured at the smaller K."]
    lines += ["", f"Paper rows: {PAPER_SOURCE}."]
    return "\n".join(lines)
