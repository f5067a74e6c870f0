"""Tests for the HDF5 run log (dssfn_mpi.runlog): schema, atomicity, errors, report."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

from dssfn_mpi import runlog
from dssfn_mpi.errors import UserError
from dssfn_mpi.runlog import (
    ATTRIBUTES,
    LAYER_FIELDS,
    LAYER_UNITS,
    RANK_FIELDS,
    SCHEMA_VERSION,
    RunLog,
    append_run,
    check_output_path,
    is_sweep,
    read_runlog,
    read_sweep,
    write_runlog,
)

REPO = Path(__file__).resolve().parents[1]
L_PLUS_1, M = 4, 3


def full_layers(seed: int = 0, rows: int = L_PLUS_1, m: int = M) -> dict[str, np.ndarray]:
    """Every documented field with distinct random values of the right dtype."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, (dtype, _desc) in LAYER_FIELDS.items():
        if dtype == np.int64:
            out[name] = rng.integers(0, 10**6, size=(rows, m))
        else:
            out[name] = rng.random((rows, m))
    return out


def full_attrs() -> dict:
    return {
        "mode": "async",
        "update": "arock",
        "dataset": "digits",
        "nodes": M,
        "topology": "ring",
        "degree": 2,
        "layers": L_PLUS_1 - 1,
        "hidden": 50,
        "iters": 200,
        "seed": 7,
        "config": {"eps": 2.0, "mu": 1e-3, "out": Path("/tmp/x.h5"), "n": np.int64(3)},
        "command_line": ["dssfn-mpi", "train", "--out", "my run.h5"],
        "shard_sizes": np.array([10, 11, 12]),
        "python": "3.x",
        "numpy": "1.0",
        "scipy": "",
        "h5py": "3.0",
        "mpi4py": "4.0",
        "mpi_library": "Open MPI v5",
        "hostnames": ["a", "b", "a"],
        "start_time": "2020-05-04T12:00:00+00:00",
        "end_time": "2020-05-04T12:01:00+00:00",
        "git_revision": "abc123",
        "complete": True,
        # undocumented attributes of every supported kind
        "eps": 2.0,
        "tag": "baseline",
        "flag": False,
        "count": np.int32(5),
        "gammas": [0.1, 0.2],
        "names": ["x", "y"],
        "sizes": np.array([1, 2, 3]),
        "meta": {"k": [1, 2]},
    }


def full_ranks() -> dict:
    return {
        "hostname": ["a", "b", "a"],
        "degree": [2, 2, 2],
        "neighbors": [[1, 2], [0], [0, 1]],
        "shard_size": [10, 11, 12],
        "cpu": np.array([0.5, 0.25, 0.125]),
    }


def tmp_leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".tmp-" in p.name)


# --------------------------------------------------------------------------- round trip


def test_round_trip_every_field_and_attribute(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    layers = full_layers()
    attrs = full_attrs()
    extra = {"gamma_schedule": np.arange(8.0).reshape(4, 2), "note": "hi", "tags": ["p", "q"]}
    write_runlog(path, attrs, layers, full_ranks(), extra)
    rl = read_runlog(path)

    assert set(rl.layers) == set(LAYER_FIELDS)
    for name, (dtype, _desc) in LAYER_FIELDS.items():
        assert rl.layers[name].shape == (L_PLUS_1, M)
        assert rl.layers[name].dtype == dtype
        np.testing.assert_array_equal(rl.layers[name], layers[name])

    a = rl.attrs
    assert set(ATTRIBUTES) <= set(a)
    for name in ["mode", "update", "dataset", "topology", "python", "numpy", "scipy", "h5py"]:
        assert a[name] == attrs[name]
    for name in ["mpi4py", "mpi_library", "start_time", "end_time", "git_revision"]:
        assert a[name] == attrs[name]
    for name in ["nodes", "degree", "layers", "hidden", "iters", "seed"]:
        assert a[name] == attrs[name] and isinstance(a[name], int)
    assert a["schema_version"] == SCHEMA_VERSION
    assert a["kind"] == "run"
    assert a["complete"] is True and rl.complete
    assert a["layers_done"] == L_PLUS_1 == rl.layers_done
    assert rl.config == {"eps": 2.0, "mu": 1e-3, "out": "/tmp/x.h5", "n": 3}
    assert a["command_line"] == "dssfn-mpi train --out 'my run.h5'"
    assert rl.hostnames == ["a", "b", "a"]
    np.testing.assert_array_equal(a["shard_sizes"], [10, 11, 12])
    assert a["shard_sizes"].dtype == np.int64
    assert a["hdf5"] == h5py.version.hdf5_version  # filled in by the writer
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", a["write_time"])

    assert a["eps"] == 2.0 and a["tag"] == "baseline" and a["flag"] is False
    assert a["count"] == 5
    np.testing.assert_array_equal(a["gammas"], [0.1, 0.2])
    assert a["names"] == ["x", "y"]
    np.testing.assert_array_equal(a["sizes"], [1, 2, 3])
    assert json.loads(a["meta"]) == {"k": [1, 2]}

    np.testing.assert_array_equal(rl.ranks["hostname"], ["a", "b", "a"])
    np.testing.assert_array_equal(rl.ranks["degree"], [2, 2, 2])
    np.testing.assert_array_equal(rl.ranks["neighbors"], [[1, 2], [0, -1], [0, 1]])
    np.testing.assert_array_equal(rl.ranks["shard_size"], [10, 11, 12])
    np.testing.assert_array_equal(rl.ranks["cpu"], [0.5, 0.25, 0.125])

    np.testing.assert_array_equal(rl.extra["gamma_schedule"], extra["gamma_schedule"])
    assert str(rl.extra["note"]) == "hi"
    np.testing.assert_array_equal(rl.extra["tags"], ["p", "q"])

    # A RunLog read back writes itself again unchanged (writer-owned attrs accepted).
    again = tmp_path / "again.h5"
    rl.write(again)
    rl2 = read_runlog(again)
    for name in LAYER_FIELDS:
        np.testing.assert_array_equal(rl2.layers[name], rl.layers[name])
    assert rl2.attrs["config"] == rl.attrs["config"]
    np.testing.assert_array_equal(rl2.extra["gamma_schedule"], extra["gamma_schedule"])


def test_a_run_log_writes_itself_as_write_runlog_writes_its_parts(tmp_path: Path) -> None:
    """``RunLog.write`` / ``append_to`` are the writes; ``write_runlog`` / ``append_run``
    the same from the parts, and ``checked`` the run as the file holds it."""
    run = RunLog(attrs={"mode": "sync", "nodes": M}, layers={"gamma": np.ones((2, M))},
                 ranks={"degree": [2, 2, 2]}, extra={"note": "hi"})
    run.write(tmp_path / "a.h5")
    write_runlog(tmp_path / "b.h5", run.attrs, run.layers, run.ranks, run.extra)
    a, b = read_runlog(tmp_path / "a.h5"), read_runlog(tmp_path / "b.h5")
    for name in LAYER_FIELDS:
        np.testing.assert_array_equal(a.layers[name], b.layers[name])
    checked = run.checked()
    assert set(checked.layers) == set(LAYER_FIELDS) and checked.attrs["layers_done"] == 2
    assert run.layers.keys() == {"gamma"}  # the caller's run is left as it was
    run.append_to(tmp_path / "s.h5", "one")
    assert read_sweep(tmp_path / "s.h5")["one"].attrs["mode"] == "sync"
    with pytest.raises(ValueError, match="unknown layer field"):
        RunLog(attrs={}, layers={"nope": np.ones((1, M))}).write(tmp_path / "c.h5")
    assert not (tmp_path / "c.h5").exists()


def test_dataset_units_and_descriptions_in_file(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    write_runlog(path, {"nodes": M}, {"total_seconds": np.ones((2, M))})
    with h5py.File(path, "r") as f:
        assert f["layers/total_seconds"].attrs["units"] == "s"
        for name in LAYER_FIELDS:
            ds = f["layers"][name]
            assert ds.shape == (2, M)
            assert ds.attrs["units"] == LAYER_UNITS[name]
            assert ds.attrs["description"] == LAYER_FIELDS[name][1]
        assert set(f["ranks"]) == set(RANK_FIELDS)
        assert "extra" in f


def test_missing_fields_filled(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    write_runlog(path, {"mode": "sync"}, {"test_accuracy": np.full((2, M), 0.5)})
    rl = read_runlog(path)
    assert rl.layers["rel_distance"].dtype == np.float64
    assert np.isnan(rl.layers["rel_distance"]).all()
    assert rl.layers["puts"].dtype == np.int64
    assert (rl.layers["puts"] == -1).all()
    assert rl.layers["puts"].shape == (2, M)
    assert rl.attrs["nodes"] == M and rl.attrs["layers_done"] == 2
    assert rl.attrs["complete"] is False
    assert rl.attrs["degree"] == -1 and rl.attrs["git_revision"] == ""
    assert rl.attrs["shard_sizes"].shape == (0,)
    np.testing.assert_array_equal(rl.ranks["degree"], [-1] * M)
    np.testing.assert_array_equal(rl.ranks["hostname"], [""] * M)
    assert rl.ranks["neighbors"].shape == (M, 0)


def test_zero_layers_and_incremental_writes(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    attrs = {"nodes": M, "layers": 2}
    write_runlog(path, attrs, {})  # before layer 0: validates attrs, creates the file
    assert read_runlog(path).layers["gamma"].shape == (0, M)
    acc = []
    for l in range(3):
        acc.append([0.5 + 0.1 * l] * M)
        write_runlog(path, {**attrs, "complete": l == 2}, {"test_accuracy": np.array(acc)})
        rl = read_runlog(path)
        assert rl.layers_done == l + 1 and rl.complete == (l == 2)
    assert tmp_leftovers(tmp_path) == []


def test_attribute_cross_fill(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    write_runlog(
        path,
        {"shard_sizes": [4, 5, 6]},
        {"gamma": np.ones((1, M))},
        ranks={"hostname": ["n0", "n1", "n2"]},
    )
    rl = read_runlog(path)
    np.testing.assert_array_equal(rl.ranks["shard_size"], [4, 5, 6])
    assert rl.hostnames == ["n0", "n1", "n2"]


# --------------------------------------------------------------------------- bad input (bugs)


@pytest.mark.parametrize(
    ("attrs", "layers", "match"),
    [
        ({}, {"not_a_field": np.ones((1, M))}, "unknown layer field"),
        ({}, {"gamma": np.ones(M)}, "2-D"),
        ({}, {"gamma": np.ones((1, M)), "puts": np.ones((2, M), int)}, "different shapes"),
        ({"nodes": M + 1}, {"gamma": np.ones((1, M))}, "nodes"),
        ({"layers_done": 5}, {"gamma": np.ones((1, M))}, "layers_done"),
        ({}, {"puts": np.full((1, M), 0.5)}, "integer"),
        ({"iters": 2.5}, {"gamma": np.ones((1, M))}, "iters"),
        ({"complete": "yes"}, {"gamma": np.ones((1, M))}, "complete"),
        ({"config": "{not json"}, {"gamma": np.ones((1, M))}, "JSON"),
        ({"schema_version": 99}, {"gamma": np.ones((1, M))}, "schema_version"),
        ({"weird": object()}, {"gamma": np.ones((1, M))}, "unsupported"),
        ({}, {}, "nodes"),
    ],
)
def test_bad_input_is_a_bug(tmp_path: Path, attrs: dict, layers: dict, match: str) -> None:
    path = tmp_path / "run.h5"
    with pytest.raises(ValueError, match=match):
        write_runlog(path, attrs, layers)
    assert list(tmp_path.iterdir()) == []


def test_bad_ranks_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="length M"):
        write_runlog(tmp_path / "r.h5", {}, {"gamma": np.ones((1, M))}, ranks={"degree": [1, 2]})


def test_write_without_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    write_runlog(path, {}, {"gamma": np.ones((1, M))})
    with pytest.raises(UserError, match="exists; pass --overwrite"):
        write_runlog(path, {}, {"gamma": np.zeros((1, M))}, overwrite=False)
    assert read_runlog(path).layers["gamma"][0, 0] == 1.0


# --------------------------------------------------------------------------- atomicity


def _fail_after(monkeypatch: pytest.MonkeyPatch, n_ok: int) -> None:
    """Make h5py fail on dataset number ``n_ok + 1``: a crash half-way through a write."""
    real = h5py.Group.create_dataset
    calls = {"n": 0}

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > n_ok:
            raise RuntimeError("simulated disk failure")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(h5py.Group, "create_dataset", flaky)


def test_failed_write_keeps_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.h5"
    old = full_layers(seed=1, rows=1)
    write_runlog(path, {"mode": "async"}, old)
    _fail_after(monkeypatch, 5)
    with pytest.raises(RuntimeError, match="simulated"):
        write_runlog(path, {"mode": "async"}, full_layers(seed=2, rows=2))
    monkeypatch.undo()
    rl = read_runlog(path)
    assert rl.layers_done == 1
    np.testing.assert_array_equal(rl.layers["rel_distance"], old["rel_distance"])
    assert tmp_leftovers(tmp_path) == []


def test_failed_first_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fail_after(monkeypatch, 3)
    with pytest.raises(RuntimeError):
        write_runlog(tmp_path / "run.h5", {}, full_layers())
    assert list(tmp_path.iterdir()) == []


def test_kill_9_during_write_keeps_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    old = full_layers(seed=3, rows=1)
    write_runlog(path, {"mode": "async"}, old)
    child = textwrap.dedent(
        f"""
        import sys, time
        import h5py, numpy as np
        from dssfn_mpi.runlog import write_runlog
        real = h5py.Group.create_dataset
        n = [0]
        def slow(self, *a, **k):
            n[0] += 1
            if n[0] == 4:  # the temp file is open and half written
                print("mid-write", flush=True)
                time.sleep(60)
            return real(self, *a, **k)
        h5py.Group.create_dataset = slow
        write_runlog({str(path)!r}, {{}}, {{"gamma": np.zeros((2, {M}))}})
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "mid-write"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    rl = read_runlog(path)  # still the previous, complete log
    assert rl.layers_done == 1
    np.testing.assert_array_equal(rl.layers["gamma"], old["gamma"])
    # kill -9 cannot clean up; the stale temp is a separate, ignorable file
    assert tmp_leftovers(tmp_path) == [f"run.h5.tmp-{proc.pid}"]


# --------------------------------------------------------------------------- check_output_path


def test_check_output_path_ok_and_creates_nothing(tmp_path: Path) -> None:
    check_output_path(tmp_path / "new.h5", overwrite=False)
    existing = tmp_path / "old.h5"
    existing.write_bytes(b"x")
    check_output_path(existing, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.h5"]


def test_check_output_path_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        check_output_path(tmp_path / "nope" / "run.h5", overwrite=True)
    assert list(tmp_path.iterdir()) == []


def test_check_output_path_parent_is_a_file(tmp_path: Path) -> None:
    # Fails even for root, unlike a chmod-based unwritable directory.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="not a directory"):
        check_output_path(blocker / "run.h5", overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_check_output_path_existing_without_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    path.write_bytes(b"old")
    with pytest.raises(UserError) as err:
        check_output_path(path, overwrite=False)
    assert str(err.value) == f"{path} exists; pass --overwrite or choose another --out"
    assert path.read_bytes() == b"old"


def test_check_output_path_target_is_directory(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a directory"):
        check_output_path(tmp_path, overwrite=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root bypasses directory permissions")
def test_check_output_path_unwritable_dir(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(UserError, match="not writable"):
            check_output_path(locked / "run.h5", overwrite=True)
    finally:
        locked.chmod(0o700)


# --------------------------------------------------------------------------- read errors


def test_read_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        read_runlog(tmp_path / "missing.h5")


def test_read_non_hdf5(tmp_path: Path) -> None:
    path = tmp_path / "notes.h5"
    path.write_text("not hdf5 at all\n")
    with pytest.raises(UserError, match="not an HDF5 file"):
        read_runlog(path)


def test_read_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    write_runlog(path, {}, {"gamma": np.ones((1, M))})
    with h5py.File(path, "a") as f:
        f.attrs["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(UserError, match="newer"):
        read_runlog(path)


def test_read_foreign_hdf5(tmp_path: Path) -> None:
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(3)
    with pytest.raises(UserError, match="not a dssfn_mpi run log"):
        read_runlog(path)


def test_read_fills_fields_missing_from_older_writer(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    write_runlog(path, {}, {"gamma": np.ones((2, M))})
    with h5py.File(path, "a") as f:
        del f["layers/consensus_spread"]
    rl = read_runlog(path)
    assert rl.layers["consensus_spread"].shape == (2, M)
    assert np.isnan(rl.layers["consensus_spread"]).all()


# --------------------------------------------------------------------------- sweeps


def test_append_run_read_sweep_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sweep.h5"
    runs = {"M4_ring": full_layers(seed=4, rows=2), "M4_complete": full_layers(seed=5, rows=3)}
    for name, layers in runs.items():
        append_run(
            path,
            name,
            {"topology": name.split("_")[1], "complete": True},
            layers,
            ranks={"degree": [2, 2, 2]},
        )
    sweep = read_sweep(path)
    assert list(sweep) == ["M4_ring", "M4_complete"]  # append order, not alphabetical
    for name, layers in runs.items():
        rl = sweep[name]
        assert isinstance(rl, RunLog) and rl.complete
        assert rl.attrs["topology"] == name.split("_")[1]
        for field, arr in layers.items():
            np.testing.assert_array_equal(rl.layers[field], arr)
        np.testing.assert_array_equal(rl.ranks["degree"], [2, 2, 2])
    assert tmp_leftovers(tmp_path) == []
    assert is_sweep(path)
    with pytest.raises(UserError, match="read_sweep"):
        read_runlog(path)


def test_append_run_errors_and_atomicity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sweep.h5"
    append_run(path, "a", {}, {"gamma": np.ones((1, M))})
    with pytest.raises(UserError, match="already holds run 'a'"):
        append_run(path, "a", {}, {"gamma": np.ones((1, M))})
    with pytest.raises(ValueError, match="not a valid"):
        append_run(path, "x/y", {}, {"gamma": np.ones((1, M))})
    _fail_after(monkeypatch, 2)
    with pytest.raises(RuntimeError):
        append_run(path, "b", {}, full_layers())
    monkeypatch.undo()
    assert list(read_sweep(path)) == ["a"]
    assert tmp_leftovers(tmp_path) == []

    single = tmp_path / "run.h5"
    write_runlog(single, {}, {"gamma": np.ones((1, M))})
    assert not is_sweep(single)
    with pytest.raises(UserError, match="not a sweep file"):
        append_run(single, "a", {}, {"gamma": np.ones((1, M))})
    with pytest.raises(UserError, match="not a sweep file"):
        read_sweep(single)


# --------------------------------------------------------------------------- named axes


def _axis_names(ds: h5py.Dataset) -> list[str]:
    """The dimension scale attached to each axis, by name (h5py's view of the labels)."""
    return [dim[0].name.rsplit("/", 1)[1] if len(dim) else "" for dim in ds.dims]


def test_axes_are_named_by_dimension_scales(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    write_runlog(path, full_attrs(), full_layers(), full_ranks(), {"grid": np.ones((2, 5))})
    with h5py.File(path, "r") as f:
        for name in LAYER_FIELDS:
            assert _axis_names(f["layers"][name]) == ["layer", "rank"], name
            assert list(f["layers"][name].dims[0].keys()) == ["layer"]
        for name in ("hostname", "degree", "shard_size", "cpu"):
            assert _axis_names(f["ranks"][name]) == ["rank"], name
        assert _axis_names(f["ranks/neighbors"]) == ["rank", "neighbor"]
        assert _axis_names(f["extra/grid"]) == ["", ""]  # free-form: no names guessed
        # One scale per name, in the run's group, holding the index along that axis.
        for name, length in (("layer", L_PLUS_1), ("rank", M), ("neighbor", 2)):
            assert f[name].is_scale
            np.testing.assert_array_equal(f[name][()], np.arange(length))
        assert not any(f[g][n].is_scale for g in ("layers", "ranks", "extra") for n in f[g])
    # The scales are not data: reading is unchanged.
    rl = read_runlog(path)
    assert set(rl.layers) == set(LAYER_FIELDS)
    assert set(rl.ranks) == {*RANK_FIELDS, "cpu"} and set(rl.extra) == {"grid"}


def test_each_run_of_a_sweep_has_its_own_axes(tmp_path: Path) -> None:
    path = tmp_path / "sweep.h5"
    append_run(path, "M3", {}, full_layers(rows=2, m=3))
    append_run(path, "M5", {}, full_layers(rows=4, m=5))
    with h5py.File(path, "r") as f:
        for name, (rows, m) in {"M3": (2, 3), "M5": (4, 5)}.items():
            run = f["runs"][name]
            assert run["layer"].shape == (rows,) and run["rank"].shape == (m,)
            assert run["layers/gamma"].dims[1][0] == run["rank"]
    assert {k: v.layers["gamma"].shape for k, v in read_sweep(path).items()} == {
        "M3": (2, 3), "M5": (4, 5)
    }


def test_label_axes_is_reusable_for_new_groups(tmp_path: Path) -> None:
    # What a writer of further per-run groups (e.g. a trace) does: same names, same scales.
    path = tmp_path / "run.h5"
    write_runlog(path, {}, full_layers())
    with h5py.File(path, "a") as f:
        trace = f.create_group("trace").create_dataset("z", data=np.zeros((L_PLUS_1, M, 7)))
        runlog.label_axes(trace, ("layer", "rank", "activation"))
        assert _axis_names(trace) == ["layer", "rank", "activation"]
        assert trace.dims[0][0] == f["layers/gamma"].dims[0][0]  # the same "layer" scale
        np.testing.assert_array_equal(f["activation"][()], np.arange(7))
        with pytest.raises(ValueError, match="has length 6, but the scale /activation has 7"):
            runlog.label_axes(f["trace"].create_dataset("w", data=np.zeros(6)), ("activation",))
        with pytest.raises(ValueError, match="2 axes"):
            runlog.label_axes(f["trace"].create_dataset("v", data=np.zeros((2, 2))), ("layer",))
        # A scale kept inside a data group is still not read as a field.
        f["layers"].create_dataset("spare", data=np.arange(M)).make_scale("spare")
    assert "spare" not in read_runlog(path).layers


def test_xarray_reads_labelled_arrays(tmp_path: Path) -> None:
    try:
        import h5netcdf  # noqa: F401
        import xarray as xr
    except ImportError:
        pytest.skip("xarray and h5netcdf are not installed (optional: pip install xarray h5netcdf)")
    path = tmp_path / "run.h5"
    layers = full_layers()
    write_runlog(path, full_attrs(), layers, full_ranks())
    with xr.open_dataset(path, engine="h5netcdf", group="layers") as ds:
        acc = ds["test_accuracy"]
        assert acc.dims == ("layer", "rank") and dict(ds.sizes) == {"layer": L_PLUS_1, "rank": M}
        np.testing.assert_array_equal(acc.values, layers["test_accuracy"])
        assert acc.attrs["units"] == "fraction"
        np.testing.assert_array_equal(acc.isel(layer=2).values, layers["test_accuracy"][2])
    with xr.open_dataset(path, engine="h5netcdf", group="ranks") as ds:
        assert ds["neighbors"].dims == ("rank", "neighbor")
        assert list(ds["hostname"].values) == ["a", "b", "a"]
    with xr.open_dataset(path, engine="h5netcdf") as root:  # the scales are coordinates
        np.testing.assert_array_equal(root["layer"].values, np.arange(L_PLUS_1))
        assert root.attrs["mode"] == "async"


# --------------------------------------------------------------------------- documentation


def test_docs_cover_the_schema() -> None:
    doc = (REPO / "docs" / "RUNLOG.md").read_text()
    for name in [*LAYER_FIELDS, *ATTRIBUTES, *RANK_FIELDS]:
        assert f"`{name}`" in doc, f"{name} is not documented in docs/RUNLOG.md"
    assert f"schema_version = {SCHEMA_VERSION}" in doc or f"version {SCHEMA_VERSION}" in doc


def test_docs_h5py_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    doc = (REPO / "docs" / "RUNLOG.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    assert blocks, "docs/RUNLOG.md needs a ```python example"
    monkeypatch.chdir(tmp_path)
    write_runlog("run.h5", {"nodes": M, "layers": 1}, full_layers(rows=2))
    exec(compile(blocks[0], "RUNLOG.md", "exec"), {})
    assert "test_accuracy" in capsys.readouterr().out


def test_module_exports() -> None:
    for name in runlog.__all__:
        assert hasattr(runlog, name)
