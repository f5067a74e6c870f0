"""The decomposition's figure: async's cost at equal accuracy, split into factors.

Drawn from a ``bench decompose`` summary; the factors and their counts are
:mod:`dssfn_mpi.bench.sweeps.decompose`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..sweeps.decompose import FACTORS, decomposition_rows, graph_name
from .figstyle import plt

__all__ = ["decompose_figure"]


def decompose_figure(summary: Mapping[str, Any]) -> Any:
    """``decomposition``: per graph and node count, each factor of :data:`FACTORS` as a
    bar (log scale, 1 = no cost)."""
    rows = [(M, g, b, {n: v for n, v in f.items()  # the product when both parts ran
                       if not (n == "graph + formulation" and "formulation" in f)})
            for M, g, b, f in decomposition_rows(summary) if f]
    if not rows:
        return None
    names = [n for n, _, _ in FACTORS if any(n in r[3] for r in rows)]
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(7, 1.3 * len(rows)), 4.5))
    colours = ("tab:green", "tab:purple", "tab:brown", "tab:blue", "tab:olive", "tab:cyan")
    for j, name in enumerate(names):
        xs = [i + (j - (len(names) - 1) / 2) * width for i, r in enumerate(rows) if name in r[3]]
        ys = [r[3][name] for r in rows if name in r[3]]
        bars = ax.bar(xs, ys, width, label=name,
                      color=colours[[n for n, _, _ in FACTORS].index(name)])
        ax.bar_label(bars, [f"{y:.2f}x" for y in ys], fontsize=7)
    ax.set_xticks(range(len(rows)), [f"{graph_name(g)}\nM = {M}" for M, g, _, _ in rows])
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_ylabel("ratio of activations per node to eps (log)")
    ax.grid(alpha=0.3, axis="y", which="both")
    ax.legend(fontsize=8)
    i = summary["info"]
    ax.set_title(f"Cost of async at equal accuracy, split ({i.get('dataset', '?')}, layers 1-"
                 f"{i.get('layers', '?')}, {i.get('stop', '?')}, simulated; each "
                 f"variant at its best relaxation)", fontsize=9)
    fig.tight_layout()
    return fig
