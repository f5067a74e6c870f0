"""The registry: ``--mode`` (and ``--update``) name an algorithm object.

Adding an algorithm is one module in this package and one line in :data:`ALGORITHMS`
(docs/EXTENDING.md); code outside the package may also :func:`register` one.
"""

from __future__ import annotations

from ..drivers import LOCKSTEP
from ..errors import UserError
from .base import Algorithm
from .consensus import ConsensusADMM
from .direct import Central, OneShot
from .edge import EdgeADMM, PaperUpdate
from .hood import NeighbourhoodADMM
from .hoodjacobi import JacobiNeighbourhoodADMM

__all__ = ["ALGORITHMS", "UPDATES", "known", "lookup", "names", "register"]

#: Every algorithm, the default first; a mode with several updates lists its default first.
ALGORITHMS: list[Algorithm] = [
    EdgeADMM(),
    PaperUpdate(),
    ConsensusADMM(),
    ConsensusADMM("sync-graph", "mixing", "consensus ADMM, averaging by neighbour mixing"),
    EdgeADMM("lockstep", LOCKSTEP, "async's edge update in lockstep rounds (Jacobi), "
             "neighbour exchange: async without the asynchrony", step_size=1.8),
    PaperUpdate("lockstep", LOCKSTEP, "lockstep with the paper's eq. 7 update"),
    OneShot("oneshot", "allreduce", "statistics averaged by one allreduce, exact solve"),
    OneShot("oneshot-graph", "mixing", "statistics averaged by neighbour mixing, exact solve"),
    Central(),
    NeighbourhoodADMM(),
    NeighbourhoodADMM("hood-lockstep", LOCKSTEP, "neighbourhood consensus ADMM in lockstep "
                      "rounds, neighbour exchange: hood without the asynchrony", step_size=1.0),
    JacobiNeighbourhoodADMM(),
]

#: The colour and marker of a mode in the benchmarks' figures (:attr:`Algorithm.colour`,
#: :attr:`Algorithm.marker`), where it has its own; every other mode, and one registered
#: later, is drawn in a colour and with a marker no other mode has.
_LOOKS = {
    "async": ("tab:blue", "o"),
    "sync": ("tab:orange", "s"),
    "sync-graph": ("tab:green", "^"),
    "oneshot": ("tab:red", "D"),
    "oneshot-graph": ("tab:purple", "P"),
    "central": ("black", "x"),
}
for _alg in ALGORITHMS:
    _alg.colour, _alg.marker = _LOOKS.get(_alg.name, (_alg.colour, _alg.marker))

#: The ``--update`` values.
UPDATES = ("edge", "paper")


def register(algorithm: Algorithm) -> Algorithm:
    """Add ``algorithm`` (or replace the one of the same name and update); returns it."""
    for i, known in enumerate(ALGORITHMS):
        if (known.name, known.update) == (algorithm.name, algorithm.update):
            ALGORITHMS[i] = algorithm
            return algorithm
    ALGORITHMS.append(algorithm)
    return algorithm


def names() -> tuple[str, ...]:
    """The ``--mode`` values, the default first."""
    return tuple(dict.fromkeys(a.name for a in ALGORITHMS))


def known(mode: str) -> bool:
    """Whether ``--mode mode`` names a registered algorithm."""
    return any(a.name == mode for a in ALGORITHMS)


def lookup(mode: str, update: str | None = None) -> Algorithm:
    """The algorithm of ``--mode mode`` (``--update update`` where the mode has several).

    Raises
    ------
    UserError
        No such mode.
    """
    found = [a for a in ALGORITHMS if a.name == mode]
    if not found:
        raise UserError(f"--mode {mode!r}: choose one of {', '.join(names())}")
    return next((a for a in found if a.update == update), found[0])
