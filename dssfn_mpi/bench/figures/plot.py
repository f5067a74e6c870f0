"""``dssfn-mpi plot FILE.h5 --out DIR``: figures (PNG and PDF) from one HDF5 file.

What is drawn depends on the file:

* a sweep written by ``dssfn-mpi bench`` (or ``bench collect``): per
  benchmark found in it, measured wall time, projected dedicated-core time,
  projected time to eps and accuracy against degree (paper fig. 2) or node
  count (fig. 3), accuracy and relative distance to the exact solution per
  layer, straggler bars (live runs and projections), the jitter view, Table 2
  bars and times, contention slowdown bars per mode and wait policy (plus a
  Markdown table per benchmark);
* an RMA file (``bench rma``): the mailbox's put and read latencies against
  the size of Z, and the per-activation overhead against the compute floor;
* a single run log (``train --out``): accuracy, distance and time per layer.

Only the file is read; numbers are defined in :mod:`dssfn_mpi.bench.summaries.summary` and
:mod:`dssfn_mpi.bench.summaries.projection`; the time figures are in
:mod:`dssfn_mpi.bench.figures.timeplots`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from matplotlib.ticker import MaxNLocator

from ...errors import UserError
from ...runlog import RunLog, read_runlog, read_sweep
from ..summaries.projection import DEFAULT_EPS, DEFAULT_NETWORK, check_network, has_trace
from ..variants import decentralized
from .figstyle import describe as _describe
from .figstyle import describe_info, plt
from .figstyle import save as _save
from .figstyle import style as _style

__all__ = ["plot_file", "plot_runs", "plot_summary", "summary_markdown",
           "summary_stem"]

# --------------------------------------------------------------------------- sweeps


def _line_style(label: str) -> dict:
    """Colour and marker by mode (first word), line style by straggler pattern."""
    style = _style(label.split(" ")[0])
    words = label.split(" ")
    style["linestyle"] = "--" if "one" in words else ":" if "several" in words else "-"
    return style


def _per_layer(recs: list[tuple[str, dict]], outdir: Path, stem: str,
               title: str) -> list[Path]:
    """Accuracy per layer, and the relative distance per layer if it was measured, of
    ``(label, record)`` pairs."""
    out: list[Path] = []
    if not recs:
        return out
    with_acc = [(label, np.asarray(r["acc_per_layer"], dtype=float)) for label, r in recs]
    if any(np.isfinite(a).any() for _label, a in with_acc):
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, acc in with_acc:
            ax.plot(np.arange(acc.size), acc * 100, label=label, **_line_style(label))
        ax.set_xlabel("layer l")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("test accuracy [%] (mean over nodes)")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        out += _save(fig, outdir, f"{stem}_accuracy_per_layer")
    with_rel = [(label, np.asarray(r["rel_per_layer"], dtype=float)) for label, r in recs]
    with_rel = [(label, rel) for label, rel in with_rel if np.isfinite(rel).any()]
    if with_rel:
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, rel in with_rel:
            ax.semilogy(np.arange(rel.size), rel, label=label, **_line_style(label))
        ax.set_xlabel("layer l")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(r"max$_m$ $\|O_m - O^*\|_F / \|O^*\|_F$  (log scale)")
        ax.set_title(title + "\nrelative distance to the exact layer solution O*", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out += _save(fig, outdir, f"{stem}_rel_distance_per_layer")
    return out


def _ok_records(summary: dict, kind: str = "live") -> list[dict]:
    return [r for r in summary["records"] if r["status"] == "ok" and r["kind"] == kind
            and r["layer_seconds"]]


def _pick_layer_runs(summary: dict) -> tuple[list, str]:
    """Runs shown per layer: one per mode at a representative swept value."""
    bench, ok = summary["bench"], _ok_records(summary)
    values = sorted({r["value"] for r in ok} - {-1.0})
    if bench == "degree":
        pick = min(values, key=lambda v: abs(v - 8)) if values else -1
        what = f"d = {pick:g}"
    else:
        pick = max(values) if values else -1
        what = f"M = {pick:g}"
    chosen = []
    for r in ok:
        central = not decentralized(r["mode"])
        if central or r["value"] == pick:
            shorter = not central and r["iters"] != r["target_iters"]
            chosen.append((r["mode"] + (f" (K={r['iters']})" if shorter else ""), r))
    return chosen, f"{bench} sweep, {what}; {describe_info(summary['info'])}"


_WAIT_COLOR = {"spin": "tab:red", "hybrid": "tab:purple", "auto": "tab:green"}
#: How Table 2's figures tell the paper's setting (its steps and penalties) from ours.
_SETTING_HATCH = {"exact": None, "paper": "//"}
_SETTING_LINE = {"exact": "-", "paper": "--"}


def _contention(summary: dict, outdir: Path) -> list[Path]:
    """Idle solve time, then the slowdown beside each busy-process count: bars per
    wait policy, grouped by mode (medians over repetitions; log scale; the label on a
    bar is its value)."""
    rows = summary["tables"].get("contention", [])
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
            key = "solve" if busy == 0 else "slowdown"
            vals = [float(r[key]) if r else np.nan for r in got]
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
    info = summary["info"]
    reps = max(len(r["names"]) for r in rows)
    fig.suptitle(f"Contention: M = {info.get('nodes')} ranks on {info.get('topology', 'ring')}, "
                 f"{describe_info(info)}; busy = Python CPU hogs beside the job; "
                 f"median of {reps} run{'s' if reps > 1 else ''}", fontsize=9)
    fig.tight_layout()
    return _save(fig, outdir, "contention")


def _table2(summary: dict, outdir: Path) -> list[Path]:
    """``table2.md``, the time figure and the accuracy figure of a table2 summary."""
    from ..summaries.table2 import COLUMNS, PAPER_TABLE2, table2_markdown
    from .timeplots import table2_time_figure

    rows = [r for r in summary["tables"].get("table2", []) if r["seeds"]]
    md = outdir / "table2.md"
    md.write_text(table2_markdown(summary) + "\n")
    out = [md, *table2_time_figure(rows, outdir, summary["network"], summary["info"])]
    if not rows:
        return out
    datasets = sorted({r["dataset"] for r in rows},
                      key=lambda d: list(PAPER_TABLE2).index(d) if d in PAPER_TABLE2 else 99)
    bars = [(st, m) for st in ("exact", "paper") for m in COLUMNS
            if any(r["setting"] == st and r["mode"] == m for r in rows)]
    by = {(r["dataset"], r["setting"], r["mode"]): r for r in rows}
    x = np.arange(len(datasets))
    width = 0.8 / max(len(bars), 1)
    fig, ax = plt.subplots(figsize=(max(7, 2.6 * len(datasets)), 4.8))
    for i, (setting, mode) in enumerate(bars):
        off = x + (i - (len(bars) - 1) / 2) * width
        vals = [by.get((d, setting, mode)) for d in datasets]
        mean = np.array([v["acc_mean"] * 100 if v else np.nan for v in vals], dtype=float)
        # a spread over one seed says nothing: error bars only over several
        std = np.array([v["acc_std"] * 100 if v and v["seeds"] > 1 else 0.0 for v in vals],
                       dtype=float)
        ax.bar(off, mean, width, yerr=std if std.any() else None, capsize=2,
               color=_style(mode).get("color"), hatch=_SETTING_HATCH[setting],
               edgecolor="white", label=f"{mode} ({setting})")
    _paper_ticks(ax, datasets, bars, width)
    ax.set_ylim(0, 100)  # a zero baseline: bar heights compare
    ax.set_xticks(x, datasets)
    seeds = max(r["seeds"] for r in rows)
    ax.set_ylabel("test accuracy, last layer [%]\n(node mean" + (
        ", mean ± std over seeds)" if seeds > 1 else ", one seed)"))
    info = summary["info"]
    ax.set_title(f"Table 2: M = {info.get('nodes')}, d = {info.get('degree')}, "
                 f"K = {info.get('iters')}, L = {info.get('layers')}; black ticks: the paper's "
                 "numbers (L = 20)", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    # below the axes, so the legend hides no bar
    ax.legend(fontsize=7, ncol=min(len(bars) + 1, 5), loc="upper center",
              bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    return out + _save(fig, outdir, "table2_accuracy")


def _paper_ticks(ax, datasets: list[str], bars: list, width: float) -> None:
    """The paper's Table 2 accuracies as black ticks on our exact-setting bars (its
    synchronous dSSFN is consensus over the graph: its tick goes on sync-graph)."""
    from ..summaries.table2 import paper_accuracy

    first = True
    for j, d in enumerate(datasets):
        for i, (setting, mode) in enumerate(bars):
            acc = paper_accuracy(d, mode) if setting == "exact" else None
            if acc is not None:
                off = j + (i - (len(bars) - 1) / 2) * width
                ax.plot(off, acc, "k_", markersize=12,
                        label="paper, Table 2" if first else None)
                first = False


def _table2_layers(summary: dict, outdir: Path) -> list[Path]:
    """Per-layer accuracy and distance of the seed-0 runs, one panel per dataset."""
    ok = [r for r in _ok_records(summary) if int(r.get("seed", 0)) == 0]
    datasets = sorted({str(r.get("dataset")) for r in ok})
    if not datasets:
        return []
    out: list[Path] = []
    info = summary["info"]
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
            for r in ok:
                if r.get("dataset") != d:
                    continue
                y = np.asarray(r[field], dtype=float) * (1 if log else 100)
                if not np.isfinite(y).any():
                    continue
                drawn = True
                ls = _SETTING_LINE.get(r.get("setting"), "-")
                (ax.semilogy if log else ax.plot)(np.arange(y.size), y, linestyle=ls,
                                                  label=f"{r['mode']} ({r.get('setting')})",
                                                  **_style(r["mode"]))
            ax.set_title(d, fontsize=9)
            ax.set_xlabel("layer l")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3, which="both")
        axes[0][0].set_ylabel(ylabel)
        axes[0][0].legend(fontsize=7)
        if drawn:
            fig.suptitle(f"Table 2 per layer, seed 0: M = {info.get('nodes')}, d = "
                         f"{info.get('degree')}, L = {info.get('layers', '?')}", fontsize=10)
            fig.tight_layout()
            out += _save(fig, outdir, stem)
        else:
            plt.close(fig)
    return out


def _timing_tables(summary: dict, outdir: Path) -> list[Path]:
    """``<bench>.md`` and, when the runs carry traces, ``jitter.md`` and the jitter figure."""
    from ..summaries.jitter import jitter_markdown
    from ..summaries.tables import straggler_markdown, sweep_markdown
    from .timeplots import jitter_figure

    bench = summary["bench"]
    md = outdir / f"{bench}.md"
    md.write_text((straggler_markdown(summary) if bench == "straggler"
                   else sweep_markdown(summary)) + "\n")
    out = [md]
    fig = jitter_figure(summary, outdir)
    if fig:
        jmd = outdir / "jitter.md"
        jmd.write_text(jitter_markdown(summary) + "\n")
        out += [jmd, *fig]
    return out


def summary_markdown(summary: dict) -> str:
    """The main Markdown table of a summary (the one ``bench`` prints at the end)."""
    from ..summaries.table2 import table2_markdown
    from ..summaries.tables import contention_markdown, straggler_markdown, sweep_markdown
    from . import ttefigs as T

    bench, tte = summary["bench"], summary_stem(summary) != summary["bench"]
    if bench == "noise":
        return T.noise_markdown(summary)
    if bench == "crossover":
        from ..summaries.crossratio import crossover_markdown

        return crossover_markdown(summary)
    if bench == "decompose":
        from ..sweeps.decompose import decompose_markdown

        return decompose_markdown(summary)
    if bench == "table2":
        return T.table2_tte_markdown(summary) if tte else table2_markdown(summary)
    if bench in ("degree", "nodes"):
        return T.tte_markdown(summary) if tte else sweep_markdown(summary)
    return {"straggler": straggler_markdown, "contention": contention_markdown}.get(
        bench, lambda s: f"(no table for {bench})")(summary)


def summary_stem(summary: dict) -> str:
    """The name of a summary's files: its benchmark, ``_tte`` for a sweep to accuracy."""
    bench = summary["bench"]
    eps_form = str(summary["info"].get("stop", "iters")).startswith("eps")
    return f"{bench}_tte" if eps_form and bench in ("degree", "nodes", "table2") else bench


def _save_figure(fig: Any, outdir: Path, stem: str) -> list[Path]:
    return [] if fig is None else _save(fig, outdir, stem)


def _plot_tte(summary: dict, outdir: Path) -> list[Path]:
    """The figure and table of a sweep to accuracy (degree, nodes, table2 or noise)."""
    from . import ttefigs as T

    bench, stem = summary["bench"], summary_stem(summary)
    figure, markdown = {"noise": (T.noise_figure, T.noise_markdown),
                        "table2": (T.table2_tte_figure, T.table2_tte_markdown)}.get(
        bench, (T.sweep_tte_figure, T.tte_markdown))
    md = outdir / f"{stem}.md"
    md.write_text(markdown(summary) + "\n")
    return [md, *_save_figure(figure(summary), outdir, stem)]


def _plot_scale(summary: dict, outdir: Path) -> list[Path]:
    """Fig. 3 at scale (``nodes_scale``): activations per node to eps, per graph."""
    from .scalefig import scale_figure, scale_markdown

    md = outdir / "nodes_scale.md"
    md.write_text(scale_markdown(summary) + "\n")
    return [md, *_save_figure(scale_figure(summary), outdir, "nodes_scale")]


def plot_summary(summary: dict, outdir: Path, name: str = "sweep") -> list[Path]:
    """Every figure and table of one benchmark's sweep summary (:mod:`..summaries.records`).

    Parameters
    ----------
    summary : dict
        As made by :func:`dssfn_mpi.bench.summaries.records.sweep_summaries` or read by
        :func:`~dssfn_mpi.bench.summaries.records.read_summary`.
    outdir : pathlib.Path
        Existing folder for the files.
    name : str
        Title of runs that belong to no benchmark.

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    from ..summaries.tables import contention_markdown
    from .timeplots import straggler_figure, sweep_time_figure

    bench = summary["bench"]
    if bench == "crossover":
        from .crossoverfig import plot_crossover

        return plot_crossover(summary, outdir)
    if bench == "decompose":
        from ..sweeps.decompose import decompose_markdown
        from .decomposefig import decompose_figure

        md = outdir / "decomposition.md"
        md.write_text("\n\n".join(decompose_markdown(summary, v) for v in (None, "relax", "times"))
                      + "\n")
        return [md, *_save_figure(decompose_figure(summary), outdir, "decomposition")]
    if summary_stem(summary) != bench or bench == "noise":
        out = _plot_tte(summary, outdir)
        if bench in ("degree", "nodes"):
            chosen, title = _pick_layer_runs(summary)
            out += _per_layer(chosen, outdir, summary_stem(summary), title)
        if bench == "nodes":
            out += _plot_scale(summary, outdir)
        return out
    out: list[Path] = []
    if bench in ("degree", "nodes", "straggler"):
        out += _timing_tables(summary, outdir)
    if bench in ("degree", "nodes"):
        out += sweep_time_figure(summary, outdir)
        chosen, title = _pick_layer_runs(summary)
        out += _per_layer(chosen, outdir, bench, title)
    elif bench == "straggler":
        out += straggler_figure(summary, outdir)
        ok = _ok_records(summary)
        top = max((float(r.get("factor", 1)) for r in ok), default=1.0)
        base = [(f"{r['mode']} {r.get('pattern')} x{float(r.get('factor', 1)):g}", r)
                for r in ok if r.get("pattern") == "none" or float(r.get("factor", 1)) == top]
        out += _per_layer(base, outdir, "straggler", "stragglers: no straggler vs the "
                          "largest slow-down")
    elif bench == "contention":
        md = outdir / "contention.md"
        md.write_text(contention_markdown(summary) + "\n")
        out += [md, *_contention(summary, outdir)]
    elif bench == "table2":
        out += _table2(summary, outdir)
        out += _table2_layers(summary, outdir)
    else:
        out += _per_layer([(r["mode"], r) for r in _ok_records(summary)], outdir, "sweep", name)
    return out


def plot_runs(runs: dict[str, RunLog], outdir: Path, name: str = "sweep",
              network: str = DEFAULT_NETWORK, eps: float = DEFAULT_EPS) -> list[Path]:
    """Every figure and table of the runs of a sweep file, per benchmark found in them,
    and each benchmark's summary (``<bench>.json``, or ``<bench>_tte.json`` for a sweep
    to accuracy), from which ``plot --summary`` draws the same again.

    Parameters
    ----------
    runs : dict of str to RunLog
        As read by ``read_sweep``.
    outdir : pathlib.Path
        Existing folder for the files.
    name : str
        Title of runs that belong to no benchmark.
    network : str
        Network of the projected times.
    eps : float
        Target of the time to eps.

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    from ..summaries.records import sweep_summaries, write_summary

    if any(has_trace(r) for r in runs.values()):
        check_network(network)  # a bad --network fails before any file is written
    out: list[Path] = []
    for summary in sweep_summaries(runs, network, eps).values():
        out.append(write_summary(summary, outdir / f"{summary_stem(summary)}.json"))
        out += plot_summary(summary, outdir, name)
    return out



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


def plot_file(path: str | os.PathLike, outdir: str | os.PathLike,
              network: str = DEFAULT_NETWORK, eps: float = DEFAULT_EPS) -> list[Path]:
    """Draw every figure the file supports into ``outdir`` (PNG and PDF).

    Parameters
    ----------
    path : str or path-like
        A sweep file (``dssfn-mpi bench``), an RMA file (``bench rma``) or a
        run log (``train --out``).
    outdir : str or path-like
        Folder for the figures; created if missing.
    network : str
        Network of the projected dedicated-core times of sweeps (``shm``,
        ``ib``, ``eth10`` or ``alpha=S,beta=B``).
    eps : float
        Target relative distance to O* of the projected time to eps.

    Returns
    -------
    list of pathlib.Path
        The files written: PNG and PDF of each figure, and a Markdown summary
        table per benchmark (``degree.md``, ``nodes.md``, ``straggler.md``,
        ``table2.md``, ``contention.md``; ``jitter.md`` for degree, nodes and
        straggler sweeps with traces).

    Raises
    ------
    UserError
        The file is missing, not HDF5 or holds nothing to plot.
    """
    p = Path(path)
    if not (math.isfinite(eps) and eps > 0):
        raise UserError(f"--eps {eps:g}: the target distance must be a positive number, "
                        "e.g. --eps 1e-2")
    if not p.is_file():
        raise UserError(f"{p} does not exist; give a file written by dssfn-mpi bench or train")
    if p.suffix == ".json":
        from ..summaries.records import read_summary

        summary = read_summary(p)
        out = _make_folder(outdir)
        return plot_summary(summary, out, p.name) or _nothing(p)
    try:
        with h5py.File(p, "r") as f:
            kind = f.attrs.get("kind", "")
            kind = kind.decode() if isinstance(kind, bytes) else str(kind)
    except OSError:
        raise UserError(f"{p} is not an HDF5 file; give a file written by dssfn-mpi") from None
    out = _make_folder(outdir)
    if kind == "rma":
        from .rmaviews import plot_rma

        paths = plot_rma(p, out)
    elif kind == "sweep":
        paths = plot_runs(read_sweep(p), out, p.name, network, eps)
    else:
        paths = _plot_run(p, out)
    return paths or _nothing(p)


def _nothing(path: Path) -> list[Path]:
    raise UserError(f"{path}: no successful runs to plot")


def _make_folder(outdir: str | os.PathLike) -> Path:
    out = Path(outdir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out}: {exc.strerror}; choose another folder") \
            from None
    return out
