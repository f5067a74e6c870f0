"""Figures and tables at equal accuracy, drawn from a sweep summary (:mod:`..summaries.records`).

Every number is a run's ``time_at_eps``: every layer, the input layer included, until
every node is within eps of O* (``--stop eps:E``). Three kinds, each labelled:

* **projected** (the main panel): the live run's trace replayed with one core per
  rank under the summary's network; in the noise view also the unslowed run
  replayed with a jitter or, for engines without ``--slow``, a straggler;
* **simulated**: ``dssfn-mpi simulate``, simulated seconds (past the node counts
  this machine runs live);
* **measured** (secondary): the live run's wall time, ranks sharing this machine's
  cores.

A point whose run did not reach eps (a layer ended at the cap K) is drawn hollow
and its table cell says ``(cap)``: its time is the time at the cap, a lower
bound. Nothing is dropped.

Figures: ``degree_tte`` / ``nodes_tte`` (paper figs. 2 and 3 at equal accuracy),
``table2_tte`` (Table 2's times) and ``noise`` (jitter and stragglers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ...fmt import number
from ..summaries.tables import FAILED_NOTE
from ..variants import decentralized, order
from .figstyle import plt, style

__all__ = ["CAP_NOTE", "STOPPED_NOTE", "mode_order", "noise_figure", "noise_markdown", "select",
           "sweep_tte_figure", "table2_tte_figure", "table2_tte_markdown", "tte_cell",
           "tte_markdown", "tte_records"]

#: The note of runs that ended at a sweep's job timeout (``bench --job-timeout``).
STOPPED_NOTE = ("stopped: the run ended at the sweep's job timeout (the summary's record of it "
                "keeps the layers it finished), so it has no time to eps.")
#: The legend entry and note of unreached points.
CAP_NOTE = "hollow: not within eps at the cap K (time at the cap, a lower bound)"


def tte_records(summary: Mapping[str, Any]) -> list[dict]:
    """The summary's successful decentralized runs to accuracy (``eps_reached`` set); of a
    nodes sweep over several graphs the ring's (the others: :mod:`.scalefig`)."""
    return [r for r in summary["records"] if r.get("ok") and decentralized(r["mode"])
            and r.get("eps_reached") is not None and _ring(r)]


def _ring(rec: Mapping[str, Any]) -> bool:
    """Not a nodes run, or a nodes run on the ring."""
    return rec.get("bench") != "nodes" or rec.get("graph", "ring") == "ring"


def mode_order(modes: Iterable[str]) -> list[str]:
    """Modes in the registry's order (a mode's variants after it), others last."""
    return sorted(set(modes), key=order)


def tte_cell(rec: Mapping[str, Any] | None, key: str = "time_at_eps", spec: str = ".3f") -> str:
    """A table cell: the time, ``(cap)`` after it when the run did not reach eps."""
    if rec is None:
        return "-"
    text = number(rec.get(key, math.nan), spec)
    return text + (" (cap)" if rec.get("eps_reached") is False and text != "-" else "")


def cap_text(summary: Mapping[str, Any]) -> str:
    """The cap K of the summary's runs: one value, or the range where sweeps of one summary
    had different caps (each run's own is its record's ``iters``)."""
    caps = sorted({int(r["iters"]) for r in summary["records"] if r.get("iters") is not None})
    if len(caps) > 1:
        return f"{caps[0]} - {caps[-1]} (per run)"
    return str(caps[0]) if caps else str(summary["info"].get("iters", "?"))


def _title(summary: Mapping[str, Any], what: str) -> str:
    i = summary["info"]
    ds = ", ".join(i.get("datasets") or [str(i.get("dataset", "?"))])
    # the width is per dataset (n = 2Q + 1000 at the paper's sizes): name each one's
    widths = {r["dataset"]: r["hidden"] for r in summary["records"]
              if r.get("dataset") and r.get("hidden") is not None}
    n = (", ".join(f"{widths[d]} ({d})" for d in sorted(widths)) if len(set(widths.values())) > 1
         else i.get("hidden", "?"))
    return (f"{what}: time to eps = {summary['eps']:g}, every layer (input layer included); "
            f"{ds}, L = {i.get('layers', '?')}, n = {n}, cap K = {cap_text(summary)}")


def _draw(ax, x: list, recs: list[dict], key: str, st: dict, label: str,
          linestyle: str = "-", size: float = 7) -> None:
    """One series: a line through every point, reached points filled, unreached hollow
    (a separate line with gid ``unreached``, so they can be found in the figure)."""
    y = np.array([r.get(key, math.nan) for r in recs], dtype=float)
    ok = np.array([r.get("eps_reached") is not False for r in recs])
    xs = np.asarray(x, dtype=float)
    color, marker = st.get("color"), st.get("marker", "o")
    ax.plot(xs, y, linestyle=linestyle, color=color, alpha=0.8, label=label)
    ax.plot(xs[ok], y[ok], linestyle="none", color=color, marker=marker, markersize=size)
    if (~ok).any():
        ax.plot(xs[~ok], y[~ok], linestyle="none", marker=marker, markersize=size + 1,
                markerfacecolor="none", markeredgecolor=color, markeredgewidth=1.5,
                gid="unreached")


def _cap_legend(ax, any_unreached: bool) -> None:
    if any_unreached:
        ax.plot([], [], linestyle="none", marker="o", markerfacecolor="none",
                markeredgecolor="gray", label=CAP_NOTE)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # hides no point


def select(recs: Iterable[dict], mode: str, kinds: tuple[str, ...] | None = None,
           key: str = "value") -> list[dict]:
    """The records of ``mode`` (and of ``kinds``; of every kind without), sorted by ``key``
    (``value``, or ``case`` in the noise cases' order)."""
    got = (r for r in recs if r["mode"] == mode and (kinds is None or r["kind"] in kinds))
    return sorted(got, key=lambda r: _case_key(str(r.get(key))) if key == "case" else r[key])


def sweep_tte_figure(summary: Mapping[str, Any]) -> Any:
    """``degree_tte`` / ``nodes_tte``: time to eps against the degree at fixed M or against
    M on the ring; projected (main panel) with a simulated line per engine, measured wall
    beside it. Returns the figure (None without runs to accuracy)."""
    recs = tte_records(summary)
    if not recs:
        return None
    bench, info = summary["bench"], summary["info"]
    fig, (ax, ax_m) = plt.subplots(1, 2, figsize=(15, 5), gridspec_kw={"width_ratios": [3, 2]})
    unreached = False
    for mode in mode_order(r["mode"] for r in recs):
        st = style(mode)
        for kind, key, axis, ls, what in (
                ("live", "time_at_eps", ax, "-", "projected"),
                ("simulated", "time_at_eps", ax, "--", "simulated"),
                ("live", "train_seconds", ax_m, "-", "measured")):
            got = select(recs, mode, (kind,))
            if got:
                _draw(axis, [r["value"] for r in got], got, key, st, f"{mode}, {what}", ls,
                      size=7 if kind == "live" else 5)
                unreached |= any(r["eps_reached"] is False for r in got)
    xlabel = "node degree d (circular graph)" if bench == "degree" else "nodes M (ring)"
    ax.set_title(f"projected: live runs' traces replayed with one core per rank, network "
                 f"{summary['network']}\n(solid); simulated (dashed)", fontsize=9)
    ax_m.set_title("measured wall time of the live runs (secondary):\nranks sharing this "
                   "machine's cores (oversubscribed)", fontsize=9)
    for a, ylabel in ((ax, "time to eps [s] (log)"), (ax_m, "measured wall [s] (log)")):
        a.set_xlabel(xlabel)
        a.set_ylabel(ylabel)
        a.set_yscale("log")
        a.grid(alpha=0.3, which="both")
        if bench == "nodes":
            a.set_xscale("log", base=2)
        xs = sorted({r["value"] for r in recs if a is ax or r["kind"] == "live"})
        a.set_xticks(xs, [f"{v:g}" for v in xs])
        if bench == "nodes":
            a.minorticks_off()
    _cap_legend(ax, unreached)
    ax_m.legend(fontsize=7)
    where = (f"M = {info.get('nodes', '?')}, circular graph" if bench == "degree"
             else "ring (d = 2; d = 1 at M = 2)")
    fig.suptitle(_title(summary, f"{'Fig. 2' if bench == 'degree' else 'Fig. 3'} at equal "
                                 f"accuracy, {where}"), fontsize=10)
    fig.tight_layout()
    return fig


def tte_markdown(summary: Mapping[str, Any]) -> str:
    """The table of :func:`sweep_tte_figure`: per swept value, each engine's projected,
    simulated and measured time to eps."""
    recs = tte_records(summary)
    if not recs:
        return "(no runs to accuracy in this summary)"
    modes = mode_order(r["mode"] for r in recs)
    failed = {(r["mode"], r["kind"], r["value"]): r["status"] for r in summary["records"]
              if r["status"] != "ok" and _ring(r)}
    by = {(r["mode"], r["kind"], r["value"]): r for r in recs}
    head = "d" if summary["bench"] == "degree" else "M"
    cols = [(m, "live", "time_at_eps", "projected") for m in modes]
    cols += [(m, "simulated", "time_at_eps", "simulated") for m in modes
             if any(k[:2] == (m, "simulated") for k in by)]
    cols += [(m, "live", "train_seconds", "measured") for m in modes]
    lines = ["| " + head + " | " + " | ".join(f"{m} {w} [s]" for m, _k, _f, w in cols) + " |",
             "|---" * (1 + len(cols)) + "|"]
    for v in sorted({r["value"] for r in recs}):
        cells = [failed[m, k, v] if (m, k, v) in failed and (m, k, v) not in by else
                 tte_cell(by.get((m, k, v)), f, ".3f" if w != "measured" else ".2f")
                 for m, k, f, w in cols]
        lines.append(f"| {v:g} | " + " | ".join(cells) + " |")
    lines += ["", _note(summary)]
    missing = {failed[k] for k in set(failed) - set(by)}
    lines += [note for status, note in (("failed", FAILED_NOTE), ("stopped", STOPPED_NOTE))
              if status in missing for note in ("", note)]
    return "\n".join(lines)


def _note(summary: Mapping[str, Any]) -> str:
    return (f"Time until every layer (input layer included) of every node is within "
            f"{summary['eps']:g} of O*. projected: the live run's trace replayed with one core "
            f"per rank, network {summary['network']}; simulated: dssfn-mpi simulate, simulated "
            f"seconds; measured: the live run's wall time, ranks sharing this machine's cores. "
            f"(cap): not within eps at the cap K = {cap_text(summary)}, the "
            f"time at the cap.")


def table2_tte_figure(summary: Mapping[str, Any]) -> Any:
    """``table2_tte``: Table 2's times at equal accuracy per dataset and engine: projected
    bars (hollow when not reached), simulated ticks, measured wall beside them."""
    recs = tte_records(summary)
    if not recs:
        return None
    datasets = sorted({r["dataset"] for r in recs})
    modes = mode_order(r["mode"] for r in recs)
    by = {(r["dataset"], r["mode"], r["kind"]): r for r in recs}
    x = np.arange(len(datasets))
    width = 0.8 / max(len(modes), 1)
    fig, (ax, ax_m) = plt.subplots(1, 2, figsize=(max(11, 4 * len(datasets)), 4.8),
                                   gridspec_kw={"width_ratios": [3, 2]})
    unreached = False
    for i, mode in enumerate(modes):
        off = x + (i - (len(modes) - 1) / 2) * width
        color = style(mode).get("color")
        for axis, kind, key in ((ax, "live", "time_at_eps"), (ax_m, "live", "train_seconds")):
            got = [by.get((d, mode, kind)) for d in datasets]
            y = [g[key] if g else np.nan for g in got]
            hollow = [bool(g) and g["eps_reached"] is False for g in got]
            unreached |= any(hollow)
            bars = axis.bar(off, y, width, color=color, edgecolor=color, label=mode)
            for bar, h in zip(bars, hollow):
                if h:
                    bar.set_facecolor("none")
                    bar.set_hatch("//")
                    bar.set_gid("unreached")
        sim = [by.get((d, mode, "simulated")) for d in datasets]
        if any(sim):
            ax.plot(off, [s["time_at_eps"] if s else np.nan for s in sim], "k_", markersize=12,
                    label="simulated" if i == 0 else None)
    ax.set_title(f"projected, dedicated cores, network {summary['network']} (bars); "
                 f"simulated (black ticks)", fontsize=9)
    ax_m.set_title("measured wall (secondary): ranks sharing this machine's cores", fontsize=9)
    for a, ylabel in ((ax, "time to eps [s] (log)"), (ax_m, "measured wall [s] (log)")):
        a.set_xticks(x, datasets)
        a.set_yscale("log")
        a.set_ylabel(ylabel)
        a.grid(alpha=0.3, axis="y", which="both")
    if unreached:
        ax.bar([0], [np.nan], color="none", edgecolor="gray", hatch="//",
               label="hatched, hollow: not within eps at the cap K (time at the cap)")
    ax.legend(fontsize=7)
    ax_m.legend(fontsize=7)
    i = summary["info"]
    fig.suptitle(_title(summary, f"Table 2 at equal accuracy, M = {i.get('nodes', '?')}, "
                                 f"d = {i.get('degree', '?')}"), fontsize=10)
    fig.tight_layout()
    return fig


def table2_tte_markdown(summary: Mapping[str, Any]) -> str:
    """Per dataset, each engine's projected, simulated and measured time to eps."""
    recs = tte_records(summary)
    if not recs:
        return "(no runs to accuracy in this summary)"
    modes = mode_order(r["mode"] for r in recs)
    by = {(r["dataset"], r["mode"], r["kind"]): r for r in recs}
    kinds = [("live", "time_at_eps", "projected"), ("simulated", "time_at_eps", "simulated"),
             ("live", "train_seconds", "measured")]
    kinds = [k for k in kinds if any(key[2] == k[0] for key in by)]
    lines = ["| dataset | " + " | ".join(f"{m} {w} [s]" for _k, _f, w in kinds for m in modes)
             + " |", "|---" * (1 + len(kinds) * len(modes)) + "|"]
    for d in sorted({r["dataset"] for r in recs}):
        cells = [tte_cell(by.get((d, m, k)), f, ".3f" if w != "measured" else ".2f")
                 for k, f, w in kinds for m in modes]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    lines += ["", _note(summary)]
    return "\n".join(lines)


def _case_key(case: str) -> tuple:
    kind, _, value = case.partition(":")
    order = {"none": 0, "exp": 1, "slow": 2}
    return (order.get(kind, 3), float(value) if value else 0.0)


def _case_label(case: str) -> str:
    kind, _, value = case.partition(":")
    if kind == "slow":
        return f"rank 0 x{value}"
    return "no noise" if case == "none" else f"jitter {case}"


def noise_figure(summary: Mapping[str, Any]) -> Any:
    """``noise``: time to eps per engine with no noise, each jitter and each straggler;
    projected (solid) and simulated (dashed), one figure."""
    recs = tte_records(summary)
    if not recs:
        return None
    cases = sorted({str(r.get("case", "none")) for r in recs}, key=_case_key)
    pos = {c: i for i, c in enumerate(cases)}
    fig, ax = plt.subplots(figsize=(max(11, 1.8 * len(cases)), 5))
    unreached = False
    for mode in mode_order(r["mode"] for r in recs):
        st = style(mode)
        proj = select(recs, mode, ("live", "replay"), "case")
        sim = select(recs, mode, ("simulated",), "case")
        for got, ls, what, size in ((proj, "-", "projected", 8), (sim, "--", "simulated", 5)):
            if got:
                _draw(ax, [pos[str(r["case"])] for r in got], got, "time_at_eps", st,
                      f"{mode}, {what}", ls, size)
                unreached |= any(r["eps_reached"] is False for r in got)
    ax.set_xticks(range(len(cases)), [_case_label(c) for c in cases])
    ax.set_yscale("log")
    ax.set_ylabel("time to eps [s] (log)")
    ax.grid(alpha=0.3, which="both")
    _cap_legend(ax, unreached)
    i = summary["info"]
    ax.set_title(f"projected (solid): live runs' traces replayed with one core per rank, network "
                 f"{summary['network']}; jitter, and the straggler of engines without --slow: "
                 f"the unslowed run replayed with it\nsimulated (dashed): dssfn-mpi simulate, "
                 f"the same noise", fontsize=8)
    graph = str(i.get("topology", f"circular(d={i.get('degree', '?')})"))
    fig.suptitle(_title(summary, f"Noise and stragglers, M = {i.get('nodes', '?')}, "
                                 f"{graph.split('(')[0]} graph, d = {i.get('degree', '?')}"),
                 fontsize=10)
    fig.tight_layout()
    return fig


def noise_markdown(summary: Mapping[str, Any]) -> str:
    """Per case, each engine's projected and simulated time to eps."""
    recs = tte_records(summary)
    if not recs:
        return "(no runs to accuracy in this summary)"
    modes = mode_order(r["mode"] for r in recs)
    proj = {(r["mode"], str(r["case"])): r for r in recs if r["kind"] in ("live", "replay")}
    sim = {(r["mode"], str(r["case"])): r for r in recs if r["kind"] == "simulated"}
    kinds = [(what, by) for what, by in (("projected", proj), ("simulated", sim)) if by]
    cases = sorted({str(r["case"]) for r in recs}, key=_case_key)
    lines = ["| case | " + " | ".join(f"{m} {what} [s]" for what, _ in kinds for m in modes)
             + " |", "|---" * (1 + len(kinds) * len(modes)) + "|"]
    for c in cases:
        lines.append(f"| {_case_label(c)} | " + " | ".join(
            tte_cell(by.get((m, c))) for _, by in kinds for m in modes) + " |")
    lines += ["", _note(summary) + " Jitter rows projected: the unslowed run replayed with the "
              "jitter (mean over replay seeds); replay keeps each run's activation counts."]
    return "\n".join(lines)
