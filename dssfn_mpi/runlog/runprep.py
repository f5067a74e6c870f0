"""A run's record checked and completed before a byte is written.

:func:`prepare` turns a :class:`dssfn_mpi.runlog.RunLog` as a caller built it (root
attributes, ``/layers``, ``/ranks``, extras, trace groups) into the complete run as
the file will hold it (:meth:`dssfn_mpi.runlog.RunLog.checked`): every schema field
present (the missing ones as "not measured"), every attribute of its documented kind,
every shape agreeing.
A caller's mistake is a ``ValueError`` here, before any file is touched.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from .rootschema import (
    ATTRIBUTES,
    RANK_FIELDS,
    SCHEMA_VERSION,
    coerce_attr,
    coerce_free_attr,
    is_int,
    to_json,
    utc_now,
)
from .schema import LAYER_FIELDS, TRACE, TRAJECTORY, trace_fields
from .versions import software_versions

if TYPE_CHECKING:
    from . import RunLog

__all__ = ["check_axes", "check_name", "prepare"]

_I8 = np.dtype(np.int64)


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


def check_name(kind: str, name: Any) -> str:
    """``name`` if it can name an HDF5 object (a group, dataset or attribute).

    Raises
    ------
    ValueError
        Not a non-empty str, holds ``/``, or is ``.`` or ``..``: a bug in the caller.
    """
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{kind} name {name!r} is not a valid HDF5 object name")
    return name


def check_axes(group: str, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> str | None:
    """Why the datasets of ``group`` disagree with the schema's shapes (None: they agree).

    Parameters
    ----------
    group
        ``trace`` or ``trajectory`` (:func:`dssfn_mpi.runlog.schema.trace_fields`).
    arrays
        Its datasets by name.
    sizes
        The known axis lengths (L, M); it learns the others (K, D, ...).

    Returns
    -------
    str or None
        The first disagreement, in one line; None when every shape agrees.
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
    out_attrs = {check_name("trace attribute", k): coerce_free_attr(k, v)
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
        problem = check_axes(group, into, {"L": rows, "M": m})
        if problem is not None:
            raise ValueError(problem)
    return out_trace, out_trajectory, out_attrs


def prepare(run: RunLog) -> RunLog:
    """Validate and normalise a run before any file is touched: the run as written.

    Parameters
    ----------
    run : RunLog
        The run as its caller built it (:class:`dssfn_mpi.runlog.RunLog` says what
        each part may hold).

    Returns
    -------
    RunLog
        A copy of ``run`` (of its class, ``source`` and any fields of a subclass as
        they were) whose written parts are complete: every schema field, attribute
        and rank field present, each of its documented kind and shape.

    Raises
    ------
    ValueError
        Unknown layer field, inconsistent shapes or a badly typed attribute.
    """
    arrays, rows, m = _layer_arrays(run.attrs, run.layers)
    out_layers = _complete_layers(arrays, rows, m)
    out_attrs, ranks = _root_attrs(run.attrs, dict(run.ranks or {}), rows, m)
    out_ranks = _rank_arrays(ranks, m)
    out_extra = {
        check_name("extra", name): _as_extra_array(name, value)
        for name, value in (run.extra or {}).items()
    }
    out_trace, out_trajectory, out_trace_attrs = _prepare_timing(
        run.trace, run.trajectory, run.trace_attrs, rows, m)
    return dataclasses.replace(run, attrs=out_attrs, layers=out_layers, ranks=out_ranks,
                               extra=out_extra, trace=out_trace, trajectory=out_trajectory,
                               trace_attrs=out_trace_attrs)


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
        if not is_int(nodes) or nodes < 1:
            raise ValueError("without layer arrays, attrs['nodes'] must give M")
        rows, m = int(attrs.get("layers_done") or 0), int(nodes)
    if nodes is not None and is_int(nodes) and int(nodes) != m:
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
        check_name("attribute", name)
        if value is None:  # None means "not known": documented defaults apply
            continue
        out_attrs[name] = coerce_attr(name, value)
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
        out_attrs["hostnames"] = to_json([str(h) for h in ranks["hostname"]])

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
        out_ranks[check_name("ranks field", name)] = _as_rank_array(name, value, m)
    for name in RANK_FIELDS:
        if name not in out_ranks:
            if name == "hostname":
                out_ranks[name] = np.array([""] * m, dtype=object)
            elif name == "neighbors":
                out_ranks[name] = np.full((m, 0), -1, dtype=np.int64)
            else:
                out_ranks[name] = np.full(m, -1, dtype=np.int64)
    return out_ranks

