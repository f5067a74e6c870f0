"""Time to accuracy: live runs and simulated runs of ``--stop eps`` on the same axes.

``dssfn-mpi bench accuracy --live SWEEP.h5 --sim RUN.h5 ... --out FIG.png``

Every point is the time the layers from 1 on took to reach the eps rule (layer 0, the input
layer, is left out: with the scalar penalty it often ends at the cap; docs/ALGORITHMS.md,
"Stopping to accuracy, measured"):

* live: a ``bench straggler --set stop=eps:E`` sweep; each run's own trace replayed with one
  core per rank (``--network``, its ``--slow`` re-applied: a sleep is not CPU time), the sum
  of the layers' solves;
* simulated: ``dssfn-mpi simulate`` run logs, the sum of the layers' ``solve_seconds`` on the
  slowest node (simulated seconds).

The left panel is against the straggler factor (one rank slowed; live points and simulated
curves of the same configuration), the right one against M for the simulated runs that
differ in M. A table of the same numbers is printed. The points are also written as a small
JSON summary beside the figure (``FIG.json``, format :data:`ACCURACY_FORMAT`), from which
:func:`plot_accuracy` draws the same figure again (``dssfn-mpi plot --all`` draws the
published ``time_to_eps`` from ``results/data/time_to_eps.json``).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ...algorithms.stoprule import reason_code
from ...errors import UserError
from ...runlog import RunLog, read_runlog, read_sweep
from ..summaries.records import ACCURACY_FORMAT
from ..variants import run_label

__all__ = ["ACCURACY_FORMAT", "accuracy_markdown", "accuracy_summary", "live_points", "main",
           "plot_accuracy", "run", "simulated_points"]

_EPS = reason_code("eps")


def _variant(run: RunLog, label: str | None = None) -> str:
    """The label of a run (``label``, else its mode) with a one-sided mode's bound named:
    ``async-leadS`` / ``async-unbounded`` / ``sync`` / ``sync-graph``."""
    return run_label(label or str(run.attrs.get("mode")), run.config.get("max_lead", 4),
                     bound=True)


def _factor(run: RunLog) -> float:
    slow = run.config.get("slow") or {}
    return max((float(v) for v in slow.values()), default=1.0)


def _after_layer0(seconds: np.ndarray, reasons: np.ndarray) -> float:
    """Sum over layers >= 1 that ended by the eps rule on every rank; NaN if one did not."""
    if seconds.size < 2 or not np.all(reasons[1:] == _EPS):
        return math.nan
    return float(np.sum(seconds[1:]))


def live_points(path: str | Path, network: str = "shm") -> dict[str, list[tuple]]:
    """``{variant: [(factor, seconds), ...]}`` of a straggler sweep's one-rank cases."""
    from ..summaries.projection import project_run

    out: dict[str, list[tuple]] = defaultdict(list)
    for run in read_sweep(path).values():
        a = run.attrs
        if a.get("bench_status", "ok") != "ok" or a.get("bench_pattern") not in ("none", "one"):
            continue
        proj = project_run(run, network)
        if proj is None:
            continue
        solve = np.array([lp.solve_seconds for lp in proj.layers])
        reasons = np.asarray(run.layers["stop_reason"])[:, 0]
        out[_variant(run, str(a.get("bench_mode")))].append(
            (float(a.get("bench_factor", 1.0)), _after_layer0(solve, reasons)))
    return {k: sorted(v) for k, v in out.items()}


def simulated_points(paths: list[str]) -> list[dict]:
    """One row per simulated run log: variant, M, factor, jitter, time after layer 0."""
    rows = []
    for p in paths:
        run = read_runlog(p)
        if not run.attrs.get("simulated"):
            raise UserError(f"{p} is not a simulated run log (dssfn-mpi simulate)")
        L = run.layers
        rows.append({
            "variant": _variant(run), "nodes": run.nodes, "factor": _factor(run),
            "topology": str(run.attrs.get("topology")),
            "noise": "jitter" in str(run.attrs.get("sim_speed", "")),
            "seconds": _after_layer0(np.asarray(L["solve_seconds"]).max(axis=1),
                                     np.asarray(L["stop_reason"])[:, 0]),
        })
    return rows


def _style(variant: str) -> dict:
    """The engine's colour (figstyle), the variant's marker."""
    from .figstyle import style

    return style(variant) or {"color": "gray", "marker": "D"}


def _title(args: argparse.Namespace, sim: list[dict]) -> str:
    """Dataset, M and eps of the figure, from the runs themselves."""
    runs = [read_runlog(p) for p in args.sim]
    if args.live:
        runs += list(read_sweep(args.live).values())[:1]
    datasets = sorted({str(r.attrs.get("dataset", "?")) for r in runs})
    stops = sorted({str(r.config.get("stop", "?")).partition(":")[2] for r in runs} - {""})
    live_m = sorted({int(r.attrs.get("nodes", 0)) for r in runs if not r.attrs.get("simulated")})
    return (f"Time to eps = {', '.join(stops) or '?'} (layers >= 1): "
            f"{', '.join(datasets)}; live M = {', '.join(map(str, live_m)) or '-'}, simulated "
            f"M = {', '.join(map(str, sorted({r['nodes'] for r in sim}))) or '-'}")


def accuracy_summary(args: argparse.Namespace) -> dict:
    """The points of the figure (``args`` as ``dssfn-mpi bench accuracy`` takes them), as
    the JSON summary written beside it."""
    from ..summaries.records import machine, now

    live = live_points(args.live, args.network) if args.live else {}
    sim = simulated_points(args.sim)
    return {"format": ACCURACY_FORMAT, "version": 1, "network": args.network,
            "title": _title(args, sim), "made": now(), "machine": machine(),
            "live": {k: [list(p) for p in v] for k, v in sorted(live.items())},
            "simulated": sorted(sim, key=lambda r: (r["variant"], r["topology"], r["noise"],
                                                    r["nodes"], r["factor"]))}


def accuracy_markdown(summary: dict, part: str | None = None) -> str:
    """The table of a summary: every live point and simulated run (``part`` ``"live"`` or
    ``"simulated"``: those rows alone)."""
    net = summary["network"]
    lines = ["| source | variant | M | straggler | noise | time to eps, layers >= 1 [s] |",
             "|---|---|---|---|---|---|"]
    if part in (None, "live"):
        lines += [f"| live, replayed {net} | {variant} | - | {f:g} | - | {t:.3f} |"
                  for variant, pts in summary["live"].items() for f, t in pts]
    if part in (None, "simulated"):
        lines += [f"| simulated | {r['variant']} {r['topology']} | {r['nodes']} "
                  f"| {r['factor']:g} | {'jitter' if r['noise'] else '-'} | {r['seconds']:.4f} |"
                  for r in summary["simulated"]]
    return "\n".join(lines)


def _simulated_lines(ax_f: Any, ax_m: Any, sim: list[dict]) -> None:
    """Simulated curves: against the straggler factor where only it varies, against M
    where M does."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in sim:
        by[(r["variant"], r["topology"], r["noise"])].append(r)
    for (variant, topo, noise), rows in sorted(by.items()):
        style = _style(variant)
        label = f"sim {variant} {topo}" + (" +jitter" if noise else "")
        factors = {r["factor"] for r in rows}
        nodes = {r["nodes"] for r in rows}
        ls = "--" if noise else "-"
        if len(factors) > 1 and len(nodes) == 1:
            rows.sort(key=lambda r: r["factor"])
            ax_f.plot([r["factor"] for r in rows], [r["seconds"] for r in rows], ls,
                      color=style["color"], label=label, alpha=0.8)
        elif len(nodes) > 1:
            rows.sort(key=lambda r: r["nodes"])
            ax_m.plot([r["nodes"] for r in rows], [r["seconds"] for r in rows], ls,
                      marker=style["marker"], color=style["color"],
                      label=label + (f", x{max(factors):g} straggler" if max(factors) > 1
                                     else ""))


def plot_accuracy(summary: dict, outdir: Path, stem: str = "time_to_eps") -> list[Path]:
    """The figure of a summary (:func:`accuracy_summary`) as ``<stem>.png`` and ``.pdf``."""
    from matplotlib.ticker import NullFormatter

    from .figstyle import plt, save

    live, sim = summary["live"], summary["simulated"]
    fig, (ax_f, ax_m) = plt.subplots(1, 2, figsize=(12, 4.5))
    for variant, pts in live.items():
        x, y = zip(*pts)
        ax_f.plot(x, y, linestyle="none", markersize=8, label=f"live {variant} (projected)",
                  **_style(variant))
    _simulated_lines(ax_f, ax_m, sim)
    drawn = {lab.removeprefix("sim ").split(" ")[0] for lab in
             ax_f.get_legend_handles_labels()[1] if lab.startswith("sim ")}
    for variant in sorted(set(live) - drawn):  # every live series names its simulated line
        ax_f.plot([], [], "-", color=_style(variant)["color"],
                  label=f"sim {variant}: no simulated run given")
    ax_f.set(xlabel="straggler factor (one rank slowed)", ylabel="time to eps, layers >= 1 [s]",
             yscale="log", title="against a straggler: live points (projected), simulated lines")
    fig.suptitle(summary["title"], fontsize=10)
    ax_m.set(xlabel="nodes M", ylabel="simulated time to eps, layers >= 1 [s]", xscale="log",
             yscale="log", title="against the node count (simulated)")
    ticks = sorted({r["nodes"] for r in sim})
    if ticks:
        ax_m.set_xticks(ticks, [str(t) for t in ticks])
    ax_m.xaxis.set_minor_formatter(NullFormatter())
    for ax in (ax_f, ax_m):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return save(fig, outdir, stem)


def main(argv: list[str] | None = None) -> int:
    """``python -m dssfn_mpi.bench.figures.accuracy``: as ``dssfn-mpi bench accuracy``."""
    from ..sweeps.toolargs import tool_parser

    parser = tool_parser("dssfn_mpi.bench.figures.accuracy", __doc__.splitlines()[0])
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Draw the figure, write its summary beside it and print the table of ``args``
    (``dssfn-mpi bench accuracy``)."""
    from ..summaries.records import write_summary

    summary = accuracy_summary(args)
    print(accuracy_markdown(summary))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for p in [*plot_accuracy(summary, out.parent, out.stem),
              write_summary(summary, out.with_suffix(".json"))]:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
