"""The answer of README.md and the summary of the results page, rendered from the data.

Every number of these paragraphs is computed here from the committed sweep summaries
in ``results/data`` (``degree_tte``, ``nodes_tte``, ``table2_tte``, ``noise`` at equal
accuracy; ``degree``, ``nodes``, ``table2`` at the paper's fixed K; ``table2_L20``),
so the prose cannot drift from the data: ranges are the smallest and largest of the
unrounded values, ratios are taken before rounding. The text sits between marker lines
of its page::

    <!-- text: answer readme -->
    ...
    <!-- /text -->

and ``dssfn-mpi plot --all`` rewrites it (:mod:`dssfn_mpi.bench.pages.mdtables`). Views:
``readme`` (README's answer paragraph) and ``brief`` (the results page's "In brief").
"""

from __future__ import annotations

import math
import os
import re
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ...errors import UserError
from ..variants import algorithm, decentralized

__all__ = ["VIEWS", "answer_markdown", "facts"]

#: The summaries the answer is computed from (``results/data/<name>.json``).
SOURCES = ("degree_tte", "nodes_tte", "table2_tte", "noise", "degree", "nodes", "table2",
           "table2_L20", "decomposition", "noise_best", "noise_best_m128", "crossover")
#: The sweeps at equal accuracy whose relaxation the answer names.
TTE = ("degree_tte", "nodes_tte", "table2_tte", "noise")

_WIDTH = 95
_LINK_EQ = "docs/ALGORITHMS.md#why-eq-7-is-biased-when-the-bound-is-active"
_LINK_SPLIT = "docs/RESULTS.md#asyncs-cost-split-graph-formulation-asynchrony"
_LINK_MAP = "BENCHMARKS.md#where-asynchrony-wins-graphs-scale-and-noise"
_LINK_RELAX = "docs/ALGORITHMS.md#default-relaxations"
_LINK_KINDS = "BENCHMARKS.md#the-machine-and-the-kinds-of-numbers"
_LINK_NOISE = "BENCHMARKS.md#noise-and-stragglers-at-the-papers-size"
_LINK_T2 = "BENCHMARKS.md#table-2s-times-at-equal-accuracy"

# ------------------------------------------------------------------ formatting


def _rng(values: Iterable[float], spec: str = ".2f", unit: str = "") -> str:
    """``"lo - hi"`` of the unrounded values (one number when both print alike)."""
    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        raise UserError("the answer needs a value the data do not hold")
    lo, hi = format(min(vals), spec), format(max(vals), spec)
    return f"{lo}{unit}" if lo == hi else f"{lo} - {hi}{unit}"


def _x(value: float) -> str:
    """A speed-up factor: two significant digits below 1, one decimal above."""
    return f"{value:.2g}x" if value < 1 else f"{value:.1f}x"


def _sci(value: float) -> str:
    """``0.01`` as ``1e-2``."""
    mant, _, exp = f"{value:.0e}".partition("e")
    return f"{mant}e{int(exp)}"


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _samples(dataset: str) -> tuple[int, int]:
    """Training and test samples of a dataset, from its one record in the package."""
    from ...datasets import REGISTRY

    m = re.search(r"(\d+)/(\d+)", REGISTRY[dataset].description)
    if m is None:
        raise UserError(f"{dataset}: its description names no train/test split")
    return int(m[1]), int(m[2])


# ------------------------------------------------------------------ the data


def load(data_dir: str | os.PathLike) -> dict[str, dict]:
    """The summaries of :data:`SOURCES` from ``data_dir``.

    Raises
    ------
    UserError
        One of them is missing or not a summary.
    """
    return {name: read_source(data_dir, name, "the answer is computed from it")
            for name in SOURCES}


def read_source(data_dir: str | os.PathLike, name: str, why: str) -> dict:
    """The summary ``name`` (without ``.json``) of ``data_dir``.

    Raises
    ------
    UserError
        It is missing (the message says ``why`` it is needed) or not a summary.
    """
    from ..summaries.records import read_summary

    path = Path(data_dir) / f"{name}.json"
    if not path.is_file():
        raise UserError(f"{path}: no such data file ({why})")
    return read_summary(path)


def pick_view(views: Mapping[str, Any], view: str | None, what: str) -> Any:
    """``views[view]``, or a one-line error naming the views of ``what``.

    Raises
    ------
    UserError
        ``view`` is not one of ``views``.
    """
    if view not in views:
        raise UserError(f"no {what} view {view!r}; one of {', '.join(views)}")
    return views[view]


def _tte(summary: Mapping[str, Any], kinds: tuple[str, ...] = ("live",)) -> dict:
    """Successful runs to accuracy by ``(mode, key)``; key = swept value, dataset or case."""
    out = {}
    for r in summary["records"]:
        if not r.get("ok") or not decentralized(r["mode"]) or r["kind"] not in kinds:
            continue
        key = {"table2": r["dataset"], "noise": str(r.get("case"))}.get(summary["bench"],
                                                                       r["value"])
        out[(r["mode"], key)] = r
    return out


def _of(by: Mapping[tuple, Any], mode: str) -> dict:
    """``key -> value`` of one mode's entries of a ``(mode, key)`` mapping."""
    return {k: v for (m, k), v in by.items() if m == mode}


def _where(by: Mapping[tuple, Any], *modes: str) -> list:
    """The keys of a ``(mode, key)`` mapping where every one of ``modes`` ran, sorted."""
    return sorted(set.intersection(*(set(_of(by, m)) for m in modes)))


def _records_of(records: Iterable[dict], mode: str) -> list[dict]:
    """The records of one mode."""
    return [r for r in records if r["mode"] == mode]


def _ratios(by: dict, num: str, den: str, field: str = "time_at_eps") -> dict:
    """``num / den`` per key where both ran."""
    return {k: by[(num, k)][field] / by[(den, k)][field]
            for (m, k) in by if m == den and (num, k) in by}


def _fixed_k(summary: Mapping[str, Any], setting: str | None = None) -> dict:
    """Projected seconds (mean over seeds) by ``(mode, key)`` of a fixed-K summary."""
    acc: dict[tuple, list[float]] = {}
    for r in summary["records"]:
        if r.get("ok") and decentralized(r["mode"]) and r.get("setting", setting) == setting:
            key = r["dataset"] if summary["bench"] == "table2" else r["value"]
            acc.setdefault((r["mode"], key), []).append(r["projected_seconds"])
    return {k: sum(v) / len(v) for k, v in acc.items()}


# ------------------------------------------------------------------ the numbers


def _equal_accuracy(s: dict[str, dict]) -> dict[str, str]:
    """sync / async at equal accuracy on every sweep, and where async loses its lead."""
    deg, nod = _tte(s["degree_tte"]), _tte(s["nodes_tte"])
    t2 = _tte(s["table2_tte"])
    noise = _tte(s["noise"], ("live", "replay"))
    r_deg, r_nod = _ratios(deg, "sync", "async"), _ratios(nod, "sync", "async")
    r_t2, r_noise = _ratios(t2, "sync", "async"), _ratios(noise, "sync", "async")
    worst = max(max(r.values()) for r in (r_deg, r_nod, r_t2, r_noise))
    first = ("first" if worst < 0.95 else "first, or level," if worst <= 1.0
             else f"first, or within {100 * (worst - 1):.0f} % of async,")
    lo_ds, hi_ds = min(r_t2, key=r_t2.get), max(r_t2, key=r_t2.get)
    slow = sorted(float(c.split(":")[1]) for c in r_noise if c.startswith("slow:"))
    sg_deg = _ratios(deg, "sync-graph", "async")
    info = s["degree_tte"]["info"]
    return {
        "eps": _sci(s["degree_tte"]["eps"]), "first": first,
        "M": f"{info['nodes']}", "cap": f"{info['iters']}",
        "deg": _rng(r_deg.values()), "deg_values": _rng(sorted({k for _m, k in deg}), "g"),
        "nodes": _rng(r_nod.values()), "nodes_values": _rng(sorted({k for _m, k in nod}), "g"),
        "noise": _rng(r_noise.values()),
        "noise_graph": f"M = {s['noise']['info']['nodes']}, d = {s['noise']['info']['degree']}",
        "slow": _rng(slow, "g", "x"),
        "t2": f"{r_t2[lo_ds]:.2f} ({lo_ds}) - {r_t2[hi_ds]:.2f} ({hi_ds})",
        "sg_deg": _rng(sg_deg.values()),
        "sg_nodes": _rng(_ratios(nod, "sync-graph", "async").values()),
        "sg_t2": _rng(_ratios(t2, "sync-graph", "async").values()),
        "sg_noise_r": _rng(_ratios(noise, "sync-graph", "async").values()),
        "verdict": _verdict([v for r in (r_deg, r_nod, r_t2, r_noise) for v in r.values()]),
        "sg_noise": _rng(_ratios(noise, "sync-graph", "async").values(), ".1f", "x"),
        **_against_sync_graph(sg_deg, _ratios(t2, "sync-graph", "async")),
    }


def _degrees(values: list[float], every: list[float]) -> str:
    """``d >= 12`` when ``values`` are the top of ``every``, ``d <= 8`` the bottom, else
    ``d = 2, 4 and 8``."""
    if values == every[len(every) - len(values):] and len(values) > 1:
        return f"d >= {values[0]:g}"
    if values == every[:len(values)] and len(values) > 1:
        return f"d <= {values[-1]:g}"
    return "d = " + _listing([f"{d:g}" for d in values])


def _against_sync_graph(by_degree: dict, by_dataset: dict) -> dict[str, str]:
    """Where async is faster and where slower than sync-graph (sync-graph / async above or
    below 1), across degrees and Table 2's datasets; its ratio on the ring."""
    every = sorted(by_degree)
    wins = [d for d in every if by_degree[d] > 1]
    loses = [d for d in every if by_degree[d] < 1]
    sets = sorted(d for d, v in by_dataset.items() if v < 1)
    where = []
    if wins:
        where.append(f"faster at {_degrees(wins, every)}")
    if loses or sets:
        slower = ([_degrees(loses, every)] if loses else []) + (["on " + _listing(sets)]
                                                                if sets else [])
        where.append("slower " + ("at " if loses else "") + " and ".join(slower))
    return {"sg_where": ", ".join(where) or "level with it", "sg_ring": _x(by_degree[every[0]])}


def _verdict(ratios: list[float]) -> str:
    """The verdict sentence's claim from every sync / async ratio measured: where async
    leads anywhere, in how many of the cases and by how much."""
    worst = max(ratios)
    if worst < 0.95:
        return "sync, not async, is the faster engine everywhere measured"
    if worst <= 1.0:
        return "sync, not async, is as fast or faster everywhere measured"
    ahead = sum(v > 1.0 for v in ratios)
    return (f"sync leads or ties in {len(ratios) - ahead} of {len(ratios)} cases, async leads "
            f"in {ahead} (by up to {worst:.2f}x)")


def _tte_accuracy(s: dict[str, dict]) -> dict[str, str]:
    """Test accuracy at equal accuracy: every node of every decentralized engine against
    the centralized model, in points, on Table 2's datasets (``table2_tte``)."""
    rows = [r for r in s["table2_tte"]["records"] if r.get("ok") and r["kind"] == "live"]
    central = {r["dataset"]: r["acc_mean"] for r in _records_of(rows, "central")}
    gaps = [abs(r[f] - central[r["dataset"]]) for r in rows
            if decentralized(r["mode"]) and r["dataset"] in central
            for f in ("acc_min", "acc_max")]
    return {"acc_tte": f"{100 * max(gaps):.1f}"}


def _crossover(s: dict[str, dict]) -> dict[str, str]:
    """Where async wins on the graph/scale/noise map (``crossover``, layers >= 1)."""
    from ..summaries.crossratio import graph_free_spread, ratio_rows

    rows = ratio_rows(s["crossover"])
    wins = [r for r in rows if r["ratio"] > 1 and r["bound"] in ("", ">=")]
    spread = [v for vs in graph_free_spread(s["crossover"]).values() for v in vs]
    top = max((r["ratio"] for r in wins), default=1.0)
    inside = top - 1 <= max(spread, default=0.0)
    return {"x_wins": f"{len(wins)}", "x_cases": f"{len(rows)}",
            "x_M": _rng([r["nodes"] for r in rows], ".0f").replace(" - ", " to "),
            "x_max": _x(top), "x_inside": "inside" if inside else "beyond",
            "x_spread": f"up to {100 * max(spread, default=0):.0f} %"}


def relaxation(data_dir: str | os.PathLike, names: Iterable[str] = TTE) -> str:
    """The relaxation the sweeps ``names`` were measured at
    (:func:`~dssfn_mpi.bench.pages.manifest.relaxation`; default: the answer's)."""
    from .manifest import relaxation as measured_at

    return measured_at(data_dir, names)


def _activations(s: dict[str, dict]) -> dict[str, str]:
    """Activations per node and layer against iterations, on the paper's graph; the ring's
    growth with M in the simulation; the input layer's counts on Table 2's datasets."""
    live = {m: _of(_tte(s["noise"]), m) for m in ("async", "sync")}
    per_layer = [a / b for c, r in live["async"].items() if c in live["sync"]
                 for a, b in zip(r["activations_per_layer"],
                                 live["sync"][c]["activations_per_layer"])]
    counts = {m: [a for r in by.values() for a in r["activations_per_layer"]]
              for m, by in live.items()}
    ring = _of(_tte(s["nodes_tte"], ("simulated",)), "async")
    reached = [k for k, r in ring.items() if r["eps_reached"]]
    capped = [k for k, r in ring.items() if r["eps_reached"] is False]
    top = max(reached)
    t2 = _tte(s["table2_tte"])
    layer0 = [r["activations_per_layer"][0] for (m, _d), r in t2.items()
              if not algorithm(m).direct]
    grow = f"up to {max(ring[top]['activations_per_layer']):.0f} per layer at " \
           f"M = {top:g}"
    if capped:
        grow += f", the cap K = {s['nodes_tte']['info']['iters']} before eps at " \
                f"M = {min(capped):g}"
    return {"act_ratio": _rng(per_layer, ".1f"), "act_async": _rng(counts["async"], ".0f"),
            "act_sync": _rng(counts["sync"], ".0f"), "ring_growth": grow,
            "layer0": _rng(layer0, ".0f")}


def _oneshot(s: dict[str, dict]) -> dict[str, str]:
    """The one-shot baseline on the sweeps' dataset at the paper's M (every sweep's runs
    there), and on the dataset of Table 2 whose nodes hold the most samples per unknown."""
    base, m_paper = s["degree_tte"]["info"]["dataset"], s["noise"]["info"]["nodes"]
    runs = [(_tte(s["degree_tte"]), None), (_tte(s["nodes_tte"]), float(m_paper)),
            (_tte(s["noise"]), "none"), (_tte(s["table2_tte"]), base)]
    os_sync, os_async, iters = [], [], []
    for by, only in runs:
        for k, r in _of(by, "oneshot").items():
            if (only is None or k == only) and r["nodes"] == m_paper:
                os_sync.append(r["time_at_eps"] / by[("sync", k)]["time_at_eps"])
                os_async.append(r["time_at_eps"] / by[("async", k)]["time_at_eps"])
                iters += by[("sync", k)]["activations_per_layer"]
    t2 = _tte(s["table2_tte"])
    per_node = {d: _samples(d)[0] / r["nodes"] for d, r in _of(t2, "oneshot").items()}
    big = max(per_node, key=lambda d: per_node[d] / t2[("oneshot", d)]["hidden"])
    mn = {m: r for (m, d), r in t2.items() if d == big}
    fastest = min(set(mn) - {"oneshot"}, key=lambda m: mn[m]["time_at_eps"])
    ahead = mn["oneshot"]["time_at_eps"] <= mn[fastest]["time_at_eps"]
    cost_sync = mn["sync"]["time_at_eps"] / mn["oneshot"]["time_at_eps"] - 1
    return {"base": base, "M_paper": f"{m_paper}",
            "os_sync": _rng(os_sync, ".1f", "x"), "os_async": _rng(os_async, ".1f", "x"),
            "sync_iters": _rng(iters, ".0f"),
            "base_samples": f"{_samples(base)[0] / m_paper:.0f}",
            "big": big, "big_samples": f"{per_node[big]:.0f}",
            "big_n": f"{mn['oneshot']['hidden']}",
            "big_fastest": "the fastest engine" if ahead
            else f"behind only {fastest}",
            "big_sync": f"{100 * cost_sync:.0f} %",
            "big_async": _x(mn["async"]["time_at_eps"] / mn["oneshot"]["time_at_eps"])}


def _decomposition(s: dict[str, dict]) -> dict[str, str]:
    """Async's cost split (each engine at its best relaxation) and the relaxed engines
    under noise (sync / async at the largest relaxation measured, simulated)."""
    from ..sweeps.decompose import decomposition_rows

    rows = decomposition_rows(s["decomposition"])
    split = [(M, g, f) for M, g, _b, f in rows
             if "graph + formulation" in f and "asynchrony (edge)" in f]
    noise = _tte(s["noise_best"], ("simulated",))
    alpha = max(m.partition("@")[2] for m, _c in noise)
    ratio = _ratios(noise, f"sync@{alpha}", f"async@{alpha}")
    big = _tte(s["noise_best_m128"], ("simulated",))
    return {"dec_where": _listing(sorted({g.replace("d8", "d = 8") for _M, g, _f in split})),
            "dec_M": _rng([M for M, _g, _f in split], ".0f"),
            "dec_gf": _rng([f["graph + formulation"] for *_r, f in split], ".1f", "x"),
            "dec_async": _rng([f["asynchrony (edge)"] for *_r, f in split], ".1f", "x"),
            "dec_graph": _rng([f["graph"] for *_r, f in split if "graph" in f], ".1f", "x"),
            "dec_form": _rng([f["formulation"] for *_r, f in split if "formulation" in f],
                             ".1f", "x"),
            "dec_stale": _rng([f["stale z (hood)"] for *_r, f in split
                               if "stale z (hood)" in f], ".1f", "x"),
            "dec_stale_M": _rng([M for M, _g, f in split if "stale z (hood)" in f], ".0f"),
            "best_alpha": alpha, "noise_best": _rng(ratio.values()),
            "noise_big": _rng(_ratios(big, f"sync@{alpha}", f"async@{alpha}").values()),
            "M_big": f"{s['noise_best_m128']['info']['nodes']}"}


def _paper_protocol(s: dict[str, dict]) -> dict[str, str]:
    """The paper's fixed-K protocol: sync-graph's shapes and Table 2's speed-ups."""
    from ..summaries.table2 import PAPER_TABLE2, paper_ratio

    deg, nod = _fixed_k(s["degree"]), _fixed_k(s["nodes"])
    d, ms = sorted(_of(deg, "sync-graph")), sorted(_of(nod, "sync-graph"))
    exact, paper = _fixed_k(s["table2"], "exact"), _fixed_k(s["table2"], "paper")
    sets = [ds for ds in PAPER_TABLE2 if ds in _of(exact, "async")]
    info = s["degree"]["info"]
    return {
        "K": f"{info['iters']}", "L": f"{info['layers']}", "M_fixed": f"{info['nodes']}",
        "sg_fall": _x(deg[("sync-graph", d[0])] / deg[("sync-graph", d[-1])]),
        "sg_d_first": f"{deg[('sync-graph', d[0])]:.1f}",
        "sg_d_last": f"{deg[('sync-graph', d[-1])]:.2f}",
        "sg_m_first": f"{nod[('sync-graph', ms[0])]:.2f}", "m_first": f"{ms[0]:g}",
        "sg_m_last": f"{nod[('sync-graph', ms[-1])]:.1f}", "m_last": f"{ms[-1]:g}",
        "async_deg": _rng(_of(deg, "async").values()),
        "async_m_first": f"{nod[('async', ms[0])]:.2f}",
        "async_m_last": f"{nod[('async', ms[-1])]:.2f}",
        "t2_exact": _listing([f"{_x(exact[('sync-graph', ds)] / exact[('async', ds)])} ({ds})"
                              for ds in sets]),
        "t2_paper": _listing([_x(paper_ratio(ds)) for ds in sets]),
        "paper_sg": _rng([paper[("sync-graph", ds)] / paper[("async", ds)] for ds in sets],
                         ".1f", "x"),
    }


def _accuracy(s: dict[str, dict]) -> dict[str, str]:
    """Table 2 at L = 20, exact setting: node means and every node against central."""
    rows: dict[tuple, dict] = {}
    for r in s["table2_L20"]["records"]:
        if r.get("ok") and r.get("setting") == "exact":
            rows[(r["mode"], r["dataset"])] = r
    sets = sorted({ds for _m, ds in rows})
    central = {ds: 100 * rows[("central", ds)]["acc_mean"] for ds in sets}
    dec = [(m, ds) for m in ("sync", "async") for ds in sets if (m, ds) in rows]
    small = min(sets, key=lambda ds: _samples(ds)[1])
    means = [abs(100 * rows[k]["acc_mean"] - central[k[1]]) for k in dec if k[1] != small]
    nodes = [abs(100 * rows[k][f] - central[k[1]]) for k in dec for f in ("acc_min", "acc_max")]
    info = s["table2_L20"]["info"]
    return {"acc_mean": f"{max(means):.2f}",
            "acc_others": _listing([ds for ds in sets if ds != small]),
            "acc_small": small, "acc_small_test": f"{_samples(small)[1]}",
            "acc_small_async": f"{100 * rows[('async', small)]['acc_mean'] - central[small]:+.1f}",
            "acc_node": f"{max(nodes):.1f}", "acc_sets": f"{len(sets)}",
            "L20": f"M = {info['nodes']}, d = {info['degree']}, K = {info['iters']}, "
                   f"L = {info['layers']}"}


def facts(data_dir: str | os.PathLike,
          summaries: dict[str, dict] | None = None) -> dict[str, str]:
    """Every number of the answer, formatted, by name (from ``summaries``, the result of
    :func:`load`, when the caller has them)."""
    s = load(data_dir) if summaries is None else summaries
    out: dict[str, str] = {}
    for part in (_equal_accuracy, _activations, _decomposition, _oneshot, _paper_protocol,
                 _accuracy, _tte_accuracy, _crossover):
        out.update(part(s))
    out["relaxation"] = relaxation(data_dir)
    return out


# ------------------------------------------------------------------ the templates

_README = (
    "**{verdict}** at equal accuracy: each node within {eps} of the exact solution "
    "([relative distance](" + _LINK_KINDS + ")), within {acc_tte} points of the centralized "
    "model's test accuracy. Time ratios sync / async: below 1, sync is faster.\n"
    "- **Against `sync`** (consensus ADMM, one `MPI_Allreduce` per iteration): async, the "
    "paper's method, needs {act_ratio}x as many activations (one node's update) as sync "
    "needs iterations.\n"
    "- **Against `sync-graph`** (the paper's synchronous method, sync by neighbour "
    "averaging): async is {sg_where}.\n"
    "- **Why** ([split](" + _LINK_SPLIT + ")): async's count over sync's is the product of "
    "neighbour-only consensus {dec_graph}, one variable per edge {dec_form} and asynchrony "
    "{dec_async}.\n"
    "- **Where async wins** ([map](" + _LINK_MAP + "), simulated): {x_wins} of {x_cases} "
    "graph, size and noise cases, by at most {x_max}, {x_inside} the run-to-run spread "
    "({x_spread}).\n"
    "\n"
    "| M nodes of degree d; [projected](docs/REPLAY.md) times at [{relaxation}]("
    + _LINK_RELAX + ") | d = {deg_values}, M = {M} | ring, M = {nodes_values} "
    "| {noise_graph}, [jitter or a straggler](" + _LINK_NOISE + ") "
    "| [Table 2's datasets](" + _LINK_T2 + ") |\n"
    "|---|---|---|---|---|\n"
    "| sync / async | {deg} | {nodes} | {noise} | {t2} |\n"
    "| sync-graph / async | {sg_deg} | {sg_nodes} | {sg_noise_r} | {sg_t2} |"
)

_BRIEF = (
    "- **At equal accuracy** (every layer, the input layer included, until every node is "
    "within {eps} of O*; [the first results](#at-equal-accuracy)) the allreduce baseline "
    "(`sync`) gets there {first} everywhere measured: sync / async {deg} at M = {M}, "
    "d = {deg_values}; {nodes} on rings of {nodes_values} nodes; {noise} at {noise_graph} "
    "without noise, under jitter or with one {slow} straggler; {t2} on Table 2's datasets. "
    "async needs {act_ratio}x as many activations per layer as sync needs iterations. "
    "Against sync-graph async is {sg_where} (sync-graph / async {sg_deg} across degrees, "
    "{sg_noise_r} at {noise_graph}). The one-shot baseline takes {os_sync} sync's time on "
    "{base} at M = {M_paper} (its exact n x n solve per layer) and is {big_fastest} on {big}, "
    "whose nodes "
    "hold more samples than n.\n"
    "- **[The paper's protocol](docs/RESULTS.md#the-papers-protocol-a-fixed-k-per-layer)** "
    "(a fixed K = {K} per layer; {base}, M = {M_fixed}, L = {L}): "
    "its synchronous method, sync-graph, falls {sg_fall} from the ring to the complete graph "
    "and grows with M on a ring ({sg_m_first} s at M = {m_first}, {sg_m_last} s at "
    "M = {m_last}), while async moves less: the paper's shapes. On Table 2's datasets "
    "sync-graph / async is {t2_exact}, against the paper's {t2_paper}.\n"
    "- **Accuracy** ({L20}, exact setting; "
    "[Table 2 at L = 20](docs/RESULTS.md#table-2-at-l--20)): sync's "
    "and async's node means are within {acc_mean} points of central on {acc_others} "
    "({acc_small}: async {acc_small_async}, a {acc_small_test}-sample test set), and every "
    "node within {acc_node} points on all {acc_sets} datasets; the exact `edge` update reaches "
    "the centralized solution, the paper's eq. (7) update stalls at a biased point when the "
    "norm bound is active ([why](" + _LINK_EQ + "))."
)

#: The views of :func:`answer_markdown` and their templates.
VIEWS = {"readme": _README, "brief": _BRIEF}


def _wrap(text: str) -> str:
    """Each paragraph or list item wrapped at :data:`_WIDTH` columns, never inside a range
    (``0.5 - 0.9``), an equation (``M = 20``), ``n x n``, a link's text or a code span; a
    table row is left whole."""
    keep = re.sub(r" ([-=x]) (?=\S)", "\xa0\\1\xa0", text)
    keep = re.sub(r"\[[^\]]*\]\(", lambda m: m[0].replace(" ", "\xa0"), keep)
    keep = re.sub(r"`[^`]*`", lambda m: m[0].replace(" ", "\xa0"), keep)
    out = []
    for par in keep.split("\n"):
        if par.startswith("|"):
            out.append(par)
            continue
        indent = "  " if par.startswith("- ") else ""
        out.append(textwrap.fill(par, _WIDTH, subsequent_indent=indent,
                                 break_long_words=False, break_on_hyphens=False))
    return "\n".join(out).replace("\xa0", " ")


def answer_markdown(data_dir: str | os.PathLike, view: str | None = "readme") -> str:
    """The text of ``view`` (``readme`` or ``brief``) with every number from ``data_dir``.

    Raises
    ------
    UserError
        An unknown view, or a summary it needs is missing.
    """
    text = pick_view(VIEWS, view, "answer").format(**facts(data_dir))
    return text if view == "readme" else _wrap(text)
