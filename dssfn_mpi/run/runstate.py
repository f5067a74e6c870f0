"""Setting a run up: what every rank knows before its first layer.

:func:`prepare_run` validates the settings, checks the output files, scatters
the shards, fills the defaults that depend on the data, restores a resumed
run (its solutions, log rows and features) and collects the run's
attributes. It returns a :class:`RunState`, which the layer loop
(:mod:`dssfn_mpi.run.train`) and the observers (:mod:`dssfn_mpi.run.observers`)
share.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..config import TrainConfig
from ..engines.base import RunContext
from ..errors import RankError, UserError, require
from ..mailbox.waiting import WaitPolicy, make_policy
from ..runlog import schema
from ..ssfn.gramstats import available_memory, check_memory
from ..ssfn.model import layer_features, one_hot

if TYPE_CHECKING:
    from ..runlog import RunLog

__all__ = ["RunState", "make_graph", "prepare_run", "rank_table", "root_call",
           "run_attributes"]


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
class RunState:
    """One rank's view of the run, shared by the layer loop and the observers.

    The loop appends to ``Os``; the observers store this rank's rows in ``rows``
    and append to ``checks`` and ``history``. Fields marked "rank 0" are empty
    elsewhere.
    """

    cfg: TrainConfig
    comm: Any
    graph: Any
    meta: dict[str, Any]  # n_classes, name, shard_sizes
    X: np.ndarray  # this rank's training shard (features x samples) and labels
    y: np.ndarray
    Xt: np.ndarray  # the test set, on every rank
    yt: np.ndarray
    T: np.ndarray  # one-hot targets of the shard
    tt: float  # ||T||_F^2
    hidden: int
    eps: float
    first: int  # the first layer to solve: > 0 when resuming
    Os: list[np.ndarray]  # this rank's solutions of the layers done
    Y: np.ndarray  # training features of layer first - 1 (X when starting)
    Yt: np.ndarray  # the same for the test set (advanced only with cfg.evaluate)
    rows: np.ndarray  # this rank's log rows, one per layer (schema.ROW_DTYPE; blank if not done)
    checks: dict[str, list]  # rank 0: one list of (M,) arrays per check field
    attrs: dict[str, Any]  # rank 0: the run log's root attributes
    wait_policy: WaitPolicy  # how this rank waits (engine and loop alike)
    history: np.ndarray  # rank 0: (layers gathered, M) rows of every rank, the run log's /layers

    @property
    def rank(self) -> int:
        return self.comm.Get_rank()

    @property
    def size(self) -> int:
        return self.comm.Get_size()

    @property
    def n_classes(self) -> int:
        return int(self.meta["n_classes"])

    @property
    def n_layers(self) -> int:
        """Layers 0..L: ``cfg.layers + 1``."""
        return self.cfg.layers + 1

    @property
    def checking(self) -> bool:
        """Whether the centralized-equivalence check runs after every layer."""
        return self.cfg.check and self.cfg.algorithm.decentralized

    def log_due(self, layer: int) -> bool:
        """Whether the run log is rewritten after ``layer`` (every ``cfg.log_every`` layers)."""
        every = self.cfg.log_every
        return self.cfg.out is not None and every > 0 and (layer + 1) % every == 0

    def barrier(self, what: str) -> None:
        """Wait, under the run's wait policy, until every rank got here (``MPI_Ibarrier``).

        Before a blocking collective it lets the collective start with every
        rank present, so no rank spins in it for a descheduled one. Raises
        :class:`~dssfn_mpi.errors.RankError` after ``--timeout`` seconds.
        """
        if not self.wait_policy.wait_request(self.comm.Ibarrier(), self.cfg.timeout).ready:
            raise RankError(self.rank, f"{what}: the other ranks did not arrive within "
                            f"{self.cfg.timeout:g} s (a rank died or hangs; see --timeout)")

    def context(self) -> RunContext:
        """What the engine is built from."""
        return RunContext(comm=self.comm, graph=self.graph, cfg=self.cfg,
                          n_classes=self.n_classes, max_width=max(self.hidden, self.X.shape[0]),
                          first_layer=self.first, wait_policy=self.wait_policy)

    def record(self, complete: bool, **groups: Any) -> RunLog:
        """Rank 0: the run so far, as its run log records it.

        ``groups``: the ``trace``, ``trajectory`` and ``trace_attrs`` of
        :class:`~dssfn_mpi.runlog.RunLog` (:meth:`dssfn_mpi.run.observers.Tracing.runlog_groups`).
        """
        from ..runlog import RunLog

        return RunLog(attrs={**self.attrs, "complete": complete,
                             "layers_done": len(self.history)},
                      layers=schema.layer_arrays(self.history, self.checks),
                      ranks=self.rank_table(), source=self.cfg.out or "", **groups)

    def rank_table(self) -> dict[str, np.ndarray]:
        """The run log's ``/ranks`` datasets this run knows: degree, neighbours, shard size."""
        return rank_table(self.graph, self.meta["shard_sizes"])


def rank_table(graph: Any, shard_sizes: list[int]) -> dict[str, np.ndarray]:
    """The run log's ``/ranks`` datasets: each node's degree, neighbours (padded with -1)
    and shard size."""
    M = graph.n_nodes
    width = max((graph.degree(m) for m in range(M)), default=0)
    nbrs = np.full((M, max(width, 1)), -1, dtype=np.int64)
    for m in range(M):
        nb = graph.neighbors(m)
        nbrs[m, : len(nb)] = nb
    return {
        "degree": np.array([graph.degree(m) for m in range(M)], dtype=np.int64),
        "neighbors": nbrs,
        "shard_size": np.array(shard_sizes, dtype=np.int64),
    }


def prepare_run(cfg: TrainConfig, comm: Any, command_line: str = "",
                resume: bool = False) -> RunState:
    """Set a run up on every rank (collective); user errors are raised on every rank.

    Parameters
    ----------
    cfg : TrainConfig
        Settings; validated here before any MPI work.
    comm : mpi4py.MPI.Comm
        One rank per graph node.
    command_line : str
        Recorded in the run log.
    resume : bool
        Continue after the last layer every rank has checkpointed beside
        ``cfg.out``: restore the solutions and log rows and rebuild the
        features of that layer from them.

    Returns
    -------
    RunState
    """
    cfg.validate(comm.Get_size())
    graph = make_graph(cfg, comm.Get_size())
    _check_rma(cfg, comm)
    _check_outputs(cfg, comm, resume)
    meta, (X, y), (Xt, yt) = _load_shards(cfg, comm)
    Q = meta["n_classes"]
    hidden, eps = cfg.width_and_bound(Q)
    _check_memory(cfg, comm, graph, max(X.shape[0], hidden), Q)
    Os, rows, checks = _restore(cfg, comm, resume)
    # The features of the last completed layer, from the one forward pass.
    Y, Yt = X, Xt
    for layer in range(1, len(Os)):
        if cfg.evaluate:
            Y, Yt = layer_features(Os[layer - 1], cfg.seed, layer, hidden, Y, Yt)
        else:
            (Y,) = layer_features(Os[layer - 1], cfg.seed, layer, hidden, Y)
    attrs = _attrs(cfg, comm, graph, meta, hidden, eps, command_line)
    policy = make_policy(cfg.wait, comm)
    if comm.Get_rank() == 0:
        attrs.update(wait_policy=policy.name, wait_resolved=policy.resolution())
        if resume:
            attrs["resumed_at_layer"] = len(Os)
    T = one_hot(y, Q)
    return RunState(cfg=cfg, comm=comm, graph=graph, meta=meta, X=X, y=y, Xt=Xt, yt=yt,
                    T=T, tt=float(np.vdot(T, T)), hidden=hidden, eps=eps, first=len(Os),
                    Os=Os, Y=Y, Yt=Yt, rows=rows, checks=checks, attrs=attrs,
                    wait_policy=policy, history=schema.blank_rows((0, comm.Get_size())))


def _check_rma(cfg: TrainConfig, comm: Any) -> None:
    """``--rma store`` where no shared window can be made: a user error before any work."""
    if cfg.algorithm.one_sided and cfg.rma == "store":
        from ..mailbox.rmacheck import NO_STORES, shared_window_possible

        require(shared_window_possible(comm), NO_STORES)


def _check_outputs(cfg: TrainConfig, comm: Any, resume: bool) -> None:
    """Fail before any work if an output file cannot be written (rank 0 looks)."""
    from ..runlog.outpath import check_output_path

    if cfg.out is not None and not resume:
        root_call(comm, lambda: check_output_path(cfg.out, cfg.overwrite))
    if cfg.save_model is not None:
        root_call(comm, lambda: check_output_path(cfg.save_model, cfg.overwrite))


def _check_memory(cfg: TrainConfig, comm: Any, graph: Any, width: int, n_classes: int) -> None:
    """One-shot modes: the same UserError on every rank, before the engine is built, when the
    ranks on some host cannot hold the ``width x width`` statistics
    (:func:`dssfn_mpi.ssfn.gramstats.check_memory`)."""
    if not cfg.algorithm.exchanges_statistics:
        return
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    ranks_here = local.Get_size()
    local.Free()
    degree = max(graph.degree(m) for m in range(graph.n_nodes))
    error = None
    try:
        check_memory(cfg.algorithm, width, n_classes, degree, ranks_here, available_memory())
    except UserError as exc:
        error = str(exc)
    first = next((e for e in comm.allgather(error) if e is not None), None)
    if first is not None:
        raise UserError(first)


def _restore(cfg: TrainConfig, comm: Any,
             resume: bool) -> tuple[list[np.ndarray], np.ndarray, dict[str, list]]:
    """Solutions, log rows (one per layer, blank beyond those restored) and check rows of
    the layers every rank has checkpointed (none for a new run).

    A new run with ``--out`` records its settings beside its checkpoints.
    """
    from mpi4py import MPI

    from . import checkpoint

    rank = comm.Get_rank()
    rows = schema.blank_rows(cfg.layers + 1)
    checks: dict[str, list] = {k: [] for k in schema.names(schema.CHECK)}
    if not resume:
        if cfg.out is not None and rank == 0:
            checkpoint.save_config(cfg.out, cfg.to_dict(), comm.Get_size())
        return [], rows, checks
    saved_Os, saved_rows, saved_checks = checkpoint.RankCheckpoint(cfg.out, rank).load()
    first = comm.allreduce(len(saved_Os), op=MPI.MIN)
    rows[:first] = saved_rows[:first]
    checks = {k: list(saved_checks.get(k, []))[:first] for k in checks}
    if rank == 0:
        checkpoint.remove_stale_temporaries(cfg.out)
    return saved_Os[:first], rows, checks


def _git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
            capture_output=True, text=True, timeout=5, check=False,
        )
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _load_shards(cfg: TrainConfig, comm: Any) -> tuple[Any, tuple, tuple]:
    """Rank 0 reads the dataset and partitions it; every rank gets its shard and the test set."""
    from ..datasets import load_dataset
    from ..datasets.partition import partition

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


def make_graph(cfg: TrainConfig, size: int):
    """The run's communication graph; a user error unless it has ``size`` nodes."""
    from ..graph.topology import make_topology, read_edge_list

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


def run_attributes(cfg: TrainConfig, graph: Any, dataset: str, n_classes: int, hidden: int,
                   eps: float, command_line: str = "") -> dict[str, Any]:
    """The run log's root attributes that follow from the settings alone (no MPI).

    Training adds what it measures at start-up (:func:`prepare_run`); a run
    log rebuilt from checkpoints after a stop (:mod:`dssfn_mpi.run.jobstop`)
    has only these.

    Parameters
    ----------
    cfg : TrainConfig
        The run's settings.
    graph : Topology
        The run's communication graph (:func:`make_graph`).
    dataset : str
        Dataset name.
    n_classes : int
        Q, classes of the dataset.
    hidden, eps : int, float
        The hidden width and norm bound in use (defaults resolved).
    command_line : str
        The command line that started the run.

    Returns
    -------
    dict
        Attribute name to value, as :class:`dssfn_mpi.runlog.RunLog` holds them.
    """
    return {
        "mode": cfg.mode,
        "update": cfg.algorithm.update or "",
        "dataset": dataset,
        "nodes": graph.n_nodes,
        "topology": graph.name,
        **graph.facts(),  # degree, diameter, spectral gap, ...
        "layers": cfg.layers,
        "hidden": hidden,
        "iters": cfg.iters,
        "seed": cfg.seed,
        "eps": eps,
        "n_classes": n_classes,
        "config": json.dumps(cfg.to_dict()),
        "command_line": command_line,
    }


def _compiled_kernels(cfg: TrainConfig) -> str:
    """Whether numba's kernels ran: only the per-neighbour drivers run them (the one-sided
    mailbox's seqlock, the edge form's loops); "n/a" elsewhere, without importing numba."""
    if not cfg.algorithm.per_neighbour:
        return "n/a"
    from ..algorithms.kernels import compiled_status

    return compiled_status()


def _attrs(cfg: TrainConfig, comm: Any, graph: Any, meta: dict, hidden: int, eps: float,
           command_line: str) -> dict[str, Any]:
    """The run log's root attributes on rank 0 (``{}`` elsewhere).

    Collective: gathers the host names and takes the MPI facts once
    (:func:`dssfn_mpi.run.mpifacts.mpi_facts`, its passive-put check included).
    """
    from .mpifacts import mpi_facts

    start_time = datetime.now(timezone.utc).isoformat()
    hostnames = comm.gather(socket.gethostname(), root=0)
    facts = mpi_facts(comm)
    if comm.Get_rank() != 0:
        return {}
    from ..runlog.versions import software_versions

    if cfg.out is not None:  # which ranks a lost host took with it (jobstop.report_lost)
        from .checkpoint import save_hosts

        save_hosts(cfg.out, hostnames)
    return {
        **run_attributes(cfg, graph, meta["name"], meta["n_classes"], hidden, eps,
                         command_line),
        "shard_sizes": np.array(meta["shard_sizes"], dtype=np.int64),
        "hostnames": json.dumps(hostnames),
        "start_time": start_time,
        "git_revision": _git_revision(),
        "blas_threads": os.environ.get("OMP_NUM_THREADS", ""),
        **software_versions(),
        "compiled_kernels": _compiled_kernels(cfg),
        **facts,
    }
