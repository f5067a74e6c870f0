"""What a driver kind is: how a layer of an algorithm runs live, simulated and replayed.

A :class:`Driver` holds no arithmetic (its algorithm's) and no loop of its own: it names
the three implementations of its kind by import path, ``"package.module:attribute"``, as
entry points do, and resolves each on first use. So the registry sits below the code it
names (the engines, the simulator and the replay import the algorithms, which name their
driver), and a driver kind added outside the package is one object.
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable, Mapping
from typing import Any, Union

__all__ = ["Driver", "Penalty"]

#: An implementation: an import path ``"module:attribute"`` or the object itself.
Impl = Union[str, Callable[..., Any]]


class Penalty(enum.Enum):
    """Where a layer's ADMM penalty comes from (:meth:`Driver.penalty_source`)."""

    NONE = "none"  # solved directly: no penalty
    FIXED = "fixed"  # set by --gamma / --rho
    METRIC = "metric"  # the Gram metric form's rule, from the graph alone
    AUTO = "auto"  # from the data, combined over what the driver talks to


def _resolve(impl: Impl) -> Any:
    if not isinstance(impl, str):
        return impl
    module, _, attr = impl.partition(":")
    return getattr(importlib.import_module(module), attr)


class Driver:
    """One way of running an algorithm: its live engine, simulated solve and replay.

    Parameters
    ----------
    name : str
        The kind's name (the docs' and the registry's).
    live, simulated, replayed : Impl or mapping of averaging to Impl
        The live engine class (``cls(ctx)`` with a
        :class:`~dssfn_mpi.engines.base.RunContext`), the simulated layer solve
        (the signature of :mod:`dssfn_mpi.sim.layersolve`) and the replayed layer timeline
        (that of :mod:`dssfn_mpi.analysis.replayrules`); a mapping picks one by the
        algorithm's ``averaging`` (``allreduce``, ``mixing``). None: the kind has none.
    one_sided, per_neighbour, direct, decentralized, exchanges_statistics : bool
        What the kind is (see the properties of
        :class:`~dssfn_mpi.algorithms.Algorithm` of the same names, which read these).
    summary : str
        One line for the docs.
    """

    def __init__(self, name: str, *, live: Impl | Mapping[str, Impl],
                 simulated: Impl | Mapping[str, Impl] | None = None,
                 replayed: Impl | Mapping[str, Impl] | None = None,
                 one_sided: bool = False, per_neighbour: bool = False, direct: bool = False,
                 decentralized: bool = True, exchanges_statistics: bool = False,
                 summary: str = "") -> None:
        self.name, self.summary = name, summary
        self._impl = {"live": live, "simulated": simulated, "replayed": replayed}
        self.one_sided, self.per_neighbour = one_sided, per_neighbour
        self.direct, self.decentralized = direct, decentralized
        self.exchanges_statistics = exchanges_statistics

    def implementation(self, what: str, averaging: str | None = None) -> Any:
        """The ``live``, ``simulated`` or ``replayed`` implementation (for ``averaging``).

        Raises
        ------
        NotImplementedError
            The kind has none.
        """
        impl = self._impl[what]
        if isinstance(impl, Mapping):
            impl = impl.get(averaging)
        if impl is None:
            raise NotImplementedError(f"driver {self.name} has no {what} form")
        return _resolve(impl)

    def engine(self, ctx: Any) -> Any:
        """Build the live engine of ``ctx.cfg.algorithm`` (collective over ``ctx.comm``)."""
        return self.implementation("live", ctx.cfg.algorithm.averaging)(ctx)

    def simulate(self, run: Any, layer: int, *args: Any) -> Any:
        """One layer's simulated solve of ``run.cfg.algorithm`` (:mod:`dssfn_mpi.sim`)."""
        alg = run.cfg.algorithm
        return self.implementation("simulated", alg.averaging)(run, layer, *args)

    def replay(self, algorithm: Any, *args: Any) -> Any:
        """One traced layer's projected ``(start, end)`` (:mod:`dssfn_mpi.analysis`)."""
        return self.implementation("replayed", algorithm.averaging)(*args)

    def penalty_source(self, fixed: Any, metric: bool) -> Penalty:
        """Where a layer's penalty comes from: the one decision of train, simulate and
        replay. ``fixed`` is the layer's set penalty (None: ``auto``), ``metric`` whether
        the layer is solved in the Gram metric."""
        if self.direct:
            return Penalty.NONE
        if fixed is not None:
            return Penalty.FIXED
        return Penalty.METRIC if metric else Penalty.AUTO

    def __repr__(self) -> str:
        return f"<driver {self.name}>"
