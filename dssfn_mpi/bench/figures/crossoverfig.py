"""The crossover figure: best synchronous / best asynchronous time to eps against M.

Drawn from a ``bench crossover`` summary; the ratios, their bounds and the table are
:mod:`dssfn_mpi.bench.summaries.crossratio`'s. One column per graph, one row per view
(layers >= 1, all layers), one line per noise case (dashed and dotted: other networks); a
horizontal line at 1 (above it async is faster); a point whose ratio is only a bound (a run
at the cap) is drawn hollow.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import product
from pathlib import Path
from typing import Any

from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..summaries.crossratio import (
    VIEWS,
    crossover_markdown,
    graph_label,
    network_order,
    noise_order,
    ratio_rows,
)
from .figstyle import plt, save

__all__ = ["crossover_figure", "plot_crossover"]

_COLOURS = ("black", "tab:blue", "tab:cyan", "tab:purple", "tab:red", "tab:orange",
            "tab:green", "tab:brown")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<")
#: The line of each network, the summary's own first.
_LINES = ("-", "--", ":")


def _graphs(rows: list[dict], summary: Mapping[str, Any]) -> list[str]:
    seen = list(dict.fromkeys(r["graph"] for r in rows))
    known = [g for g in summary.get("info", {}).get("graphs", []) if g in seen]
    return known + [g for g in seen if g not in known]


def _series(ax: Any, rows: list[dict], style: dict, label: str) -> None:
    """One noise case: a line through its points, exact ones filled, bounds hollow."""
    rows = sorted(rows, key=lambda r: r["nodes"])
    colour, marker = style["color"], style["marker"]
    ax.plot([r["nodes"] for r in rows], [r["ratio"] for r in rows], markersize=7, alpha=0.85,
            label=label, gid="exact", **style)
    bounds = [r for r in rows if r["bound"]]
    if bounds:
        ax.plot([r["nodes"] for r in bounds], [r["ratio"] for r in bounds], linestyle="none",
                marker=marker, markersize=7, markerfacecolor="white", markeredgecolor=colour,
                markeredgewidth=1.5, gid="bound")


def _axes_style(ax: Any, xs: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(xs, [f"{x:g}" for x in xs], fontsize=7)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.axhline(1.0, color="black", lw=0.9)
    ax.grid(alpha=0.3, which="both")


def crossover_figure(summary: Mapping[str, Any]) -> Any:
    """``crossover``: per graph (columns) and view (rows), best synchronous / best
    asynchronous simulated time to eps against M, a line per noise case; None without a
    case that has both sides."""
    by_view = {v: ratio_rows(summary, v) for v in VIEWS}
    every = [r for rows in by_view.values() for r in rows]
    if not every:
        return None
    graphs, noises = _graphs(every, summary), noise_order(summary)
    nets = network_order(summary, {r["network"] for r in every})
    fig, axes = plt.subplots(len(VIEWS), len(graphs), figsize=(4.6 * len(graphs) + 2.2, 7.6),
                             squeeze=False, sharex="col", sharey="row")
    for row, (view, (_field, what)) in enumerate(VIEWS.items()):
        for col, graph in enumerate(graphs):
            ax = axes[row, col]
            mine = [r for r in by_view[view] if r["graph"] == graph]
            for (i, noise), (j, net) in product(enumerate(noises), enumerate(nets)):
                got = [r for r in mine if r["noise"] == noise and r["network"] == net]
                style = {"color": _COLOURS[i % len(_COLOURS)],
                         "marker": _MARKERS[i % len(_MARKERS)], "linestyle": _LINES[j % 3]}
                if got:
                    _series(ax, got, style, noise if j == 0 else f"{noise}, {net}")
            _axes_style(ax, sorted({r["nodes"] for r in every if r["graph"] == graph}))
            if row == 0:
                ax.set_title(graph_label(graph), fontsize=10)
            if row == len(VIEWS) - 1:
                ax.set_xlabel("nodes M")
            if col == 0:
                ax.set_ylabel(f"best sync / best async, {what}\n(above 1: async faster; log)")
    handles, labels = axes[0, -1].get_legend_handles_labels()
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    handles.append(axes[0, -1].plot([], [], linestyle="none", marker="o", color="gray",
                                    markerfacecolor="white")[0])
    labels.append("hollow: a bound (a run at the cap K)")
    axes[0, -1].legend(handles, labels, fontsize=7, title="noise", title_fontsize=8,
                       loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(_title(summary), fontsize=9)
    fig.tight_layout()
    return fig


def _title(summary: Mapping[str, Any]) -> str:
    i = summary.get("info", {})
    nets = network_order(summary, {str(r.get("net", summary.get("network")))
                                   for r in summary["records"]})
    return (f"Where asynchrony wins: simulated time to eps = {summary.get('eps', 0.01):g} "
            f"(every node, every layer), best synchronous over best asynchronous mode;\n"
            f"{i.get('dataset', '?')}, L = {i.get('layers', '?')}, cap K = "
            f"{i.get('iters', '?')}, network {', '.join(nets)}"
            + (f" ({', '.join(('solid', 'dashed', 'dotted')[:len(nets)])})"
               if len(nets) > 1 else "")
            + "; simulated seconds: each activation's measured thread CPU time plus the "
            "network model")


def plot_crossover(summary: Mapping[str, Any], outdir: Path) -> list[Path]:
    """``crossover.md`` (the ratio table and the fastest modes) and the figure."""
    md = outdir / "crossover.md"
    md.write_text(crossover_markdown(summary) + "\n\n" + crossover_markdown(summary, "best")
                  + "\n")
    fig = crossover_figure(summary)
    return [md, *([] if fig is None else save(fig, outdir, "crossover"))]
