"""The Table 2 comparison: our central / sync / async results next to the paper's.

Reads a table2 sweep file only. For every dataset, setting and mode it
reports the test accuracy at the last layer as mean ± std over seeds of the
node-mean accuracy, the min / max over nodes (over all seeds), the
training time (mean over seeds; definition in :mod:`dssfn_mpi.bench.summary`) and
the largest relative distance to the exact layer solution at the last layer.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

import numpy as np

from ..fmt import MISSING, number
from ..runlog import RunLog
from .summary import summarize

__all__ = ["PAPER_TABLE2", "PAPER_SOURCE", "table2_rows", "table2_markdown"]

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


def table2_rows(runs: Mapping[str, RunLog]) -> list[dict]:
    """Aggregate a table2 sweep into one row per (dataset, setting, mode).

    Parameters
    ----------
    runs : mapping of str to RunLog
        The sweep (``read_sweep``); runs without ``bench = "table2"`` are ignored.

    Returns
    -------
    list of dict
        Keys ``dataset``, ``setting``, ``mode``, ``seeds`` (successful runs),
        ``failed`` (failed runs), ``acc_mean``, ``acc_std`` (over seeds, of the
        node-mean), ``acc_min``, ``acc_max`` (over nodes and seeds),
        ``seconds`` (mean training time), ``rel_distance`` (largest, last layer),
        ``layers`` (L of the runs).
    """
    groups: dict[tuple[str, str, str], list] = defaultdict(list)
    for name, run in runs.items():
        a = run.attrs
        if a.get("bench") != "table2":
            continue
        key = (str(a.get("bench_dataset", a.get("dataset", ""))),
               str(a.get("bench_setting", "exact")), str(a.get("bench_mode", a.get("mode", ""))))
        groups[key].append(summarize(name, run))
    rows = []
    for (ds, setting, mode), sums in groups.items():
        good = [s for s in sums if s.ok]
        accs = np.array([s.acc_mean for s in good])
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
            "seconds": float(np.mean([s.train_seconds for s in good])) if good else math.nan,
            "rel_distance": max((s.rel_distance for s in good), default=math.nan),
        })
    return rows


def _acc(row: dict | None) -> str:
    if row is None or not row["seeds"]:
        return "failed" if row is not None and row["failed"] else "-"
    txt = f"{100 * row['acc_mean']:.1f}±{100 * row['acc_std']:.1f}"
    if row["mode"] != "central":
        txt += f" [{100 * row['acc_min']:.1f}, {100 * row['acc_max']:.1f}]"
    return txt


def _secs(row: dict | None) -> str:
    return "-" if row is None or not row["seeds"] else f"{row['seconds']:.1f}"


def _rel(row: dict | None) -> str:
    return MISSING if row is None or not row["seeds"] else number(row["rel_distance"], ".1e")


def table2_markdown(runs: Mapping[str, RunLog]) -> str:
    """The comparison table in Markdown, the paper's numbers on the line below ours.

    Columns: central accuracy; sync accuracy [min, max over nodes], time and
    rel. distance; async likewise. Accuracies are mean ± std over seeds in %.
    """
    rows = table2_rows(runs)
    if not rows:
        return "(no table2 runs in this file)"
    by = {(r["dataset"], r["setting"], r["mode"]): r for r in rows}
    dist = [r for r in runs.values() if r.attrs.get("mode") != "central"]
    info = (dist or list(runs.values()))[0].attrs  # M and d of the decentralized runs
    lines = [
        f"M = {info.get('nodes', '?')}, d = {info.get('degree', '?')}, "
        f"K = {info.get('iters', '?')} (per node per layer), test accuracy at the last layer "
        f"in %: mean ± std over seeds of the node-mean [min, max over nodes]; time = "
        f"training time in s (slowest rank, layers only); rel = max_m ||O_m − O*|| / ||O*|| "
        f"at the last layer.",
        "",
        "| dataset | setting | L | seeds | central acc | sync acc | sync time | sync rel "
        "| async acc | async time | async rel |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    paper_order = list(PAPER_TABLE2)
    datasets = sorted({r["dataset"] for r in rows},
                      key=lambda d: (paper_order.index(d) if d in paper_order else 99, d))
    for ds in datasets:
        layers = next((run.attrs.get("layers") for run in runs.values()
                       if run.attrs.get("bench_dataset") == ds), "?")
        for setting in ("exact", "paper"):
            sync, asyn = by.get((ds, setting, "sync")), by.get((ds, setting, "async"))
            if sync is None and asyn is None:
                continue
            # Each setting's own central model (the paper setting's is the authors'
            # ADMM); files from before it was run per setting have only the exact one.
            central = by.get((ds, setting, "central")) or by.get((ds, "exact", "central"))
            seeds = max((r["seeds"] for r in (central, sync, asyn) if r), default=0)
            lines.append(
                f"| {ds} | {setting} | {layers} | {seeds} | {_acc(central)} | {_acc(sync)} "
                f"| {_secs(sync)} | {_rel(sync)} | {_acc(asyn)} | {_secs(asyn)} | {_rel(asyn)} |"
            )
        if ds in PAPER_TABLE2:
            c, s, st, a, at = PAPER_TABLE2[ds]
            lines.append(
                f"| {ds} | **paper** | 20 | - | {c[0]:.1f}±{c[1]:.1f} | {s[0]:.1f}±{s[1]:.1f} "
                f"| {st:.1f} | - | {a[0]:.1f}±{a[1]:.1f} | {at:.1f} | - |"
            )
    lines += ["", f"Paper rows: {PAPER_SOURCE}."]
    return "\n".join(lines)
