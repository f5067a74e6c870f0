"""The reference pages' measured numbers, rendered from the data: what docs/ALGORITHMS.md
says of the fixed-K sweeps (``table2.json``, ``degree.json``), so a re-run cannot leave
the page behind.

Each text sits between marker lines in its page and is rewritten by ``dssfn-mpi plot
--all`` (:mod:`dssfn_mpi.bench.pages.mdtables`)::

    <!-- text: refnotes sync-graph -->
    ...
    <!-- /text -->

Views: ``central-admm`` (the central ADMM's test accuracy against the exact solution),
``sync-graph`` (the paper's synchronous method against sync, and across degrees) and
``edge-cost`` (the edge form's input layer on mnist against sync's).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from ...errors import UserError
from .answer import _listing, _of, _records_of, _rng, _where, _wrap, _x, pick_view, read_source
from .manifest import relaxation

__all__ = ["REFNOTES", "refnotes_markdown"]


def _summary(data_dir: str | os.PathLike, name: str) -> dict:
    """The summary ``name`` (without ``.json``) of the data folder."""
    return read_source(data_dir, name, "a reference page's text needs it")


def _rows(summary: dict, setting: str | None = None) -> dict[tuple[str, str], dict]:
    """``(mode, dataset) -> record`` of the successful seed-0 runs (of ``setting``)."""
    return {(r["mode"], str(r.get("dataset"))): r for r in summary["records"]
            if r.get("ok", True) and int(r.get("seed", 0)) == 0
            and (setting is None or r.get("setting") == setting)}


def _e(value: float) -> str:
    """``2.1e-4``: two significant digits, the exponent without its padding."""
    return re.sub(r"e([+-])0*(\d)", lambda m: f"e{m[1].replace('+', '')}{m[2]}", f"{value:.1e}")


def _central(data_dir: str | os.PathLike) -> str:
    """Central test accuracy, the authors' ADMM (``paper``) against the exact solution."""
    s = _summary(data_dir, "table2")
    paper, exact = _rows(s, "paper"), _rows(s, "exact")
    sets = sorted(set(_of(paper, "central")) & set(_of(exact, "central")))
    pairs = [f"{d} {100 * paper[('central', d)]['acc_mean']:.1f} % against "
             f"{100 * exact[('central', d)]['acc_mean']:.1f} %" for d in sets]
    return (f"Central test accuracy at L = {s['info']['layers']}, this ADMM against the "
            f"exact solution: {_listing(pairs)} (`results/data/table2.json`).")


def _sync_graph(data_dir: str | os.PathLike) -> str:
    """sync-graph against sync in Table 2's exact setting, and across the degree sweep."""
    s, deg = _summary(data_dir, "table2"), _summary(data_dir, "degree")
    rows, i = _rows(s, "exact"), s["info"]
    sets = _where(rows, "sync-graph", "sync")
    rel = {d: (rows[("sync-graph", d)]["rel_distance"], rows[("sync", d)]["rel_distance"])
           for d in sets}
    close = [d for d in sets if rel[d][0] <= 1.5 * rel[d][1]]
    far = [f"{d} {_e(rel[d][0])} against sync's {_e(rel[d][1])}" for d in sets
           if d not in close]
    ratio = {key: [rows[("sync-graph", d)][key] / rows[("sync", d)][key] for d in sets]
             for key in ("projected_seconds", "train_seconds")}
    text = (f"At M = {i['nodes']}, d = {i['degree']}, K = {i['iters']}, L = {i['layers']} "
            f"(`results/data/table2.json`, the `exact` setting, "
            f"{relaxation(data_dir, ['table2'])}) it ends ")
    if close:
        both = [v for d in close for v in rel[d]]
        span = _e(min(both)) if _e(min(both)) == _e(max(both)) else \
            f"{_e(min(both))} - {_e(max(both))}"
        text += (f"as close to `O*` as sync where the layer rather than the mixing limits "
                 f"the distance ({', '.join(close)}: {span} for both)")
    text += (", " if close and far else "") + ", ".join(far)
    text += (f", at {_rng(ratio['projected_seconds'], '.2g')}x sync's projected time (one "
             f"core per rank) and {_rng(ratio['train_seconds'], '.2g')}x its measured time "
             f"with {i['nodes']} ranks on {s['machine'].get('cpus', '?')} cores. ")
    return text + _degrees(data_dir, deg)


def _degrees(data_dir: str | os.PathLike, deg: dict) -> str:
    """sync-graph's projected and measured time from the sparsest to the densest graph."""
    by = sorted((float(r["value"]), r) for r in _records_of(deg["records"], "sync-graph")
                if r.get("kind", "live") == "live" and r.get("ok"))
    if len(by) < 2:
        raise UserError("degree.json: sync-graph at fewer than two degrees")
    (d0, ring), (d1, full) = by[0], by[-1]
    i = deg["info"]
    return (f"Its projected time falls {_x(ring['projected_seconds'] / full['projected_seconds'])} "
            f"from d = {d0:g} to d = {d1:g} ({i.get('dataset', '?')}, M = {i['nodes']}, "
            f"L = {i['layers']}: {ring['projected_seconds']:.2g} s to "
            f"{full['projected_seconds']:.2g} s; measured, with ranks sharing cores, "
            f"{_x(ring['train_seconds'] / full['train_seconds'])}; `results/data/degree.json`, "
            f"{relaxation(data_dir, ['degree'])}), the paper's synchronous trend.")


def _edge_cost(data_dir: str | os.PathLike) -> str:
    """The edge form's input layer against sync's, on the dataset of Table 2 where it
    costs most (the widest input)."""
    s = _summary(data_dir, "table2")
    rows, i = _rows(s, "exact"), s["info"]
    first = {d: (rows[("async", d)]["projected_per_layer"][0],
                 rows[("sync", d)]["projected_per_layer"][0])
             for d in _where(rows, "async", "sync")}
    if not first:
        raise UserError("table2.json: no dataset with both async and sync")
    d = max(first, key=lambda k: first[k][0])  # the dearest: the widest input
    a, b = first[d]
    return (f"On {d} at M = {i['nodes']}, d = {i['degree']} and a fixed K = {i['iters']}, "
            f"async's input layer in the edge form takes {a:.2g} s of projected "
            f"dedicated-core time (from its CPU time) against sync's {b:.2g} s "
            f"(`results/data/table2.json`, the `exact` setting).")


#: The views of :func:`refnotes_markdown`.
REFNOTES: dict[str, Callable[[str | os.PathLike], str]] = {
    "central-admm": _central, "sync-graph": _sync_graph, "edge-cost": _edge_cost}


def refnotes_markdown(data_dir: str | os.PathLike, view: str | None) -> str:
    """The reference-page text ``view`` with every number from ``data_dir``.

    Raises
    ------
    UserError
        An unknown view, or a summary it needs is missing.
    """
    return _wrap(pick_view(REFNOTES, view, "refnotes")(data_dir))
