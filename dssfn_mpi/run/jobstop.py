"""A job stopped from outside: the scheduler's time-up signal, a lost host.

Slurm sends SIGTERM to every task when a job reaches its ``--time`` (then
SIGKILL ``KillWait`` seconds later, 30 by default), and the signal chosen with
``--signal=USR1@SECONDS`` that many seconds before. Python's default for
SIGTERM is to die on the spot: a run started with ``--no-check`` (which writes
its run log only at the end) would vanish.

:class:`StopWatcher` blocks both signals in every thread before MPI starts, so
that MPI's own threads inherit the mask, and waits for them in a thread of its
own: it acts even while the main thread is blocked inside an MPI call. It
never calls MPI (MPI runs at MPI_THREAD_FUNNELED). On a signal, rank 0 makes
sure ``--out`` holds an incomplete run log (``complete = False``) of every
layer all ranks had finished, rebuilt from the per-rank checkpoints
(:mod:`dssfn_mpi.run.checkpoint`) when training had not written it per layer,
prints one line, and every rank exits with :data:`EXIT_STOPPED`. The
checkpoints stay, so ``dssfn-mpi train --resume RUN.h5`` continues the run.

After a host was lost, :func:`report_lost` leaves the same incomplete run log
and says which ranks went with it (the Slurm templates call it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

import numpy as np

from ..launch import launcher_rank

__all__ = ["EXIT_STOPPED", "STOP_SIGNALS", "StopWatcher", "report_lost", "salvage_runlog"]

#: Exit status of a run stopped by a signal (EX_TEMPFAIL: try again with --resume).
EXIT_STOPPED = 75
#: Signals that stop a run gracefully.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
#: Seconds the other ranks wait before exiting, so rank 0 writes undisturbed.
_GRACE = 10.0


class StopWatcher:
    """Wait for :data:`STOP_SIGNALS` in a daemon thread; start it before MPI.

    Parameters
    ----------
    out : str or None
        The run log of this run (``--out``), or None.
    command_line : str
        Recorded in a run log rebuilt from checkpoints.
    prog : str
        Prefix of the message line.
    """

    def __init__(self, out: str | None, command_line: str = "", prog: str = "dssfn-mpi") -> None:
        self.out = out
        self.command_line = command_line
        self.prog = prog
        self.rank: int | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Block the signals (inherited by threads started later) and start waiting."""
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        self._thread = threading.Thread(target=self._wait, name="dssfn-stop", daemon=True)
        self._thread.start()

    def set_rank(self, rank: int) -> None:
        """Tell the watcher its MPI rank once MPI is up (rank 0 writes the log)."""
        self.rank = rank

    def _wait(self) -> None:
        signum = signal.sigwait(set(STOP_SIGNALS))
        name = signal.Signals(signum).name
        rank = self.rank if self.rank is not None else launcher_rank()
        if rank == 0:
            from ..fileio import WRITE_LOCK

            # Kept until os._exit: the training loop writes no run log after this one.
            WRITE_LOCK.acquire()
            try:
                line = self._stop_line(name)
            except Exception as exc:  # never die silently: say what happened
                line = f"stopped by {name}; could not write the incomplete run log: {exc}"
            sys.stdout.flush()
            print(f"{self.prog}: error: {line}", file=sys.stderr, flush=True)
        else:
            time.sleep(_GRACE)
        os._exit(EXIT_STOPPED)

    def _stop_line(self, name: str) -> str:
        if self.out is None:
            return f"stopped by {name} (time limit?); no --out, nothing written"
        done = salvage_runlog(self.out, self.command_line, stopped_by=name)
        if done is None:
            return f"stopped by {name} (time limit?) before any layer was done; nothing written"
        return (f"stopped by {name} (time limit?) after {done} layer(s): {self.out} holds them "
                f"with complete = False; continue with: {self.prog} train --resume {self.out}")


def _settings(cfg: dict[str, Any]):
    """The run's TrainConfig, rebuilt from its saved settings."""
    from ..config import TrainConfig, config_from_mapping

    return TrainConfig(**config_from_mapping(cfg, "checkpoint"))


def _layers_in(path: str) -> int:
    """Rows in an existing run log at ``path``, -1 if none is readable."""
    from ..errors import UserError
    from ..runlog import read_runlog

    if not os.path.exists(path):
        return -1
    try:
        return read_runlog(path).layers_done
    except UserError:
        return -1


def _mark_stopped(out: str, stopped_by: str) -> int:
    """Rewrite the run log at ``out`` as incomplete and stopped by ``stopped_by``."""
    import dataclasses

    from ..runlog import read_runlog, utc_now

    run = read_runlog(out)
    attrs = {**run.attrs, "complete": False, "stopped_by": stopped_by, "end_time": utc_now()}
    dataclasses.replace(run, attrs=attrs).write(out)
    return run.layers_done


def salvage_runlog(out: str, command_line: str = "", stopped_by: str = "") -> int | None:
    """Make ``out`` an incomplete run log of the layers every rank checkpointed.

    A run log already at ``out`` with at least as many layers (training with
    the equivalence check rewrites it after every layer) is kept as it is.

    Parameters
    ----------
    out : str
        The interrupted run's ``--out``.
    command_line : str
        Recorded as the run log's ``command_line``.
    stopped_by : str
        Signal name, recorded as the attribute ``stopped_by``.

    Returns
    -------
    int or None
        Layers in the run log at ``out``, or None when the run has no
        checkpoint (it had not finished a layer) and no run log.
    """
    from ..errors import UserError
    from ..runlog import RunLog, schema, utc_now
    from .checkpoint import RankCheckpoint, load_config, load_hosts
    from .runstate import make_graph, run_attributes

    try:
        cfg, size = load_config(out)
    except UserError:
        existing = _layers_in(out)
        return existing if existing >= 0 else None
    per_rank = [RankCheckpoint(out, r).load_rows() for r in range(size)]
    done = min(len(rows) for rows, _, _ in per_rank)
    existing = _layers_in(out)
    if existing >= done:
        return _mark_stopped(out, stopped_by)
    layers = schema.layer_arrays(np.stack([rows[:done] for rows, _, _ in per_rank], axis=1),
                                 {}) if done else {}
    for k, rows in per_rank[0][1].items():  # equivalence rows: rank 0 keeps them all
        if len(rows) >= done and done:
            layers[k] = np.asarray(rows[:done])
    q = per_rank[0][2]
    settings = _settings(cfg)
    graph = make_graph(settings, size)
    hidden, eps = settings.width_and_bound(q)  # validated when the run started
    if not q:  # no solution checkpointed: Q, and so the default width, unknown
        hidden = settings.hidden or -1
    attrs = {**run_attributes(settings, graph, settings.dataset, q, hidden, eps, command_line),
             "complete": False, "layers_done": done, "end_time": utc_now(),
             "stopped_by": stopped_by}
    hosts = load_hosts(out)
    if hosts:
        attrs["hostnames"] = json.dumps(hosts)
    ranks = {"degree": np.array([graph.degree(m) for m in range(size)], dtype=np.int64),
             "neighbors": [list(graph.neighbors(m)) for m in range(size)]}
    RunLog(attrs=attrs, layers=layers, ranks=ranks).write(out)
    return done


def report_lost(out: str, lost_hosts: list[str], prog: str = "dssfn-mpi") -> str:
    """After a run ended because hosts were lost: mark its run log, say who and what is left.

    Called by the Slurm templates once a step failed and some of the job's nodes no
    longer answer (the ranks there cannot say anything, and the others may have been
    killed by the launcher before they could). ``out`` becomes an incomplete run log
    of the layers every rank checkpointed (:func:`salvage_runlog`, ``stopped_by`` =
    ``"lost host(s) ..."``); the ranks that ran on ``lost_hosts`` come from the hosts
    the run recorded beside its checkpoints.

    Returns
    -------
    str
        One line: the lost hosts and ranks, the layers kept, how to continue.
    """
    from .checkpoint import load_hosts

    hosts = load_hosts(out)
    ranks = [r for r, h in enumerate(hosts) if h in lost_hosts]
    where = ", ".join(lost_hosts)
    who = (f"rank(s) {', '.join(map(str, ranks))} on lost host(s) {where}" if ranks
           else f"the ranks on lost host(s) {where}")
    done = salvage_runlog(out, stopped_by=f"lost host(s) {where}")
    if done is None:
        return f"{who}: nothing to keep (no layer was finished; no checkpoint of {out})"
    return (f"{who}: {out} holds the {done} layer(s) every rank finished, with complete = "
            f"False; continue on healthy nodes with: {prog} train --resume {out}")
