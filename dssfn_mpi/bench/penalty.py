"""Penalty sweep: how close each ADMM gets to O* in K iterations, or how many
activations it needs to get within a tolerance, per layer and penalty.

A serial study (no MPI), the evidence behind the ``auto`` constants in
:mod:`dssfn_mpi.solver`::

    dssfn-mpi bench penalty --dataset digits --layers 20 --engine sync
    dssfn-mpi bench penalty --dataset vowel --layers 12 --engine async --degree 8
    dssfn-mpi bench penalty --dataset digits --engine async --degree 2 --to-eps 1e-2

Along the *centralized* path (every layer's features built from the exact O*
of the layer before), the training set is split uniformly over M nodes and
each layer problem is solved by

* ``sync``: consensus ADMM, ``O_m = (2 B_m + rho (Zbar - U_m)) (2 G_m + rho
  I)^-1``, ``Zbar = P_eps(mean(O_m + U_m))``, or
* ``async``: the edge-form ARock update on the circular graph of degree d
  (:func:`dssfn_mpi.topology.make_topology`), nodes activated in random order
  with fresh reads (no staleness: the MPI engine's runs are noisier) and one
  penalty on every edge,

each step being the engines' own (:mod:`dssfn_mpi.engines.updates`), for K
iterations per node with penalty ``auto x 2^k``. One line per layer gives
lam*, the condition number ``cond(G + lam* I)`` of the stacked layer problem,
the ``auto`` penalty, the best multiplier and every multiplier's max relative
distance to O*.

With ``--to-eps TOL`` (:func:`to_eps`) each layer is instead solved by the
simulator's engines (:mod:`dssfn_mpi.sim`: async with its reads of one-message-old
neighbour values and bounded delay 4, sync with its allreduce, every node at one
speed), each until every node is within TOL of O* (``--stop eps:TOL``) or at
``--iters``, and a line gives the mean activations per node of every multiplier.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..datasets import load_dataset
from ..engines.updates import EdgeStep, consensus_dual, consensus_primal
from ..errors import UserError
from ..model import default_eps, default_width, layer_features, one_hot
from ..partition import partition
from ..solver import LocalInverse, auto_penalty, exact_solve, local_multiplier
from ..topology import Graph, make_topology

__all__ = ["consensus_admm", "edge_arock", "main", "run", "sweep"]


def consensus_admm(
    Ys: list[np.ndarray], Gs: list[np.ndarray], Bs: list[np.ndarray], eps: float, rho: float,
    iters: int,
) -> list[np.ndarray]:
    """Every node's O after ``iters`` iterations of consensus ADMM (all equal: Zbar)."""
    invs = [LocalInverse(Y, rho, G) for Y, G in zip(Ys, Gs)]
    B2s = [2.0 * B for B in Bs]
    Zbar = np.zeros_like(Bs[0])
    U = [np.zeros_like(Zbar) for _ in Ys]
    for _ in range(iters):
        Os = [consensus_primal(inv, B2, rho, Zbar, u) for inv, B2, u in zip(invs, B2s, U)]
        mean = sum(o + u for o, u in zip(Os, U)) / len(Os)  # the allreduce
        for o, u in zip(Os, U):
            Zbar = consensus_dual(mean, eps, o, u)
    return [Zbar] * len(Ys)


def edge_arock(
    Ys: list[np.ndarray], Gs: list[np.ndarray], Bs: list[np.ndarray], eps: float, gamma: float,
    iters: int, graph: Graph, seed: int = 0,
) -> list[np.ndarray]:
    """Every node's O after ``iters`` activations each of the edge-form update (eta = 1)."""
    M = graph.n_nodes
    nbrs = [graph.neighbors(m) for m in range(M)]
    # Where Z_{n,m} sits among neighbour n's edges: what node m reads from n.
    back = [[nbrs[n].index(m) for n in nbrs[m]] for m in range(M)]
    gammas = [np.full(len(nbrs[m]), gamma) for m in range(M)]
    invs = [LocalInverse(Ys[m], float(gammas[m].sum()), Gs[m]) for m in range(M)]
    steps = [EdgeStep(2.0 * Bs[m], gammas[m], 1.0, eps, invs[m]) for m in range(M)]
    Zr = [np.empty_like(step.Z) for step in steps]
    Os = [np.zeros_like(Bs[0]) for _ in range(M)]
    rng = np.random.default_rng(seed)
    for m in np.concatenate([rng.permutation(M) for _ in range(iters)]):
        for i, n in enumerate(nbrs[m]):
            Zr[m][i] = steps[n].Z[back[m][i]]  # a fresh read of the neighbour's latest Z
        Os[m] = steps[m](Zr[m]).copy()
    return Os


def _layers(dataset: str, layers: int, nodes: int, seed: int):
    """Each layer along the centralized path, split over ``nodes`` uniform shards.

    Yields ``(layer, eps, Ys, Gs, Bs, star, cond, lam_mean, scale)``: the shards'
    features, Gram matrices and ``T Y^T``, the exact solution, the condition number
    of the stacked problem and the network means behind the ``auto`` penalty.
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
        lam_mean = float(np.mean([local_multiplier(a, t, eps) for a, t in zip(Ys, Ts)]))
        scale = float(np.mean([np.trace(g) / min(a.shape) for g, a in zip(Gs, Ys)]))
        yield layer, eps, Ys, Gs, Bs, star, cond, lam_mean, scale
        O_prev = star.O


def sweep(
    dataset: str, layers: int, engine: str, nodes: int = 20, degree: int = 8, iters: int = 200,
    powers: tuple[int, ...] = (-2, -1, 0, 1, 2, 3), seed: int = 0, out=sys.stdout,
) -> list[dict]:
    """Run the sweep; print and return one dict per layer (see the module notes)."""
    graph = make_topology("circular", nodes, degree) if engine == "async" else None
    mults = [2.0**k for k in powers]
    rows = []
    for layer, eps, Ys, Gs, Bs, star, cond, lam_mean, scale in _layers(dataset, layers, nodes,
                                                                        seed):
        auto = auto_penalty(lam_mean, scale, nodes, consensus=engine == "sync")
        norm = np.linalg.norm(star.O)
        dist = []
        for mult in mults:
            if engine == "sync":
                Os = consensus_admm(Ys, Gs, Bs, eps, auto * mult, iters)
            else:
                Os = edge_arock(Ys, Gs, Bs, eps, auto * mult, iters, graph, seed)
            dist.append(max(float(np.linalg.norm(o - star.O)) for o in Os) / norm)
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


def to_eps(
    dataset: str, layers: int, engine: str, nodes: int = 20, degree: int | None = 8,
    topology: str = "circular", tol: float = 1e-2, iters: int = 3000,
    powers: tuple[int, ...] = (-2, -1, 0, 1, 2), seed: int = 0, out=sys.stdout,
) -> list[dict]:
    """Activations to ``tol`` per layer and penalty multiplier, in the simulator.

    Prints and returns one dict per layer: ``activations`` is, per multiplier,
    the mean over nodes of the activations (sync: iterations) the layer took,
    ``done`` whether every node got within ``tol`` of O* before ``iters``.
    """
    from ..config import TrainConfig
    from ..network import parse_network
    from ..sim.layerloop import SimOptions, solve_layer
    from ..sim.speed import SpeedModel

    graph = make_topology(topology, nodes, degree)
    nbrs = [graph.neighbors(m) for m in range(nodes)]
    cfg = TrainConfig(dataset=dataset, mode=engine, iters=iters, stop=f"eps:{tol}", seed=seed)
    rule = cfg.stop_rule
    opts = SimOptions(nodes=nodes, network=parse_network("shm"),
                      speed=SpeedModel.build("const:1e-3", nodes, layers + 1, iters, {}, None,
                                             None, seed))
    mults = [2.0**k for k in powers]
    rows = []
    for layer, eps, Ys, Gs, Bs, star, _, lam_mean, scale in _layers(dataset, layers, nodes, seed):
        B2s = [2.0 * b for b in Bs]
        auto = auto_penalty(lam_mean, scale, nodes, consensus=engine == "sync")
        acts, done = [], []
        for mult in mults:
            # The simulator's own layer solve: async one gamma per edge, sync one rho.
            pens = [np.full(graph.degree(m), mult * auto) if engine == "async" else mult * auto
                    for m in range(nodes)]
            invs = [LocalInverse(Ys[m], float(np.sum(pens[m])), Gs[m]) for m in range(nodes)]
            runs, ok = solve_layer(cfg, opts, layer, invs, B2s, pens, eps, star, rule,
                                   np.zeros(nodes), 0, None, nbrs, Bs[0].nbytes, graph)
            acts.append(float(np.mean([r.activations for r in runs])))
            done.append(bool(ok))
        # The fewest activations among the multipliers that got there (None: none did).
        best = (mults[int(np.argmin([a if ok else np.inf for a, ok in zip(acts, done)]))]
                if any(done) else None)
        row = {"layer": layer, "lam_star": star.lam, "auto": auto,
               "multipliers": mults, "activations": acts, "done": done, "best": best}
        rows.append(row)
        print(f"l={layer:2d} lam*={star.lam:.3g} auto={row['auto']:.3g} "
              f"best {'-' if best is None else f'x{best:g}'} | "
              + " ".join(f"x{m:g}:{'' if ok else '>'}{a:.0f}"
                         for m, a, ok in zip(mults, acts, done)), file=out, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m dssfn_mpi.bench.penalty``: as ``dssfn-mpi bench penalty``."""
    from .parser import tool_parser

    parser = tool_parser("penalty", __doc__.split("\n\n")[0])
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
    try:
        if args.to_eps is None:
            sweep(args.dataset, args.layers, args.engine, args.nodes, args.degree or 8,
                  args.iters, powers)
        else:
            to_eps(args.dataset, args.layers, args.engine, args.nodes, args.degree, args.topology,
                   args.to_eps, args.iters, powers)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
