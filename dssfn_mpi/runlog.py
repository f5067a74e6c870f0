"""The HDF5 run log: a stable, documented record of one training run.

During training, rank 0 gathers the per-(layer, rank) numbers and calls
:func:`write_runlog` after every ``log_every``-th completed layer (``--log-every
N``, default 1: after every layer; 0: only at the end), whether or not the
equivalence check runs, and once more at the end. Every write replaces the
target atomically, so the file on disk is always a complete, valid log of the
layers done so far (``complete = False`` until the last write).

The schema is public and versioned; ``docs/RUNLOG.md`` describes it and
:mod:`dssfn_mpi.schema` defines the per-layer fields. Additive changes keep
:data:`SCHEMA_VERSION`; renames and removals bump it.

The summary table printed by ``dssfn-mpi report`` is :mod:`dssfn_mpi.report`.

The run log observes and never steers: nothing here talks to MPI, and
``mpi4py`` is only consulted (never imported) for its version strings.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Union

import h5py
import numpy as np

from .errors import UserError
from .fileio import atomic_write
from .schema import LAYER_FIELDS, LAYER_UNITS, TRACE, TRAJECTORY, trace_fields

__all__ = [
    "ATTRIBUTES",
    "DIMENSIONS",
    "LAYER_FIELDS",
    "LAYER_UNITS",
    "RANK_FIELDS",
    "SCHEMA_VERSION",
    "RunLog",
    "append_run",
    "check_output_path",
    "is_sweep",
    "label_axes",
    "read_runlog",
    "read_sweep",
    "software_versions",
    "utc_now",
    "write_runlog",
]

PathLike = Union[str, "os.PathLike[str]"]

SCHEMA_VERSION = 1

_F8 = np.dtype(np.float64)
_I8 = np.dtype(np.int64)

# The /layers fields (name, dtype, unit, description, who fills them) are
# defined once, in dssfn_mpi.schema; these are its derived tables:
# LAYER_FIELDS is name -> (dtype, description), LAYER_UNITS name -> unit. Each
# dataset has shape (layers_done, M); row l is layer l, column m is rank m.

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
    "degree": (_INT, -1, "degree parameter of the topology (-1: not applicable)"),
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
                         "else 'off (why)': the async update and seqlock ran in numpy/Python"),
    # What training measured about MPI at start-up (dssfn_mpi.doctor.mpi_facts).
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
    "complete": (_BOOL, False, "True once every layer is done and the run ended normally"),
    "layers_done": (_INT, 0, "rows in each /layers dataset (set by the writer)"),
}

_SOFTWARE = ("python", "numpy", "scipy", "h5py", "hdf5", "mpi4py", "mpi_library", "numba")

#: Names of the axes of the run's datasets, stored as HDF5 dimension scales
#: (datasets ``layer``, ``rank``, ``neighbor`` in the run's group, see
#: :func:`label_axes`): ``/layers/*`` are (layer, rank), 1-D ``/ranks/*`` (rank),
#: ``/ranks/neighbors`` (rank, neighbor).
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "layers": ("layer", "rank"),
    "ranks": ("rank",),
    "neighbors": ("rank", "neighbor"),
}

#: Dimension names of the /trace and /trajectory axes (the letters of
#: :attr:`dssfn_mpi.schema.TraceField.shape`).
_TRACE_AXES = {"L": "layer", "M": "rank", "K": "activation", "D": "neighbor", "P": "phase",
               "S": "snapshot"}

# --------------------------------------------------------------------------- helpers


def utc_now() -> str:
    """Return the current time as an ISO 8601 UTC string (second resolution).

    Returns
    -------
    str
        For example ``"2020-05-04T12:00:00+00:00"``.
    """
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def software_versions() -> dict[str, str]:
    """Versions of the software stack, as stored in the run log root attributes.

    ``mpi_library`` is filled only if ``mpi4py.MPI`` is already imported:
    importing it here would initialise MPI as a side effect.

    Returns
    -------
    dict of str to str
        Keys ``python``, ``numpy``, ``scipy``, ``h5py``, ``hdf5``, ``mpi4py``,
        ``mpi_library``, ``numba``; ``""`` for anything not available.
    """
    mpi_library = ""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        try:
            # Open MPI ends the string with a NUL, which HDF5 strings cannot hold.
            lines = str(mpi.Get_library_version()).replace("\x00", "").strip().splitlines()
            mpi_library = " ".join(lines[0].split()) if lines else ""  # MPICH pads with spaces
        except Exception:  # a broken MPI must not lose the run log
            mpi_library = ""
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": _dist_version("scipy"),
        "h5py": h5py.__version__,
        "hdf5": h5py.version.hdf5_version,
        "mpi4py": _dist_version("mpi4py"),
        "mpi_library": mpi_library,
        # The async edge form runs compiled loops when numba is installed (engines/kernels.py).
        "numba": _dist_version("numba"),
    }


def _json_default(obj: Any) -> Any:
    # Configurations carry numpy scalars and Paths; store them readably.
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    return str(obj)


def _to_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=_json_default)


def _open(path: PathLike, mode: str) -> h5py.File:
    # HDF5 file locking fails on some cluster file systems (NFS, Lustre).
    # Locks buy nothing here: writers never share a file (atomic replace).
    try:
        return h5py.File(path, mode, locking=False)
    except (TypeError, ValueError):  # h5py/HDF5 too old for the locking option
        return h5py.File(path, mode)


def _exists_message(path: PathLike) -> str:
    return f"{path} exists; pass --overwrite or choose another --out"


# --------------------------------------------------------------------------- validation


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _coerce_attr(name: str, value: Any) -> Any:
    """Check and convert one root attribute value; ValueError for a bad value."""
    if name in ATTRIBUTES:
        kind = ATTRIBUTES[name][0]
        if kind == _STR:
            if not isinstance(value, str):
                raise ValueError(f"attribute {name!r} must be a str, got {type(value).__name__}")
            return str(value)
        if kind == _INT:
            if not _is_int(value):
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
            return _to_json(value)
        if kind == _INTS:
            arr = np.asarray(value)
            if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
                raise ValueError(f"attribute {name!r} must be a 1-D int array, got {value!r}")
            return arr.astype(np.int64)
        raise AssertionError(kind)  # pragma: no cover - table is static
    return _coerce_free_attr(name, value)


def _coerce_free_attr(name: str, value: Any) -> Any:
    """Convert an undocumented attribute: str/int/float/bool/list/1-D array/dict."""
    if isinstance(value, dict):
        return _to_json(value)
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


def _as_layer_array(name: str, value: Any) -> np.ndarray:
    dtype = LAYER_FIELDS[name][0]
    arr = np.asarray(value)
    if arr.ndim != 2:
        raise ValueError(f"layer field {name!r} must be 2-D (layers, ranks), got {arr.shape}")
    if dtype == _I8:
        if arr.dtype.kind == "f":
            # Accept integral floats (e.g. counters summed as floats) but not NaN or fractions.
            if not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
                raise ValueError(f"layer field {name!r} is an integer field; got non-integers")
        elif arr.size and arr.dtype.kind not in "biu":
            raise ValueError(f"layer field {name!r} must be integer, got {arr.dtype}")
        return arr.astype(np.int64)
    if arr.size and arr.dtype.kind not in "biuf":
        raise ValueError(f"layer field {name!r} must be numeric, got {arr.dtype}")
    return arr.astype(np.float64)


def _pad_neighbors(value: Any, m: int) -> np.ndarray:
    if isinstance(value, np.ndarray) and value.ndim == 2:
        arr = value
    else:
        rows = [np.asarray(r, dtype=np.int64).ravel() for r in value]
        width = max((r.size for r in rows), default=0)
        arr = np.full((len(rows), width), -1, dtype=np.int64)
        for i, r in enumerate(rows):
            arr[i, : r.size] = r
    if arr.shape[0] != m:
        raise ValueError(f"ranks field 'neighbors' has {arr.shape[0]} rows, expected M={m}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError("ranks field 'neighbors' must be integer")
    return arr.astype(np.int64)


def _as_rank_array(name: str, value: Any, m: int) -> np.ndarray:
    if name == "neighbors":
        return _pad_neighbors(value, m)
    if name == "hostname":
        arr = np.asarray([str(v) for v in value], dtype=object)
    else:
        arr = np.asarray(value)
        if arr.dtype.kind in "US":
            arr = arr.astype(str).astype(object)
        elif arr.dtype.kind not in "biuf":
            raise ValueError(f"ranks field {name!r}: unsupported dtype {arr.dtype}")
        elif name in RANK_FIELDS:
            if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
                raise ValueError(f"ranks field {name!r} must be integer")
            arr = arr.astype(np.int64)
    if arr.ndim < 1 or arr.shape[0] != m:
        raise ValueError(f"ranks field {name!r} must have length M={m}, got shape {arr.shape}")
    return arr


def _as_extra_array(name: str, value: Any) -> np.ndarray:
    if isinstance(value, str):
        return np.array(value, dtype=object)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return np.array(list(value), dtype=object)
    try:
        arr = np.asarray(value)
    except ValueError as exc:  # ragged nested lists
        raise ValueError(f"extra {name!r} is not a rectangular array: {exc}") from None
    if arr.dtype.kind in "US":
        return arr.astype(str).astype(object)
    if arr.dtype.kind not in "biufc":
        raise ValueError(f"extra {name!r}: unsupported dtype {arr.dtype}")
    return arr


def _check_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{kind} name {name!r} is not a valid HDF5 object name")
    return name


def _check_axes(group: str, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> str | None:
    """Why the datasets of ``group`` disagree with the schema's shapes (None: they agree).

    ``sizes`` holds the known axis lengths (L, M) and learns the others (K, D, ...).
    """
    fields = trace_fields(group)
    for name, arr in arrays.items():
        if name not in fields:
            return f"unknown {group} dataset {name!r}; known: {sorted(fields)}"
        axes = fields[name].shape
        if arr.ndim != len(axes):
            return f"/{group}/{name} has shape {arr.shape}, expected ({', '.join(axes)})"
        for axis, n in zip(axes, arr.shape):
            if sizes.setdefault(axis, n) != n:
                return (f"/{group}/{name} has {n} along {axis}, expected {sizes[axis]} "
                        f"(shape {arr.shape})")
    return None


def _prepare_timing(trace: dict[str, Any] | None, trajectory: dict[str, Any] | None,
                    attrs: dict[str, Any] | None, rows: int,
                    m: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, Any]]:
    """Check and convert the trace groups (``/trace``, ``/trajectory``, the attributes of
    ``/trace``); ValueError for a caller's bug."""
    out_attrs = {_check_name("trace attribute", k): _coerce_free_attr(k, v)
                 for k, v in (attrs or {}).items()}
    out_trace: dict[str, np.ndarray] = {}
    out_trajectory: dict[str, np.ndarray] = {}
    for group, given, into in ((TRACE, trace, out_trace), (TRAJECTORY, trajectory,
                                                          out_trajectory)):
        fields = trace_fields(group)
        for name, value in (given or {}).items():
            arr = np.asarray(value)
            dtype = fields[name].dtype if name in fields else arr.dtype
            if arr.size and arr.dtype.kind not in "biuf":
                raise ValueError(f"{group} dataset {name!r} must be numeric, got {arr.dtype}")
            into[name] = arr.astype(dtype)
        problem = _check_axes(group, into, {"L": rows, "M": m})
        if problem is not None:
            raise ValueError(problem)
    return out_trace, out_trajectory, out_attrs


def _prepare(
    attrs: dict[str, Any],
    layers: dict[str, Any],
    ranks: dict[str, Any] | None,
    extra: dict[str, Any] | None,
    trace: dict[str, Any] | None = None,
    trajectory: dict[str, Any] | None = None,
    trace_attrs: dict[str, Any] | None = None,
) -> RunLog:
    """Validate and normalise everything before any file is touched: the run as written."""
    arrays, rows, m = _layer_arrays(attrs, layers)
    out_layers = _complete_layers(arrays, rows, m)
    out_attrs, ranks = _root_attrs(attrs, dict(ranks or {}), rows, m)
    out_ranks = _rank_arrays(ranks, m)
    out_extra = {
        _check_name("extra", name): _as_extra_array(name, value)
        for name, value in (extra or {}).items()
    }
    out_trace, out_trajectory, out_trace_attrs = _prepare_timing(trace, trajectory,
                                                                 trace_attrs, rows, m)
    return RunLog(attrs=out_attrs, layers=out_layers, ranks=out_ranks, extra=out_extra,
                  trace=out_trace, trajectory=out_trajectory, trace_attrs=out_trace_attrs)


def _layer_arrays(attrs: dict[str, Any],
                  layers: dict[str, Any]) -> tuple[dict[str, np.ndarray], int, int]:
    """The given layer fields as (L, M) arrays, with L and M checked against the attributes."""
    unknown = sorted(set(layers) - set(LAYER_FIELDS))
    if unknown:
        raise ValueError(f"unknown layer field(s) {unknown}; known: {sorted(LAYER_FIELDS)}")
    arrays = {name: _as_layer_array(name, value) for name, value in layers.items()}
    shapes = {a.shape for a in arrays.values()}
    if len(shapes) > 1:
        detail = {name: a.shape for name, a in arrays.items()}
        raise ValueError(f"layer fields have different shapes: {detail}")

    nodes = attrs.get("nodes")
    if shapes:
        rows, m = shapes.pop()
    else:  # no layer yet: the shape must come from the attributes
        if not _is_int(nodes) or nodes < 1:
            raise ValueError("without layer arrays, attrs['nodes'] must give M")
        rows, m = int(attrs.get("layers_done") or 0), int(nodes)
    if nodes is not None and _is_int(nodes) and int(nodes) != m:
        raise ValueError(f"attrs['nodes'] = {nodes} but the layer arrays have {m} columns")
    given_rows = attrs.get("layers_done")
    if given_rows is not None and given_rows != rows:
        raise ValueError(f"attrs['layers_done'] = {given_rows} but the arrays have {rows} rows")
    if attrs.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise ValueError(f"attrs['schema_version'] must be {SCHEMA_VERSION} (set by the writer)")
    if attrs.get("kind", "run") != "run":
        raise ValueError("attrs['kind'] is set by the writer and must be 'run'")
    return arrays, rows, m


def _complete_layers(arrays: dict[str, np.ndarray], rows: int,
                     m: int) -> dict[str, np.ndarray]:
    """Every schema field; the ones not given filled with NaN ("not measured") or -1."""
    out_layers: dict[str, np.ndarray] = {}
    for name, (dtype, _desc) in LAYER_FIELDS.items():
        if name in arrays:
            out_layers[name] = arrays[name]
        else:
            fill = -1 if dtype == _I8 else np.nan
            out_layers[name] = np.full((rows, m), fill, dtype=dtype)
    return out_layers


def _root_attrs(attrs: dict[str, Any], ranks: dict[str, Any], rows: int,
                m: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The root attributes, completed, and ``ranks`` completed from them (and back)."""
    out_attrs: dict[str, Any] = {}
    for name, value in attrs.items():
        _check_name("attribute", name)
        if value is None:  # None means "not known": documented defaults apply
            continue
        out_attrs[name] = _coerce_attr(name, value)
    for name, value in software_versions().items():
        out_attrs.setdefault(name, value)

    # The per-rank datasets and the root attributes describe the same facts; fill
    # one from the other so either route gives a complete file.
    if "shard_size" not in ranks and "shard_sizes" in out_attrs:
        if len(out_attrs["shard_sizes"]) == m:
            ranks["shard_size"] = out_attrs["shard_sizes"]
    if "shard_sizes" not in out_attrs and "shard_size" in ranks:
        out_attrs["shard_sizes"] = _as_rank_array("shard_size", ranks["shard_size"], m)
    if "hostname" not in ranks and "hostnames" in out_attrs:
        hosts = json.loads(out_attrs["hostnames"])
        if isinstance(hosts, list) and len(hosts) == m:
            ranks["hostname"] = hosts
    if "hostnames" not in out_attrs and "hostname" in ranks:
        out_attrs["hostnames"] = _to_json([str(h) for h in ranks["hostname"]])

    for name, (_kind, default, _desc) in ATTRIBUTES.items():
        if name not in out_attrs:
            out_attrs[name] = np.zeros(0, dtype=np.int64) if name == "shard_sizes" else default
    out_attrs["schema_version"] = SCHEMA_VERSION
    out_attrs["kind"] = "run"
    out_attrs["nodes"] = m
    out_attrs["layers_done"] = rows
    out_attrs["write_time"] = utc_now()
    return out_attrs, ranks


def _rank_arrays(ranks: dict[str, Any], m: int) -> dict[str, np.ndarray]:
    """The per-rank datasets, each of length M; the schema's missing ones as "unknown"."""
    out_ranks: dict[str, np.ndarray] = {}
    for name, value in ranks.items():
        out_ranks[_check_name("ranks field", name)] = _as_rank_array(name, value, m)
    for name in RANK_FIELDS:
        if name not in out_ranks:
            if name == "hostname":
                out_ranks[name] = np.array([""] * m, dtype=object)
            elif name == "neighbors":
                out_ranks[name] = np.full((m, 0), -1, dtype=np.int64)
            else:
                out_ranks[name] = np.full(m, -1, dtype=np.int64)
    return out_ranks


# --------------------------------------------------------------------------- writing


def _write_dataset(group: h5py.Group, name: str, data: np.ndarray) -> h5py.Dataset:
    if data.dtype == object:
        return group.create_dataset(name, data=data, dtype=h5py.string_dtype())
    return group.create_dataset(name, data=data)


def label_axes(
    dataset: h5py.Dataset, names: Sequence[str], root: h5py.Group | None = None
) -> None:
    """Name the axes of ``dataset`` with HDF5 dimension scales (netCDF-4 dimensions).

    Axis ``i`` gets the scale dataset ``root/names[i]``, holding ``0, 1, ...``
    (an index: layer number, rank, neighbour slot), created by the first
    dataset of the run that uses that name and shared by all later ones, so
    xarray (``engine="h5netcdf"``), netCDF tools and HDFView show named axes;
    in h5py, ``dataset.dims[i].keys()`` is ``[names[i]]``. No
    ``dims[i].label`` is set: xarray would show it as a stray attribute.

    Parameters
    ----------
    dataset
        A dataset of a run (e.g. ``/layers/test_accuracy``).
    names
        One dimension name per axis, e.g. ``("layer", "rank")``; the names
        of :data:`DIMENSIONS` or new ones.
    root
        The run's group, where the scales live (the file's root for a run
        log, ``/runs/<name>`` in a sweep file). Default: the group above the
        dataset's group, which is the run's group for ``/layers/x`` and
        ``/ranks/x``.

    Raises
    ------
    ValueError
        ``names`` does not give one name per axis, or a scale of that name
        exists with another length (two axes of one name must agree): a
        bug in the writer.
    """
    if len(names) != dataset.ndim:
        raise ValueError(f"{dataset.name}: {dataset.ndim} axes but dimension names {names}")
    if root is None:
        root = dataset.parent.parent
    for axis, name in enumerate(names):
        length = dataset.shape[axis]
        scale = root.get(name)
        if scale is None:
            scale = root.create_dataset(name, data=np.arange(length, dtype=np.int64))
            scale.make_scale(name)
        elif not isinstance(scale, h5py.Dataset) or not scale.is_scale:
            raise ValueError(f"{root.name}/{name} exists and is not a dimension scale")
        elif scale.shape != (length,):
            raise ValueError(
                f"{dataset.name}: axis {axis} ({name}) has length {length}, "
                f"but the scale {scale.name} has {scale.shape[0]}"
            )
        dataset.dims[axis].attach_scale(scale)


def _rank_axes(name: str, data: np.ndarray) -> tuple[str, ...]:
    """Dimension names of a /ranks dataset; () for a free-form one of more axes."""
    axes = DIMENSIONS["neighbors"] if name == "neighbors" else DIMENSIONS["ranks"]
    return axes if data.ndim == len(axes) else ()


def _write_run(group: h5py.Group, prep: RunLog) -> None:
    """Write one run's layout (attributes, /layers, /ranks, /extra) into ``group``."""
    for name, value in prep.attrs.items():
        group.attrs[name] = value
    g_layers = group.create_group("layers")
    for name, data in prep.layers.items():
        ds = _write_dataset(g_layers, name, data)
        ds.attrs["units"] = LAYER_UNITS[name]
        ds.attrs["description"] = LAYER_FIELDS[name][1]
        label_axes(ds, DIMENSIONS["layers"], group)
    g_ranks = group.create_group("ranks")
    for name, data in prep.ranks.items():
        ds = _write_dataset(g_ranks, name, data)
        if name in RANK_FIELDS:
            ds.attrs["description"] = RANK_FIELDS[name][1]
        axes = _rank_axes(name, data)
        if axes:
            label_axes(ds, axes, group)
    g_extra = group.create_group("extra")
    for name, data in prep.extra.items():
        _write_dataset(g_extra, name, data)
    for name, data, attrs in ((TRACE, prep.trace, prep.trace_attrs),
                              (TRAJECTORY, prep.trajectory, {})):
        if not (data or attrs):
            continue
        sub = group.create_group(name)
        for key, value in attrs.items():
            sub.attrs[key] = value
        fields = trace_fields(name)
        for key, arr in data.items():
            ds = sub.create_dataset(key, data=arr)
            ds.attrs["units"] = fields[key].unit
            ds.attrs["description"] = fields[key].description
            try:
                label_axes(ds, [_TRACE_AXES[a] for a in fields[key].shape], group)
            except ValueError:  # e.g. versions of a 1-rank run: no neighbour axis to share
                pass


def write_runlog(
    path: PathLike,
    attrs: dict[str, Any],
    layers: dict[str, Any],
    ranks: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    overwrite: bool = True,
    *,
    trace: dict[str, Any] | None = None,
    trajectory: dict[str, Any] | None = None,
    trace_attrs: dict[str, Any] | None = None,
) -> None:
    """Write a complete run log atomically.

    Called by rank 0 every ``--log-every`` layers (default: after each one) and at
    the end of the run; each call rewrites the whole file from the arrays gathered
    so far. The data go to ``<name>.tmp-<pid>`` in the same directory, which is
    flushed, synced and then
    renamed onto ``path``: the target is always either the previous complete log
    or the new one. On any exception the temporary file is removed.

    Parameters
    ----------
    path
        Target file. Its directory must exist (see :func:`check_output_path`).
    attrs
        Root attributes. Documented names (see :data:`ATTRIBUTES`) are type
        checked; missing ones get their defaults; ``None`` values count as
        missing. Other names are stored as given (str, int, float, bool, list,
        1-D array; dicts as JSON strings). ``schema_version``, ``kind``,
        ``layers_done`` and ``write_time`` are set by the writer; software
        versions are filled in when absent.
    layers
        Field name -> array of shape ``(layers_done, M)``, a subset of
        :data:`LAYER_FIELDS`. Missing fields are written NaN-filled (float) or
        -1 (int). With no arrays at all, ``attrs['nodes']`` gives M and the
        log has zero rows (useful to validate attributes before layer 0).
    ranks
        Per-rank arrays of length M (``neighbors`` may be a ragged list of
        lists; it is padded with -1). Documented fields missing here are filled.
    extra
        Any other arrays (numeric of any shape, str or list of str).
    overwrite
        If False and ``path`` exists, raise :class:`UserError`. Training checks
        ``--overwrite`` once up front and then rewrites its own file each layer.
    trace, trajectory
        The ``/trace`` and ``/trajectory`` datasets, named and shaped as in
        :data:`dssfn_mpi.schema.TRACE_SCHEMA` (L = ``layers_done``, M ranks);
        a group is written when it has datasets or attributes.
    trace_attrs
        Attributes of ``/trace`` (:data:`dssfn_mpi.schema.TRACE_ATTRIBUTES`).

    Raises
    ------
    ValueError
        Unknown layer field, inconsistent shapes or a badly typed attribute:
        a bug in the caller, not a user error.
    UserError
        ``path`` exists and ``overwrite`` is False, or it cannot be written.
    """
    target = Path(path)
    prep = _prepare(attrs, layers, ranks, extra, trace, trajectory, trace_attrs)  # check first
    check_output_path(target, overwrite)

    def write(tmp: Path) -> None:
        with _open(tmp, "w") as f:
            _write_run(f, prep)

    atomic_write(target, write)


def check_output_path(path: PathLike, overwrite: bool) -> None:
    """Check that a run log can be written at ``path``, without creating anything.

    Parameters
    ----------
    path
        The intended output file.
    overwrite
        Whether an existing file may be replaced.

    Raises
    ------
    UserError
        The directory does not exist or is not a directory, is not writable,
        ``path`` is a directory, or ``path`` exists and ``overwrite`` is False.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UserError(f"{target} is a directory; give a file name for --out")
    if not parent.exists():
        raise UserError(f"directory {parent} does not exist; create it or choose another --out")
    if not parent.is_dir():
        raise UserError(f"{parent} is not a directory; choose another --out")
    # os.access also reports read-only file systems (EROFS), even for root.
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"directory {parent} is not writable; choose another --out")
    if (target.exists() or target.is_symlink()) and not overwrite:
        raise UserError(_exists_message(target))


# --------------------------------------------------------------------------- reading


@dataclass
class RunLog:
    """The record of one run: what ``train`` and ``simulate`` write, and what reading a
    run log (or one run of a sweep file) gives back.

    Training (:mod:`dssfn_mpi.observers`) and the simulator
    (:mod:`dssfn_mpi.sim.layerloop`) build one and :meth:`write` it; the writer
    checks and completes it (:func:`write_runlog`) into the form :func:`read_runlog`
    returns.

    Attributes
    ----------
    attrs
        Root attributes as Python values (str, int, float, bool) or numpy
        arrays; string arrays become lists of str.
    layers
        Field name -> array of shape ``(layers_done, M)`` (float64 or int64).
    ranks
        Per-rank arrays (first axis M); strings as ``numpy.str_`` arrays.
    extra
        Anything else the writer stored.
    source
        Where it was read from (file, or ``file:/runs/<name>``).
    trace, trajectory
        The ``/trace`` and ``/trajectory`` datasets (empty when the file has none).
    trace_attrs
        The attributes of ``/trace`` and ``/trajectory`` (empty when absent).
    """

    attrs: dict[str, Any]
    layers: dict[str, np.ndarray]
    ranks: dict[str, np.ndarray] = field(default_factory=dict)
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = ""
    trace: dict[str, np.ndarray] = field(default_factory=dict)
    trajectory: dict[str, np.ndarray] = field(default_factory=dict)
    trace_attrs: dict[str, Any] = field(default_factory=dict)

    def write(self, path: PathLike, overwrite: bool = True) -> None:
        """Write this run as the run log ``path``, atomically (:func:`write_runlog`)."""
        write_runlog(path, self.attrs, self.layers, self.ranks, self.extra, overwrite,
                     trace=self.trace, trajectory=self.trajectory,
                     trace_attrs=self.trace_attrs)

    @property
    def nodes(self) -> int:
        """M, the number of ranks."""
        return int(self.attrs["nodes"])

    @property
    def layers_done(self) -> int:
        """Rows in each layer dataset."""
        return int(self.attrs["layers_done"])

    @property
    def complete(self) -> bool:
        """Whether the run finished."""
        return bool(self.attrs.get("complete", False))

    @property
    def config(self) -> dict[str, Any]:
        """The full configuration, parsed from its JSON attribute."""
        return json.loads(self.attrs.get("config", "{}") or "{}")

    @property
    def hostnames(self) -> list[str]:
        """Host of each rank, parsed from its JSON attribute."""
        return json.loads(self.attrs.get("hostnames", "[]") or "[]")


def _attr_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and value.dtype.kind in "OSU":
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in value]
    return value


def _read_dataset(ds: h5py.Dataset) -> np.ndarray:
    if h5py.check_string_dtype(ds.dtype) is not None:
        return np.asarray(ds.asstr()[()], dtype=str)
    return np.asarray(ds[()])


def _read_run(group: h5py.Group, source: str) -> RunLog:
    attrs = {name: _attr_value(value) for name, value in group.attrs.items()}
    _check_version(attrs, source)
    if not isinstance(group.get("layers"), h5py.Group):
        raise UserError(f"{source} has no /layers group; it is damaged or not a dssfn_mpi run log")
    layers = _read_datasets(group, "layers")
    rows = int(attrs.get("layers_done", 0))
    m = int(attrs.get("nodes", 0))
    for name, arr in layers.items():
        if arr.shape != (rows, m):
            raise UserError(
                f"{source}: /layers/{name} has shape {arr.shape}, expected ({rows}, {m}); "
                "the file is damaged"
            )
    for name, (dtype, _desc) in LAYER_FIELDS.items():
        # Files from an older writer of the same version may lack newer fields.
        layers.setdefault(name, np.full((rows, m), -1 if dtype == _I8 else np.nan, dtype=dtype))

    trace, trajectory = _read_datasets(group, TRACE), _read_datasets(group, TRAJECTORY)
    trace_attrs: dict[str, Any] = {}
    for name in (TRACE, TRAJECTORY):
        if isinstance(group.get(name), h5py.Group):
            trace_attrs.update({k: _attr_value(v) for k, v in group[name].attrs.items()})
    for name, arrays in ((TRACE, trace), (TRAJECTORY, trajectory)):
        known = {k: v for k, v in arrays.items() if k in trace_fields(name)}  # ignore newer
        problem = _check_axes(name, known, {"L": rows, "M": m})
        if problem is not None:
            raise UserError(f"{source}: {problem}; the file is damaged")
    return RunLog(
        attrs=attrs,
        layers=layers,
        ranks=_read_datasets(group, "ranks"),
        extra=_read_datasets(group, "extra"),
        source=source,
        trace=trace,
        trajectory=trajectory,
        trace_attrs=trace_attrs,
    )


def _read_datasets(group: h5py.Group, name: str) -> dict[str, np.ndarray]:
    sub = group.get(name)
    if not isinstance(sub, h5py.Group):
        return {}
    # Dimension scales (label_axes) are axis names, not data.
    return {
        n: _read_dataset(d)
        for n, d in sub.items()
        if isinstance(d, h5py.Dataset) and not d.is_scale
    }


def _check_version(attrs: dict[str, Any], source: str) -> None:
    version = attrs.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UserError(f"{source} is not a dssfn_mpi run log (no schema_version attribute)")
    if version > SCHEMA_VERSION:
        raise UserError(
            f"{source} uses run log schema {version}, newer than this dssfn_mpi reads "
            f"({SCHEMA_VERSION}); upgrade dssfn_mpi"
        )
    if version < 1:
        raise UserError(f"{source} has invalid schema_version {version}")


def _open_for_reading(path: PathLike) -> h5py.File:
    p = Path(path)
    if not p.exists():
        raise UserError(f"run log {p} does not exist; check the path")
    if p.is_dir():
        raise UserError(f"{p} is a directory, not a run log file")
    try:
        is_hdf5 = h5py.is_hdf5(p)
    except OSError:
        is_hdf5 = False
    if not is_hdf5:
        raise UserError(f"{p} is not an HDF5 file; give a run log written by dssfn-mpi")
    try:
        return _open(p, "r")
    except OSError as exc:
        raise UserError(f"cannot open run log {p}: {exc}") from None


def read_runlog(path: PathLike) -> RunLog:
    """Read and validate a run log.

    Parameters
    ----------
    path
        A file written by :func:`write_runlog`.

    Returns
    -------
    RunLog
        Attributes, ``(layers_done, M)`` layer arrays (every field of
        :data:`LAYER_FIELDS` present), per-rank arrays and extras.

    Raises
    ------
    UserError
        Missing file, not HDF5, not a run log, a sweep file, a damaged file or
        a schema newer than :data:`SCHEMA_VERSION`.
    """
    with _open_for_reading(path) as f:
        if f.attrs.get("kind") == "sweep":
            raise UserError(f"{path} is a sweep file holding several runs; read it with read_sweep")
        return _read_run(f, str(path))


def read_sweep(path: PathLike) -> dict[str, RunLog]:
    """Read every run of a sweep file written by :func:`append_run`.

    Parameters
    ----------
    path
        The sweep file.

    Returns
    -------
    dict of str to RunLog
        Group name -> run, in the order the runs were appended.

    Raises
    ------
    UserError
        As for :func:`read_runlog`, or if the file is not a sweep file.
    """
    with _open_for_reading(path) as f:
        _check_sweep_root(f, str(path))
        runs = f["runs"]
        return {name: _read_run(runs[name], f"{path}:/runs/{name}") for name in runs}


def is_sweep(path: PathLike) -> bool:
    """Whether ``path`` is a sweep file (read it with :func:`read_sweep`).

    Parameters
    ----------
    path
        A run log or sweep file.

    Returns
    -------
    bool
        True for a sweep file, False for anything else HDF5 (a run log).

    Raises
    ------
    UserError
        As for :func:`read_runlog`: missing file, a directory, not HDF5.
    """
    with _open_for_reading(path) as f:
        return bool(f.attrs.get("kind") == "sweep")


def _check_sweep_root(f: h5py.File, source: str) -> None:
    attrs = {name: _attr_value(value) for name, value in f.attrs.items()}
    _check_version(attrs, source)
    if attrs.get("kind") != "sweep" or not isinstance(f.get("runs"), h5py.Group):
        raise UserError(f"{source} is not a sweep file; read a single run with read_runlog")


# --------------------------------------------------------------------------- sweeps


def append_run(
    path: PathLike,
    group_name: str,
    attrs: dict[str, Any],
    layers: dict[str, Any],
    ranks: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    *,
    trace: dict[str, Any] | None = None,
    trajectory: dict[str, Any] | None = None,
    trace_attrs: dict[str, Any] | None = None,
) -> None:
    """Add one run as ``/runs/<group_name>`` of a sweep file, atomically.

    The existing file (if any) is copied to ``<name>.tmp-<pid>``, the group is
    added to the copy and the copy replaces the original. Inside the group the
    layout is that of a run log (attributes, ``layers``, ``ranks``, ``extra``).
    Not safe for several processes appending to one file at the same time.

    Parameters
    ----------
    path
        The sweep file; created if it does not exist.
    group_name
        Name of the run inside ``/runs`` (no ``/``).
    attrs, layers, ranks, extra, trace, trajectory, trace_attrs
        As for :func:`write_runlog` (a read run passes ``run.trace``,
        ``run.trajectory`` and ``run.trace_attrs`` to keep its trace).

    Raises
    ------
    ValueError
        Invalid group name or run data (a bug in the caller).
    UserError
        The file is not a sweep file, is newer than this schema, already holds
        ``group_name``, or its directory cannot be written.
    """
    _check_name("run group", group_name)
    target = Path(path)
    prep = _prepare(attrs, layers, ranks, extra, trace, trajectory, trace_attrs)
    check_output_path(target, overwrite=True)
    exists = target.exists()
    if exists:
        with _open_for_reading(target) as f:
            _check_sweep_root(f, str(target))
            if group_name in f["runs"]:
                raise UserError(
                    f"{target} already holds run {group_name!r}; choose another output file"
                )

    def write(tmp: Path) -> None:
        if exists:
            shutil.copyfile(target, tmp)
        with _open(tmp, "a" if exists else "w") as f:
            if not exists:
                f.attrs["schema_version"] = SCHEMA_VERSION
                f.attrs["kind"] = "sweep"
                f.create_group("runs", track_order=True)  # keep append order
            f.attrs["write_time"] = utc_now()
            _write_run(f["runs"].create_group(group_name), prep)

    atomic_write(target, write)
