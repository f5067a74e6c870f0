"""The run log's schema beyond the per-layer fields: root attributes, ``/ranks``, axes.

:mod:`dssfn_mpi.runlog.schema` defines the per-(layer, rank) fields of ``/layers`` and the
``/trace`` and ``/trajectory`` datasets; this module defines the rest of the schema
``docs/RUNLOG.md`` describes, once: the schema version, the root attributes
(:data:`ATTRIBUTES`: kind, default, description, and how a value of each kind is
checked and stored, :func:`coerce_attr`), the per-rank datasets (:data:`RANK_FIELDS`),
the names of the datasets' axes (:data:`DIMENSIONS`) and the format of the time
attributes (:func:`utc_now`). :mod:`dssfn_mpi.runlog` reads and writes files by them.

Additive changes keep :data:`SCHEMA_VERSION`; renames and removals bump it.
"""

from __future__ import annotations

import json
import shlex
from datetime import datetime, timezone
from typing import Any

import h5py
import numpy as np

__all__ = [
    "ATTRIBUTES",
    "DIMENSIONS",
    "RANK_FIELDS",
    "SCHEMA_VERSION",
    "TRACE_AXES",
    "coerce_attr",
    "coerce_free_attr",
    "is_int",
    "to_json",
    "utc_now",
]

SCHEMA_VERSION = 1

_I8 = np.dtype(np.int64)

#: Documented per-rank datasets in ``/ranks``: name -> (dtype, description).
#: ``hostname`` is a variable-length UTF-8 string; ``neighbors`` is 2-D.
RANK_FIELDS: dict[str, tuple[np.dtype | str, str]] = {
    "hostname": ("str", "host the rank ran on"),
    "degree": (_I8, "number of graph neighbours of the rank"),
    "neighbors": (_I8, "neighbour ranks, shape (M, max degree), padded with -1"),
    "shard_size": (_I8, "number of training samples held by the rank"),
}

# Root attribute kinds: how a caller's value is checked and coerced.
_STR, _INT, _BOOL, _JSON, _INTS, _CMD = "str", "int", "bool", "json", "int array", "cmd"
_FLOAT = "float"

#: Documented root attributes: name -> (kind, default, description).
#: A missing attribute is written with its default so the schema is complete.
ATTRIBUTES: dict[str, tuple[str, Any, str]] = {
    "schema_version": (_INT, SCHEMA_VERSION, "version of this schema (set by the writer)"),
    "kind": (_STR, "run", "'run' for a run log (set by the writer); 'sweep' at a sweep root"),
    "mode": (_STR, "", "training mode, e.g. async, sync or central"),
    "update": (_STR, "", "the per-layer engine / update rule"),
    "dataset": (_STR, "", "dataset name"),
    "nodes": (_INT, -1, "M, number of MPI ranks = graph nodes"),
    "topology": (_STR, "", "communication graph name"),
    "degree": (_INT, -1, "the graph's largest node degree (a regular graph's degree)"),
    # The graph's facts (dssfn_mpi.graph.topology.Graph.facts).
    "graph_min_degree": (_INT, -1, "the graph's smallest node degree (= degree if regular)"),
    "graph_diameter": (_INT, -1, "the graph's diameter: its longest shortest path [hops]"),
    "graph_spectral_gap": (_FLOAT, float("nan"), "1 - the largest |eigenvalue| of the "
                           "graph's Metropolis mixing matrix besides its 1"),
    "graph_algebraic_connectivity": (_FLOAT, float("nan"), "second-smallest eigenvalue of "
                                     "the graph's Laplacian"),
    "layers": (_INT, -1, "L, index of the last layer; a complete run has L+1 rows"),
    "hidden": (_INT, -1, "n, hidden width of layers 1..L"),
    "iters": (_INT, -1, "solver iterations per layer"),
    "seed": (_INT, -1, "master random seed"),
    "config": (_JSON, "{}", "JSON string of the full configuration"),
    "command_line": (_CMD, "", "the command line that started the run"),
    "shard_sizes": (_INTS, None, "training samples per rank, int64 array of length M"),
    "python": (_STR, "", "Python version"),
    "numpy": (_STR, "", "numpy version"),
    "scipy": (_STR, "", "scipy version ('' if not installed)"),
    "h5py": (_STR, "", "h5py version"),
    "hdf5": (_STR, "", "HDF5 library version"),
    "mpi4py": (_STR, "", "mpi4py version ('' if not installed)"),
    "mpi_library": (_STR, "", "first line of MPI_Get_library_version ('' if MPI not loaded)"),
    "numba": (_STR, "", "numba version ('' if not installed: the async update ran in numpy)"),
    "compiled_kernels": (_STR, "", "'on (numba X)' if numba's compiled kernels were there, "
                         "else 'off (why)': the async update and seqlock ran in numpy/Python; "
                         "'n/a' for a mode that runs none (all but async, lockstep, hood, "
                         "hood-lockstep and hood-jacobi)"),
    # What training measured about MPI at start-up (dssfn_mpi.run.mpifacts.mpi_facts).
    "mpi_vendor": (_STR, "", "MPI vendor and version, as mpi4py reports it"),
    "mpi_standard": (_STR, "", "MPI standard version the library implements"),
    "mpi_osc": (_STR, "", "one-sided component: Open MPI's OMPI_MCA_osc, or the MPICH device"),
    "mpi_thread_level": (_STR, "", "thread level MPI provided, e.g. MPI_THREAD_FUNNELED"),
    "mpi_window_model": (_STR, "", "memory model of an MPI-allocated window: unified or separate"),
    "mpi_passive_put": (_STR, "", "passive-put check: 'passive', 'not passive', 'undecided' "
                        "(no attempt conclusive on a loaded machine), 'n/a' (1 rank)"),
    "mpi_passive_put_attempts": (_INT, 0, "checks the passive-put verdict took (longer target "
                                 "sleeps until one decides)"),
    "mpi_passive_put_seconds": (_FLOAT, float("nan"), "put + flush time in that check [s]"),
    "mpi_passive_put_error": (_STR, "", "MPI error of that check's window or put, or ''"),
    "mpi_passive_put_pair": (_STR, "", "the ranks (and hosts) of that check: origin -> target"),
    "rma_write_path": (_STR, "", "how async wrote into neighbours' windows (--rma): 'store' "
                       "(plain stores, shared window), 'put' (MPI_Put); '' for the other modes"),
    "placement": (_STR, "", "placement a Slurm template asked for (DSSFN_PLACEMENT), or ''"),
    "slurm_env": (_JSON, "{}", "JSON object of the SLURM_* placement variables set"),
    "cpu_affinity": (_JSON, "[]", "JSON list, per rank, of the CPUs it was allowed to run on"),
    "hostnames": (_JSON, "[]", "JSON list of the host of each rank (index = rank)"),
    "start_time": (_STR, "", "ISO 8601 UTC time the run started"),
    "end_time": (_STR, "", "ISO 8601 UTC time the run ended ('' while running)"),
    "write_time": (_STR, "", "ISO 8601 UTC time of this write (set by the writer)"),
    "git_revision": (_STR, "", "git commit of the code, or ''"),
    "wait_policy": (_STR, "", "how ranks waited for each other (--wait: spin, hybrid, auto)"),
    "wait_resolved": (_STR, "", "what the wait policy did on rank 0: spin, hybrid, or for "
                      "auto 'measured' (a long spin, or a 0.5 ms spin then sleeps, as the measured "
                      "foreign load says) and "
                      "the ranks and cores of its node"),
    # dssfn-mpi simulate (dssfn_mpi.sim): its run logs' times are simulated seconds.
    "simulated": (_BOOL, False, "True for a run log of dssfn-mpi simulate: its times are "
                  "simulated seconds, not measured"),
    "sim_speed": (_STR, "", "simulate: the speed model (--speed, --speeds, --slow, --jitter)"),
    "sim_network": (_STR, "", "simulate: the network model, its alpha and beta"),
    "sim_allreduce": (_STR, "", "simulate, sync: whose allreduce algorithm was costed"),
    "sim_schedule": (_STR, "", "simulate --schedule: the traced run re-executed, or ''"),
    "sim_total_seconds": (_FLOAT, float("nan"), "simulate: simulated end of the last layer "
                          "(the slowest node) [s]"),
    "sim_wall_seconds": (_FLOAT, float("nan"), "simulate: wall time of the simulation "
                         "itself [s]"),
    "sim_peak_rss_bytes": (_INT, -1, "simulate: peak resident memory of the simulating "
                           "process [bytes]"),
    "sim_cpu_seconds": (_FLOAT, float("nan"), "simulate: CPU time (user + system) of the "
                        "simulation itself [s]"),
    "sim_load_average": (_FLOAT, float("nan"), "simulate: the machine's 1-minute load average "
                         "at the layers' ends, their mean (what shared the cores)"),
    "complete": (_BOOL, False, "True once every layer is done and the run ended normally"),
    "layers_done": (_INT, 0, "rows in each /layers dataset (set by the writer)"),
}


#: Names of the axes of the run's datasets, stored as HDF5 dimension scales
#: (datasets ``layer``, ``rank``, ``neighbor`` in the run's group, see
#: :func:`dssfn_mpi.runlog.label_axes`): ``/layers/*`` are (layer, rank), 1-D ``/ranks/*`` (rank),
#: ``/ranks/neighbors`` (rank, neighbor).
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "layers": ("layer", "rank"),
    "ranks": ("rank",),
    "neighbors": ("rank", "neighbor"),
}

#: Dimension names of the /trace and /trajectory axes (the letters of
#: :attr:`dssfn_mpi.runlog.schema.TraceField.shape`).
TRACE_AXES = {"L": "layer", "M": "rank", "K": "activation", "D": "neighbor", "P": "phase",
              "S": "snapshot"}


def utc_now() -> str:
    """Return the current time as an ISO 8601 UTC string (second resolution).

    Returns
    -------
    str
        For example ``"2020-05-04T12:00:00+00:00"``.
    """
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _json_default(obj: Any) -> Any:
    # Configurations carry numpy scalars and Paths; store them readably.
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    return str(obj)


def to_json(value: Any) -> str:
    """A value as the JSON string a ``json`` attribute stores (keys sorted).

    Parameters
    ----------
    value
        Any JSON-able value; numpy scalars and arrays, sets and other objects
        (e.g. paths) are stored as numbers, lists and strings.

    Returns
    -------
    str
        The JSON text.
    """
    return json.dumps(value, sort_keys=True, default=_json_default)


def is_int(value: Any) -> bool:
    """Whether ``value`` is a Python or numpy integer (a bool is not)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def coerce_attr(name: str, value: Any) -> Any:
    """Check and convert one root attribute value to what the file stores.

    Parameters
    ----------
    name
        The attribute; a name of :data:`ATTRIBUTES` is checked against its kind,
        any other by :func:`coerce_free_attr`.
    value
        The caller's value.

    Returns
    -------
    Any
        The value as stored (str, int, float, bool, JSON text or int64 array).

    Raises
    ------
    ValueError
        A value of the wrong kind: a bug in the caller.
    """
    if name in ATTRIBUTES:
        kind = ATTRIBUTES[name][0]
        if kind == _STR:
            if not isinstance(value, str):
                raise ValueError(f"attribute {name!r} must be a str, got {type(value).__name__}")
            return str(value)
        if kind == _INT:
            if not is_int(value):
                raise ValueError(f"attribute {name!r} must be an int, got {value!r}")
            return int(value)
        if kind == _FLOAT:
            real = isinstance(value, (int, float, np.integer, np.floating))
            if not real or isinstance(value, (bool, np.bool_)):
                raise ValueError(f"attribute {name!r} must be a float, got {value!r}")
            return float(value)
        if kind == _BOOL:
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"attribute {name!r} must be a bool, got {value!r}")
            return bool(value)
        if kind == _CMD:
            if isinstance(value, (list, tuple)):
                return shlex.join(str(v) for v in value)
            if not isinstance(value, str):
                raise ValueError(f"attribute {name!r} must be a str or list of str")
            return value
        if kind == _JSON:
            if isinstance(value, str):
                try:
                    json.loads(value)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"attribute {name!r} is not valid JSON: {exc}") from None
                return value
            return to_json(value)
        if kind == _INTS:
            arr = np.asarray(value)
            if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
                raise ValueError(f"attribute {name!r} must be a 1-D int array, got {value!r}")
            return arr.astype(np.int64)
        raise AssertionError(kind)  # pragma: no cover - table is static
    return coerce_free_attr(name, value)


def coerce_free_attr(name: str, value: Any) -> Any:
    """Convert an undocumented attribute: str/int/float/bool/list/1-D array/dict.

    Parameters
    ----------
    name
        The attribute (for the error message).
    value
        The caller's value; a dict is stored as JSON text, a list of str as a
        string array.

    Returns
    -------
    Any
        The value as stored.

    Raises
    ------
    ValueError
        A type HDF5 attributes cannot hold here (a bug in the caller).
    """
    if isinstance(value, dict):
        return to_json(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bool, int, float, np.generic)):
        if isinstance(value, np.generic) and value.dtype.kind not in "biuf":
            raise ValueError(f"attribute {name!r}: unsupported numpy scalar {value!r}")
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(value) if not isinstance(value, np.ndarray) else None
        if items is not None and items and all(isinstance(v, str) for v in items):
            return np.array(items, dtype=h5py.string_dtype())
        arr = np.asarray(value) if items is None or items else np.zeros(0, dtype=np.float64)
        if arr.ndim != 1:
            raise ValueError(f"attribute {name!r} must be 1-D, got shape {arr.shape}")
        if arr.dtype.kind in "US":
            return arr.astype(str).astype(h5py.string_dtype())
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"attribute {name!r}: unsupported element type {arr.dtype}")
        return arr
    raise ValueError(
        f"attribute {name!r}: unsupported type {type(value).__name__} "
        "(use str, int, float, bool, list, 1-D array or dict)"
    )

