"""The crossover's ratio: best synchronous over best asynchronous time to eps.

Read from a ``bench crossover`` summary (:mod:`dssfn_mpi.bench.sweeps.crossover`): per
dataset, network, graph, node count M and noise case, the fastest *synchronous* mode run
(every decentralized mode of the algorithm registry that is not one-sided: consensus by
allreduce or by mixing, lockstep rounds, the one-shot baseline) against the fastest
*asynchronous* one (the one-sided modes). The times are simulated seconds (each
activation's measured thread CPU time plus the network model) until every node of every
layer of the view is within eps of O*, in two views: the layers past the input layer
(``after_input``) and every layer (``all``).

**Reading the ratio**: best synchronous time / best asynchronous time, so above 1 async is
faster, below 1 a synchronous mode is.

**Capped points.** A run whose layer of the view ended at the cap K (or that ran into the
job timeout) gives a lower bound of its time. The best of a side is exact when its fastest
time is exact (every bound of the side is above it), else a lower bound. So the ratio is a
lower bound (``>=``) when only the synchronous best is bounded, an upper bound (``<=``)
when only the asynchronous best is, and unknown (``?``, its value the ratio of the two
bounds) when both are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["VIEWS", "Best", "best_of", "crossover_markdown", "graph_free_spread",
           "graph_label", "network_order", "noise_order", "ratio_rows", "side_of",
           "spread_line", "view_time", "wins_line"]

#: The views: name -> (record field, what it covers).
VIEWS = {"after_input": ("time_after_input", "layers >= 1"), "all": ("time_all", "all layers")}


@dataclass(frozen=True)
class Best:
    """The fastest mode of one side in one case.

    Attributes
    ----------
    mode : str
        Its mode.
    seconds : float
        Its simulated time to eps in the view.
    bound : bool
        True when that time is only a lower bound (module docstring).
    """

    mode: str
    seconds: float
    bound: bool


def side_of(mode: str) -> str | None:
    """``async`` for a one-sided mode of the registry, ``sync`` for any other decentralized
    one, None for the rest (central, an unknown name)."""
    from ...algorithms import lookup
    from ...errors import UserError

    try:
        alg = lookup(mode)
    except UserError:
        return None
    if not alg.decentralized:
        return None
    return "async" if alg.one_sided else "sync"


def view_time(rec: Mapping[str, Any], view: str) -> tuple[float, bool] | None:
    """A record's simulated time to eps in ``view`` and whether it is a lower bound; None
    for a run without a finished layer of the view (failed, or stopped before it)."""
    times = [float(t) for t in rec.get("layer_times") or []]
    at_eps = list(rec.get("layer_eps") or [])
    first = 1 if view == "after_input" else 0
    complete = rec.get("status") == "ok" and len(times) == int(rec.get("layers", -1)) + 1
    if len(times) <= first or not (complete or rec.get("status") == "stopped"):
        return None
    seconds = float(sum(times[first:]))
    if not (math.isfinite(seconds) and seconds > 0):
        return None
    return seconds, not (complete and all(at_eps[first:]))


def best_of(recs: list[Mapping[str, Any]], view: str) -> Best | None:
    """The fastest of ``recs`` in ``view`` (module docstring); None when none has a time."""
    points = [(vt, str(r["mode"])) for r in recs if (vt := view_time(r, view)) is not None]
    if not points:
        return None
    (seconds, bound), mode = min(points, key=lambda p: (p[0][0], p[0][1]))
    return Best(mode, seconds, bound)


def _cases(summary: Mapping[str, Any]) -> dict[tuple, list[dict]]:
    """The summary's records by case: ``(dataset, network, graph, M, noise)``."""
    out: dict[tuple, list[dict]] = {}
    for r in summary["records"]:
        key = (str(r.get("dataset")), str(r.get("net", summary.get("network", ""))),
               str(r.get("graph")), int(r.get("nodes") or r.get("value") or 0),
               str(r.get("case")))
        out.setdefault(key, []).append(r)
    return out


def _graph_facts(recs: list[dict]) -> dict[str, Any]:
    """Degree, diameter and spectral gap of a case's graph (from any of its run logs)."""
    for r in recs:
        if r.get("graph_diameter") is not None:
            return {"degree": r.get("degree"), "diameter": r.get("graph_diameter"),
                    "spectral_gap": r.get("graph_spectral_gap")}
    return {"degree": None, "diameter": None, "spectral_gap": None}


def ratio_rows(summary: Mapping[str, Any], view: str = "after_input") -> list[dict[str, Any]]:
    """One row per case with both sides run: its labels, graph facts, each side's
    :class:`Best`, ``ratio`` (best sync / best async) and ``bound`` (``""`` exact, ``">="``,
    ``"<="`` or ``"?"``; module docstring)."""
    rows = []
    for (dataset, net, graph, M, noise), recs in _cases(summary).items():
        sides = {s: best_of([r for r in recs if side_of(str(r["mode"])) == s], view)
                 for s in ("sync", "async")}
        if sides["sync"] is None or sides["async"] is None:
            continue
        s, a = sides["sync"], sides["async"]
        bound = {(False, False): "", (True, False): ">=", (False, True): "<=",
                 (True, True): "?"}[(s.bound, a.bound)]
        rows.append({"dataset": dataset, "network": net, "graph": graph, "nodes": M,
                     "noise": noise, "sync": s, "async": a, "ratio": s.seconds / a.seconds,
                     "bound": bound, **_graph_facts(recs)})
    return rows


def noise_order(summary: Mapping[str, Any]) -> list[str]:
    """The noise cases of a summary: the sweep's order (``info["noises"]``), then others
    as they appear."""
    seen = list(dict.fromkeys(str(r.get("case")) for r in summary["records"]))
    known = [n for n in summary.get("info", {}).get("noises", []) if n in seen]
    return known + [n for n in seen if n not in known]


def _graph_order(summary: Mapping[str, Any]) -> list[str]:
    seen = list(dict.fromkeys(str(r.get("graph")) for r in summary["records"]))
    known = [g for g in summary.get("info", {}).get("graphs", []) if g in seen]
    return known + [g for g in seen if g not in known]


def graph_label(graph: str, short: bool = False) -> str:
    """How the figure (or, ``short``, the table, which gives the degree) names a graph of
    the sweep."""
    names = {"circular-d8": ("circular, d = 8", "circular"),
             "random-regular-d8": ("random-regular, d = 8", "random-regular"),
             "exponential": ("exponential (i linked to i ± 2^k)", "exponential")}
    return names.get(graph, (graph, graph))[int(short)]


def _cell(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return "-"
    return f"{row['bound']}{row['ratio']:.2f}" if row["bound"] != "?" else \
        f"? ({row['ratio']:.2f})"


def _best_cell(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return "-"
    s, a = row["sync"], row["async"]
    return (f"{s.mode} {1e3 * s.seconds:.1f}{'+' if s.bound else ''} / "
            f"{a.mode} {1e3 * a.seconds:.1f}{'+' if a.bound else ''}")


def network_order(summary: Mapping[str, Any], nets: set[str]) -> list[str]:
    """The networks of a summary's cases: its own first, then the others by name."""
    first = str(summary.get("network", ""))
    return [n for n in [first] if n in nets] + sorted(nets - {first})


def _table(summary: Mapping[str, Any], rows: dict[str, dict], group: tuple, view: str | None,
           noises: list[str]) -> list[str]:
    """The lines of one dataset's and network's table."""
    lines = ["| M | graph | d | diameter | " + " | ".join(noises) + " |",
             "|---" * (4 + len(noises)) + "|"]
    order = _graph_order(summary)
    keys = sorted({k[2:4] for v in rows.values() for k in v if k[:2] == group},
                  key=lambda gm: (gm[1], order.index(gm[0])))
    for graph, M in keys:
        case = [(*group, graph, M, n) for n in noises]
        facts = next((rows[v][c] for v in VIEWS for c in case if c in rows[v]), {})
        if view == "best":
            cells = [_best_cell(rows["after_input"].get(c)) for c in case]
        else:
            cells = [f"{_cell(rows['after_input'].get(c))} / {_cell(rows['all'].get(c))}"
                     for c in case]
        lines.append(f"| {M} | {graph_label(graph, short=True)} | {facts.get('degree', '-')} "
                     f"| {facts.get('diameter', '-')} | " + " | ".join(cells) + " |")
    lines.append("")
    if view != "best":
        lines += [wins_line([r for k, r in rows["after_input"].items() if k[:2] == group]), ""]
    return lines


def crossover_markdown(summary: Mapping[str, Any], view: str | None = None) -> str:
    """The ratios per M x graph x noise (default: ``layers >= 1 / all layers`` in each
    cell) or, with view ``best``, the fastest mode of each side and its simulated
    milliseconds (layers >= 1); one table per dataset and network."""
    rows = {v: {(r["dataset"], r["network"], r["graph"], r["nodes"], r["noise"]): r
                for r in ratio_rows(summary, v)} for v in VIEWS}
    if not rows["all"] and not rows["after_input"]:
        return "(no case of this summary has both a synchronous and an asynchronous run)"
    keys = {k[:2] for v in rows.values() for k in v}
    groups = [(d, n) for d in sorted({k[0] for k in keys})
              for n in network_order(summary, {k[1] for k in keys if k[0] == d})
              if (d, n) in keys]
    lines: list[str] = []
    for group in groups:
        if len(groups) > 1:
            lines += [f"{group[0]}, network {group[1]}:", ""]
        noises = [n for n in noise_order(summary)
                  if any(k[:2] == group and k[4] == n for v in rows.values() for k in v)]
        lines += _table(summary, rows, group, view, noises)
    spread = spread_line(summary) if view != "best" else ""
    return "\n".join(lines + ([spread, ""] if spread else []) + [_note(summary, view)])


def _wins(rows: list[Mapping[str, Any]]) -> tuple[list, int]:
    """The rows where async is faster for certain (ratio above 1, exact or a lower bound),
    and the count of rows left undecided by a bound (``<=`` above 1, ``?``)."""
    wins = [r for r in rows if r["ratio"] > 1 and r["bound"] in ("", ">=")]
    open_ = sum(1 for r in rows if r["bound"] == "?" or (r["bound"] == "<=" and r["ratio"] > 1))
    return wins, open_


def wins_line(rows: list[Mapping[str, Any]]) -> str:
    """One sentence from the ratios (layers >= 1): per M, in how many of its cases async is
    faster, and which."""
    parts = []
    for M in sorted({r["nodes"] for r in rows}):
        mine = [r for r in rows if r["nodes"] == M]
        wins, open_ = _wins(mine)
        which = "; ".join(f"{graph_label(g, short=True)}: "
                          + ", ".join(r["noise"] for r in wins if r["graph"] == g)
                          for g in dict.fromkeys(r["graph"] for r in wins))
        parts.append(f"M = {M}: {len(wins)} of {len(mine)}" + (f" ({which})" if wins else "")
                     + (f", {open_} undecided by the cap" if open_ else ""))
    return "Async faster (layers >= 1, ratio above 1): " + "; ".join(parts) + "."


def graph_free_spread(summary: Mapping[str, Any]) -> dict[str, list[float]]:
    """The measurement's own spread: for every engine that averages by one allreduce (its
    iterates and its collective's cost are the same on every graph), at each M and noise
    case run on several graphs, its largest simulated time (layers >= 1) over its smallest,
    minus 1; by engine."""
    from ...algorithms import lookup
    from ...errors import UserError

    def collective(mode: str) -> bool:
        try:
            return lookup(mode).collective
        except UserError:
            return False

    by: dict[tuple, list[float]] = {}
    for r in summary["records"]:
        vt = view_time(r, "after_input")
        if vt is not None and not vt[1] and collective(str(r["mode"])):
            key = (r["mode"], r.get("dataset"), r.get("net"), r.get("nodes"), r.get("case"))
            by.setdefault(key, []).append(vt[0])
    out: dict[str, list[float]] = {}
    for key, times in by.items():
        if len(times) > 1:
            out.setdefault(key[0], []).append(max(times) / min(times) - 1)
    return out


def _median(values: list[float]) -> float:
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def spread_line(summary: Mapping[str, Any]) -> str:
    """One sentence on :func:`graph_free_spread` ('' when nothing ran on several graphs)."""
    spread = graph_free_spread(summary)
    if not spread:
        return ""
    parts = [f"{mode} by up to {100 * max(v):.0f} % (median {100 * _median(v):.0f} %, "
             f"{len(v)} cases)" for mode, v in spread.items()]
    return (f"The measurement's own spread: the allreduce engines' iterates and collectives "
            f"are the same on every graph, yet their simulated times (layers >= 1) at the "
            f"same M and noise differ between graphs, {'; '.join(parts)}, each run timing its "
            f"own activations' CPU on a shared machine: a ratio that close to 1 is a tie.")


def _note(summary: Mapping[str, Any], view: str | None) -> str:
    eps, cap = summary.get("eps"), summary.get("info", {}).get("iters", "?")
    if view == "best":
        return (f"Each cell: the fastest synchronous mode and its simulated milliseconds to "
                f"eps = {eps:g} at layers >= 1, then the fastest asynchronous one; `+`: a "
                f"lower bound (a layer at the cap K = {cap} or the run stopped).")
    return (f"Each cell: best synchronous / best asynchronous simulated time until every "
            f"node is within eps = {eps:g} of O*, at layers >= 1, then over all layers; above "
            f"1 async is faster. Synchronous: every non-one-sided decentralized mode run; "
            f"asynchronous: the one-sided ones. `<=` / `>=`: a bound, the asynchronous / the "
            f"synchronous best stopped at the cap K = {cap}; `?`: both; -: not run. "
            f"Simulated time: each activation's measured thread CPU time plus the network "
            f"model.")
