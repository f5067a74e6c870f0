"""The one-shot baseline's cost per layer against the hidden width n, and its break-even K.

``python -m dssfn_mpi.bench.micro.oneshot --out results/data/oneshot_cost.json
--figure docs/figures``
measures, on this machine and in this process (one BLAS thread), per width n:

- ``solve``: wall seconds of one node's one-shot step without the exchange:
  packing the statistics, unpacking the sum and the exact solve
  (:mod:`dssfn_mpi.engines.oneshot`'s arithmetic), median of ``--repeat``;
- ``factor``: wall seconds of the ADMM engines' once-per-layer factorisation
  (:class:`~dssfn_mpi.ssfn.solver.LocalInverse`, dense), which the one-shot step replaces;
- ``iteration``: wall seconds of one sync ADMM iteration's compute on a node
  (:func:`~dssfn_mpi.algorithms.updates.consensus_primal` and ``consensus_dual``);

and projects, with the replay's network models (:mod:`dssfn_mpi.analysis.network`,
Open MPI's allreduce rule as on this machine) for M nodes:

- ``oneshot_seconds``: ``solve`` plus the allreduce of the packed statistics,
  ``(n (n + 1) / 2 + Q n) 8`` bytes;
- ``round_seconds``: ``iteration`` plus the allreduce of one ``Q x n`` average;
- the break-even K: in bytes ``stats_bytes / (Q n 8)``, about ``n / (2Q)``;
  in time ``(oneshot_seconds - factor) / round_seconds`` per network: the K at
  which a sync ADMM layer (factorisation and K rounds) costs one one-shot layer.

Features are random non-negative ``n x 2n`` (the solve's cost depends on n, not
on the data); the layer's features and ``G_m`` are left out (every mode has them).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from ...algorithms.updates import consensus_dual, consensus_primal
from ...analysis.network import NETWORKS, allreduce_seconds
from ...ssfn.gramstats import StatsLayout, stats_bytes
from ...ssfn.solver import LocalInverse, exact_solve

__all__ = ["cost_markdown", "measure", "plot", "main"]

WIDTHS = (100, 250, 500, 1000, 1500, 2000)


def _median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _timings(n: int, n_classes: int, rng: np.random.Generator, repeat: int) -> dict:
    """Measured seconds of one width: the one-shot step, the factorisation, one iteration."""
    Y = np.maximum(rng.standard_normal((n, 2 * n)), 0.0)
    T = np.eye(n_classes)[:, rng.integers(0, n_classes, 2 * n)]
    G, B, eps = Y @ Y.T, T @ Y.T, 2.0 * n_classes
    lay = StatsLayout(n, n_classes)

    def oneshot_step() -> None:
        exact_solve(*lay.unpack(lay.pack(G, B)), eps)

    inv = LocalInverse(Y, 1.0, G)
    B2, U, Zbar = 2.0 * B, np.zeros_like(B), np.zeros_like(B)

    def admm_step() -> None:
        O = consensus_primal(inv, B2, 1.0, Zbar, U)
        consensus_dual(O + U, eps, O, U.copy())

    return {"solve": _median_seconds(oneshot_step, repeat),
            "factor": _median_seconds(lambda: LocalInverse(Y, 1.0, G), repeat),
            "iteration": _median_seconds(admm_step, max(repeat, 20))}


def measure(widths=WIDTHS, n_classes: int = 10, nodes: int = 20, repeat: int = 3,
            seed: int = 0) -> dict:
    """Measured step times and projected per-layer costs for every width (see the module)."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in widths:
        row = {"n": n, "stats_bytes": stats_bytes(n, n_classes),
               "round_bytes": n_classes * n * 8, **_timings(n, n_classes, rng, repeat)}
        row["breakeven_bytes"] = row["stats_bytes"] / row["round_bytes"]
        for name, net in NETWORKS.items():
            one = row["solve"] + allreduce_seconds(net, nodes, row["stats_bytes"], "openmpi")
            rnd = row["iteration"] + allreduce_seconds(net, nodes, row["round_bytes"],
                                                       "openmpi")
            row[f"oneshot_seconds_{name}"], row[f"round_seconds_{name}"] = one, rnd
            row[f"breakeven_time_{name}"] = max(one - row["factor"], 0.0) / rnd
        rows.append(row)
    return {"n_classes": n_classes, "nodes": nodes, "repeat": repeat, "rows": rows}


def plot(data: dict, outdir: Path) -> list[Path]:
    """``oneshot_cost.png`` / ``.pdf``: seconds per layer and break-even K against n."""
    from ..figures.figstyle import plt, save

    rows, Q, M = data["rows"], data["n_classes"], data["nodes"]
    n = np.array([r["n"] for r in rows])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax.loglog(n, [r["solve"] for r in rows], "k.-", label="one-shot solve, measured")
    for name, colour in (("ib", "tab:blue"), ("eth10", "tab:red")):
        ax.loglog(n, [r[f"oneshot_seconds_{name}"] for r in rows], "o-", color=colour,
                  label=f"one-shot layer, projected ({name})")
        ax.loglog(n, [r[f"round_seconds_{name}"] for r in rows], "s--", color=colour,
                  label=f"one sync ADMM round, projected ({name})")
    ax.set(xlabel="hidden width n", ylabel="seconds per node",
           title=f"cost per layer, M = {M}, Q = {Q}")
    ax.legend(fontsize=7)
    bx.loglog(n, [r["breakeven_bytes"] for r in rows], "k.-", label="bytes: (n + 1) / (2Q) + 1")
    for name, colour in (("shm", "tab:green"), ("ib", "tab:blue"), ("eth10", "tab:red")):
        bx.loglog(n, [r[f"breakeven_time_{name}"] for r in rows], "o-", color=colour,
                  label=f"time, projected ({name})")
    bx.axhline(200, color="gray", lw=0.8, ls=":", label="K = 200 (the paper)")
    bx.set(xlabel="hidden width n", ylabel="sync ADMM rounds K costing one one-shot layer",
           title="break-even K")
    bx.legend(fontsize=7)
    return save(fig, outdir, "oneshot_cost")


def _sig(x: float, digits: int) -> str:
    """``x`` to ``digits`` significant digits, never rounding its integer part."""
    return f"{x:.{max(digits, len(str(int(abs(x)))))}g}"


def cost_markdown(data: dict) -> str:
    """The results page's table of the measurements: per n the statistics' size, the
    measured one-shot step, factorisation and sync iteration, the projected one-shot layer
    and sync round (ib / eth10) and the break-even K in bytes and in time."""
    lines = ["| n | statistics [MB] | one-shot step [ms] | ADMM factorisation [ms] "
             "| sync iteration [ms] | one-shot layer, ib / eth10 [ms] "
             "| sync round, ib / eth10 [ms] | break-even K: bytes | time, ib / eth10 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        ms = {k: 1e3 * r[k] for k in ("solve", "factor", "iteration", "oneshot_seconds_ib",
                                       "oneshot_seconds_eth10", "round_seconds_ib",
                                       "round_seconds_eth10")}
        lines.append(
            f"| {r['n']} | {r['stats_bytes'] / 1e6:.2f} | {_sig(ms['solve'], 3)} "
            f"| {_sig(ms['factor'], 3)} | {_sig(ms['iteration'], 2)} "
            f"| {_sig(ms['oneshot_seconds_ib'], 4)} / {_sig(ms['oneshot_seconds_eth10'], 4)} "
            f"| {_sig(ms['round_seconds_ib'], 2)} / {_sig(ms['round_seconds_eth10'], 2)} "
            f"| {r['breakeven_bytes']:.0f} | {r['breakeven_time_ib']:.0f} / "
            f"{r['breakeven_time_eth10']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: measure, write the JSON, draw the figure."""
    p = argparse.ArgumentParser(prog="python -m dssfn_mpi.bench.micro.oneshot", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    p.add_argument("--classes", type=int, default=10, help="Q (default 10)")
    p.add_argument("--nodes", type=int, default=20, help="M of the projection (default 20)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", help="JSON file for the measurements")
    p.add_argument("--figure", help="folder for oneshot_cost.png / .pdf")
    p.add_argument("--from", dest="source", metavar="JSON",
                   help="draw the figure from these measurements instead of measuring")
    args = p.parse_args(argv)
    widths = tuple(int(w) for w in args.widths.split(","))
    if args.source:
        data = json.loads(Path(args.source).read_text())
    else:
        data = measure(widths, args.classes, args.nodes, args.repeat)
    if args.out and not args.source:
        Path(args.out).write_text(json.dumps(data, indent=1))
    if args.figure:
        plot(data, Path(args.figure))
    for r in data["rows"]:
        print(f"n {r['n']:5d}  solve {r['solve'] * 1e3:9.2f} ms  factor "
              f"{r['factor'] * 1e3:8.2f} ms  iteration "
              f"{r['iteration'] * 1e3:7.3f} ms  stats {r['stats_bytes'] / 1e6:7.2f} MB  "
              f"break-even K: bytes {r['breakeven_bytes']:6.1f}, time ib "
              f"{r['breakeven_time_ib']:7.1f}, eth10 {r['breakeven_time_eth10']:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
