"""How the simulator's cost grows: CPU seconds per simulated activation against M and n.

``python -m dssfn_mpi.bench.micro.simcost [--out FILE.json] [--quick]`` runs one layer's simulated
solve (:func:`dssfn_mpi.sim.layerloop.solve_layer`, ``--stop iters``, the scalar penalty,
``--speed const``) on synthetic data for each mode, node count M and layer width n, and
prints a Markdown table of the process CPU time per activation (each node's iteration:
M per consensus iteration); with ``--out`` it writes the rows as JSON. Each node holds
``60000 // M`` samples (mnist's training set split M ways) of ``Q = 10`` classes, so the
local inverses are Woodbury's where ``2 J < n``. The set-up (the local inverses) is not
counted. ``sync/node`` is sync through the node-by-node reference path.

``python -m dssfn_mpi.bench.micro.simcost --runs RUN.h5 ...`` prints instead what whole simulated
runs cost, from their run logs: wall, CPU, memory peak and load, and per layer the
iterations (activations per node, the most of any node) and the distance to ``O*``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import Any

import numpy as np

__all__ = ["measure", "main", "runs_table"]

#: Activations (consensus: iterations) per node of every measurement.
ITERS = 20
CLASSES = 10
SAMPLES = 60000


def measure(mode: str, nodes: int, width: int, topology: str = "circular", degree: int = 8,
            stacked: bool = True, iters: int = ITERS, seed: int = 0) -> dict[str, Any]:
    """One layer's simulated solve of ``mode``: its activations, CPU and wall seconds."""
    from ...analysis.network import parse_network
    from ...analysis.timeline import hop_distances
    from ...config import TrainConfig
    from ...run.runstate import make_graph
    from ...sim import syncsim
    from ...sim.layerloop import SimOptions, SolveContext, solve_layer
    from ...sim.speed import SpeedModel

    cfg = TrainConfig(mode=mode, iters=iters, topology=topology, degree=degree,
                      metric="identity")
    alg = cfg.algorithm
    graph = make_graph(cfg, nodes)
    neighbors = [tuple(graph.neighbors(m)) for m in range(nodes)]
    speed = SpeedModel.build("const:1e-4", nodes, 2, iters, {}, None, None, 0)
    opts = SimOptions(nodes=nodes, speed=speed, network=parse_network("shm"))
    ctx = SolveContext(cfg, opts, graph, 2.0 * CLASSES,
                       alg.mix_rounds(graph, cfg.mix_rounds, cfg.mix_tol), neighbors,
                       hop_distances(neighbors))
    rng = np.random.default_rng(seed)
    J = max(SAMPLES // nodes, 1)
    invs, B2s, pens = [], [], []
    for m in range(nodes):
        Y = rng.random((width, J)) / np.sqrt(width)
        T = np.eye(CLASSES)[:, rng.integers(0, CLASSES, J)]
        pens.append(alg.fixed_penalty(1.0, graph.degree(m)))
        invs.append(alg.inverse(Y, None, pens[-1]))
        B2s.append(2.0 * T @ Y.T)
    saved, syncsim.STACKED = syncsim.STACKED, stacked
    try:
        c0, w0 = time.process_time(), time.perf_counter()
        runs, _ = solve_layer(ctx, 1, invs, B2s, pens, None, None, np.zeros(nodes),
                              alg.message_bytes(CLASSES, width))
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    finally:
        syncsim.STACKED = saved
    acts = sum(r.activations for r in runs)
    return {"mode": mode if stacked else f"{mode}/node", "nodes": nodes, "width": width,
            "samples_per_node": J, "topology": f"{topology}(d={degree})",
            "mix_rounds": ctx.rounds, "activations": acts, "cpu_seconds": cpu,
            "wall_seconds": wall, "cpu_us_per_activation": 1e6 * cpu / acts,
            "peak_rss_bytes": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024}


def _cases(quick: bool) -> list[tuple[str, int, int, bool]]:
    sizes = (64, 256) if quick else (64, 256, 1024, 4096)
    widths = (100,) if quick else (100, 1020)
    out = []
    for n in widths:
        for M in sizes:
            out += [("async", M, n, True), ("sync", M, n, True), ("sync-graph", M, n, True)]
            if M <= 256:
                out.append(("sync", M, n, False))
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table: microseconds of CPU per activation, mode x n by M."""
    sizes = sorted({r["nodes"] for r in rows})
    keys = sorted({(r["mode"], r["width"]) for r in rows}, key=lambda k: (k[1], k[0]))
    lines = ["| mode | n | " + " | ".join(f"M = {M} (J = {max(SAMPLES // M, 1)})"
                                          for M in sizes) + " |",
             "|---|---|" + "---|" * len(sizes)]
    by: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        by.setdefault((r["mode"], r["width"], r["nodes"]), r)  # the first of each
    for mode, n in keys:
        cells = []
        for M in sizes:
            hit = by.get((mode, n, M))
            cells.append(f"{hit['cpu_us_per_activation']:.0f}" if hit else "-")
        lines.append(f"| {mode} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def runs_table(paths: list[str]) -> str:
    """What simulated runs cost, one row per run log (``dssfn-mpi simulate --out``)."""
    from ...runlog import read_runlog

    lines = ["| mode | M | graph | layers | iterations per layer | max rel. distance to O* "
             "per layer | wall | CPU | peak memory | load |", "|---|---|---|---|---|---|---|---|"
             "---|---|"]
    for path in paths:
        run = read_runlog(path)
        a, lay = run.attrs, run.layers
        iters = " / ".join(str(int(v)) for v in lay["activations"].max(axis=1))
        dist = " / ".join(f"{v:.1e}" for v in np.nanmax(lay["rel_distance"], axis=1))
        total = int(run.config.get("layers", -1)) + 1
        nan = float("nan")
        lines.append(f"| {a['mode']} | {run.nodes:,} | {a['topology']} | "
                     f"{a['layers_done']} of {total} | {iters} | {dist} | "
                     f"{a.get('sim_wall_seconds', nan):,.0f} s | "
                     f"{a.get('sim_cpu_seconds', nan):,.0f} s | "
                     f"{a.get('sim_peak_rss_bytes', -1) / 2**30:.1f} GiB | "
                     f"{a.get('sim_load_average', nan):.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the measurements, print the table, write ``--out``."""
    p = argparse.ArgumentParser(prog="python -m dssfn_mpi.bench.micro.simcost",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the rows to this JSON file")
    p.add_argument("--quick", action="store_true", help="M = 64, 256 and n = 100 only")
    p.add_argument("--runs", nargs="+", metavar="RUN.h5",
                   help="tabulate these simulated runs' costs instead")
    args = p.parse_args(argv)
    if args.runs:
        from ...errors import UserError

        try:
            print(runs_table(args.runs))
        except UserError as e:
            print(f"simcost: {e}", file=sys.stderr)
            return 2
        return 0
    rows = []
    for mode in ("async", "sync", "sync-graph"):  # warm-up: imports and compiled kernels
        measure(mode, 16, 50, iters=2)
    for mode, M, n, stacked in _cases(args.quick):
        rows.append(measure(mode, M, n, stacked=stacked))
        r = rows[-1]
        print(f"{r['mode']:<11} M={M:<5} n={n:<5} {r['cpu_us_per_activation']:8.1f} us CPU "
              f"per activation ({r['activations']} in {r['cpu_seconds']:.2f} s CPU, "
              f"{r['wall_seconds']:.2f} s wall)", file=sys.stderr, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": "python -m dssfn_mpi.bench.micro.simcost" +
                       (" --quick" if args.quick else "") + f" --out {args.out}",
                       "iters": ITERS, "rows": rows}, f, indent=1)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
