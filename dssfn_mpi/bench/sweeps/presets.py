"""Sizes of every benchmark for each preset: ``quick``, ``mid`` and ``paper``.

``quick`` smoke-runs each benchmark in well under a minute on a 2-core
laptop (tiny layers, few ranks); ``mid`` reproduces the paper's figures 2
and 3, Table 2 and the straggler / jitter study at the paper's layer width
(n = 2Q + 1000, K = 200, M = 20) with L = 2 layers, about 10 - 20 minutes per
sweep on such a machine (every mode at the full K: the projected times come
from each activation's CPU time, so oversubscription does not distort them);
``paper`` uses the paper's sizes (M = 20, L = 20, n = 2Q + 1000, K = 200).

A preset is plain data. ``--set KEY=VALUE`` overrides any field and
``--values`` / ``--modes`` narrow the swept lists, so tests and users can
shrink or reshape a sweep without a new preset.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields, replace
from typing import Any

from ...algorithms.registry import lookup, names
from ...errors import UserError, require
from ...mailbox.waiting import POLICIES

__all__ = ["ALL_ENGINES", "ONESHOT_MODES", "PRESETS", "WAIT_POLICIES", "Preset",
           "apply_overrides", "as_dict", "get_preset"]

#: The training's wait policies (``dssfn-mpi train --wait``), swept by ``bench contention``
#: in this order (the shared-laptop sweep).
WAIT_POLICIES = POLICIES


@dataclass(frozen=True)
class Preset:
    """Everything a benchmark sweep needs besides its name.

    Attributes
    ----------
    dataset : str
        Dataset of the degree, nodes and straggler sweeps.
    layers, hidden, iters : int or None
        L, n (None: 2Q + 1000) and K (activations per node per layer).
    nodes, degree : int
        M and d where they are not the swept variable.
    values : tuple
        The swept variable: degrees (degree), node counts (nodes) or
        slow-down factors (straggler).
    modes : tuple of str
        Modes (or straggler variants) to run at every value.
    sync_graph_iters : int or None
        K for ``sync-graph`` only, when its full-K runs are too slow for the
        machine; its measured and projected times are then scaled to K (solver
        part, linear) and marked ``*`` as scaled, its time to eps and accuracy
        are those of the shorter run (see plot/summary).
    datasets : tuple of str
        table2: datasets to try (only those whose files load are run).
    seeds : int
        table2: repetitions with seeds 0..seeds-1.
    central : bool
        Add one central (single-process, exact) reference run.
    reps : int
        rma: repetitions per measurement; contention: runs per configuration.
    policies : tuple of str
        contention: the wait policies (``train --wait``) to run every mode with.
    stop : str
        ``train --stop`` of every run: ``iters`` (K activations) or, e.g.,
        ``eps:1e-2`` (every layer to accuracy, K the cap: time to eps live).
    eps_iters : int
        The cap K of the time-to-eps form (``--to-eps``; the noise benchmark's runs).
    sim_values : tuple
        The time-to-eps form's simulated swept values (``dssfn-mpi simulate``, one
        process): node counts (nodes, past what the machine runs live) or degrees
        (degree; empty: the live ones). table2 and noise simulate their live cases.
    jitters : tuple of str
        noise: the per-activation jitters (``exp:MEAN``), projected and simulated.
    relaxes : tuple of float
        decompose: the relaxations (``--relax``, the edge form's ``--eta``) of every variant.
    relax : float or None
        The other benchmarks: every iterative mode's relaxation (``--relax`` or ``--eta``,
        :func:`~dssfn_mpi.bench.variants.relax_args`) where a ``MODE@ALPHA`` variant names
        none; None: each mode's default (the results measured at relaxation 1 record
        ``--set relax=1``).
    degrees : tuple of int
        nodes: the circular graph's degrees at every M (2: the ring, d = 1 at M = 2; a
        degree d > 2 only where M > d).
    topology : str
        noise: the graph, ``circular`` or ``random-regular`` of degree ``degree``, or
        ``exponential`` (its degree set by M).
    """

    dataset: str = "digits"
    layers: int = 1
    hidden: int | None = 100
    iters: int = 20
    nodes: int = 8
    degree: int = 2
    values: tuple = ()
    modes: tuple[str, ...] = ("async", "sync", "sync-graph")
    sync_graph_iters: int | None = None
    datasets: tuple[str, ...] = ()
    seeds: int = 1
    central: bool = True
    reps: int = 20
    policies: tuple[str, ...] = WAIT_POLICIES
    stop: str = "iters"
    eps_iters: int = 500
    sim_values: tuple = ()
    jitters: tuple[str, ...] = ("exp:0.5", "exp:1.0")
    relaxes: tuple = (1.0,)
    relax: float | None = None
    degrees: tuple = (2,)
    topology: str = "circular"


_TABLE2_ALL = ("vowel", "satimage", "letter", "mnist", "norb", "caltech101")
_TABLE2_MODES = ("central", "sync", "sync-graph", "async")
_STRAGGLER_MODES = ("async", "async-unbounded", "sync")
# sync-graph runs only without a straggler (its engine has no --slow); the straggler and
# jitter views project it from that run.
_STRAGGLER_ALL = (*_STRAGGLER_MODES, "sync-graph")
#: The one-shot baseline's modes (statistics averaged once, then the exact solve), added to
#: every engine in the time-to-eps form.
ONESHOT_MODES = tuple(n for n in names() if lookup(n).exchanges_statistics)
#: Every engine, as the noise benchmark and the time-to-eps form run them.
ALL_ENGINES = ("async", "sync", "sync-graph", *ONESHOT_MODES)
# The simulated node counts of the time-to-eps form: the live ones and past them.
#: The decomposition's variants (:data:`dssfn_mpi.bench.sweeps.decompose.VARIANTS`).
_DECOMPOSE = ("sync", "sync-graph", "lockstep", "async", "hood-jacobi")
_SIM_NODES = (2, 4, 8, 12, 16, 20, 32, 64, 128, 256)

PRESETS: dict[str, dict[str, Preset]] = {
    "degree": {
        "quick": Preset(nodes=6, values=(2, 4, 5)),
        "mid": Preset(dataset="satimage", layers=2, hidden=None, iters=200, nodes=20,
                      values=(2, 4, 8, 12, 19), eps_iters=3000),
        "paper": Preset(dataset="satimage", layers=20, hidden=None, iters=200, nodes=20,
                        values=(2, 4, 6, 8, 10, 12, 14, 16, 18, 19), eps_iters=3000),
    },
    "nodes": {
        "quick": Preset(values=(2, 4, 6), sim_values=(2, 4, 6, 8, 12)),
        "mid": Preset(dataset="satimage", layers=2, hidden=None, iters=200,
                      values=(2, 4, 8, 12, 16, 20), eps_iters=3000, sim_values=_SIM_NODES),
        "paper": Preset(dataset="satimage", layers=20, hidden=None, iters=200,
                        values=(2, 4, 6, 8, 10, 12, 14, 16, 18, 20), eps_iters=3000,
                        sim_values=_SIM_NODES),
    },
    "table2": {
        "quick": Preset(nodes=4, degree=2, modes=_TABLE2_MODES,
                        datasets=("digits", "vowel"), central=False),
        "mid": Preset(layers=2, hidden=None, iters=200, nodes=20, degree=8,
                      modes=_TABLE2_MODES, datasets=_TABLE2_ALL, central=False,
                      eps_iters=3000),
        "paper": Preset(layers=20, hidden=None, iters=200, nodes=20, degree=8,
                        modes=_TABLE2_MODES, datasets=_TABLE2_ALL, seeds=3,
                        central=False, eps_iters=3000),
    },
    # Time to eps under noise at the paper's graph (M = 20, d = 8 in mid and paper): every
    # engine live (projected) and simulated, with per-activation jitter and one straggler.
    "noise": {
        "quick": Preset(nodes=4, degree=2, values=(2.0, 5.0, 10.0), modes=ALL_ENGINES,
                        central=False, stop="eps:1e-2", iters=500, eps_iters=500),
        "mid": Preset(dataset="satimage", layers=2, hidden=None, iters=3000, nodes=20, degree=8,
                      values=(2.0, 5.0, 10.0), modes=ALL_ENGINES, central=False,
                      stop="eps:1e-2", eps_iters=3000),
        "paper": Preset(dataset="satimage", layers=20, hidden=None, iters=3000, nodes=20,
                        degree=8, values=(2.0, 5.0, 10.0), modes=ALL_ENGINES, central=False,
                        stop="eps:1e-2", eps_iters=3000),
    },
    # Async's cost split at equal accuracy (bench/sweeps/decompose.py): values are node counts (at
    # M = nodes also the complete graph and every relaxation), all simulated.
    "decompose": {
        "quick": Preset(nodes=6, values=(6, 8), modes=_DECOMPOSE, central=False,
                        stop="eps:1e-2", iters=500, relaxes=(1.0, 1.6)),
        "mid": Preset(dataset="satimage", layers=2, hidden=None, iters=3000, nodes=20,
                      values=(20, 64, 128), modes=_DECOMPOSE, central=False, stop="eps:1e-2",
                      eps_iters=3000, relaxes=(1.0, 1.3, 1.6, 1.8)),
        "paper": Preset(dataset="satimage", layers=20, hidden=None, iters=3000, nodes=20,
                        values=(20, 64, 128), modes=_DECOMPOSE, central=False, stop="eps:1e-2",
                        eps_iters=3000, relaxes=(1.0, 1.3, 1.6, 1.8)),
    },
    "straggler": {
        "quick": Preset(nodes=4, degree=2, values=(5.0,), modes=_STRAGGLER_MODES,
                        central=False),
        # M = 20 at the paper's width: compute dominates the emulated delay, and the
        # unslowed runs feed the jitter view.
        "mid": Preset(dataset="satimage", layers=2, hidden=None, iters=200, nodes=20, degree=8,
                      values=(2.0, 5.0, 10.0), modes=_STRAGGLER_ALL, central=False),
        "paper": Preset(dataset="satimage", layers=20, hidden=None, iters=200, nodes=20,
                        degree=8, values=(2.0, 5.0, 10.0), modes=_STRAGGLER_ALL,
                        central=False),
    },
    # values = busy processes beside the job. mid: a shared laptop's size (4 ranks on the
    # ring, digits, n = 200, K = 1000); the paper has no such experiment, so paper is the
    # same size.
    "contention": {
        "quick": Preset(nodes=4, values=(0, 1), central=False, reps=1),
        "mid": Preset(hidden=200, iters=1000, nodes=4, values=(0, 1, 2), central=False, reps=3),
        "paper": Preset(hidden=200, iters=1000, nodes=4, values=(0, 1, 2), central=False,
                        reps=5),
    },
    "rma": {
        "quick": Preset(reps=10, central=False),
        "mid": Preset(reps=50, central=False),
        "paper": Preset(reps=200, central=False),
    },
}


def get_preset(bench: str, name: str) -> Preset:
    """The preset ``name`` of benchmark ``bench``.

    Raises
    ------
    UserError
        Unknown benchmark or preset name.
    """
    require(bench in PRESETS, f"unknown benchmark {bench!r}; choose one of {', '.join(PRESETS)}")
    table = PRESETS[bench]
    require(name in table, f"--preset {name!r}: choose one of {', '.join(table)}")
    return table[name]


def _parse_value(key: str, text: str, current: Any, kind: Any) -> Any:
    """Convert ``text`` to the type of preset field ``key``."""
    kind_s = str(kind)
    try:
        if text.lower() in ("none", "auto", "") and "None" in kind_s:
            return None
        if kind_s.startswith("tuple"):
            items = [s for s in text.split(",") if s]
            if key in ("modes", "datasets", "policies", "jitters"):
                return tuple(items)
            if key == "relaxes":
                return tuple(float(s) for s in items)
            return tuple(float(s) if "." in s else int(s) for s in items)
        if kind_s.startswith("bool"):
            require(text.lower() in ("true", "false", "1", "0", "yes", "no"),
                    f"--set {key}={text}: expected true or false")
            return text.lower() in ("true", "1", "yes")
        if kind_s.startswith("int"):
            return int(text)
        if kind_s.startswith("float"):
            return float(text)
        return text
    except ValueError:
        raise UserError(f"--set {key}={text}: expected a value like {current!r}") from None


#: The least value of each numeric preset field (``None`` is also allowed where the
#: field's type allows it); ``--set`` outside is a user error, before any job.
_AT_LEAST = {"layers": 0, "hidden": 1, "iters": 1, "nodes": 2, "degree": 1, "sync_graph_iters": 1,
             "seeds": 1, "reps": 1, "eps_iters": 1}


#: The graphs ``--set topology=`` takes (the noise benchmark's).
TOPOLOGIES = ("circular", "random-regular", "exponential")


def topology_args(topology: str, degree: int) -> list[str]:
    """``train`` / ``simulate`` arguments of a graph of :data:`TOPOLOGIES` at ``degree``
    (the exponential graph's degree is set by M, so it takes none)."""
    if topology == "exponential":
        return ["--topology", "exponential"]
    return ["--topology", topology, "--degree", str(degree)]


def _check_range(key: str, value: Any) -> None:
    """A ``--set`` value within its field's range (``stop`` a valid rule, ``topology`` a
    graph of :data:`TOPOLOGIES`)."""
    require(key != "topology" or value in TOPOLOGIES,
            f"--set topology={value}: choose one of {', '.join(TOPOLOGIES)}")
    if key in _AT_LEAST and value is not None:
        require(value >= _AT_LEAST[key], f"--set {key}={value}: must be >= {_AT_LEAST[key]}")
    if key == "stop":
        from ...algorithms.stoprule import parse_stop

        parse_stop(value)


def apply_overrides(preset: Preset, items: list[str] | None) -> Preset:
    """Apply ``--set KEY=VALUE`` overrides (e.g. ``layers=5``, ``dataset=satimage``).

    Parameters
    ----------
    preset : Preset
        The starting point.
    items : list of str or None
        ``KEY=VALUE`` strings; keys are :class:`Preset` field names (``-`` or
        ``_``).

    Returns
    -------
    Preset
        A new preset.

    Raises
    ------
    UserError
        Malformed item, unknown key, a value of the wrong type or out of range.
    """
    known = {f.name: f for f in fields(Preset)}
    changes: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        require(sep == "=", f"--set {item!r}: expected KEY=VALUE, e.g. --set layers=5")
        require(key in known, f"--set {key}: unknown key; valid keys: {', '.join(known)}")
        changes[key] = _parse_value(key, text.strip(), getattr(preset, key), known[key].type)
        _check_range(key, changes[key])
    return replace(preset, **changes) if changes else preset


def as_dict(preset: Preset) -> dict[str, Any]:
    """The preset as a JSON-friendly dict (stored with every run of a sweep)."""
    return {k: (list(v) if isinstance(v, tuple) else v)
            for k, v in dataclasses.asdict(preset).items()}

