"""What an algorithm is: its per-node arithmetic, its messages, its penalty rules, its driver.

An :class:`Algorithm` holds no MPI and no clock. The live engines
(:mod:`dssfn_mpi.engines`) are drivers that run any algorithm of their kind over MPI,
the simulator (:mod:`dssfn_mpi.sim`) runs the same objects on its simulated clock, and
the replay (:mod:`dssfn_mpi.analysis.replay`) and the run log read their message sizes from
them. Nothing outside this package asks which mode runs: it asks the mode's algorithm
(:func:`dssfn_mpi.algorithms.registry.lookup`).

Its driver kind (:attr:`Algorithm.driver`, one of :data:`dssfn_mpi.drivers.DRIVERS`) says how
it runs and exchanges; :attr:`Algorithm.averaging` how a consensus or one-shot driver averages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..drivers import CONSENSUS, Driver
from ..ssfn.metric import DenseInverse, MetricWoodbury, metric_sum
from ..ssfn.solver import LocalInverse

__all__ = ["Algorithm", "local_inverse", "needs_gram", "penalty_matrix"]

_F8 = 8  # bytes of a float64


def penalty_matrix(penalty: float | np.ndarray, metrics: Sequence[Any]) -> np.ndarray:
    """``K = sum_n gamma_n S_n``: the penalties times their metrics (one per edge, or one).

    The one home of ``K``: the local matrix is ``2 G_m + K`` and ``--stop local`` reads it.
    Formed by :func:`~dssfn_mpi.ssfn.metric.metric_sum` (the low-rank edge metrics in one
    product).
    """
    return metric_sum(np.atleast_1d(penalty), metrics)


def local_inverse(Y: np.ndarray, G: np.ndarray | None, penalty: float | np.ndarray,
                  metrics: Sequence[Any] | None = None
                  ) -> LocalInverse | DenseInverse | MetricWoodbury:
    """The node's ``(2 G_m + K)^-1``: ``K = (sum of the penalties) I`` in the scalar form,
    :func:`penalty_matrix` in the Gram metric (``metrics``, aligned with ``penalty``).

    ``G`` may be None where the inverse is low-rank (:func:`needs_gram` is False)."""
    if metrics is None:
        return LocalInverse(Y, float(np.sum(penalty)), G)
    if not needs_gram(Y, len(metrics)):
        return MetricWoodbury(Y, float(np.sum(penalty)), metrics[0])
    return DenseInverse(2.0 * G + penalty_matrix(penalty, metrics))


def needs_gram(Y: np.ndarray, metrics: int = 0) -> bool:
    """Whether a node's local inverse is formed from its ``d x d`` Gram matrix (dense) rather
    than from its features ``Y`` (d x J) by Woodbury: ``2 J >= d``, or in more than one metric
    (the per-neighbour metric forms)."""
    d, J = Y.shape
    return 2 * J >= d or metrics > 1


class Algorithm:
    """One decentralized (or central) method: what it computes and what it sends.

    Subclasses set the class attributes and override the methods their driver calls;
    :mod:`dssfn_mpi.algorithms.registry` maps ``--mode`` (and ``--update``) to an
    instance. docs/EXTENDING.md walks through adding one.

    Attributes
    ----------
    name : str
        The ``--mode`` value.
    update : str or None
        The ``--update`` value it answers to (None: any; the run log records "").
    driver : Driver
        Its driver kind (:mod:`dssfn_mpi.drivers`): how a layer of it runs.
    averaging : str or None
        ``allreduce`` or ``mixing`` (consensus and one-shot drivers), else None.
    penalty_option : str or None
        The option that sets its penalty (``gamma``, ``rho``) or None (no penalty).
    metric_form : bool
        Whether it solves the input layer in the Gram metric under ``--metric gram``.
    local_stop : bool
        Whether ``--stop local`` can read its variables.
    min_ranks, max_ranks : int, int or None
        The rank counts it runs on.
    summary : str
        One line for ``--help`` and the docs.
    relaxes : bool
        It takes ``--relax`` (:meth:`configured` applies it).
    relax : float
        The ``--relax`` a run takes when none is given (1 where it does not relax).
    step_size : float
        The ``--eta`` a run takes when none is given.

    ``relax`` and ``step_size`` are the one home of each mode's default relaxation: the
    options, the live engines, the simulator and the replay read them from here
    (docs/ALGORITHMS.md, "Default relaxations").
    """

    name = ""
    update: str | None = None
    driver: Driver = CONSENSUS
    averaging: str | None = None
    penalty_option: str | None = None
    metric_form = False
    local_stop = True
    min_ranks = 1
    max_ranks: int | None = None
    summary = ""
    #: It takes ``--relax`` (over-relaxation alpha in (0, 2)).
    relaxes = False
    #: The default ``--relax`` (consensus ADMM's over-relaxation; 1 where it does not relax).
    relax = 1.0
    #: The default ``--eta`` (the step of the per-neighbour drivers, in (0, 2)).
    step_size = 1.0
    #: Its fixed point is the exact solution O* of every layer (the common checks,
    #: tests/test_common_checks.py, hold every node to it).
    exact = True
    #: Its colour in the benchmarks' figures (a matplotlib colour; variants of the mode keep
    #: it); None: one no other registered mode has (:mod:`dssfn_mpi.bench.figures.figstyle`).
    colour: str | None = None
    #: Its marker in the benchmarks' figures; None: one no other registered mode has.
    marker: str | None = None

    def prepare(self) -> None:
        """Build (or load from numba's cache) the compiled loops its step runs, outside any
        timed region: the per-neighbour steps' (:mod:`dssfn_mpi.algorithms.kernels`; a no-op
        without numba), nothing for the others."""
        if self.per_neighbour:
            from . import kernels  # noqa: F401

    def configured(self, cfg: Any) -> Algorithm:
        """The algorithm with the run's own options (``cfg``) applied; itself by default."""
        return self

    # -- what it is ------------------------------------------------------------------
    @property
    def direct(self) -> bool:
        """Solved in one step (no penalty, no iteration count, no stopping rule)."""
        return self.driver.direct

    @property
    def one_sided(self) -> bool:
        """Asynchronous, with one-sided writes into the neighbours' windows."""
        return self.driver.one_sided

    @property
    def per_neighbour(self) -> bool:
        """Runs the one-sided step interface (``step``, ``step_rows``): one message, one
        penalty and one metric per neighbour, formed from what the neighbours alone send
        (the one-sided and lockstep drivers)."""
        return self.driver.per_neighbour

    @property
    def collective(self) -> bool:
        """Averages with one allreduce over every node."""
        return self.averaging == "allreduce"

    @property
    def mixes(self) -> bool:
        """Averages by rounds of neighbour mixing (``--mix-rounds`` applies)."""
        return self.averaging == "mixing"

    @property
    def decentralized(self) -> bool:
        """Runs on a graph of nodes (everything but the central reference): it has a
        trace, a timeline, a simulation and an equivalence check."""
        return self.driver.decentralized

    @property
    def exchanges_statistics(self) -> bool:
        """Sends its packed statistics ``(G_m, B_m)`` (one-shot) rather than iterates."""
        return self.driver.exchanges_statistics

    @property
    def edge_penalties(self) -> bool:
        """One penalty per edge (in the order of the node's neighbours), not one per node."""
        return self.per_neighbour

    # -- its messages -----------------------------------------------------------------
    def message_floats(self, n_classes: int, d: int) -> int:
        """Values of one message at a layer of input width ``d``: one ``Q x d`` matrix (the
        one-sided drivers size their windows' slots by it)."""
        return n_classes * d

    def message_bytes(self, n_classes: int, d: int) -> int:
        """Payload of one message at a layer of input width ``d``
        (:meth:`message_floats` float64 values)."""
        return self.message_floats(n_classes, d) * _F8

    #: Neighbour exchanges in a lockstep round (:meth:`phases`), each carrying an equal
    #: share of :meth:`message_floats`.
    exchanges = 1

    def phases(self, step: Any) -> list[tuple[Callable[[np.ndarray, np.ndarray], Any],
                                             np.ndarray]]:
        """A lockstep round's phases, one per neighbour exchange (:attr:`exchanges`).

        Each is a method ``(table, rows)`` of the step, reading the messages received in
        the exchange before it (the first phase: the previous round's last exchange), and
        the outbox it fills (one row per neighbour), sent in its own exchange. The first
        phase's method returns the round's iterate. One phase by default: the activation
        (``step_rows``, ``Z``).
        """
        return [(step.step_rows, step.Z)]

    def round_exchanges(self, network: Any, message_bytes: float) -> tuple[int, float]:
        """``(exchanges, seconds of each)`` of a lockstep round whose messages to a neighbour
        total ``message_bytes`` (``network`` a
        :class:`~dssfn_mpi.analysis.network.Network`): the one rule of the simulated and the
        replayed lockstep round."""
        return self.exchanges, network.message_seconds(message_bytes / self.exchanges)

    def sent(self, activations: int, degree: int, rounds: int,
             message_bytes: int) -> tuple[int, int]:
        """``(puts, bytes_sent)`` of a node over a layer: payload bytes, headers and
        stopping votes aside (the run log's ``bytes_sent``, the same live and simulated).

        One-sided: one put per neighbour per activation; lockstep: the round's messages to
        every neighbour (:attr:`exchanges` of them, ``message_bytes`` in all), sent (no
        puts); allreduce: one vector per iteration (the collective's own traffic is its
        library's); mixing: one vector to every neighbour per round.
        """
        if self.per_neighbour:
            sent = activations * degree
            return (sent if self.one_sided else 0), sent * message_bytes
        if self.mixes:
            return 0, activations * rounds * degree * message_bytes
        return 0, activations * message_bytes

    def mix_rounds(self, graph: Any, rounds: int | None, tol: float) -> int:
        """Mixing rounds per exchange (``--mix-rounds`` or the default; 0 when it does not
        mix)."""
        return 0

    # -- its penalty ------------------------------------------------------------------
    def fixed_penalty(self, value: float, degree: int) -> float | np.ndarray:
        """A set ``--gamma``/``--rho`` value as the node's penalty."""
        return np.full(degree, value) if self.edge_penalties else float(value)

    def auto_penalty(self, own: np.ndarray, gathered: Any, graph: Any,
                     node: int) -> float | np.ndarray:
        """The ``auto`` penalty from the node's ``[lam, s, g]`` and what its driver
        gathered of the others': the per-neighbour drivers (:attr:`per_neighbour`) each
        neighbour's values (in the order of its neighbours), the others the average over
        the network."""
        raise NotImplementedError(f"{self.name} has no penalty")

    def metric_penalty(self, graph: Any, node: int, ratio: float) -> float | np.ndarray:
        """The ``auto`` penalty of a layer solved in the Gram metric, from the graph and
        ``ratio``, the layer's width over the mean samples per node
        (:func:`~dssfn_mpi.ssfn.solver.width_ratio`)."""
        raise NotImplementedError(f"{self.name} has no metric form")

    def metric(self, own_G: np.ndarray, gathered: Any) -> Any:
        """The node's Gram metric from its ``G_m`` and what its driver gathered."""
        raise NotImplementedError(f"{self.name} has no metric form")

    #: Its :meth:`metric` is one per neighbour, each formed from the two ends' ``G`` alone,
    #: the same at both ends (the simulator forms each edge's once).
    metric_per_edge = False

    #: Its metric takes a second neighbour exchange: each node's :meth:`metric` (a matrix)
    #: goes to its neighbours, and :meth:`relayed_metric` forms the node's metric from them.
    relays_metric = False

    @property
    def metric_exchanges(self) -> int:
        """Neighbour exchanges (or collectives) of a packed ``d x d`` matrix that form the
        metric at a layer's start: 2 where it :attr:`relays_metric` (the Grams to the
        centres, their metrics back), else 1. The run log's ``metric_bytes`` and the
        timeline's layer start count them."""
        return 2 if self.relays_metric else 1

    def relayed_metric(self, own: np.ndarray, gathered: Any) -> Any:
        """The node's metric from its own :meth:`metric` and its neighbours' (when
        :attr:`relays_metric`)."""
        raise NotImplementedError(f"{self.name} does not relay its metric")

    def edge_metrics(self, metric: Any) -> list:
        """The node's metrics aligned with its penalties (for :func:`local_inverse`)."""
        return list(metric) if self.edge_penalties else [metric]

    def inverse(self, Y: np.ndarray, G: np.ndarray | None, penalty: float | np.ndarray,
                metric: Any = None) -> LocalInverse | DenseInverse:
        """The node's local inverse for ``penalty`` (and ``metric``, or None)."""
        return local_inverse(Y, G, penalty,
                             None if metric is None else self.edge_metrics(metric))

    def node_check(self, rule: Any, target: np.ndarray | None, B2: np.ndarray,
                   penalty: float | np.ndarray, eta: float, metric: Any = None) -> Any:
        """The node's own stopping test (:class:`~dssfn_mpi.algorithms.stoprule.NodeCheck`)."""
        from .stoprule import NodeCheck

        return NodeCheck(rule, target)

    def __repr__(self) -> str:
        return f"<algorithm {self.name}{'' if self.update is None else '/' + self.update}>"
