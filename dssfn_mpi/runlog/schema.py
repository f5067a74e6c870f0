"""The per-(layer, rank) fields of the run log: the one definition.

Each field has a name, a dtype, a unit, a description and the part of the
code that fills it:

``engine``
    measured by the layer solver and returned in its
    :class:`~dssfn_mpi.engines.base.SolveStats` (same names);
``loop``
    measured by the layer loop (timings, penalty) or its per-rank
    observers (accuracy, cost, evaluation time);
``check``
    the centralized-equivalence check: computed on rank 0 for all ranks at
    once, only when the check runs (NaN otherwise).

The per-activation ``/trace`` and ``/trajectory`` datasets have their own
table, :data:`TRACE_SCHEMA` (shapes, dtypes, units, descriptions).

Everything else is derived from :data:`LAYER_SCHEMA`: the run log's tables
(:data:`LAYER_FIELDS`, :data:`LAYER_UNITS`), the loop's rows and the
checkpoint contents (:func:`names`, :data:`ROW_FIELDS`), the rows' record type
(:data:`ROW_DTYPE`), the ``/layers`` arrays of a run's rows, live or simulated
(:func:`layer_arrays`), and the table in ``docs/RUNLOG.md``
(:func:`markdown_table`; ``python -m dssfn_mpi.runlog.schema`` prints it).

Adding a field here is an additive change of the run log (the schema version
stays); renaming or removing one, or changing its dtype, unit or meaning,
bumps :data:`dssfn_mpi.runlog.SCHEMA_VERSION`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "CHECK",
    "ENGINE",
    "LAYER_FIELDS",
    "LAYER_SCHEMA",
    "LAYER_UNITS",
    "LOOP",
    "ROW_DTYPE",
    "ROW_FIELDS",
    "SOURCES",
    "TRACE",
    "TRACE_ATTRIBUTES",
    "TRACE_SCHEMA",
    "TRAJECTORY",
    "LayerField",
    "TraceField",
    "blank_rows",
    "layer_arrays",
    "layer_field",
    "markdown_table",
    "names",
    "set_fields",
    "trace_attributes_table",
    "trace_fields",
    "trace_markdown_table",
]

ENGINE, LOOP, CHECK = "engine", "loop", "check"
SOURCES = (ENGINE, LOOP, CHECK)

_F8 = np.dtype(np.float64)
_I8 = np.dtype(np.int64)


@dataclass(frozen=True)
class LayerField:
    """One ``/layers`` dataset: shape ``(layers_done, M)``, row l = layer l, column m = rank m."""

    name: str
    dtype: np.dtype
    unit: str
    source: str
    description: str

    @property
    def missing(self) -> float | int:
        """The value that means "not measured": NaN for floats, -1 for integers."""
        return -1 if self.dtype == _I8 else float("nan")


def _f(name: str, dtype: np.dtype, unit: str, source: str, description: str) -> LayerField:
    return LayerField(name, dtype, unit, source, description)


#: Every per-(layer, rank) field, in the order of the documentation.
LAYER_SCHEMA: tuple[LayerField, ...] = (
    _f("total_seconds", _F8, "s", LOOP,
       "wall time of the layer's timed part on this rank: features, penalty, factorisation "
       "and solve (not the untimed observation after it)"),
    _f("cpu_seconds", _F8, "s", LOOP,
       "CPU time this rank's process used in the layer's timed part; with more ranks than "
       "cores this is the work done, not the time spent waiting for a core; includes MPI's "
       "internal spinning"),
    _f("features_seconds", _F8, "s", LOOP,
       "computing Y_l and the local statistics G_m = Y Y^T, B_m = T Y^T"),
    _f("factor_seconds", _F8, "s", ENGINE,
       "factorising the local inverse used by the solver, plus computing the auto penalty "
       "and, on a layer solved in the Gram metric, exchanging and factorising the metric"),
    _f("metric_bytes", _I8, "bytes", LOOP,
       "--metric gram: bytes this rank sent each neighbour (or into each collective) in the "
       "layer-start exchanges that form the metric: one packed n x n matrix (the upper "
       "triangle, n (n + 1) / 2 numbers) per exchange, two in the neighbourhood modes hood, "
       "hood-lockstep and hood-jacobi (the Grams to each centre, its metric back); 0 on a "
       "layer solved with the scalar penalty"),
    _f("solve_seconds", _F8, "s", ENGINE,
       "the decentralized solver iterations (compute and communication)"),
    _f("wait_seconds", _F8, "s", ENGINE, "time blocked waiting for neighbours or collectives"),
    _f("eval_seconds", _F8, "s", LOOP,
       "untimed observation after the solve: accuracy, cost and the equivalence check"),
    _f("activations", _I8, "count", ENGINE, "local updates performed by this rank"),
    _f("stop_reason", _I8, "code", ENGINE,
       "why the layer ended on this rank (--stop): 0 iters (the fixed count K), 1 eps (every "
       "rank within E of O*), 2 local (every rank's local residuals <= TOL), 3 cap (K "
       "reached under eps or local first); -1 in central and the one-shot modes (one exact "
       "solve, no iterations)"),
    _f("puts", _I8, "count", ENGINE, "messages (RMA puts or sends) issued by this rank"),
    _f("bytes_sent", _I8, "bytes", ENGINE, "payload bytes sent by this rank"),
    _f("staleness_mean", _F8, "versions", ENGINE,
       "async: mean number of neighbour versions skipped per read"),
    _f("staleness_max", _F8, "versions", ENGINE,
       "async: largest number of neighbour versions skipped in one read"),
    _f("rel_distance", _F8, "1", CHECK,
       "||O_m - O*||_F / ||O*||_F against the exact layer solution O*"),
    _f("objective_gap", _F8, "1", CHECK,
       "(f(O_m) - f(O*)) / f(O*) on the stacked (all-node) problem"),
    _f("consensus_spread", _F8, "1", CHECK,
       "max_m ||O_m - mean O||_F / ||mean O||_F; one value per layer, repeated in each column"),
    _f("train_accuracy", _F8, "fraction", LOOP,
       "accuracy of this rank's model on its own training shard"),
    _f("train_cost", _F8, "1", LOOP,
       "||T_m - O_m Y_m||_F^2 of this rank's model on its own shard (the sum over ranks is "
       "the training cost of the stacked problem)"),
    _f("test_accuracy", _F8, "fraction", LOOP, "accuracy of this rank's model on the test set"),
    _f("lambda_star", _F8, "1", CHECK,
       "Lagrange multiplier of the exact layer solution's norm constraint"),
    _f("gamma", _F8, "1", LOOP,
       "the ADMM penalty of this layer: rho for sync and sync-graph, gamma for async (with "
       "auto, the mean of the rank's per-edge gammas)"),
    _f("mix_rounds", _I8, "count", ENGINE,
       "sync-graph: neighbour-mixing rounds per ADMM iteration; oneshot-graph: rounds that "
       "averaged the statistics (-1 in other modes)"),
    _f("torn_retries", _I8, "count", ENGINE,
       "async: copies of a neighbour's mailbox slot discarded because a write was in flight "
       "(-1 in other modes)"),
    _f("fallbacks", _I8, "count", ENGINE,
       "async: neighbour reads that gave up after repeated torn copies and used the last "
       "consistent (older) copy (-1 in other modes)"),
    _f("waits_slept", _I8, "count", ENGINE,
       "waits of the solve (for a collective, a neighbour exchange or the bounded delay) that "
       "slept at least once under the run's wait policy (--wait; run attribute wait_policy); "
       "0 under spin, which never sleeps"),
    _f("stats_peak_bytes", _I8, "bytes", ENGINE,
       "oneshot, oneshot-graph: peak memory the solve allocated (packed statistics sent and "
       "received, the summed G, the exact solve's eigendecomposition), measured with "
       "tracemalloc; leaves out the local G_m and MPI's own buffers (-1 in other modes and "
       "in simulate)"),
)

_BY_NAME = {f.name: f for f in LAYER_SCHEMA}

#: Name -> (dtype, description), the run log writer's table.
LAYER_FIELDS: dict[str, tuple[np.dtype, str]] = {
    f.name: (f.dtype, f.description) for f in LAYER_SCHEMA
}

#: Name -> unit, stored as each dataset's ``units`` attribute.
LAYER_UNITS: dict[str, str] = {f.name: f.unit for f in LAYER_SCHEMA}


def names(*sources: str) -> tuple[str, ...]:
    """Names of the fields filled by ``sources`` (all fields when none is given).

    Parameters
    ----------
    *sources : str
        Any of ``"engine"``, ``"loop"``, ``"check"``.

    Returns
    -------
    tuple of str
        In the order of :data:`LAYER_SCHEMA`.
    """
    unknown = set(sources) - set(SOURCES)
    if unknown:
        raise ValueError(f"unknown source(s) {sorted(unknown)}; known: {SOURCES}")
    return tuple(f.name for f in LAYER_SCHEMA if not sources or f.source in sources)


def layer_field(name: str) -> LayerField:
    """The definition of the field ``name`` (``KeyError`` if there is none)."""
    return _BY_NAME[name]


#: The fields of a node's own log row of a layer (the check fields are computed for all
#: nodes at once).
ROW_FIELDS = names(ENGINE, LOOP)

#: A node's log row of a layer as one numpy record: a field per :data:`ROW_FIELDS` name, of
#: its dtype. The one form of rows from the layer step to ``/layers``: a row (0-d), a rank's
#: rows (one per layer), a run's rows ``(layers, M)``, whose fields are the ``/layers``
#: arrays.
ROW_DTYPE = np.dtype([(name, _BY_NAME[name].dtype) for name in ROW_FIELDS])


def blank_rows(shape: int | tuple[int, ...]) -> np.ndarray:
    """Rows of :data:`ROW_DTYPE` of ``shape`` (``()``: one row), every field "not measured"
    (:attr:`LayerField.missing`) until it is set."""
    rows = np.empty(shape, dtype=ROW_DTYPE)
    for name in ROW_FIELDS:
        rows[name] = _BY_NAME[name].missing
    return rows


def set_fields(rows: np.ndarray, **fields: Any) -> np.ndarray:
    """Set ``fields`` (by :data:`ROW_FIELDS` name) in ``rows``, in place; returns ``rows``.

    Raises
    ------
    ValueError
        A name that is no row field: a bug in the caller.
    """
    for name, value in fields.items():
        rows[name] = value
    return rows


def layer_arrays(rows: np.ndarray,
                 checks: dict[str, list[np.ndarray]]) -> dict[str, np.ndarray]:
    """The run log's ``/layers`` arrays, ``(layers, M)``, of a run's rows and checks.

    Parameters
    ----------
    rows : numpy.ndarray
        ``(layers, M)`` of :data:`ROW_DTYPE`: ``rows[l, m]`` is node m's row of layer l.
    checks : dict
        Check field name -> one ``(M,)`` array per layer (empty lists: the check
        did not run, and the writer fills those fields).

    Returns
    -------
    dict of str to numpy.ndarray
        The row fields are ``rows``' own fields (views, not copies).
    """
    layers = {k: rows[k] for k in ROW_FIELDS}
    for k in names(CHECK):
        if checks.get(k):
            layers[k] = np.array(checks[k])
    return layers


def markdown_table() -> str:
    """The ``/layers`` table of ``docs/RUNLOG.md``, generated from :data:`LAYER_SCHEMA`."""
    lines = ["| dataset | dtype | units | filled by | meaning |", "|---|---|---|---|---|"]
    for f in LAYER_SCHEMA:
        text = f.description.replace("|", "\\|")
        lines.append(f"| `{f.name}` | {f.dtype.name} | {f.unit} | {f.source} | {text} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class TraceField:
    """One dataset of the ``/trace`` or ``/trajectory`` group (docs/RUNLOG.md)."""

    group: str
    name: str
    shape: tuple[str, ...]  # axis names: L layers_done, M ranks, K iters, D degree, ...
    dtype: np.dtype
    unit: str
    description: str

    @property
    def missing(self) -> float | int:
        """The value that means "not recorded": NaN for floats, -1 for integers."""
        return -1 if self.dtype == _I8 else float("nan")


TRACE, TRAJECTORY = "trace", "trajectory"

#: Every ``/trace`` and ``/trajectory`` dataset. Times are seconds relative to the run's
#: origin (each rank's ``perf_counter`` right after the barrier that starts the run).
TRACE_SCHEMA: tuple[TraceField, ...] = (
    TraceField(TRACE, "start", ("L", "M", "K"), _F8, "s",
               "activation (iteration) k began: async, the start of the successful poll (the "
               "read of the neighbours' Z the update uses); sync, sync-graph: the primal update"),
    TraceField(TRACE, "end", ("L", "M", "K"), _F8, "s",
               "it ended: async, after its puts; sync, sync-graph: after the collective (the "
               "last mixing round) and the dual update"),
    TraceField(TRACE, "cpu", ("L", "M", "K"), _F8, "s",
               "thread CPU time of its compute, without any MPI wait, collective or put "
               "(async: read and update; sync: primal and dual; sync-graph: also the mixing "
               "arithmetic)"),
    TraceField(TRACE, "comm_start", ("L", "M", "K"), _F8, "s",
               "the communication began: async, its puts (NaN in logs whose cpu still "
               "includes them); sync, sync-graph: the collective (first mixing round)"),
    TraceField(TRACE, "versions", ("L", "M", "K", "D"), _I8, "version",
               "async only: version of each neighbour's Z read by activation k, neighbours in "
               "the order of /ranks/neighbors (j+1 = written by its activation j, 0 = nothing "
               "yet), padded with -1"),
    TraceField(TRACE, "phase_start", ("L", "M", "P"), _F8, "s",
               "layer-start phases (attribute phases): features, penalty (the auto-penalty "
               "exchange, ~0 when fixed), parity_wait (async only, NaN elsewhere), factor"),
    TraceField(TRACE, "phase_end", ("L", "M", "P"), _F8, "s", "the phases' ends"),
    TraceField(TRACE, "phase_cpu", ("L", "M", "P"), _F8, "s",
               "thread CPU time of each phase (the penalty's includes its exchange)"),
    TraceField(TRACE, "message_bytes", ("L",), _I8, "bytes",
               "payload of one Z put / one collective of the layer: Q d_l 8, d_l its input "
               "width; one-shot modes: the packed statistics, (d_l (d_l + 1) / 2 + Q d_l) 8"),
    TraceField(TRAJECTORY, "activation", ("S",), _I8, "count",
               "activations done at each snapshot: s, 2s, ..., and always K"),
    TraceField(TRAJECTORY, "rel_distance", ("L", "M", "S"), _F8, "1",
               "||O_m - O*||_F / ||O*||_F of rank m's snapshot (sync: its Zbar), O* the "
               "layer's exact solution; NaN without the check; the last equals "
               "/layers/rel_distance"),
)


#: The attributes of ``/trace`` (``RunLog.trace_attrs``): name -> description.
TRACE_ATTRIBUTES: dict[str, str] = {
    "recorded": "bool: whether the per-activation datasets were recorded (False: none, "
                "see why)",
    "why": "str: why not (--trace-limit, or central mode), '' when recorded",
    "phases": "list of str: the phase order of phase_*: features, penalty, parity_wait, factor",
    "origin": "str: the time origin, 'perf_counter after the start barrier' (each rank's own)",
    "bytes_per_message": "int: Q max(d_l) 8, the largest Z put / collective payload",
    "max_lead": "int: the async bounded delay --max-lead (-1: unbounded)",
    "mix_rounds": "int: sync-graph mixing rounds per iteration (-1 in other modes)",
    "snapshot_every": "int: s, the activations between trajectory snapshots",
}


def trace_fields(group: str) -> dict[str, TraceField]:
    """The datasets of ``group`` (``"trace"`` or ``"trajectory"``) by name."""
    return {f.name: f for f in TRACE_SCHEMA if f.group == group}


def trace_markdown_table(group: str) -> str:
    """The ``/trace`` or ``/trajectory`` table of ``docs/RUNLOG.md``, from :data:`TRACE_SCHEMA`."""
    lines = ["| dataset | shape | dtype | units | meaning |", "|---|---|---|---|---|"]
    for f in trace_fields(group).values():
        text = f.description.replace("|", "\\|")
        shape = ", ".join(f.shape) + ("," if len(f.shape) == 1 else "")
        lines.append(f"| `{f.name}` | ({shape}) | {f.dtype.name} | {f.unit} | {text} |")
    return "\n".join(lines)


def trace_attributes_table() -> str:
    """The table of ``/trace`` attributes in ``docs/RUNLOG.md``, from :data:`TRACE_ATTRIBUTES`."""
    lines = ["| attribute | meaning |", "|---|---|"]
    lines += [f"| `{name}` | {text} |" for name, text in TRACE_ATTRIBUTES.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
    for group in (TRACE, TRAJECTORY):
        print(f"\n{group}:\n{trace_markdown_table(group)}")
    print(f"\ntrace attributes:\n{trace_attributes_table()}")
