"""Penalty sweep: how close each ADMM gets to O* in K iterations, or how many
activations it needs to get within a tolerance, per layer and penalty.

A serial study (no MPI), the evidence behind the ``auto`` constants in
:mod:`dssfn_mpi.ssfn.solver`::

    dssfn-mpi bench penalty --dataset digits --layers 20 --engine sync
    dssfn-mpi bench penalty --dataset vowel --layers 12 --engine async --degree 8
    dssfn-mpi bench penalty --dataset digits --engine async --degree 2 --to-eps 1e-2

Along the *centralized* path (every layer's features built from the exact O*
of the layer before), the training set is split uniformly over M nodes and each layer
problem is solved on the circular graph of degree d
(:func:`dssfn_mpi.graph.topology.make_topology`) by the engine's algorithm in the
simulator (:func:`dssfn_mpi.sim.layerloop.solve_layer`: the algorithm object the engines
run, at its default relaxation or ``--relax``; every node at one speed), for K
activations (iterations) per node with penalty ``auto x 2^k``. One line per layer gives
lam*, the condition number ``cond(G + lam* I)`` of the stacked layer problem, the ``auto``
penalty, the best multiplier and every multiplier's max relative distance to O*.

With ``--to-eps TOL`` (:func:`to_eps`) each layer is solved the same way, for any mode
whose algorithm takes a penalty (:func:`penalised_modes`: async with its reads of one-
message-old neighbour values and bounded delay 4, sync with its allreduce, sync-graph with
its mixing rounds, lockstep, hood, hood-lockstep, hood-jacobi; every node at one speed) on
``--topology``, each until every node is within TOL of O* (``--stop eps:TOL``) or at
``--iters``, and a line gives the mean activations per node of every multiplier of the
``auto`` penalties (per edge or per membership where the algorithm has several, as the
engines combine them). ``--table GRAPHS`` (:func:`table`) runs that for every engine,
graph and dataset given (``--engine all``: every mode with a penalty), layers 1 - L, and
prints one markdown row per layer: the ``auto`` count, the best multiplier's and their
ratio::

    dssfn-mpi bench penalty --to-eps 1e-2 --table all --engine all \\
        --dataset digits,satimage,vowel,letter --layers 5 --iters 3000

With ``--metric gram`` layer 0 is solved in the Gram metric with the metric form's ``auto``
penalty (:func:`dssfn_mpi.ssfn.solver.metric_penalty`, ``train``'s default), and ``--table``
covers layers 0 - L::

    dssfn-mpi bench penalty --to-eps 1e-2 --metric gram --layers 0 --iters 2000 \\
        --engine async --dataset satimage,digits --table ring:64,circular:64:8
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ...datasets import load_dataset
from ...datasets.partition import partition
from ...errors import UserError
from ...graph.topology import Graph, make_topology
from ...ssfn.model import default_eps, default_width, layer_features, one_hot
from ...ssfn.solver import exact_solve, penalty_stats, width_ratio

__all__ = ["main", "penalised_modes", "run", "sweep",
           "table", "to_eps"]

class _Solver:
    """One layer's simulated solve of ``cfg``'s algorithm on ``graph`` (the simulator's own
    :func:`~dssfn_mpi.sim.layerloop.solve_layer`: the algorithm object at its relaxation,
    with its penalties, metric and messages; every node at one speed)."""

    def __init__(self, cfg, graph: Graph, layers: int, seed: int) -> None:
        from ...analysis.network import parse_network
        from ...analysis.timeline import hop_distances
        from ...sim.layerloop import SimOptions
        from ...sim.speed import SpeedModel

        nodes = graph.n_nodes
        self.cfg, self.graph, self.alg = cfg, graph, cfg.algorithm
        self.nbrs = [graph.neighbors(m) for m in range(nodes)]
        self.hops = hop_distances(self.nbrs)  # when a mixing round's values have arrived
        self.rounds = _mix_rounds(cfg, graph)
        self.opts = SimOptions(nodes=nodes, network=parse_network("shm"),
                               speed=SpeedModel.build("const:1e-3", nodes, layers + 1,
                                                      cfg.iters, {}, None, None, seed))

    def __call__(self, layer: int, eps: float, Ys, Gs, Bs, pens, metrics, star):
        """Every node's run of the layer and whether all got within the stop rule's eps."""
        from ...sim.layerloop import SolveContext, solve_layer

        nodes, alg = self.graph.n_nodes, self.alg
        invs = [alg.inverse(Ys[m], Gs[m], pens[m], metrics[m]) for m in range(nodes)]
        ctx = SolveContext(self.cfg, self.opts, self.graph, eps, self.rounds, self.nbrs,
                           self.hops)
        return solve_layer(ctx, layer, invs, [2.0 * b for b in Bs], pens, metrics, star,
                           np.zeros(nodes), alg.message_bytes(*Bs[0].shape))


def _layers(dataset: str, layers: int, nodes: int, seed: int):
    """Each layer along the centralized path, split over ``nodes`` uniform shards.

    Yields ``(layer, eps, Ys, Gs, Bs, star, cond, stats)``: the shards'
    features, Gram matrices and ``T Y^T``, the exact solution, the condition number
    of the stacked problem and each node's numbers behind the ``auto`` penalty
    (:func:`dssfn_mpi.ssfn.solver.penalty_stats`).
    """
    ds = load_dataset(dataset, seed=seed)
    X, y = ds.X_train, ds.y_train
    Q = int(y.max()) + 1
    n, eps = default_width(Q), default_eps(Q)
    T = one_hot(y, Q)
    shards = partition(y, nodes, "uniform", seed)
    Y, O_prev = X, None
    for layer in range(layers + 1):
        if layer > 0:
            (Y,) = layer_features(O_prev, seed, layer, n, Y)
        G = Y @ Y.T
        star = exact_solve(G, T @ Y.T, eps)
        # Condition number of the layer's Hessian: ADMM's iteration count grows with it.
        eig = np.linalg.eigvalsh(G)
        cond = (eig[-1] + star.lam) / max(eig[0] + star.lam, np.finfo(float).tiny)
        Ys = [Y[:, s] for s in shards]
        Ts = [T[:, s] for s in shards]
        Gs = [a @ a.T for a in Ys]
        Bs = [t @ a.T for t, a in zip(Ts, Ys)]
        stats = [penalty_stats(a, t, g, eps) for a, t, g in zip(Ys, Ts, Gs)]
        yield layer, eps, Ys, Gs, Bs, star, cond, stats
        O_prev = star.O


def sweep(
    dataset: str, layers: int, engine: str, nodes: int = 20, degree: int = 8, iters: int = 200,
    powers: tuple[int, ...] = (-2, -1, 0, 1, 2, 3), seed: int = 0, out=sys.stdout,
    relax: float | None = None,
) -> list[dict]:
    """Run the sweep; print and return one dict per layer (see the module notes).

    Each multiplier's layer is ``iters`` activations (iterations) per node of the engine's
    algorithm in the simulator, at its default relaxation or ``relax``.
    """
    from ...config import TrainConfig

    graph = make_topology("circular", nodes, degree)
    cfg = TrainConfig(dataset=dataset, mode=engine, iters=iters, seed=seed, metric="identity",
                      **_relaxation(engine, relax))
    solve = _Solver(cfg, graph, layers, seed)
    mults = [2.0**k for k in powers]
    rows = []
    for layer, eps, Ys, Gs, Bs, star, cond, stats in _layers(dataset, layers, nodes, seed):
        pens = _auto(engine, graph, layer, stats)
        auto = float(np.mean(pens[0]))
        norm = np.linalg.norm(star.O)
        dist = []
        for mult in mults:
            runs, _ = solve(layer, eps, Ys, Gs, Bs, [mult * p for p in pens],
                            [None] * nodes, star)
            dist.append(max(float(np.linalg.norm(r.O - star.O)) for r in runs) / norm)
        best = int(np.argmin(dist))
        row = {"layer": layer, "lam_star": star.lam, "cond": cond, "auto": auto,
               "multipliers": mults,
               "rel_distance": dist, "best": mults[best]}
        rows.append(row)
        print(f"l={layer:2d} lam*={star.lam:.3g} cond={cond:.2g} auto={auto:.3g} "
              f"best x{mults[best]:g} {dist[best]:.1e} | "
              + " ".join(f"x{m:g}:{v:.1e}" for m, v in zip(mults, dist)),
              file=out, flush=True)
    return rows


def _auto(engine: str, graph: Graph, layer: int, stats: list[np.ndarray],
          metric: str = "identity", Ys: list[np.ndarray] | None = None) -> list:
    """Each node's ``auto`` penalty as its engine combines ``stats`` (the simulator's rule).

    Per node what its algorithm's penalty is: one gamma per neighbour (async, lockstep),
    one rho per membership (hood), one rho (sync, sync-graph); under ``metric`` ``gram``
    layer 0's is the metric form's, from the nodes' features ``Ys``.
    """
    from ...config import TrainConfig
    from ...sim.nodes import penalties

    cfg = TrainConfig(mode=engine, metric=metric)
    ratio = 0.0 if Ys is None else width_ratio(Ys[0].shape[0], [Y.shape[1] for Y in Ys])
    return penalties(cfg, graph, layer, stats, _mix_rounds(cfg, graph), ratio)


def _metric_layer0(cfg, graph: Graph, rounds: int, Ys: list[np.ndarray],
                   Gs: list[np.ndarray], Bs: list[np.ndarray]) -> list:
    """Each node's Gram metric of layer 0 as the simulator forms it for ``cfg``'s algorithm
    (:func:`dssfn_mpi.sim.nodes.layer_metrics`)."""
    from ...sim.nodes import Layer, layer_metrics
    from ...ssfn.gramstats import StatsLayout

    probs = [Layer(Y=Y, G=G.copy(), B=B, stats=np.zeros(3), features_cpu=0.0, penalty_cpu=0.0,
                   gram_trace=float(np.trace(G))) for Y, G, B in zip(Ys, Gs, Bs)]
    alg, grams = cfg.algorithm, None
    if alg.mixes:
        layout = StatsLayout(Gs[0].shape[0], 0)
        grams = np.stack([layout.pack(G, B[:0]) for G, B in zip(Gs, Bs)])
    return layer_metrics(cfg, graph, probs, rounds, sum(Gs), grams)


def _mix_rounds(cfg, graph: Graph) -> int:
    """The mixing rounds of ``cfg``'s algorithm on ``graph`` (0 where it does not mix)."""
    return cfg.algorithm.mix_rounds(graph, cfg.mix_rounds, cfg.mix_tol)


def penalised_modes() -> tuple[str, ...]:
    """The modes whose algorithm takes a penalty (``--gamma`` or ``--rho``): what
    ``--to-eps`` sweeps."""
    from ...algorithms import ALGORITHMS

    return tuple(dict.fromkeys(a.name for a in ALGORITHMS if a.penalty_option))


def to_eps(
    dataset: str, layers: int, engine: str, nodes: int = 20, degree: int | None = 8,
    topology: str = "circular", tol: float = 1e-2, iters: int = 3000,
    powers: tuple[int, ...] = (-2, -1, 0, 1, 2), seed: int = 0, out=sys.stdout,
    first: int = 0, metric: str = "identity", relax: float | None = None,
) -> list[dict]:
    """Activations to ``tol`` per layer and penalty multiplier, in the simulator.

    Prints and returns one dict per layer from ``first`` on: ``activations`` is, per
    multiplier of every node's ``auto`` penalty, the mean over nodes of the activations
    (sync, sync-graph: iterations) the layer took, ``done`` whether every node got within
    ``tol`` of O* before ``iters``. ``metric`` ``gram`` solves layer 0 in the Gram metric
    with the metric form's ``auto`` penalty, as ``train`` does by default; ``identity``
    every layer with the scalar one. ``relax``: the engine's relaxation (``--relax`` or
    ``--eta``; None: the mode's default).
    """
    from ...config import TrainConfig

    graph = make_topology(topology, nodes, degree)
    cfg = TrainConfig(dataset=dataset, mode=engine, iters=iters, stop=f"eps:{tol}", seed=seed,
                      metric=metric, **_relaxation(engine, relax))
    solve = _Solver(cfg, graph, layers, seed)
    mults = [2.0**k for k in powers]
    rows = []
    for layer, eps, Ys, Gs, Bs, star, _, stats in _layers(dataset, layers, nodes, seed):
        if layer < first:
            continue
        auto = _auto(engine, graph, layer, stats, metric, Ys)
        metrics = (_metric_layer0(cfg, graph, solve.rounds, Ys, Gs, Bs)
                   if cfg.metric_at(layer) else [None] * nodes)
        acts, done = [], []
        for mult in mults:
            runs, ok = solve(layer, eps, Ys, Gs, Bs, [mult * p for p in auto], metrics, star)
            acts.append(float(np.mean([r.activations for r in runs])))
            done.append(bool(ok))
        # The fewest activations among the multipliers that got there (None: none did).
        best = (mults[int(np.argmin([a if ok else np.inf for a, ok in zip(acts, done)]))]
                if any(done) else None)
        row = {"layer": layer, "lam_star": star.lam, "auto": float(np.mean(auto[0])),
               "multipliers": mults, "activations": acts, "done": done, "best": best}
        rows.append(row)
        print(f"l={layer:2d} lam*={star.lam:.3g} auto={row['auto']:.3g} "
              f"best {'-' if best is None else f'x{best:g}'} | "
              + " ".join(f"x{m:g}:{'' if ok else '>'}{a:.0f}"
                         for m, a, ok in zip(mults, acts, done)), file=out, flush=True)
    return rows


def _relaxation(engine: str, relax: float | None) -> dict[str, float]:
    """``TrainConfig``'s keyword for ``relax`` of ``engine`` (none: the mode's default)."""
    from ...algorithms import lookup

    if relax is None:
        return {}
    return {"relax" if lookup(engine).relaxes else "eta": float(relax)}


#: ``--table``'s graphs: (topology, M, degree or None for the topology's own).
TABLE_GRAPHS = {"ring:4": ("ring", 4, None), "ring:20": ("ring", 20, None),
                "circular:20:8": ("circular", 20, 8), "complete:8": ("complete", 8, None),
                "random-regular:16:3": ("random-regular", 16, 3)}


def _graph_spec(text: str) -> tuple[str, int, int | None]:
    """``topology:M[:d]`` as (topology, M, d)."""
    parts = text.split(":")
    try:
        if len(parts) in (2, 3):
            return parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else None
    except ValueError:
        pass
    raise UserError(f"--table graph {text!r}: expected TOPOLOGY:M or TOPOLOGY:M:DEGREE")


def _check_table_input(datasets: list[str], graphs: list[str]) -> None:
    """Refuse an unknown dataset or a graph that cannot be built before any row is printed."""
    from ...datasets import DATASETS

    for dataset in datasets:
        if dataset not in DATASETS:
            raise UserError(f"--dataset {dataset!r}: expected one of {', '.join(DATASETS)}")
    for spec in graphs:
        topology, nodes, degree = _graph_spec(spec)
        make_topology(topology, nodes, degree)  # UserError on a bad name, M or degree


def table(
    datasets: list[str], engines: list[str], graphs: list[str], layers: int, tol: float = 1e-2,
    iters: int = 3000, powers: tuple[int, ...] = (-2, -1, 0, 1, 2), seed: int = 0,
    out=sys.stdout, metric: str = "identity", relax: float | None = None,
) -> list[dict]:
    """The ``auto`` rules against the best multiplier in hindsight, layers 1 - ``layers``
    (0 - ``layers`` with ``metric`` ``gram``: layer 0 in the Gram metric, :func:`to_eps`).

    One markdown row per engine, graph, dataset and layer (printed as it is measured):
    the ``auto`` penalty's activations (iterations) per node to ``tol``, the best of
    ``auto x 2^k`` (``powers``, which must hold 0) and their ratio, ``>`` where the
    cap ``iters`` was hit. Returns the rows.
    """
    if 0 not in powers:
        raise UserError("--table needs 0 among --powers (the auto penalty itself)")
    _check_table_input(datasets, graphs)
    print("| engine | graph | dataset | layer | auto | best | best x | auto / best |\n"
          "|---|---|---|---|---|---|---|---|", file=out, flush=True)
    from ...algorithms import lookup

    rows, measured = [], {}
    for engine in engines:
        for spec in graphs:
            topology, nodes, degree = _graph_spec(spec)
            for dataset in datasets:
                # An allreduce sees no graph: one run per node count serves them all.
                key = (engine, dataset, nodes if lookup(engine).collective else spec)
                if key not in measured:
                    measured[key] = to_eps(dataset, layers, engine, nodes, degree, topology,
                                           tol, iters, powers, seed, out=_Discard(),
                                           first=int(metric != "gram"), metric=metric,
                                           relax=relax)
                for r in measured[key]:
                    acts, done = r["activations"], r["done"]
                    i0 = powers.index(0)
                    ok = [a for a, d in zip(acts, done) if d]
                    best = min(ok) if ok else float("nan")
                    ratio = acts[i0] / best if done[i0] and ok else float("inf")
                    row = dict(engine=engine, graph=spec, dataset=dataset, layer=r["layer"],
                               auto=acts[i0], auto_done=done[i0], best=best, best_x=r["best"],
                               ratio=ratio)
                    rows.append(row)
                    mark = "" if done[i0] else ">"
                    bx = "-" if r["best"] is None else f"{r['best']:g}"
                    print(f"| {engine} | {spec} | {dataset} | {r['layer']} | "
                          f"{mark}{acts[i0]:.0f} | {best:.0f} | {bx} | {ratio:.2f} |",
                          file=out, flush=True)
    return rows


class _Discard:
    """A file that keeps nothing (the per-layer lines under ``--table``)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    """``python -m dssfn_mpi.bench.studies.penalty``: as ``dssfn-mpi bench penalty``."""
    from ..sweeps.toolargs import tool_parser

    parser = tool_parser("dssfn_mpi.bench.studies.penalty", __doc__.split("\n\n")[0])
    try:
        return run(parser.parse_args(argv))
    except UserError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    """Run the sweep of ``args`` (``dssfn-mpi bench penalty``); UserError on bad input."""
    try:
        powers = tuple(int(k) for k in args.powers.split(","))
    except ValueError:
        raise UserError(f"--powers {args.powers!r}: expected comma-separated integers") from None
    penalised = penalised_modes()
    for engine in args.engine.split(","):
        if engine not in (*penalised, "all"):
            raise UserError(f"--engine {engine!r}: expected a mode with a penalty "
                            f"({', '.join(penalised)}; with --table a comma list or all)")
    if ("," in args.engine + args.dataset or args.engine == "all") and args.table is None:
        raise UserError("comma lists of --engine or --dataset, and --engine all, need --table")
    try:
        if args.table is not None:
            if args.to_eps is None:
                raise UserError("--table needs --to-eps TOL")
            graphs = (list(TABLE_GRAPHS) if args.table == "all" else args.table.split(","))
            engines = (list(penalised) if args.engine == "all" else args.engine.split(","))
            table(args.dataset.split(","), engines, graphs, args.layers, args.to_eps,
                  args.iters, powers, metric=args.metric, relax=args.relax)
        elif args.to_eps is None:
            sweep(args.dataset, args.layers, args.engine, args.nodes, args.degree or 8,
                  args.iters, powers, relax=args.relax)
        else:
            to_eps(args.dataset, args.layers, args.engine, args.nodes, args.degree, args.topology,
                   args.to_eps, args.iters, powers, metric=args.metric, relax=args.relax)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
