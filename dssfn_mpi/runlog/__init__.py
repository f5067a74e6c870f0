"""The HDF5 run log: a stable, documented record of one training run.

A run's record is a :class:`RunLog`, and it writes itself (:meth:`RunLog.write`,
:meth:`RunLog.append_to` into a sweep file); reading gives one back
(:func:`read_runlog`, :func:`read_sweep`). During training, rank 0 gathers the
per-(layer, rank) rows and writes the run after every ``log_every``-th completed
layer (``--log-every N``, default 1: after every layer; 0: only at the end),
whether or not the equivalence check runs, and once more at the end. Every write
replaces the target atomically, so the file on disk is always a complete, valid
log of the layers done so far (``complete = False`` until the last write).
:func:`write_runlog` and :func:`append_run` are the same writes from the parts of
a run, for callers that hold no :class:`RunLog` (tests, hand-made logs).

The schema is public and versioned; ``docs/RUNLOG.md`` describes it,
:mod:`dssfn_mpi.runlog.schema` defines the per-layer fields and
:mod:`dssfn_mpi.runlog.rootschema` the root attributes and per-rank datasets. Additive
changes keep :data:`SCHEMA_VERSION`; renames and removals bump it. What is
written is checked and completed first (:mod:`dssfn_mpi.runlog.runprep`); where it may
be written is :mod:`dssfn_mpi.runlog.outpath`, the software versions it records
:mod:`dssfn_mpi.runlog.versions`.

The summary table printed by ``dssfn-mpi report`` is :mod:`dssfn_mpi.analysis.report`.

The run log observes and never steers: nothing here talks to MPI.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..errors import UserError
from ..fileio import PathLike, atomic_write
from .outpath import check_output_path
from .rootschema import (
    ATTRIBUTES,
    DIMENSIONS,
    RANK_FIELDS,
    SCHEMA_VERSION,
    TRACE_AXES,
    utc_now,
)
from .runprep import check_axes, check_name, prepare
from .schema import LAYER_FIELDS, LAYER_UNITS, TRACE, TRAJECTORY, trace_fields
from .versions import software_versions

# The schema's names (rootschema, schema), the path policy and the versions are
# re-exported: callers read the whole run log interface from here.
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

_I8 = np.dtype(np.int64)


def _open(path: PathLike, mode: str) -> h5py.File:
    # HDF5 file locking fails on some cluster file systems (NFS, Lustre).
    # Locks buy nothing here: writers never share a file (atomic replace).
    try:
        return h5py.File(path, mode, locking=False)
    except (TypeError, ValueError):  # h5py/HDF5 too old for the locking option
        return h5py.File(path, mode)



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
    """Write one checked run's layout (attributes, /layers, /ranks, /extra, the trace
    groups) into ``group``."""
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
                label_axes(ds, [TRACE_AXES[a] for a in fields[key].shape], group)
            except ValueError:  # e.g. versions of a 1-rank run: no neighbour axis to share
                pass


# --------------------------------------------------------------------------- the record


@dataclass
class RunLog:
    """The record of one run: what ``train`` and ``simulate`` write, and what reading a
    run log (or one run of a sweep file) gives back.

    Training (:meth:`dssfn_mpi.run.runstate.RunState.record`) and the simulator
    (:mod:`dssfn_mpi.sim.layerloop`) build one and :meth:`write` it; :meth:`checked`
    gives it as the file holds it, the form :func:`read_runlog` returns. Only the
    parts written go through the checks: ``source`` and the fields of a subclass
    (:class:`~dssfn_mpi.sim.layerloop.SimResult`'s solutions) are the caller's.

    Attributes
    ----------
    attrs
        Root attributes. Documented names (:data:`ATTRIBUTES`) are type checked;
        missing ones get their defaults; ``None`` values count as missing. Other
        names are stored as given (str, int, float, bool, list, 1-D array; dicts as
        JSON strings). ``schema_version``, ``kind``, ``layers_done`` and
        ``write_time`` are set by the writer; software versions are filled in when
        absent. Read back as Python values or numpy arrays (string arrays as lists
        of str).
    layers
        Field name -> array of shape ``(layers_done, M)``, a subset of
        :data:`LAYER_FIELDS` (written: every field, the missing ones NaN-filled
        (float) or -1 (int); with no arrays at all, ``attrs['nodes']`` gives M and the
        log has zero rows).
    ranks
        Per-rank arrays (first axis M; ``neighbors`` may be a ragged list of lists,
        padded with -1); documented fields missing here are filled. Strings read back
        as ``numpy.str_`` arrays.
    extra
        Any other arrays (numeric of any shape, str or list of str).
    source
        Where it was read from (file, or ``file:/runs/<name>``).
    trace, trajectory
        The ``/trace`` and ``/trajectory`` datasets, named and shaped as in
        :data:`dssfn_mpi.runlog.schema.TRACE_SCHEMA` (L = ``layers_done``, M ranks); a
        group is written when it has datasets or attributes (empty when the file has
        none).
    trace_attrs
        The attributes of ``/trace`` (:data:`dssfn_mpi.runlog.schema.TRACE_ATTRIBUTES`;
        read back with those of ``/trajectory``; empty when absent).
    """

    attrs: dict[str, Any]
    layers: dict[str, np.ndarray]
    ranks: dict[str, np.ndarray] = field(default_factory=dict)
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = ""
    trace: dict[str, np.ndarray] = field(default_factory=dict)
    trajectory: dict[str, np.ndarray] = field(default_factory=dict)
    trace_attrs: dict[str, Any] = field(default_factory=dict)

    def checked(self) -> RunLog:
        """This run as its file will hold it: checked and completed
        (:func:`dssfn_mpi.runlog.runprep.prepare`).

        Raises
        ------
        ValueError
            Unknown layer field, inconsistent shapes or a badly typed attribute: a bug
            in the caller, not a user error.
        """
        return prepare(self)

    def write(self, path: PathLike, overwrite: bool = True) -> None:
        """Write this run as the run log ``path``, atomically.

        Training writes its run every ``--log-every`` layers (default: after each one)
        and at the end, each time the whole file from the rows gathered so far. The
        data go to ``<name>.tmp-<pid>`` in the same directory, which is flushed,
        synced and then renamed onto ``path``: the target is always either the
        previous complete log or the new one. On any exception the temporary file is
        removed.

        Parameters
        ----------
        path
            Target file. Its directory must exist (see :func:`check_output_path`).
        overwrite
            If False and ``path`` exists, raise :class:`UserError`. Training checks
            ``--overwrite`` once up front and then rewrites its own file each layer.

        Raises
        ------
        ValueError
            As for :meth:`checked`; no file is touched.
        UserError
            ``path`` exists and ``overwrite`` is False, or it cannot be written.
        """
        target = Path(path)
        prep = self.checked()  # first: a caller's mistake leaves no file behind
        check_output_path(target, overwrite)

        def write(tmp: Path) -> None:
            with _open(tmp, "w") as f:
                _write_run(f, prep)

        atomic_write(target, write)

    def append_to(self, path: PathLike, group_name: str) -> None:
        """Add this run as ``/runs/<group_name>`` of a sweep file, atomically.

        The existing file (if any) is copied to ``<name>.tmp-<pid>``, the group is
        added to the copy and the copy replaces the original. Inside the group the
        layout is that of a run log (attributes, ``layers``, ``ranks``, ``extra``,
        the trace groups). Not safe for several processes appending to one file at
        the same time.

        Parameters
        ----------
        path
            The sweep file; created if it does not exist.
        group_name
            Name of the run inside ``/runs`` (no ``/``).

        Raises
        ------
        ValueError
            Invalid group name or run data (a bug in the caller).
        UserError
            The file is not a sweep file, is newer than this schema, already holds
            ``group_name``, or its directory cannot be written.
        """
        check_name("run group", group_name)
        target = Path(path)
        prep = self.checked()
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


# --------------------------------------------------------------------------- reading


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
        problem = check_axes(name, known, {"L": rows, "M": m})
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
        A file written by :meth:`RunLog.write`.

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
    """Read every run of a sweep file written by :meth:`RunLog.append_to`.

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


# --------------------------------------------------------------------------- from parts


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
    """Write a run log of these parts: ``RunLog(attrs, layers, ...).write(path, overwrite)``.

    A convenience for callers that hold the parts rather than a :class:`RunLog`
    (tests, hand-made logs); the parts and what is checked are :class:`RunLog`'s, the
    writing is :meth:`RunLog.write`'s. ``None`` stands for an empty part.
    """
    RunLog(attrs=attrs, layers=layers, ranks=ranks or {}, extra=extra or {},
           trace=trace or {}, trajectory=trajectory or {},
           trace_attrs=trace_attrs or {}).write(path, overwrite)


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
    """Add a run of these parts to a sweep file:
    ``RunLog(attrs, layers, ...).append_to(path, group_name)``.

    For callers that hold the parts rather than a :class:`RunLog` (a read run keeps its
    trace with ``trace=run.trace, trajectory=run.trajectory, trace_attrs=run.trace_attrs``);
    ``None`` stands for an empty part. See :meth:`RunLog.append_to`.
    """
    RunLog(attrs=attrs, layers=layers, ranks=ranks or {}, extra=extra or {},
           trace=trace or {}, trajectory=trajectory or {},
           trace_attrs=trace_attrs or {}).append_to(path, group_name)
