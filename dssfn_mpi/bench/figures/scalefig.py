"""Fig. 3 at scale: activations per node to eps against M, one panel per graph.

Drawn from a ``bench nodes --to-eps`` summary (:mod:`..summaries.records`) whose runs span the ring
and other circular degrees (``--set degrees=2,8``): per graph, each mode's activations
(async) or iterations (the synchronous engines; one step per layer for the one-shot
baseline) per node, summed over the layers, the input layer included, until every node
is within eps of O*, and below them the time to eps. The simulated runs are drawn where
the summary has them (they reach past the node counts run live), else the live ones.

Three kinds of point, each marked:

* **reached**: every layer within eps (filled);
* **capped**: a layer ended at the cap K of activations, hollow, labelled with the worst
  layer's distance to O* (the count is the cap's, a lower bound);
* **stopped**: the job ran into the sweep's job timeout; drawn as ``x`` at what its
  finished layers took (a lower bound), labelled with the layers it finished (not drawn when
  it finished none).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..variants import decentralized
from .figstyle import plt, style
from .ttefigs import _title, mode_order, select

__all__ = ["GRAPH_ORDER", "per_node", "point_state", "scale_figure", "scale_markdown",
           "scale_records", "worst_distance"]

#: Graph labels (``bench_graph``) in panel order; others follow by name.
GRAPH_ORDER = ("ring", "d8")
#: Markers' meaning, for the legend and the table's note.
_STATES = {"capped": "hollow: a layer at the cap K, labelled with its distance to O*",
           "stopped": "x: stopped at the job timeout (its finished layers, a lower bound)"}


def scale_records(summary: Mapping[str, Any]) -> list[dict]:
    """The summary's decentralized runs to accuracy that finished or stopped at the job
    timeout, simulated ones if any (else the live ones), each with its ``graph``."""
    recs = [r for r in summary["records"] if decentralized(r["mode"])
            and (r.get("status") == "stopped" or r.get("ok") and r.get("activations_per_layer")
                 and str(r.get("stop", "")).startswith("eps"))]
    kind = "simulated" if any(r["kind"] == "simulated" for r in recs) else "live"
    return [{**r, "graph": r.get("graph") or "ring"} for r in recs if r["kind"] == kind]


def point_state(rec: Mapping[str, Any]) -> str:
    """``reached``, ``capped`` or ``stopped`` (module docstring)."""
    if rec.get("status") == "stopped":
        return "stopped"
    return "capped" if rec.get("eps_reached") is False else "reached"


def worst_distance(rec: Mapping[str, Any]) -> float:
    """The largest relative distance to O* over the run's finished layers."""
    rel = np.asarray(rec.get("rel_per_layer") or [math.nan], dtype=float)
    return float(np.nanmax(rel)) if np.isfinite(rel).any() else math.nan


def _graphs(recs: list[dict]) -> list[str]:
    names = {r["graph"] for r in recs}
    return [g for g in GRAPH_ORDER if g in names] + sorted(names - set(GRAPH_ORDER))


def _graph_title(graph: str) -> str:
    return "ring (d = 2; d = 1 at M = 2)" if graph == "ring" else \
        f"circular graph, degree {graph.removeprefix('d')}"


def _series(ax, got: list[dict], key: Any, st: dict, label: str, annotate: bool) -> None:
    """One mode's line through its finished runs, with every point marked by its state;
    ``key(rec)`` gives the y value."""
    xs = np.array([r["value"] for r in got], dtype=float)
    ys = np.array([key(r) for r in got], dtype=float)
    states = np.array([point_state(r) for r in got])
    color, marker = st.get("color"), st.get("marker", "o")
    line = states != "stopped"  # a stopped run's lower bound stands apart from the line
    ax.plot(xs[line], ys[line], color=color, alpha=0.8, label=label)
    for state, kw in (("reached", dict(marker=marker, color=color)),
                      ("capped", dict(marker=marker, markerfacecolor="none",
                                      markeredgecolor=color, markeredgewidth=1.5)),
                      ("stopped", dict(marker="x", color=color, markeredgewidth=2))):
        sel = states == state
        if sel.any():
            ax.plot(xs[sel], ys[sel], linestyle="none", markersize=7, gid=state, **kw)
    if not annotate:
        return
    for r, x, y, state in zip(got, xs, ys, states):
        if state != "reached" and np.isfinite(y):
            text = f"{worst_distance(r):.1e}" if state == "capped" else _stopped_text(r)
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4),
                        fontsize=6, color=color)


def per_node(rec: Mapping[str, Any]) -> float:
    """Activations (iterations) per node over the run's layers: each layer's most active
    node's count, summed; NaN for a run stopped before its first layer ended."""
    acts = rec.get("activations_per_layer") or []
    return float(np.sum(acts)) if len(acts) else math.nan


def _stopped_text(rec: Mapping[str, Any]) -> str:
    """How far a stopped run got: ``2/3 layers`` (its log's layer count), or ``no layer``."""
    done = len(rec.get("activations_per_layer") or [])
    return f"{done}/{rec['layers'] + 1} layers" if done else "no layer"


def scale_figure(summary: Mapping[str, Any]) -> Any:
    """``nodes_scale``: per graph (columns), activations per node to eps (top) and the time
    to eps (bottom) against M, log-log; None without runs to accuracy."""
    recs = scale_records(summary)
    if not recs:
        return None
    graphs = _graphs(recs)
    fig, axes = plt.subplots(2, len(graphs), figsize=(6.5 * len(graphs) + 2, 9),
                             squeeze=False, sharex="col")
    for col, graph in enumerate(graphs):
        mine = [r for r in recs if r["graph"] == graph]
        for mode in mode_order(r["mode"] for r in mine):
            got = select(mine, mode)
            st = style(mode)
            _series(axes[0, col], got, per_node, st, mode, annotate=True)
            _series(axes[1, col], got, lambda r: r.get("time_at_eps", math.nan), st, mode,
                    annotate=False)
        xs = sorted({r["value"] for r in mine})
        for row, ylabel in ((0, "activations / iterations per node to eps\n(sum over "
                                "layers; log)"), (1, f"time to eps [s] ({mine[0]['kind']}; "
                                                     "log)")):
            ax = axes[row, col]
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(xs, [f"{v:g}" for v in xs], fontsize=7)
            ax.minorticks_off()
            ax.grid(alpha=0.3, which="both")
            ax.set_ylabel(ylabel)
        axes[0, col].set_title(_graph_title(graph), fontsize=10)
        axes[1, col].set_xlabel("nodes M")
    ax = axes[0, -1]
    for state, text in _STATES.items():
        ax.plot([], [], linestyle="none", color="gray", label=text,
                **(dict(marker="o", markerfacecolor="none") if state == "capped"
                   else dict(marker="x")))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(_title(summary, f"Fig. 3 at equal accuracy to M = {max(xs):g} "
                                 f"({recs[0]['kind']})"), fontsize=10)
    fig.tight_layout()
    return fig


def _cell(rec: Mapping[str, Any] | None) -> str:
    if rec is None:
        return "-"
    state, count = point_state(rec), f"{per_node(rec):g}"
    time = rec.get("time_at_eps", math.nan)
    time_text = f"{time:.3f} s" if math.isfinite(time) else "-"
    if state == "capped":
        return f"{count} (cap {rec.get('iters', '?')}, {worst_distance(rec):.1e}), {time_text}"
    if state == "stopped":
        done = _stopped_text(rec)
        return f"stopped, {done}: >= {count}" if done != "no layer" else "stopped, no layer"
    return f"{count}, {time_text}"


def scale_markdown(summary: Mapping[str, Any]) -> str:
    """The table of :func:`scale_figure`: per M, each graph's and mode's activations per
    node to eps and time to eps."""
    recs = scale_records(summary)
    if not recs:
        return "(no runs to accuracy in this summary)"
    graphs = _graphs(recs)
    by = {(r["graph"], r["mode"], r["value"]): r for r in recs}
    failed = {(r.get("graph") or "ring", r["mode"], r["value"]) for r in summary["records"]
              if r.get("status") == "failed" and r.get("kind") == recs[0]["kind"]}
    cols = [(g, m) for g in graphs for m in mode_order(r["mode"] for r in recs if r["graph"] == g)]
    lines = ["| M | " + " | ".join(f"{m} ({g})" for g, m in cols) + " |",
             "|---" * (1 + len(cols)) + "|"]
    for v in sorted({r["value"] for r in recs}):
        cells = ["failed" if (g, m, v) in failed and (g, m, v) not in by
                 else _cell(by.get((g, m, v))) for g, m in cols]
        lines.append(f"| {v:g} | " + " | ".join(cells) + " |")
    lines += ["", f"Activations (async) or iterations per node until every layer (input "
                  f"layer included) of every node is within {summary['eps']:g} of O*, summed "
                  f"over the layers (each layer's most active node), then the time to eps "
                  f"({recs[0]['kind']} seconds). (cap K, D): a layer ended at its cap of K "
                  f"activations or iterations per node, D its relative distance to O*; "
                  f"stopped: the job timeout ended the run, the count is its finished "
                  f"layers'; failed: the run crashed; -: not run."]
    return "\n".join(lines)
