"""Tests for dssfn_mpi.fileio.atomic_write: all-or-nothing replacement, synced, no leftovers."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dssfn_mpi import fileio
from dssfn_mpi.fileio import atomic_write, remove_stale_temporaries, temp_path

REPO = Path(__file__).resolve().parents[1]


def test_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "f.bin"
    atomic_write(target, lambda tmp: tmp.write_bytes(b"one"))
    assert target.read_bytes() == b"one"
    atomic_write(str(target), lambda tmp: tmp.write_bytes(b"two"))
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_writer_gets_the_temp_path_beside_the_target(tmp_path: Path) -> None:
    seen = []
    atomic_write(tmp_path / "f.npz", lambda tmp: (seen.append(tmp), tmp.write_bytes(b"x")))
    assert seen == [tmp_path / f"f.npz.tmp-{os.getpid()}"] == [temp_path(tmp_path / "f.npz")]


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_failure_keeps_the_old_file_and_removes_the_temp(tmp_path: Path, exc) -> None:
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")

    def write(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise exc

    with pytest.raises(type(exc)):
        atomic_write(target, write)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_failure_of_a_first_write_leaves_nothing(tmp_path: Path) -> None:
    def write(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise ValueError("bad data")

    with pytest.raises(ValueError):
        atomic_write(tmp_path / "f.bin", write)
    assert list(tmp_path.iterdir()) == []


def test_file_and_directory_are_synced_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.bin"
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync file")
        real_fsync(fd)

    def replace(a, b) -> None:
        events.append("replace")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write(target, lambda tmp: tmp.write_bytes(b"data"))
    assert events == ["fsync file", "replace", "fsync dir"]


def test_a_failing_file_sync_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="I/O error"):
        atomic_write(target, lambda tmp: tmp.write_bytes(b"new"))
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_unsupported_sync_is_tolerated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fsync(fd: int) -> None:
        raise OSError(errno.EINVAL, "not supported")

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_write(tmp_path / "f.bin", lambda tmp: tmp.write_bytes(b"new"))
    assert (tmp_path / "f.bin").read_bytes() == b"new"


def test_kill_9_mid_write_keeps_the_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "f.bin"
    target.write_bytes(b"previous")
    child = textwrap.dedent(
        f"""
        import time
        from dssfn_mpi.fileio import atomic_write
        def write(tmp):
            with open(tmp, "wb") as f:
                f.write(b"half")
                f.flush()
                print("mid-write", flush=True)
                time.sleep(60)
        atomic_write({str(target)!r}, write)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout.readline().strip() == "mid-write"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
    assert target.read_bytes() == b"previous"
    stale = tmp_path / f"f.bin.tmp-{proc.pid}"
    assert stale.read_bytes() == b"half"
    remove_stale_temporaries(target)
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_remove_stale_temporaries_touches_only_its_target(tmp_path: Path) -> None:
    names = ["run[1].h5", "run[1].h5.tmp-12", "run[1].h5.tmp-345", "other.h5.tmp-12", "run.h5"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    remove_stale_temporaries(tmp_path / "run[1].h5")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.h5.tmp-12", "run.h5", "run[1].h5"]


def test_module_exports() -> None:
    for name in fileio.__all__:
        assert hasattr(fileio, name)


# --------------------------------------------------------------------------- the package's writers


def _write_checkpoint(target: Path, value: float) -> None:
    from dssfn_mpi.run.checkpoint import RankCheckpoint
    from dssfn_mpi.runlog import schema

    ckpt = RankCheckpoint(target, 0)
    rows = schema.set_fields(schema.blank_rows(1), total_seconds=value)
    ckpt.save([np.full((2, 3), value)], rows, {})


def _read_checkpoint(target: Path) -> float:
    from dssfn_mpi.run.checkpoint import RankCheckpoint

    Os, rows, _ = RankCheckpoint(target, 0).load()
    assert list(rows["total_seconds"]) == [Os[0][0, 0]]
    return float(Os[0][0, 0])


def _write_model(target: Path, value: float) -> None:
    from dssfn_mpi.ssfn.modelio import save_model

    save_model(target, {"n_classes": 2, "value": value}, [[np.full((2, 3), value)]])


def _read_model(target: Path) -> float:
    from dssfn_mpi.ssfn.modelio import load_model

    return float(load_model(target).attrs["value"])


def _write_runlog(target: Path, value: float) -> None:
    from dssfn_mpi.runlog import write_runlog

    write_runlog(target, {"nodes": 1}, {"gamma": np.full((1, 1), value)})


def _read_runlog(target: Path) -> float:
    from dssfn_mpi.runlog import read_runlog

    return float(read_runlog(target).layers["gamma"][0, 0])


def _write_config(target: Path, value: float) -> None:
    from dssfn_mpi.run.checkpoint import save_config

    save_config(target, {"value": value}, 1)


def _read_config(target: Path) -> float:
    from dssfn_mpi.run.checkpoint import load_config

    return float(load_config(target)[0]["value"])


WRITERS = {
    "runlog": (_write_runlog, _read_runlog),
    "checkpoint": (_write_checkpoint, _read_checkpoint),
    "checkpoint config": (_write_config, _read_config),
    "model": (_write_model, _read_model),
}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_package_writers_are_atomic(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write, read = WRITERS[kind]
    target = tmp_path / "run.h5"
    write(target, 1.0)
    assert read(target) == 1.0
    # Fail at the last step, after the writer has filled the temp file.
    def no_replace(a, b) -> None:
        raise OSError(errno.ENOSPC, "simulated full disk")

    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(OSError, match="simulated full disk"):
        write(target, 2.0)
    monkeypatch.undo()
    assert read(target) == 1.0
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name]
    write(target, 3.0)
    assert read(target) == 3.0


def test_download_is_atomic_and_verified(tmp_path: Path) -> None:
    from dssfn_mpi.datasets.download import _ChecksumError, _download

    source = tmp_path / "src.bin"
    source.write_bytes(b"payload")
    target = tmp_path / "dest.bin"
    target.write_bytes(b"previous")
    with pytest.raises(_ChecksumError):
        _download(source.as_uri(), target, "0" * 64, timeout=5)
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest.bin", "src.bin"]
    _download(source.as_uri(), target, None, timeout=5)
    assert target.read_bytes() == b"payload"
