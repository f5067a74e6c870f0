"""The time figures of the sweeps: measured wall next to projected dedicated-core time.

Every panel says which number it shows: *measured wall* (the run as it ran
here, ranks sharing the machine's cores) or *projected* (its trace replayed
with one core per rank under a named network, :mod:`dssfn_mpi.bench.summaries.projection`),
and the *time to eps* (projected, until the last layer is within eps of O*).
Runs without a trace leave the projected panels empty, with a note.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..summaries.jitter import REFERENCE
from ..variants import decentralized
from .figstyle import describe_info, plt, save, style
from .ttefigs import mode_order

__all__ = ["jitter_figure", "straggler_figure", "sweep_time_figure", "table2_time_figure"]


def _cores_note(info: Mapping[str, Any]) -> str:
    return ("all ranks on one host, sharing its cores (oversubscribed when ranks > cores)"
            if info.get("hosts", 1) <= 1 else
            f"ranks on {info['hosts']} hosts, sharing their cores")


def _empty(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}:\nthe runs carry no activation trace", ha="center",
            va="center", transform=ax.transAxes, fontsize=8)


def _series(summary: Mapping[str, Any]):
    """The live decentralized records per mode, sorted by the swept value, and central's."""
    series: dict[str, list[dict]] = defaultdict(list)
    central = None
    for rec in summary["records"]:
        if rec["status"] != "ok" or rec["kind"] != "live" or not rec["layer_seconds"]:
            continue
        if not decentralized(rec["mode"]):
            central = rec
            continue
        series[rec["mode"]].append(rec)
    for pts in series.values():
        pts.sort(key=lambda r: r["value"])
    return series, central


def _sweep_panels(series: dict, axes, network: str) -> dict:
    """Draw every mode's measured, projected, time-to-eps and accuracy series."""
    ax_m, ax_p, ax_e, ax_a = axes
    drawn = {ax_p: False, ax_e: False}
    for mode in mode_order(series):
        pts = series[mode]
        x = [r["value"] for r in pts]
        k_run = pts[0]["iters"]
        short = any(r["iters"] != r["target_iters"] for r in pts)
        ls = "--" if short else "-"
        scaled = f" (run at K={k_run}, solver time scaled)" if short else ""
        ax_m.plot(x, [r["scaled_seconds" if short else "train_seconds"] for r in pts],
                  linestyle=ls, **style(mode), label=mode + scaled)
        proj = np.array([r["projected_scaled_seconds" if short else "projected_seconds"]
                         for r in pts], dtype=float)
        tte = np.array([r["time_to_eps"] for r in pts], dtype=float)
        for ax, y, note in ((ax_p, proj, scaled), (ax_e, tte, f" (K={k_run})" if short else "")):
            if np.isfinite(y).any():
                ax.plot(x, y, linestyle=ls, **style(mode), label=mode + note)
                drawn[ax] = True
        missed = np.isfinite(proj) & ~np.isfinite(tte)
        if missed.any():  # marked, not dropped: at the projected time, hollow
            ax_e.plot(np.asarray(x)[missed], proj[missed], linestyle="none",
                      marker=style(mode)["marker"], markerfacecolor="none",
                      markeredgecolor=style(mode)["color"], gid="unreached",
                      label=f"{mode}: not within eps in K={k_run} (at its projected time)")
            drawn[ax_e] = True
        acc = np.array([r["acc_mean"] for r in pts], dtype=float) * 100
        lo = np.clip(acc - np.array([r["acc_min"] for r in pts], dtype=float) * 100, 0, None)
        hi = np.clip(np.array([r["acc_max"] for r in pts], dtype=float) * 100 - acc, 0, None)
        ax_a.errorbar(x, acc, yerr=[lo, hi], capsize=3, **style(mode),
                      label=mode + (f" (K={k_run})" if short else ""))
    return drawn


def sweep_time_figure(summary: Mapping[str, Any], outdir: Path) -> list[Path]:
    """``<bench>_time``: measured wall, projected time, time to eps and accuracy against
    the degree (paper fig. 2) or the node count (fig. 3) at a fixed K per layer (the
    paper's protocol), one panel each, from a sweep summary."""
    series, central = _series(summary)
    if not series:
        return []
    bench, network, eps, info = (summary["bench"], summary["network"], summary["eps"],
                                 summary["info"])
    xlabel = "node degree d" if bench == "degree" else "number of nodes M (ranks)"
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    (ax_m, ax_p), (ax_e, ax_a) = axes
    drawn = _sweep_panels(series, (ax_m, ax_p, ax_e, ax_a), network)
    if central is not None:
        ax_m.axhline(central["train_seconds"], color="black", linestyle=":",
                     label="central (1 process, exact)")
        ax_a.axhline(central["acc_mean"] * 100, color="black", linestyle=":", label="central")
    ax_p.set_title(f"projected (main): dedicated cores (one per rank), network {network}",
                   fontsize=9)
    ax_m.set_title(f"measured wall, slowest rank (secondary)\n({_cores_note(info)})",
                   fontsize=9)
    ax_e.set_title(f"projected time to eps = {eps:g} (every rank's last layer within eps "
                   f"of O*),\ndedicated cores, network {network}", fontsize=9)
    ax_a.set_title("test accuracy, last layer (mean over nodes, bars: min-max)", fontsize=9)
    for ax, what in ((ax_p, "projection"), (ax_e, "time to eps")):
        if not drawn[ax]:
            _empty(ax, what)
    xs = sorted({r["value"] for pts in series.values() for r in pts})
    for ax in (ax_m, ax_p, ax_e, ax_a):
        ax.set_xticks(xs, [f"{v:g}" for v in xs])
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3, which="both")
        if ax is ax_a or ax is ax_m or drawn.get(ax):
            ax.legend(fontsize=7)
    for ax, what in ((ax_m, "measured training time"), (ax_p, "projected training time"),
                     (ax_e, "projected time to eps")):
        ax.set_ylabel(f"{what} [s] (log)")
        if ax is ax_m or drawn[ax]:
            ax.set_yscale("log")  # sync-graph is orders of magnitude above at low degree
    ax_a.set_ylabel("test accuracy [%]")
    where = (f"M = {info.get('nodes')}, circular graph" if bench == "degree"
             else "ring (d = 2; d = 1 for M = 2)")
    fig.suptitle(f"{'Time vs degree' if bench == 'degree' else 'Time vs nodes'}, the paper's "
                 f"protocol (fixed K per layer): {where}; {describe_info(info)}", fontsize=10)
    fig.tight_layout()
    return save(fig, outdir, f"{bench}_time")


def straggler_figure(summary: Mapping[str, Any], outdir: Path) -> list[Path]:
    """``straggler``: the live ``--slow`` runs (slowest and median rank, distance to O*,
    accuracy) and, next to them, the same cases projected from the unslowed runs."""
    rows, network, eps = summary["tables"].get("straggler"), summary["network"], summary["eps"]
    if not rows:
        return []
    cases = list(dict.fromkeys((r["pattern"], r["factor"]) for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    by = {(r["mode"], r["pattern"], r["factor"]): r for r in rows}
    labels = ["none" if p == "none" else f"{p}\n×{f:g}" for p, f in cases]
    x = np.arange(len(cases))
    width = 0.8 / max(len(modes), 1)
    fig, axes = plt.subplots(2, 2, figsize=(13, 8))
    ax_l, ax_p, ax_r, ax_a = axes.ravel()
    any_proj = False
    for i, mode in enumerate(modes):
        off = x + (i - (len(modes) - 1) / 2) * width
        got = [by.get((mode, *c)) for c in cases]
        live = [g["live"] if g else None for g in got]

        def val(attr: str, scale: float = 1.0, live=live) -> np.ndarray:
            return np.array([v[attr] * scale if v is not None else np.nan for v in live],
                            dtype=float)

        color = style(mode).get("color")
        ax_l.bar(off, val("train_seconds"), width, color=color, label=f"{mode}: slowest rank")
        ax_l.bar(off, val("median_rank_seconds"), width * 0.5, color="white", alpha=0.7,
                 edgecolor=color, hatch="//", label=f"{mode}: median rank")
        proj = np.array([g["projected"] if g else np.nan for g in got])
        tte = np.array([g["time_to_eps"] if g else np.nan for g in got])
        if np.isfinite(proj).any():
            any_proj = True
            ax_p.bar(off, proj, width, color=color, label=f"{mode}: projected")
            ax_p.plot(off, tte, "k_", markersize=8,
                      label=f"time to eps {eps:g}" if i == 0 else None)
        ax_r.bar(off, val("rel_distance"), width, color=color, label=mode)
        ax_a.bar(off, val("acc_mean", 100), width, color=color, label=mode)
    info = summary["info"]
    ax_l.set_title(f"measured wall, live --slow runs ({_cores_note(info)})", fontsize=9)
    ax_l.set_ylabel("training time [s]")
    ax_p.set_title(f"projected from the unslowed run, straggler applied in replay;\n"
                   f"dedicated cores, network {network}", fontsize=9)
    ax_p.set_ylabel("projected training time [s]")
    if not any_proj:
        _empty(ax_p, "projection")
    ax_r.set_yscale("log")
    ax_r.set_ylabel(r"max$_m$ $\|O_m - O^*\| / \|O^*\|$, last layer (log)")
    ax_a.set_ylabel("test accuracy, last layer [%] (mean over nodes)")
    _straggler_axes(axes, rows, x, labels)
    ax_l.legend(fontsize=6)
    if any_proj:
        ax_p.legend(fontsize=6)
    ax_r.legend(fontsize=7)
    fig.suptitle(f"Stragglers: M = {info.get('nodes')}, d = "
                 f"{info.get('degree')}; {describe_info(info)}; async = bounded delay "
                 f"(--max-lead 4), async-unbounded = --max-lead -1", fontsize=9)
    fig.tight_layout()
    return save(fig, outdir, "straggler")


def _straggler_axes(axes: Any, rows: list[Mapping[str, Any]], x: np.ndarray,
                    labels: list[str]) -> None:
    """The straggler figure's shared x axis (the cases) and the accuracy panel's range."""
    accs = [r["live"]["acc_mean"] * 100 for r in rows
            if r["live"] is not None and math.isfinite(r["live"]["acc_mean"])]
    if accs:
        axes.ravel()[3].set_ylim(max(0.0, min(accs) - 5), min(100.0, max(accs) + 2))
    for ax in axes.ravel():
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_xlabel("slowed ranks × slow-down factor")
        ax.grid(alpha=0.3, axis="y")


def jitter_figure(summary: Mapping[str, Any], outdir: Path, stem: str = "jitter") -> list[Path]:
    """``jitter``: projected time per mode with no jitter, jitter exp:0.5 and exp:1.0 and
    one 5x straggler, and each mode's ratio to async; nothing without traces."""
    table, network, eps = summary["tables"].get("jitter"), summary["network"], summary["eps"]
    rows = table["rows"] if table else []
    if not rows or not any(np.isfinite(float(v)) for r in rows for v in r["seconds"].values()):
        return []
    what, seeds = table["what"], table.get("seeds", 3)
    modes = list(rows[0]["seconds"])
    x = np.arange(len(rows))
    width = 0.8 / max(len(modes), 1)
    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, mode in enumerate(modes):
        off = x + (i - (len(modes) - 1) / 2) * width
        ax_t.bar(off, [r["seconds"][mode] for r in rows], width, label=mode, **{
            "color": style(mode).get("color")})
        ax_t.plot(off, [r["time_to_eps"][mode] for r in rows], "k_", markersize=8,
                  label=f"time to eps {eps:g}" if i == 0 else None)
        if mode != REFERENCE:
            ax_r.plot(x, [r["ratio"].get(mode, np.nan) for r in rows], **style(mode),
                      label=f"{mode} / {REFERENCE}")
    ax_r.axhline(1.0, color="black", linestyle=":", linewidth=1)
    for ax in (ax_t, ax_r):
        ax.set_xticks(x, [r["case"] for r in rows], fontsize=8)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7)
    ax_t.set_ylabel("projected training time [s]")
    ax_t.set_title(f"projected, dedicated cores, network {network}", fontsize=9)
    ax_r.set_ylabel("projected time / async's")
    ax_r.set_title("ratio to async (> 1: async faster)", fontsize=9)
    fig.suptitle(f"Jitter and stragglers projected from the unslowed runs at {what}, fixed K "
                 f"per layer; {describe_info(summary['info'])}; jitter: mean over {seeds} replay "
                 f"seeds", fontsize=9)
    fig.tight_layout()
    return save(fig, outdir, stem)


def table2_time_figure(rows: list[dict], outdir: Path, network: str,
                       info: Mapping[str, Any]) -> list[Path]:
    """``table2_time``: measured and projected time per dataset and mode (exact setting),
    and the projected async speed-ups next to the paper's sync / async ratio."""
    from ..summaries.table2 import TIMED, paper_ratio

    exact = [r for r in rows if r["setting"] == "exact" and r["seeds"] and r["mode"] in TIMED]
    if not exact:
        return []
    datasets = list(dict.fromkeys(r["dataset"] for r in exact))
    by = {(r["dataset"], r["mode"]): r for r in exact}
    modes = [m for m in TIMED if any(k[1] == m for k in by)]
    x = np.arange(len(datasets))
    width = 0.8 / (2 * max(len(modes), 1))
    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(max(10, 3 * len(datasets)), 4.5))
    for i, mode in enumerate(modes):
        got = [by.get((d, mode)) for d in datasets]
        color = style(mode).get("color")
        for j, (key, hatch, what) in enumerate((("seconds", "//", "measured"),
                                                ("projected", None, "projected"))):
            off = x + (2 * i + j - (2 * len(modes) - 1) / 2) * width
            ax_t.bar(off, [g[key] if g else np.nan for g in got], width, color=color,
                     hatch=hatch, edgecolor="white", label=f"{mode}, {what}")
    def projected(dataset: str, mode: str) -> float:
        return np.float64(by.get((dataset, mode), {}).get("projected", np.nan))

    for mode in ("sync-graph", "sync"):
        ax_r.plot(x, [projected(d, mode) / projected(d, REFERENCE) for d in datasets],
                  linestyle="none", **style(mode),
                  label=f"{mode} / {REFERENCE}, projected {network}")
    ax_r.plot(x, [paper_ratio(d) for d in datasets], "k_", markersize=14,
              label="paper: sync / async (its sync = our sync-graph)")
    ax_r.axhline(1.0, color="black", linestyle=":", linewidth=1)
    ax_t.set_yscale("log")
    ax_t.set_ylabel("training time [s] (log)")
    ax_t.set_title(f"exact setting; solid (main): projected, dedicated cores, network "
                   f"{network};\nhatched: measured wall (ranks sharing this machine's cores)",
                   fontsize=8)
    ax_r.set_ylabel("time ratio to async")
    ax_r.set_title("async speed-up (exact setting):\nours projected vs the paper's measured",
                   fontsize=9)
    for ax in (ax_t, ax_r):
        ax.set_xticks(x, datasets)
        ax.grid(alpha=0.3, axis="y", which="both")
        ax.legend(fontsize=7)
    fig.suptitle(f"Table 2's times at a fixed K = {info.get('iters', '?')} per layer (the "
                 f"paper's protocol): M = {info.get('nodes', '?')}, d = "
                 f"{info.get('degree', '?')}, L = {info.get('layers', '?')}", fontsize=9)
    fig.tight_layout()
    return save(fig, outdir, "table2_time")
