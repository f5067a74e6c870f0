"""``dssfn-mpi plot FILE.h5 --out DIR``: figures (PNG and PDF) from one HDF5 file.

What is drawn depends on the file:

* a sweep written by ``dssfn-mpi bench`` (or ``bench collect``): per
  benchmark found in it, time and accuracy against degree (paper fig. 2) or
  node count (fig. 3), accuracy and relative distance to the exact solution
  per layer, straggler bars, Table 2 bars (plus ``table2.md``), contention
  slowdown bars per mode and wait policy (plus ``contention.md``);
* an RMA file (``bench rma``): the mailbox's put and read latencies against
  the size of Z, and the per-activation overhead against the compute floor;
* a single run log (``train --out``): accuracy, distance and time per layer.

Only the file is read; numbers are defined in :mod:`dssfn_mpi.bench.summary`.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from ..errors import UserError  # noqa: E402
from ..runlog import RunLog, read_runlog, read_sweep  # noqa: E402
from .summary import RunSummary, summarize  # noqa: E402

__all__ = ["plot_file"]

_MODE_STYLE = {
    "async": dict(color="tab:blue", marker="o"),
    "async-unbounded": dict(color="tab:cyan", marker="v"),
    "sync": dict(color="tab:orange", marker="s"),
    "sync-graph": dict(color="tab:green", marker="^"),
    "central": dict(color="black", marker="x"),
}
_DPI = 100


def _save(fig: Any, outdir: Path, stem: str) -> list[Path]:
    paths = []
    for ext in ("png", "pdf"):
        path = outdir / f"{stem}.{ext}"
        fig.savefig(path, dpi=_DPI, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    _shrink_png(paths[0])
    return paths


def _shrink_png(path: Path) -> None:
    """Re-save a figure PNG with a 256-colour palette: a third of the size, same look
    (line plots use few colours), so figures can be committed."""
    try:
        from PIL import Image
    except ImportError:  # matplotlib depends on Pillow, but stay optional
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def _style(mode: str) -> dict:
    return dict(_MODE_STYLE.get(mode, {}))


def _describe(run: RunLog) -> str:
    a = run.attrs
    return (f"{a.get('dataset', '?')}, L = {a.get('layers', '?')}, n = {a.get('hidden', '?')}, "
            f"K = {a.get('bench_target_iters', a.get('iters', '?'))}")


# --------------------------------------------------------------------------- sweeps


def _ok_runs(runs: dict[str, RunLog]) -> dict[str, RunLog]:
    return {k: r for k, r in runs.items() if r.attrs.get("bench_status", "ok") == "ok"
            and r.layers_done > 0}


def _sweep_vs(runs: dict[str, RunLog], bench: str, outdir: Path) -> list[Path]:
    """Time and accuracy against the swept variable (degree or node count)."""
    xlabel = "node degree d" if bench == "degree" else "number of nodes M (ranks)"
    series: dict[str, list[tuple[float, RunSummary]]] = defaultdict(list)
    central = None
    example = None
    for name, run in _ok_runs(runs).items():
        target = int(run.attrs.get("bench_target_iters", run.attrs.get("iters", 0)) or 0)
        s = summarize(name, run, target or None)
        mode = str(run.attrs.get("bench_mode", run.attrs.get("mode", "")))
        if mode == "central":
            central = s
            continue
        example = example or run
        series[mode].append((float(run.attrs.get("bench_value", -1)), s))
    if not series:
        return []
    fig, (ax_t, ax_a) = plt.subplots(1, 2, figsize=(10, 4))
    for mode, pts in sorted(series.items()):
        pts.sort(key=lambda p: p[0])
        x = [p[0] for p in pts]
        scaled = any(s.iters != int(runs[s.name].attrs.get("bench_target_iters", s.iters))
                     for _, s in pts)
        if scaled:
            k_run = pts[0][1].iters
            ax_t.plot(x, [s.scaled_seconds for _, s in pts], linestyle="--", **_style(mode),
                      label=f"{mode} (measured at K={k_run}, solver time scaled)")
        else:
            ax_t.plot(x, [s.train_seconds for _, s in pts], **_style(mode), label=mode)
        acc = np.array([s.acc_mean for _, s in pts]) * 100
        # Clipped: the mean of equal values can round past the min or max.
        lo = np.clip(acc - np.array([s.acc_min for _, s in pts]) * 100, 0, None)
        hi = np.clip(np.array([s.acc_max for _, s in pts]) * 100 - acc, 0, None)
        kacc = f" (K={pts[0][1].iters})" if scaled else ""
        ax_a.errorbar(x, acc, yerr=[lo, hi], capsize=3, **_style(mode), label=mode + kacc)
    if central is not None:
        ax_t.axhline(central.train_seconds, color="black", linestyle=":",
                     label="central (1 process, exact)")
        ax_a.axhline(central.acc_mean * 100, color="black", linestyle=":", label="central")
    xs = sorted({p[0] for pts in series.values() for p in pts})
    for ax in (ax_t, ax_a):
        ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax_t.set_xlabel(xlabel)
    ax_t.set_ylabel("training time [s] (slowest rank, log scale)")
    ax_t.set_yscale("log")  # sync-graph is orders of magnitude above the rest at low degree
    ax_a.set_xlabel(xlabel)
    ax_a.set_ylabel("test accuracy, last layer [%]\n(mean over nodes, bars: min-max)")
    for ax in (ax_t, ax_a):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    assert example is not None
    where = (f"M = {example.attrs.get('nodes')}, circular graph" if bench == "degree"
             else "ring (d = 2; d = 1 for M = 2)")
    fig.suptitle(f"{'Training time vs degree' if bench == 'degree' else 'Training time vs nodes'}"
                 f": {where}; {_describe(example)}", fontsize=10)
    fig.tight_layout()
    return _save(fig, outdir, f"{bench}_time")


def _line_style(label: str) -> dict:
    """Colour and marker by mode (first word), line style by straggler pattern."""
    style = _style(label.split(" ")[0])
    words = label.split(" ")
    style["linestyle"] = "--" if "one" in words else ":" if "several" in words else "-"
    return style


def _per_layer(runs: list[tuple[str, RunLog]], outdir: Path, stem: str, title: str) -> list[Path]:
    """Accuracy per layer, and the relative distance per layer if it was measured."""
    out: list[Path] = []
    sums = [(label, summarize(label, run)) for label, run in runs]
    if not sums:
        return out
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, s in sums:
        ax.plot(np.arange(s.acc_per_layer.size), s.acc_per_layer * 100, label=label,
                **_line_style(label))
    ax.set_xlabel("layer l")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("test accuracy [%] (mean over nodes)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out += _save(fig, outdir, f"{stem}_accuracy_per_layer")
    with_rel = [(label, s) for label, s in sums if np.isfinite(s.rel_per_layer).any()]
    if with_rel:
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, s in with_rel:
            ax.semilogy(np.arange(s.rel_per_layer.size), s.rel_per_layer, label=label,
                        **_line_style(label))
        ax.set_xlabel("layer l")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(r"max$_m$ $\|O_m - O^*\|_F / \|O^*\|_F$  (log scale)")
        ax.set_title(title + "\nrelative distance to the exact layer solution O*", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out += _save(fig, outdir, f"{stem}_rel_distance_per_layer")
    return out


def _pick_layer_runs(runs: dict[str, RunLog], bench: str) -> tuple[list, str]:
    """Runs shown per layer: one per mode at a representative swept value."""
    ok = _ok_runs(runs)
    values = sorted({float(r.attrs.get("bench_value", -1)) for r in ok.values()} - {-1.0})
    if bench == "degree":
        pick = min(values, key=lambda v: abs(v - 8)) if values else -1
        what = f"d = {pick:g}"
    elif bench == "nodes":
        pick = max(values) if values else -1
        what = f"M = {pick:g}"
    else:
        pick, what = -1, ""
    chosen = []
    for _name, run in ok.items():
        mode = str(run.attrs.get("bench_mode", run.attrs.get("mode")))
        if mode == "central" or float(run.attrs.get("bench_value", -1)) == pick:
            k, target = run.attrs.get("iters"), run.attrs.get("bench_target_iters", None)
            shorter = mode != "central" and target is not None and k != target
            chosen.append((mode + (f" (K={k})" if shorter else ""), run))
    example = next(iter(ok.values()), None)
    title = f"{bench} sweep, {what}; {_describe(example)}" if example is not None else bench
    return chosen, title


def _straggler(runs: dict[str, RunLog], outdir: Path) -> list[Path]:
    ok = _ok_runs(runs)
    if not ok:
        return []
    cases: list[tuple[str, float]] = []
    table: dict[tuple[str, str, float], RunSummary] = {}
    modes: list[str] = []
    for name, run in ok.items():
        a = run.attrs
        case = (str(a.get("bench_pattern", "none")), float(a.get("bench_factor", 1.0)))
        mode = str(a.get("bench_mode", a.get("mode")))
        if case not in cases:
            cases.append(case)
        if mode not in modes:
            modes.append(mode)
        table[(mode, *case)] = summarize(name, run)
    order = {"none": 0, "one": 1, "several": 2}
    cases.sort(key=lambda c: (order.get(c[0], 3), c[1]))
    labels = ["none" if p == "none" else f"{p}\n×{f:g}" for p, f in cases]
    x = np.arange(len(cases))
    width = 0.8 / max(len(modes), 1)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for i, mode in enumerate(modes):
        off = x + (i - (len(modes) - 1) / 2) * width
        s = [table.get((mode, *c)) for c in cases]

        def val(attr: str, scale: float = 1.0, s=s) -> np.ndarray:
            return np.array([getattr(v, attr) * scale if v is not None else np.nan for v in s])

        color = _style(mode).get("color")
        axes[0].bar(off, val("train_seconds"), width, color=color, label=f"{mode}: slowest rank")
        axes[0].bar(off, val("median_rank_seconds"), width * 0.5, color="white", alpha=0.7,
                    edgecolor=color, hatch="//", label=f"{mode}: median rank")
        axes[1].bar(off, val("rel_distance"), width, color=color, label=mode)
        axes[2].bar(off, val("acc_mean", 100), width, color=color, label=mode)
    axes[1].set_yscale("log")
    axes[0].set_ylabel("training time [s]")
    axes[1].set_ylabel(r"max$_m$ $\|O_m - O^*\| / \|O^*\|$, last layer (log)")
    axes[2].set_ylabel("test accuracy, last layer [%] (mean over nodes)")
    accs = [v.acc_mean * 100 for v in table.values() if math.isfinite(v.acc_mean)]
    if accs:
        axes[2].set_ylim(max(0.0, min(accs) - 5), min(100.0, max(accs) + 2))
    for ax in axes:
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_xlabel("slowed ranks × slow-down factor")
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=6)
    axes[1].legend(fontsize=7)
    example = next(iter(ok.values()))
    fig.suptitle(f"Stragglers: M = {example.attrs.get('nodes')}, d = "
                 f"{example.attrs.get('degree')}; {_describe(example)}; async = bounded delay "
                 f"(--max-lead 4), async-unbounded = --max-lead -1", fontsize=9)
    fig.tight_layout()
    return _save(fig, outdir, "straggler")


_WAIT_COLOR = {"spin": "tab:red", "hybrid": "tab:purple", "auto": "tab:green"}


def _contention(runs: dict[str, RunLog], outdir: Path) -> list[Path]:
    """Idle solve time, then the slowdown beside each busy-process count: bars per
    wait policy, grouped by mode (log scale; the label on a bar is its value)."""
    from .tables import contention_rows

    rows = contention_rows(runs)
    if not rows:
        return []
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    waits = list(dict.fromkeys(r["wait"] for r in rows))
    levels = sorted({r["busy"] for r in rows})
    by = {(r["mode"], r["wait"], r["busy"]): r for r in rows}
    fig, axes = plt.subplots(1, len(levels), figsize=(4.5 * len(levels), 4.2), squeeze=False)
    x = np.arange(len(modes))
    width = 0.8 / max(len(waits), 1)
    for ax, busy in zip(axes[0], levels):
        for i, wait in enumerate(waits):
            got = [by.get((m, wait, busy)) for m in modes]
            if busy == 0:
                vals = [r["summary"].solve_seconds if r else np.nan for r in got]
            else:
                vals = [r["slowdown"] if r else np.nan for r in got]
            off = x + (i - (len(waits) - 1) / 2) * width
            bars = ax.bar(off, vals, width, color=_WAIT_COLOR.get(wait), label=f"--wait {wait}")
            ax.bar_label(bars, [f"{v:.2g}" if np.isfinite(v) else "" for v in vals],
                         fontsize=6)
        if busy == 0:
            ax.set_title("idle", fontsize=9)
            ax.set_ylabel("solve time [s] (slowest rank, measured wall)")
        else:
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_title(f"beside {busy} busy process{'es' if busy > 1 else ''}", fontsize=9)
            ax.set_ylabel("slowdown: solve time / idle solve time")
        ax.set_yscale("log")
        ax.set_xticks(x, modes)
        ax.grid(alpha=0.3, axis="y", which="both")
        ax.legend(fontsize=7)
    example = rows[0]["summary"]
    a = runs[example.name].attrs
    fig.suptitle(f"Contention: M = {a.get('nodes')} ranks on {a.get('topology', 'ring')}, "
                 f"{_describe(runs[example.name])}; busy = Python CPU hogs beside the job",
                 fontsize=9)
    fig.tight_layout()
    return _save(fig, outdir, "contention")


def _table2(runs: dict[str, RunLog], outdir: Path) -> list[Path]:
    from .table2 import PAPER_TABLE2, table2_markdown, table2_rows

    rows = [r for r in table2_rows(runs) if r["seeds"]]
    md = outdir / "table2.md"
    md.write_text(table2_markdown(runs) + "\n")
    out = [md]
    if not rows:
        return out
    datasets = sorted({r["dataset"] for r in rows})
    bars = [("exact", "central"), ("exact", "sync"), ("exact", "async"),
            ("paper", "central"), ("paper", "sync"), ("paper", "async")]
    bars = [b for b in bars if any((r["setting"], r["mode"]) == b for r in rows)]
    by = {(r["dataset"], r["setting"], r["mode"]): r for r in rows}
    x = np.arange(len(datasets))
    width = 0.8 / max(len(bars), 1)
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(datasets)), 4.2))
    for i, (setting, mode) in enumerate(bars):
        off = x + (i - (len(bars) - 1) / 2) * width
        vals = [by.get((d, setting, mode)) for d in datasets]
        mean = np.array([v["acc_mean"] * 100 if v else np.nan for v in vals])
        std = np.array([v["acc_std"] * 100 if v else 0 for v in vals])
        ax.bar(off, mean, width, yerr=std, capsize=2, color=_style(mode).get("color"),
               hatch="//" if setting == "paper" else None, edgecolor="white",
               label=f"{mode} ({setting})")
    paper_cols = {"central": 0, "sync": 1, "async": 3}
    for j, d in enumerate(datasets):
        if d in PAPER_TABLE2:
            for i, (setting, mode) in enumerate(bars):
                if setting == "exact":
                    off = j + (i - (len(bars) - 1) / 2) * width
                    ax.plot(off, PAPER_TABLE2[d][paper_cols[mode]][0], "k_", markersize=12,
                            label="paper, Table 2" if (j, i) == (0, 0) else None)
    accs = [r["acc_mean"] * 100 for r in rows]
    ax.set_ylim(max(0.0, min(accs) - 15), 100)
    ax.set_xticks(x, datasets)
    ax.set_ylabel("test accuracy, last layer [%]\n(mean ± std over seeds of the node-mean)")
    ex = next((r.attrs for r in runs.values() if r.attrs.get("mode") != "central"),
              next(iter(runs.values())).attrs)
    ax.set_title(f"Table 2: M = {ex.get('nodes')}, d = {ex.get('degree')}, "
                 f"K = {ex.get('iters')}, L = {ex.get('layers')}; black ticks: the paper's "
                 "numbers (L = 20)", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return out + _save(fig, outdir, "table2_accuracy")


def _table2_layers(runs: dict[str, RunLog], outdir: Path) -> list[Path]:
    """Per-layer accuracy and distance of the seed-0 runs, one panel per dataset."""
    ok = {k: r for k, r in _ok_runs(runs).items() if int(r.attrs.get("bench_seed", 0)) == 0}
    datasets = sorted({str(r.attrs.get("bench_dataset")) for r in ok.values()})
    if not datasets:
        return []
    out: list[Path] = []
    for field, stem, ylabel, log in (
        ("acc_per_layer", "table2_accuracy_per_layer", "test accuracy [%] (mean over nodes)",
         False),
        ("rel_per_layer", "table2_rel_distance_per_layer",
         r"max$_m$ $\|O_m - O^*\| / \|O^*\|$ (log)", True),
    ):
        fig, axes = plt.subplots(1, len(datasets), figsize=(4 * len(datasets), 3.6),
                                 squeeze=False)
        drawn = False
        for ax, d in zip(axes[0], datasets):
            for _name, run in ok.items():
                if run.attrs.get("bench_dataset") != d:
                    continue
                mode = str(run.attrs.get("bench_mode"))
                setting = str(run.attrs.get("bench_setting", "exact"))
                s = summarize(_name, run)
                y = getattr(s, field) * (1 if log else 100)
                if not np.isfinite(y).any():
                    continue
                drawn = True
                ls = "--" if setting == "paper" else "-"
                (ax.semilogy if log else ax.plot)(np.arange(y.size), y, linestyle=ls,
                                                  label=f"{mode} ({setting})", **_style(mode))
            ax.set_title(d, fontsize=9)
            ax.set_xlabel("layer l")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3, which="both")
        axes[0][0].set_ylabel(ylabel)
        axes[0][0].legend(fontsize=7)
        if drawn:
            fig.tight_layout()
            out += _save(fig, outdir, stem)
        else:
            plt.close(fig)
    return out


def _plot_sweep(path: Path, outdir: Path) -> list[Path]:
    runs = read_sweep(path)
    by_bench: dict[str, dict[str, RunLog]] = defaultdict(dict)
    for name, run in runs.items():
        by_bench[str(run.attrs.get("bench", "sweep"))][name] = run
    out: list[Path] = []
    for bench, group in by_bench.items():
        if bench in ("degree", "nodes", "straggler", "contention"):
            from .tables import contention_markdown, straggler_markdown, sweep_markdown

            md = outdir / f"{bench}.md"
            text = (straggler_markdown(group) if bench == "straggler"
                    else contention_markdown(group) if bench == "contention"
                    else sweep_markdown(group, bench))
            md.write_text(text + "\n")
            out.append(md)
        if bench in ("degree", "nodes"):
            out += _sweep_vs(group, bench, outdir)
            chosen, title = _pick_layer_runs(group, bench)
            out += _per_layer(chosen, outdir, bench, title)
        elif bench == "straggler":
            out += _straggler(group, outdir)
            base = [(str(r.attrs.get("bench_mode")) + " " + str(r.attrs.get("bench_pattern"))
                     + f" x{float(r.attrs.get('bench_factor', 1)):g}", r)
                    for r in _ok_runs(group).values()
                    if r.attrs.get("bench_pattern") == "none"
                    or float(r.attrs.get("bench_factor", 1)) == max(
                        float(x.attrs.get("bench_factor", 1)) for x in group.values())]
            out += _per_layer(base, outdir, "straggler", "stragglers: no straggler vs the "
                              "largest slow-down")
        elif bench == "contention":
            out += _contention(group, outdir)
        elif bench == "table2":
            out += _table2(group, outdir)
            out += _table2_layers(group, outdir)
        else:
            out += _per_layer([(str(r.attrs.get("mode")), r) for r in _ok_runs(group).values()],
                              outdir, "sweep", str(path.name))
    return out


# --------------------------------------------------------------------------- RMA


#: Series of the mailbox latency figure: (panel, dataset, colour, legend text).
_RMA_SERIES = (
    (0, "put/in_mpi", "tab:blue", "put, target in MPI"),
    (0, "put/computing", "tab:red", "put, target computing"),
    (0, "put/sleeping", "tab:purple", "put, target sleeping"),
    (0, "contended/put_seconds", "tab:gray", "put during the target's reads"),
    (1, "read/read_new", "tab:green", "read, new write"),
    (1, "read/read_all_new", "tab:olive", "read_all, new write"),
    (1, "read/read_all_unchanged", "tab:cyan", "read_all, nothing new"),
    (1, "contended/read_all_seconds", "tab:gray", "read_all during puts"),
)


def _rma_groups(path: Path, f: Any) -> dict[str, Any]:
    """The successful ``/rma/<label>`` groups of a file written by ``bench rma``."""
    from .rma import RMA_SCHEMA_VERSION

    version = int(f.attrs.get("schema_version", 0))
    if version != RMA_SCHEMA_VERSION:
        raise UserError(f"{path}: RMA file of schema {version}, this plot reads schema "
                        f"{RMA_SCHEMA_VERSION}; re-run dssfn-mpi bench rma")
    groups = {label: g for label, g in f["rma"].items() if g.attrs.get("status", "ok") == "ok"
              and "put" in g}
    if not groups:
        raise UserError(f"{path}: no successful RMA measurement in /rma")
    return groups


def _rma_latency(groups: dict[str, Any], outdir: Path) -> list[Path]:
    """ZMailbox.put and read latencies against the size of Z, per one-sided component."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 5), sharey=True)
    markers = {"osc-sm": "o", "osc-rdma": "s", "site": "D"}
    styles = ["-", "--", ":"]
    for k, (label, g) in enumerate(groups.items()):
        nbytes = g["bytes"][()]
        for panel, name, color, text in _RMA_SERIES:
            data = g[name][()]
            if not np.isfinite(data).any():
                continue
            axes[panel].loglog(nbytes, np.nanmedian(data, axis=1) * 1e6, color=color,
                               marker=markers.get(label, "o"), linestyle=styles[k % 3],
                               label=f"{label}: {text}")
    axes[0].set_ylabel("latency [µs] (median)")
    axes[0].set_title("ZMailbox.put (begin, flush, header + Z, flush, end, flush)", fontsize=9)
    axes[1].set_title("ZMailbox reads of the own window (seqlock)", fontsize=9)
    for ax in axes:
        ax.set_xlabel("size of Z [bytes] (8 B, then Q x (2Q+1000) doubles)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    lib = str(next(iter(groups.values())).attrs.get("mpi_library", "")).split(",")[0]
    names = {"-": "solid", "--": "dashed", ":": "dotted"}
    fig.suptitle(f"The async engine's mailbox between 2 ranks on one node ({lib}); "
                 + ", ".join(f"{names[st]}: {label}" for st, label in zip(styles, groups)),
                 fontsize=9)
    fig.tight_layout()
    return _save(fig, outdir, "rma_latency")


def _rma_activation(groups: dict[str, Any], outdir: Path) -> list[Path]:
    """An activation's mailbox traffic against its compute floor, per component."""
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 4), squeeze=False)
    for ax, (label, g) in zip(axes[0], groups.items()):
        q = g["activation/Q"][()]
        ovh = np.median(g["activation/overhead_seconds"][()], axis=(1, 2)) * 1e3
        cmp_ = np.median(g["activation/compute_seconds"][()], axis=(1, 2)) * 1e3
        x = np.arange(q.size)
        ax.bar(x - 0.2, cmp_, 0.4, color="tab:gray", label="(Q x n) @ (n x n) product")
        ax.bar(x + 0.2, ovh, 0.4, color="tab:blue", label="8 read_all + 8 put (ZMailbox)")
        for xi, o, c in zip(x, ovh, cmp_):
            ax.annotate(f"{100 * o / c:.0f}%", (xi + 0.2, o), ha="center", va="bottom",
                        fontsize=7)
        ax.set_yscale("log")
        ax.set_xticks(x, [f"Q={v}\nn={2 * v + 1000}" for v in q], fontsize=8)
        ax.set_ylabel("time per activation [ms] (median, log)")
        ax.set_title(f"{label}: communication vs compute floor", fontsize=9)
        ax.grid(alpha=0.3, axis="y", which="both")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, outdir, "rma_activation")


def _plot_rma(path: Path, outdir: Path) -> list[Path]:
    with h5py.File(path, "r") as f:
        groups = _rma_groups(path, f)
        return _rma_latency(groups, outdir) + _rma_activation(groups, outdir)


# --------------------------------------------------------------------------- single run


def _plot_run(path: Path, outdir: Path) -> list[Path]:
    run = read_runlog(path)
    label = f"{run.attrs.get('mode', '')} {_describe(run)}"
    out = _per_layer([(label, run)], outdir, "run", str(path.name))
    t = run.layers["total_seconds"]
    if t.size:
        fig, ax = plt.subplots(figsize=(6, 4))
        im = ax.imshow(t.T, aspect="auto", origin="lower", cmap="viridis")
        fig.colorbar(im, ax=ax, label="layer time [s]")
        ax.set_xlabel("layer l")
        ax.set_ylabel("rank m")
        ax.set_title(f"{path.name}: time per layer and rank", fontsize=9)
        fig.tight_layout()
        out += _save(fig, outdir, "run_layer_time")
    return out


def plot_file(path: str | os.PathLike, outdir: str | os.PathLike) -> list[Path]:
    """Draw every figure the file supports into ``outdir`` (PNG and PDF).

    Parameters
    ----------
    path : str or path-like
        A sweep file (``dssfn-mpi bench``), an RMA file (``bench rma``) or a
        run log (``train --out``).
    outdir : str or path-like
        Folder for the figures; created if missing.

    Returns
    -------
    list of pathlib.Path
        The files written: PNG and PDF of each figure, and a Markdown summary
        table per benchmark (``degree.md``, ``nodes.md``, ``straggler.md``,
        ``table2.md``, ``contention.md``).

    Raises
    ------
    UserError
        The file is missing, not HDF5 or holds nothing to plot.
    """
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p} does not exist; give a file written by dssfn-mpi bench or train")
    try:
        with h5py.File(p, "r") as f:
            kind = f.attrs.get("kind", "")
            kind = kind.decode() if isinstance(kind, bytes) else str(kind)
    except OSError:
        raise UserError(f"{p} is not an HDF5 file; give a file written by dssfn-mpi") from None
    out = Path(outdir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out}: {exc.strerror}; choose another folder") \
            from None
    if kind == "rma":
        paths = _plot_rma(p, out)
    elif kind == "sweep":
        paths = _plot_sweep(p, out)
    else:
        paths = _plot_run(p, out)
    if not paths:
        raise UserError(f"{p}: no successful runs to plot")
    return paths
