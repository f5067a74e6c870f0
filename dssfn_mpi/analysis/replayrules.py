"""The timeline of one traced layer, one rule per driver kind (:mod:`dssfn_mpi.drivers`).

Each takes the run's trace (:class:`~dssfn_mpi.analysis.replay.Trace`), the traced layer's
index, the :class:`~dssfn_mpi.analysis.timeline.TimingModel`, when each rank's solve
begins and each activation's compute seconds ``(M, K)``, and returns the ``(start, end)``
of every activation; :func:`dssfn_mpi.analysis.replay.timeline` runs them in turn.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .timeline import TimingModel, bounded_delay, graph_times, oneshot_end, sync_times

__all__ = ["replay_allreduce", "replay_lockstep", "replay_mixing", "replay_one_shot",
           "replay_one_sided"]


def replay_one_sided(tr: Any, i: int, model: TimingModel, begin: np.ndarray,
                 cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (M, K) of every activation under the bounded-delay rule.

    A put returns once Z is in the neighbour's memory: with the puts apart
    from ``cpu``, each activation lasts its compute plus one message time and
    its Z has arrived when it ends; an older trace's ``cpu`` holds its run's
    own puts, and the message time is counted as delivery after the end.
    """
    put = model.network.message_seconds(tr.message_bytes[i])
    if tr.puts_apart:
        return bounded_delay(begin, cpu + put, tr.neighbors, tr.max_lead, tr.counts[i])
    return bounded_delay(begin, cpu, tr.neighbors, tr.max_lead, tr.counts[i], arrive=put)


def replay_allreduce(tr: Any, i: int, model: TimingModel, begin: np.ndarray,
                cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every iteration ends on all ranks at the slowest compute plus the allreduce."""
    return sync_times(begin, cpu, model.allreduce_seconds(tr.message_bytes[i]))


def replay_mixing(tr: Any, i: int, model: TimingModel, begin: np.ndarray,
                 cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compute, then ``mix_rounds`` neighbour rounds, every iteration."""
    return graph_times(begin, cpu, tr.hops, tr.mix_rounds,
                       model.network.message_seconds(tr.message_bytes[i]))


def replay_lockstep(tr: Any, i: int, model: TimingModel, begin: np.ndarray,
                    cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compute, then the round's neighbour exchanges (sync-graph's rule; one exchange, or
    the algorithm's :meth:`~dssfn_mpi.algorithms.Algorithm.round_exchanges`)."""
    return graph_times(begin, cpu, tr.hops,
                       *model.algorithm.round_exchanges(model.network, tr.message_bytes[i]))


def replay_one_shot(tr: Any, i: int, model: TimingModel, begin: np.ndarray,
                   cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The statistics' exchange, then each rank's exact solve (its one traced step)."""
    ready = oneshot_end(tr.mode, begin, tr.hops, tr.mix_rounds, tr.message_bytes[i],
                        model.network, tr.allreduce)
    return begin[:, None], (ready + cpu[:, 0])[:, None]
