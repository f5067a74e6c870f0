"""``bench decompose``: async's cost at equal accuracy split into graph, formulation and
asynchrony.

Every configuration is simulated (``dssfn-mpi simulate``, one process): every layer runs
until every node is within eps of O* (the preset's ``stop``), so the runs compare at equal
accuracy. A *variant* is a label of the engine it simulates
(:mod:`dssfn_mpi.bench.variants`) and whether its simulated time is a projection (the
nodes' measured per-activation CPU costs under the network model) or only a count (a
constant speed). For every node count M of the preset's ``values``, the sweep runs, at
M = the preset's ``nodes``, every variant on the ring, the circular graph of degree 8 and
the complete graph at every relaxation of ``relaxes`` (``--relax`` for the algorithms that
take it, the edge form's ``--eta`` otherwise); at the other node counts the variants marked
``large`` on the ring and degree 8, at the first and the last relaxation.

The tables and the figure (:mod:`dssfn_mpi.bench.figures.decomposefig`) read a sweep
summary (:mod:`dssfn_mpi.bench.summaries.records`): per graph and node count, each
variant's activations (iterations) per node to eps over the layers past the input layer (the
largest node's, summed), at its best relaxation, and the factors of :data:`FACTORS`, each
the ratio of two variants' counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import require
from .presets import Preset
from .specs import RunSpec, simulate_args

__all__ = ["FACTORS", "GRAPHS", "VARIANTS", "Variant", "decompose_markdown", "decompose_specs",
           "decomposition_rows", "graph_name", "variant_counts"]


@dataclass(frozen=True)
class Variant:
    """One engine configuration of the decomposition.

    Attributes
    ----------
    label : str
        Its name in the tables (and ``--modes``): the label it runs
        (:mod:`dssfn_mpi.bench.variants`).
    timed : bool
        Its simulated time is projected from measured per-activation costs (False: a
        constant speed keeps it in lockstep, only its counts are meaningful).
    large : bool
        Runs at the node counts past the first too.
    """

    label: str
    timed: bool = True
    large: bool = True


#: The variants, in the tables' order.
VARIANTS: tuple[Variant, ...] = (
    Variant("sync"),
    # its mixing rounds on the ring at M >= 64 would take hours to simulate
    Variant("sync-graph", large=False),
    # the async edge update in synchronous (Jacobi) rounds
    Variant("lockstep"),
    Variant("async"),
    # neighbourhood consensus ADMM: exact synchronous (two exchanges a round), in lockstep
    # rounds of one exchange (the async operator's control) and asynchronous
    Variant("hood-jacobi"),
    Variant("hood-lockstep"),
    Variant("hood"),
)

#: The graphs: name -> ``simulate`` arguments at M nodes.
GRAPHS = {
    "ring": lambda M: ["--topology", "ring"],
    "d8": lambda M: ["--topology", "circular", "--degree", str(min(8, M - 1))],
    "complete": lambda M: ["--topology", "complete"],
}

#: The factors: (name, numerator variant, denominator variant), each a ratio of counts.
#: Neighbourhood consensus in its exact synchronous form is global consensus on the complete
#: graph, so against allreduce consensus it is the graph's cost; one exchange a round
#: (hood-lockstep, whose neighbourhood variables are one round stale) against two is the
#: cost of that staleness; graph x formulation x asynchrony (edge) = async / sync.
#: (sync-graph runs sync's iterations, its mixing costs time: ``times``.)
FACTORS = (
    ("graph", "hood-jacobi", "sync"),
    ("graph + formulation", "lockstep", "sync"),
    ("formulation", "lockstep", "hood-jacobi"),
    ("asynchrony (edge)", "async", "lockstep"),
    ("stale z (hood)", "hood-lockstep", "hood-jacobi"),
    ("asynchrony (hood)", "hood", "hood-lockstep"),
)


def _variant(label: str) -> Variant:
    found = [v for v in VARIANTS if v.label == label]
    require(bool(found), f"decompose: unknown variant {label!r}; choose from "
            f"{', '.join(v.label for v in VARIANTS)}")
    return found[0]


def _cases(p: Preset) -> list[tuple[int, str, tuple]]:
    """(M, graph, relaxations) of the sweep (module docstring)."""
    require(bool(p.relaxes), "decompose: no relaxations (--set relaxes=1,1.6)")
    ends = tuple(dict.fromkeys((p.relaxes[0], p.relaxes[-1])))
    cases = []
    for M in (int(M) for M in p.values):
        require(M >= 3, f"decompose: every node count must be >= 3, got {M}")
        cases += ([(M, g, tuple(p.relaxes)) for g in GRAPHS] if M == p.nodes
                  else [(M, g, ends) for g in ("ring", "d8")])
    return cases


def decompose_specs(p: Preset, data_dir: str | None) -> list[RunSpec]:
    """The sweep's simulated configurations (module docstring)."""
    variants = [_variant(label) for label in p.modes]
    specs = []
    for M, graph, relaxes in _cases(p):
        for v in variants:
            if M != p.nodes and not v.large:
                continue
            for alpha in relaxes:
                args = simulate_args(p, p.dataset, data_dir, M, GRAPHS[graph](M),
                                     f"{v.label}@{float(alpha):g}")
                specs.append(RunSpec(
                    group=f"{v.label}-{graph}-M{M:03d}-a{float(alpha):g}",
                    label=f"{v.label} {graph} M={M} alpha={float(alpha):g}",
                    nodes=None, train_args=args,
                    meta={"bench": "decompose", "bench_mode": v.label, "bench_value": M,
                          "bench_graph": graph, "bench_relax": float(alpha),
                          "bench_kind": "simulated"}))
    return specs


# ------------------------------------------------------------------------ tables, figure


def _count(rec: Mapping[str, Any]) -> float:
    """Activations per node to eps past the input layer (the largest node's, summed);
    inf when a layer ended at the cap."""
    if not rec.get("eps_reached"):
        return math.inf
    return float(sum(rec.get("activations_per_layer", [])[1:]))


def variant_counts(summary: Mapping[str, Any]) -> dict[tuple, dict[str, dict[float, dict]]]:
    """``(M, graph) -> variant -> relaxation -> record`` of a decompose summary's runs."""
    out: dict[tuple, dict[str, dict[float, dict]]] = {}
    for r in summary["records"]:
        if not r.get("ok") or "graph" not in r:
            continue
        key = (int(r["value"]), str(r["graph"]))
        out.setdefault(key, {}).setdefault(r["mode"], {})[float(r["relax"])] = r
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], list(GRAPHS).index(kv[0][1]))))


def _best(by_alpha: Mapping[float, dict]) -> tuple[float, dict]:
    """The relaxation with the fewest activations (the smaller one on a tie) and its run."""
    return min(by_alpha.items(), key=lambda kv: (_count(kv[1]), kv[0]))


def _labels(summary: Mapping[str, Any]) -> list[str]:
    seen = {r["mode"] for r in summary["records"]}
    known = [v.label for v in VARIANTS]
    return [m for m in known if m in seen] + sorted(seen - set(known))


def _factors(best: Mapping[str, float]) -> dict[str, float]:
    """Each factor of :data:`FACTORS` whose two variants ran (``best``: variant -> count)."""
    return {name: best[num] / best[den] for name, num, den in FACTORS
            if num in best and den in best and math.isfinite(best[num] / best[den])}


def graph_name(graph: str) -> str:
    """How tables and the figure name a graph of :data:`GRAPHS`."""
    return {"ring": "ring", "d8": "d = 8", "complete": "complete"}.get(graph, graph)


def decomposition_rows(summary: Mapping[str, Any]) -> list[tuple[int, str, dict, dict]]:
    """``(M, graph, variant -> (alpha, count, record) at its best relaxation, factor name ->
    value)`` per graph and node count of a decompose summary."""
    rows = []
    for (M, graph), variants in variant_counts(summary).items():
        best = {m: (a, _count(r), r) for m, (a, r) in
                ((m, _best(by)) for m, by in variants.items())}
        rows.append((M, graph, best, _factors({m: c for m, (_, c, _) in best.items()})))
    return rows


def _cell(entry: tuple | None) -> str:
    if entry is None:
        return "-"
    alpha, count, _ = entry
    return "cap" if math.isinf(count) else f"{count:.0f} ({alpha:g})"


def _time_cell(entry: tuple | None, base: tuple | None) -> str:
    """Projected ms at the best relaxation, and its ratio to ``base`` (sync's)."""
    if entry is None or not _variant_timed(entry[2]["mode"]) or math.isinf(entry[1]):
        return "-"
    secs = float(entry[2]["time_at_eps"])
    if base is None or base is entry or math.isinf(base[1]):
        return f"{1e3 * secs:.1f}"
    return f"{1e3 * secs:.1f} ({secs / float(base[2]['time_at_eps']):.2f}x)"


def _variant_timed(label: str) -> bool:
    return next((v.timed for v in VARIANTS if v.label == label), True)


def decompose_markdown(summary: Mapping[str, Any], view: str | None = None) -> str:
    """The decomposition (default), the ``times`` (simulated ms at each variant's best
    relaxation, in brackets against sync's), the ``relax`` or the ``defaults`` table."""
    if view == "relax":
        return _relax_markdown(summary)
    if view == "defaults":
        return _defaults_markdown(summary)
    rows = decomposition_rows(summary)
    if not rows:
        return "(no decomposition runs in this summary)"
    labels = _labels(summary)
    names = [n for n, _, _ in FACTORS if any(n in f for *_, f in rows)]
    if view == "times":
        head = [f"{m} [ms]" for m in labels if _variant_timed(m)]
        lines = ["| M | graph | " + " | ".join(head) + " |", "|---" * (2 + len(head)) + "|"]
        for M, graph, best, _ in rows:
            cells = [_time_cell(best.get(m), best.get("sync")) for m in labels
                     if _variant_timed(m)]
            lines.append(f"| {M} | {graph_name(graph)} | " + " | ".join(cells) + " |")
        return "\n".join(lines)
    lines = ["| M | graph | " + " | ".join(labels + names) + " |",
             "|---" * (2 + len(labels) + len(names)) + "|"]
    for M, graph, best, factors in rows:
        cells = [_cell(best.get(m)) for m in labels]
        cells += [f"{factors[n]:.2f}x" if n in factors else "-" for n in names]
        lines.append(f"| {M} | {graph_name(graph)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _relax_markdown(summary: Mapping[str, Any]) -> str:
    """Activations per node to eps at every relaxation, at the first node count."""
    counts = variant_counts(summary)
    if not counts:
        return "(no decomposition runs in this summary)"
    first = min(M for M, _ in counts)
    alphas = sorted({a for (M, _), vs in counts.items() if M == first
                     for by in vs.values() for a in by})
    lines = [f"| graph (M = {first}) | variant | " + " | ".join(f"{a:g}" for a in alphas)
             + " | best |", "|---" * (3 + len(alphas)) + "|"]
    for (M, graph), variants in counts.items():
        if M != first:
            continue
        for m in [x for x in _labels(summary) if x in variants]:
            by = variants[m]
            cells = ["-" if a not in by else
                     ("cap" if math.isinf(_count(by[a])) else f"{_count(by[a]):.0f}")
                     for a in alphas]
            lines.append(f"| {graph_name(graph)} | {m} | " + " | ".join(cells)
                         + f" | {_best(by)[0]:g} |")
    return "\n".join(lines)


def _default_alpha(mode: str) -> tuple[str, float]:
    """The option that sets ``mode``'s relaxation and its default (the registry's)."""
    from ...algorithms import lookup

    alg = lookup(mode)
    return ("--relax", float(alg.relax)) if alg.relaxes else ("--eta", float(alg.step_size))


def _count_cell(by: Mapping[float, dict], alpha: float) -> str:
    """The count at ``alpha``: a number, ``cap`` (not to eps), ``stopped`` (the sweep's
    job timeout ended it) or ``-`` (not run)."""
    rec = by.get(alpha)
    if rec is None:
        return "-"
    if rec.get("status") == "failed":
        return "stopped"
    return "cap" if math.isinf(_count(rec)) else f"{_count(rec):.0f}"


def _defaults_markdown(summary: Mapping[str, Any]) -> str:
    """Each variant's count to eps at relaxation 1 and at its default, per graph at the
    first node count (README's defaults table); modes with the same row share it."""
    every: dict[tuple, dict[str, dict[float, dict]]] = {}
    for r in summary["records"]:
        if "graph" in r and "relax" in r:
            key = (int(r["value"]), str(r["graph"]))
            every.setdefault(key, {}).setdefault(r["mode"], {})[float(r["relax"])] = r
    if not every:
        return "(no decomposition runs in this summary)"
    first = min(M for M, _ in every)
    graphs = [g for (M, g) in sorted(every, key=lambda k: list(GRAPHS).index(k[1]))
              if M == first]
    rows: dict[tuple, list[str]] = {}
    for m in _labels(summary):
        option, alpha = _default_alpha(m)
        at = [" / ".join(_count_cell(every[(first, g)].get(m, {}), a) for g in graphs)
              for a in (1.0, alpha)]
        key = (f"`{option}`", f"{alpha:g}", at[0], "the same" if alpha == 1 else at[1])
        rows.setdefault(key, []).append(m)
    info, eps = summary.get("info", {}), summary.get("eps")
    layers = int(info.get("layers", 2))
    head = (f"Iterations, rounds or activations per node until every node is within "
            f"{eps:g} of the exact solution at layers 1 - {layers} ({info.get('dataset')}, "
            f"M = {first}, simulated; " + " / ".join(graph_name(g) for g in graphs)
            + "; stopped: ended by the sweep's job timeout):")
    lines = [head, "", "| mode | option | default | at 1 | at the default |",
             "|---|---|---|---|---|"]
    lines += [f"| {', '.join(modes)} | " + " | ".join(key) + " |" for key, modes in rows.items()]
    return "\n".join(lines)
