"""The layer loop every rank runs: shard -> features -> layer solve -> next layer.

Per layer l (ALGORITHMS.md, Algorithm 1 of the paper):

1. features: ``Y_l = relu([O_{l-1} Y_{l-1}; -O_{l-1} Y_{l-1}; colnorm(R_l Y_{l-1})])`` from
   this rank's own ``O_{l-1}``, and the statistics ``G_m, B_m`` (timed);
2. the engine solves the decentralized layer problem (timed);
3. untimed observation: centralized equivalence (the exact solution of the
   stacked problem the nodes are solving) and train/test accuracy.

Logging observes; it never feeds back into training.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import schema
from .config import TrainConfig
from .engines import Engine, LayerProblem, RunContext, make_engine
from .errors import UserError, require
from .model import accuracy, hidden_rows, next_features, one_hot, random_matrix
from .solver import exact_solve, local_multiplier, objective

__all__ = ["RunResult", "root_call", "run_training"]


def root_call(comm: Any, fn: Callable[[], Any], root: int = 0, broadcast: bool = True) -> Any:
    """Run ``fn`` on ``root`` only; every rank raises its UserError, if any.

    Checks that only one rank should do (reading a dataset, probing the output
    directory) thus fail on every rank with the same one-line message. The
    result is broadcast, or kept on ``root`` (``None`` elsewhere) when
    ``broadcast`` is false.
    """
    result, error = None, None
    if comm.Get_rank() == root:
        try:
            result = fn()
        except UserError as exc:
            error = str(exc)
    error = comm.bcast(error, root=root)
    if error is not None:
        raise UserError(error)
    return comm.bcast(result, root=root) if broadcast else result


@dataclass
class RunResult:
    """What rank 0 returns: the attributes and arrays written to the run log."""

    attrs: dict[str, Any]
    layers: dict[str, np.ndarray]
    ranks: dict[str, np.ndarray]
    out: str | None


STAT_FIELDS = schema.names(schema.ENGINE, schema.LOOP)
CHECK_FIELDS = schema.names(schema.CHECK)


def _git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
            capture_output=True, text=True, timeout=5, check=False,
        )
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _load_shards(cfg: TrainConfig, comm: Any) -> tuple[Any, list[np.ndarray], Any]:
    """Rank 0 reads the dataset and partitions it; every rank gets its shard and the test set."""
    from .datasets import load_dataset
    from .partition import partition

    size = comm.Get_size()

    def load():
        ds = load_dataset(cfg.dataset, cfg.data_dir, seed=cfg.seed, **cfg.dataset_options)
        parts = partition(ds.y_train, size, cfg.partition, seed=cfg.seed)
        return ds, parts

    ds, parts = root_call(comm, load, broadcast=False) or (None, None)
    # Shards are scattered, so no rank ever holds another's data.
    if comm.Get_rank() == 0:
        meta = {"n_classes": ds.n_classes, "name": ds.name, "shard_sizes": [len(p) for p in parts]}
        shards = [(ds.X_train[:, p], ds.y_train[p]) for p in parts]
        test = (ds.X_test, ds.y_test)
    else:
        meta, shards, test = None, None, None
    meta = comm.bcast(meta, root=0)
    shard = comm.scatter(shards, root=0)
    test = comm.bcast(test, root=0)
    return meta, shard, test


class _Equivalence:
    """Exact solution of the stacked problem the nodes are solving, and distances to it."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm

    def measure(self, G: np.ndarray, B: np.ndarray, tt: float, O: np.ndarray, eps: float):
        from mpi4py import MPI

        comm = self.comm
        root = comm.Get_rank() == 0
        Gs = np.empty_like(G) if root else None
        Bs = np.empty_like(B) if root else None
        comm.Reduce(G, Gs, op=MPI.SUM, root=0)
        comm.Reduce(B, Bs, op=MPI.SUM, root=0)
        tts = comm.reduce(tt, op=MPI.SUM, root=0)
        Os = np.empty((comm.Get_size(),) + O.shape) if root else None
        comm.Gather(np.ascontiguousarray(O), Os, root=0)
        if not root:
            return None
        sol = exact_solve(Gs, Bs, eps)
        ref = max(float(np.linalg.norm(sol.O)), np.finfo(float).tiny)
        fstar = objective(sol.O, Gs, Bs, tts)
        rel = np.array([np.linalg.norm(Om - sol.O) / ref for Om in Os])
        gap = np.array([(objective(Om, Gs, Bs, tts) - fstar) / abs(fstar) for Om in Os])
        mean = Os.mean(axis=0)
        spread = max(np.linalg.norm(Om - mean) for Om in Os) / max(
            float(np.linalg.norm(mean)), np.finfo(float).tiny
        )
        return {
            "rel_distance": rel,
            "objective_gap": gap,
            "consensus_spread": np.full(len(Os), spread),
            "lambda_star": np.full(len(Os), sol.lam),
        }


def _progress(msg: str) -> None:
    print(msg, file=sys.stdout, flush=True)


class InjectedFailure(RuntimeError):
    """Raised by ``--fail-at`` to test what a failing rank does to a job."""


def _inject_failure(cfg: TrainConfig, rank: int, layer: int) -> None:
    if cfg.fail_at is None:
        return
    fail_rank, fail_layer, how = cfg.fail_at
    if (rank, layer) != (fail_rank, fail_layer):
        return
    if how == "kill":
        import signal

        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFailure(f"injected failure in layer {layer} (--fail-at)")


def _make_graph(cfg: TrainConfig, size: int):
    from .topology import make_topology, read_edge_list

    if cfg.topology == "file":
        graph = read_edge_list(cfg.edges)  # its own node count, compared below
    elif size > 1:
        graph = make_topology(cfg.topology, size, degree=cfg.degree, seed=cfg.seed)
    else:
        graph = make_topology("complete", 1)
    require(
        graph.n_nodes == size,
        f"the graph has {graph.n_nodes} nodes but {size} ranks were started: "
        f"run mpirun -n {graph.n_nodes}",
    )
    return graph


def run_training(
    cfg: TrainConfig,
    comm: Any,
    command_line: str = "",
    quiet: bool = False,
    resume: bool = False,
) -> RunResult | None:
    """Train a decentralized SSFN with one rank per graph node.

    Parameters
    ----------
    cfg : TrainConfig
        Settings; validated here on every rank before any MPI work.
    comm : mpi4py.MPI.Comm
        One rank per graph node.
    command_line : str
        Recorded in the run log.
    quiet : bool
        Suppress rank 0's per-layer progress lines.
    resume : bool
        Continue after the last layer every rank has checkpointed beside
        ``cfg.out`` (see :mod:`dssfn_mpi.checkpoint`).

    Returns
    -------
    RunResult or None
        On rank 0, the arrays written to the run log; ``None`` elsewhere.
    """
    from mpi4py import MPI

    from . import checkpoint
    from .runlog import check_output_path, write_runlog

    rank, size = comm.Get_rank(), comm.Get_size()
    cfg.validate(size)
    graph = _make_graph(cfg, size)
    if cfg.out is not None and not resume:
        root_call(comm, lambda: check_output_path(cfg.out, cfg.overwrite))
    if cfg.save_model is not None:
        root_call(comm, lambda: check_output_path(cfg.save_model, cfg.overwrite))
    meta, (X, y), (Xt, yt) = _load_shards(cfg, comm)
    Q = meta["n_classes"]
    hidden = cfg.hidden if cfg.hidden is not None else 2 * Q + 1000
    require(
        hidden > 2 * Q,
        f"--hidden {hidden} must exceed 2Q = {2 * Q} (Q = {Q} classes): "
        f"the weight is [V_Q O; R] with n - 2Q random rows",
    )
    eps = cfg.eps if cfg.eps is not None else 2.0 * Q
    T = one_hot(y, Q)
    tt = float(np.vdot(T, T))
    n_layers = cfg.layers + 1

    # ---- checkpoints: resume after the last layer that every rank completed ----
    ckpt = checkpoint.RankCheckpoint(cfg.out, rank) if cfg.out is not None else None
    Os: list[np.ndarray] = []
    stats: dict[str, list] = {k: [] for k in STAT_FIELDS}
    checks: dict[str, list] = {k: [] for k in CHECK_FIELDS}
    if resume:
        saved_Os, saved_stats, saved_checks = ckpt.load()
        first = comm.allreduce(len(saved_Os), op=MPI.MIN)
        Os = saved_Os[:first]
        stats = {k: list(saved_stats.get(k, []))[:first] for k in STAT_FIELDS}
        checks = {k: list(saved_checks.get(k, []))[:first] for k in CHECK_FIELDS}
        if rank == 0:
            checkpoint.remove_stale_temporaries(cfg.out)
    elif ckpt is not None and rank == 0:
        checkpoint.save_config(cfg.out, cfg.to_dict(), size)
    first = len(Os)

    ctx = RunContext(comm=comm, graph=graph, cfg=cfg, n_classes=Q,
                     max_width=max(hidden, X.shape[0]), first_layer=first)
    engine = make_engine(ctx)
    check = _Equivalence(comm) if cfg.check and cfg.mode != "central" else None

    start_time = datetime.now(timezone.utc).isoformat()
    hostnames = comm.gather(socket.gethostname(), root=0)
    attrs = _attrs(cfg, graph, meta, hidden, eps, command_line, start_time, hostnames) \
        if rank == 0 else {}
    if resume and rank == 0:
        attrs["resumed_at_layer"] = first
    per_layer_sync = check is not None
    # Rows of the layers already done, gathered once so the log can be rewritten per layer.
    done_rows = comm.gather([{k: stats[k][i] for k in STAT_FIELDS} for i in range(first)],
                            root=0)
    history: list[list[dict]] = (
        [[done_rows[r][i] for r in range(size)] for i in range(first)] if rank == 0 else []
    )

    # Rebuild this rank's features of the last completed layer (the loop builds the next).
    Y, Yt = X, Xt
    for layer in range(1, first):
        R = random_matrix(cfg.seed, layer, hidden_rows(hidden, Q), Y.shape[0])
        Y = next_features(Y, Os[layer - 1], R)
        if cfg.evaluate:
            Yt = next_features(Yt, Os[layer - 1], R)
    O = Os[-1] if Os else None

    comm.Barrier()  # common start line for the timings, outside every layer
    t_run = time.perf_counter()
    # No try/finally around the loop: closing an engine is collective, and a rank
    # that failed must reach MPI_Abort (in the CLI) instead of waiting in it.
    for layer in range(first, n_layers):
        _inject_failure(cfg, rank, layer)
        c0 = time.process_time()
        t0 = time.perf_counter()
        O_prev = O
        if layer > 0:
            R = random_matrix(cfg.seed, layer, hidden_rows(hidden, Q), Y.shape[0])
            Y = next_features(Y, O_prev, R)
        G, B = Y @ Y.T, T @ Y.T
        t1 = time.perf_counter()
        penalty = _penalty(cfg, engine, layer, Y, T, G, eps)
        tp = time.perf_counter() - t1
        prob = LayerProblem(layer=layer, Y=Y, T=T, G=G, B=B, eps=eps, penalty=penalty)
        O, st = engine.solve(prob)
        t2 = time.perf_counter()
        cpu = time.process_time() - c0
        Os.append(O)
        # ---- untimed observation ----
        if cfg.evaluate:
            if layer > 0:
                Yt = next_features(Yt, O_prev, R)
            tr_acc, te_acc = accuracy(O, Y, y), accuracy(O, Yt, yt)
        else:
            tr_acc = te_acc = float("nan")
        cost = objective(O, G, B, tt)
        if check is not None:
            res = check.measure(G, B, tt, O, eps)
            if rank == 0:
                for k in CHECK_FIELDS:
                    checks[k].append(res[k])
        t3 = time.perf_counter()
        row = {
            **asdict(st),
            "features_seconds": t1 - t0,
            "factor_seconds": st.factor_seconds + tp,
            "total_seconds": t2 - t0,
            "cpu_seconds": cpu,
            "eval_seconds": t3 - t2,
            "train_accuracy": tr_acc,
            "train_cost": cost,
            "test_accuracy": te_acc,
            "gamma": float(np.mean(penalty)),
        }
        for k in STAT_FIELDS:
            stats[k].append(row[k])
        if ckpt is not None:
            ckpt.save(Os, stats, checks)
        if per_layer_sync:
            table = comm.gather({k: stats[k][-1] for k in STAT_FIELDS}, root=0)
            if rank == 0:
                history.append(table)
                _progress_line(cfg, layer, table, checks, quiet)
                if cfg.out is not None:
                    # Rewritten every layer: a crash loses at most the layer in progress.
                    partial = {**attrs, "complete": False, "layers_done": layer + 1}
                    write_runlog(cfg.out, partial, _layer_arrays(history, checks),
                                 _rank_table(graph, meta), overwrite=True)
        elif rank == 0 and not quiet:
            _progress(f"layer {layer:>3}/{cfg.layers}  rank 0 {t2 - t0:8.3f} s")
    engine.close()
    wall = time.perf_counter() - t_run
    all_stats = comm.gather(stats, root=0)
    all_Os = comm.gather(Os, root=0) if cfg.save_model is not None else None
    if rank == 0:
        rows = [[{k: s_r[k][i] for k in STAT_FIELDS} for s_r in all_stats]
                for i in range(n_layers)]
        layers = _layer_arrays(rows, checks)
        attrs["end_time"] = datetime.now(timezone.utc).isoformat()
        attrs["wall_seconds"] = wall
        ranks = _rank_table(graph, meta)
        if cfg.save_model is not None:
            from .modelio import save_model

            save_model(cfg.save_model, _model_attrs(cfg, meta, hidden, X.shape[0], size), all_Os)
        if cfg.out is not None:
            write_runlog(cfg.out, {**attrs, "complete": True, "layers_done": n_layers}, layers,
                         ranks, overwrite=True)
    if ckpt is not None:
        comm.Barrier()  # the complete log is on disk before the checkpoints go
        if rank == 0:
            checkpoint.remove(cfg.out)
    if rank != 0:
        return None
    return RunResult(attrs=attrs, layers=layers, ranks=ranks, out=cfg.out)


def _model_attrs(cfg: TrainConfig, meta: dict, hidden: int, n_features: int,
                 size: int) -> dict[str, Any]:
    return {
        "dataset": meta["name"], "n_features": n_features, "n_classes": meta["n_classes"],
        "hidden": hidden, "layers": cfg.layers, "seed": cfg.seed, "nodes": size,
        "mode": cfg.mode, "config": json.dumps(cfg.to_dict()),
    }


def _penalty(cfg: TrainConfig, engine: Engine, layer: int, Y: np.ndarray, T: np.ndarray,
             G: np.ndarray, eps: float) -> float | np.ndarray:
    """The layer's ADMM penalty: as configured, or ``auto`` from the data.

    ``auto`` costs an estimate of the node's own multiplier and the engine's
    combination of it over the ranks it talks to anyway (async: its neighbours;
    sync: everyone), before the layer's solve, never inside it.
    """
    if cfg.mode == "central":
        return float("nan")
    fixed = cfg.penalty_at(layer)
    if fixed is not None:
        return fixed
    # Mean nonzero eigenvalue of G_m: a shard with J_m < d samples has rank J_m.
    stats = np.array([local_multiplier(Y, T, eps), float(np.trace(G)) / min(Y.shape)])
    return engine.auto_penalty(layer, stats)


def _layer_arrays(rows: list[list[dict]], checks: dict[str, list]) -> dict[str, np.ndarray]:
    """(layers, M) arrays from per-layer lists of per-rank stat rows."""
    layers = {k: np.array([[r[k] for r in layer_rows] for layer_rows in rows]) for k in STAT_FIELDS}
    for k in CHECK_FIELDS:
        if checks[k]:
            layers[k] = np.array(checks[k])
    return layers


def _rank_table(graph, meta) -> dict[str, np.ndarray]:
    M = graph.n_nodes
    width = max((graph.degree(m) for m in range(M)), default=0)
    nbrs = np.full((M, max(width, 1)), -1, dtype=np.int64)
    for m in range(M):
        nb = graph.neighbors(m)
        nbrs[m, : len(nb)] = nb
    return {
        "degree": np.array([graph.degree(m) for m in range(M)], dtype=np.int64),
        "neighbors": nbrs,
        "shard_size": np.array(meta["shard_sizes"], dtype=np.int64),
    }


def _attrs(cfg, graph, meta, hidden, eps, command_line, start_time, hostnames) -> dict:
    from .runlog import software_versions

    degrees = [graph.degree(m) for m in range(graph.n_nodes)]
    return {
        "mode": cfg.mode,
        "update": cfg.update if cfg.mode == "async" else "",
        "dataset": meta["name"],
        "nodes": graph.n_nodes,
        "topology": graph.name,
        "graph_diameter": int(graph.diameter),
        "graph_algebraic_connectivity": float(graph.algebraic_connectivity),
        "degree": int(max(degrees)) if degrees else 0,
        "layers": cfg.layers,
        "hidden": hidden,
        "iters": cfg.iters,
        "seed": cfg.seed,
        "eps": eps,
        "n_classes": meta["n_classes"],
        "config": json.dumps(cfg.to_dict()),
        "command_line": command_line,
        "shard_sizes": np.array(meta["shard_sizes"], dtype=np.int64),
        "hostnames": json.dumps(hostnames),
        "start_time": start_time,
        "git_revision": _git_revision(),
        "blas_threads": os.environ.get("OMP_NUM_THREADS", ""),
        **software_versions(),
    }


def _fmt(x: float, spec: str) -> str:
    return "-" if x is None or not np.isfinite(x) else format(x, spec)


def _progress_line(cfg, layer, table, checks, quiet) -> None:
    if quiet:
        return
    tot = max(r["total_seconds"] for r in table)
    acc = [r["test_accuracy"] for r in table]
    rel = checks["rel_distance"][-1].max() if checks["rel_distance"] else float("nan")
    _progress(
        f"layer {layer:>3}/{cfg.layers}  {cfg.mode:<10} max time {tot:8.3f} s  "
        f"max rel dist {_fmt(rel, '.2e')}  test acc min/mean/max "
        f"{_fmt(100 * min(acc), '.1f')}/{_fmt(100 * float(np.mean(acc)), '.1f')}/"
        f"{_fmt(100 * max(acc), '.1f')} %"
    )
