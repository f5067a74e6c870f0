"""A sweep's labels of its engines: which algorithm each runs, with what, in which order.

A sweep labels every configuration (its ``bench_mode``) with a ``--mode`` value or with a
variant of one:

``MODE-leadS``, ``MODE-unbounded``
    a one-sided mode (``async``, ``hood``) with ``--max-lead S``, or with no bound
    (``--max-lead -1``);
``LABEL@ALPHA``
    relaxed by ALPHA: ``--relax`` where the algorithm takes it, its ``--eta`` otherwise
    (:func:`relax_args`).

The benchmarks ask a label's algorithm (:func:`algorithm`, from the registry) what it is
rather than test its name, so a newly registered mode runs in every sweep (``--modes``) and
is drawn in every figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..algorithms.base import Algorithm
from ..algorithms.registry import lookup, names
from ..errors import UserError, require

__all__ = ["Label", "algorithm", "decentralized", "mode_args", "order", "parse", "read",
           "relax_args", "run_label"]


@dataclass(frozen=True)
class Label:
    """What a label runs.

    Attributes
    ----------
    mode : str
        The ``--mode`` value.
    lead : int or None
        Its ``--max-lead`` (-1: unbounded); None: the mode's default.
    relax : float or None
        Its relaxation (:func:`relax_args`); None: the sweep's.
    """

    mode: str
    lead: int | None = None
    relax: float | None = None

    @property
    def algorithm(self) -> Algorithm:
        """Its mode's algorithm."""
        return lookup(self.mode)


def parse(label: str) -> Label | None:
    """What a label names (module docstring); None when it names no registered mode, a
    bound of a mode that has none, or a relaxation that is no number."""
    base, sep, alpha = label.partition("@")
    if sep and not _is_number(alpha):
        return None
    relax = float(alpha) if sep else None
    if base in names():
        return Label(base, None, relax)
    mode, _, tail = base.rpartition("-")
    lead = -1 if tail == "unbounded" else int(tail[4:]) if (
        tail.startswith("lead") and tail[4:].isdigit()) else None
    if lead is None or mode not in names() or not lookup(mode).one_sided:
        return None
    return Label(mode, lead, relax)


def read(label: str) -> Label:
    """What a label a sweep runs names (:func:`parse`).

    Raises
    ------
    UserError
        A label of no registered mode, or a relaxation that is no number.
    """
    _, sep, alpha = label.partition("@")
    require(not sep or _is_number(alpha),
            f"variant {label!r}: ALPHA of MODE@ALPHA must be a number")
    found = parse(label)
    if found is None:
        one = next(n for n in names() if lookup(n).one_sided)
        raise UserError(f"unknown variant {label!r}: a mode ({', '.join(names())}), a "
                        f"one-sided mode's bound ({one}-leadS: --max-lead S; {one}-unbounded), "
                        "or any of them relaxed, LABEL@ALPHA")
    return found


def algorithm(label: str) -> Algorithm | None:
    """The algorithm a label runs; None for a label of no registered mode."""
    found = parse(label)
    return None if found is None else found.algorithm


def decentralized(label: str) -> bool:
    """Whether a label runs on a graph of nodes (not the central reference); a label of no
    registered mode counts as one that does."""
    alg = algorithm(label)
    return alg is None or alg.decentralized


def order(label: str) -> tuple[int, str]:
    """Sort key of labels: their modes in the registry's order (a mode's variants after it),
    labels of no registered mode last, each group by name."""
    found = parse(label)
    known = names()
    return (known.index(found.mode) if found else len(known), label)


def relax_args(mode: str, alpha: float) -> list[str]:
    """The relaxation ``alpha`` of ``--mode mode``: ``--relax`` where its algorithm takes
    it, the edge form's ``--eta`` otherwise (always given: a mode's default step need not
    be 1).

    Raises
    ------
    UserError
        ``alpha`` outside (0, 2).
    """
    require(0 < alpha < 2, f"relaxation {alpha:g} of {mode}: it lies in (0, 2)")
    return ["--relax" if lookup(mode).relaxes else "--eta", f"{alpha:g}"]


def mode_args(label: str) -> list[str]:
    """``--mode``, ``--max-lead`` and the relaxation (:func:`relax_args`) of a label.

    Raises
    ------
    UserError
        A label of no registered mode, or a relaxation outside (0, 2).
    """
    found = read(label)
    args = ["--mode", found.mode]
    if found.lead is not None:
        args += ["--max-lead", str(found.lead)]
    if found.relax is not None:
        args += relax_args(found.mode, found.relax)
    return args


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def run_label(label: str, max_lead: int | None, bound: bool = False) -> str:
    """The label of a run of a one-sided mode ``label`` with ``--max-lead max_lead`` (None
    or negative: no bound): ``MODE-unbounded`` without a bound, ``MODE-leadS`` with one
    when ``bound`` asks it named; ``label`` itself otherwise (and for every other label)."""
    if parse(label) != Label(label) or not lookup(label).one_sided:
        return label
    if max_lead is None or int(max_lead) < 0:
        return f"{label}-unbounded"
    return f"{label}-lead{int(max_lead)}" if bound else label
