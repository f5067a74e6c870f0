"""``dssfn-mpi data list | verify | fetch``, download progress, and the CLI's quiet exits
(a closed stdout, ``plot`` without matplotlib). No network: downloads come from file:// URLs
or a patched opener."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from dssfn_mpi import datasets as ds
from dssfn_mpi.cli import EXIT_BROKEN_PIPE, main
from dssfn_mpi.datasets.command import LOG_STEPS_FROM, DownloadProgress, format_size
from dssfn_mpi.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _publish(monkeypatch: pytest.MonkeyPatch, folder: Path, files: dict[str, bytes]) -> None:
    """Serve ``files`` from ``folder`` as file:// URLs whose published sha256 is theirs."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
        monkeypatch.setitem(ds.URLS, name, ((folder / name).as_uri(),))
        monkeypatch.setitem(ds.CHECKSUMS, name, _sha(data))


def _isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No data folder from the environment; the per-user folder is under tmp_path."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DSSFN_DATA_DIR", raising=False)
    return tmp_path / "xdg" / "dssfn-mpi"


# --------------------------------------------------------------------------- progress


def test_format_size() -> None:
    assert format_size(0) == "0 B" and format_size(999) == "999 B"
    assert format_size(48_300) == "48.3 kB"
    assert format_size(9_912_422) == "9.9 MB"
    assert format_size(2_500_000_000) == "2.5 GB"


def test_log_progress_prints_every_ten_percent_and_the_end() -> None:
    out = io.StringIO()
    progress = DownloadProgress(out, interactive=False)
    total = 2_000_000
    for done in range(20_000, total, 20_000):  # 99 updates
        progress("big.gz", done, total)
    progress("big.gz", total, total)
    lines = out.getvalue().splitlines()
    assert lines == [
        *(f"  big.gz: {p}% ({format_size(p * total // 100)} of 2.0 MB)"
          for p in range(10, 100, 10)),
        "  big.gz: 2.0 MB downloaded",
    ]
    # A small file, or one of unknown size: only the final line.
    out.truncate(0), out.seek(0)
    for done in (1000, 2000):
        progress("small", done, LOG_STEPS_FROM - 1)
        progress("nosize", done, None)
    progress("small", 3000, 3000)
    assert out.getvalue() == "  small: 3.0 kB downloaded\n"


def test_log_progress_restarts_for_a_second_address() -> None:
    out = io.StringIO()
    progress = DownloadProgress(out, interactive=False)
    total = 10_000_000
    progress("f", 6_000_000, total)  # the first address fails at 60 %
    progress("f", 1_000_000, total)  # the mirror starts again
    assert [line.split(": ")[1][:3] for line in out.getvalue().splitlines()] == ["60%", "10%"]


def test_terminal_progress_rewrites_one_line() -> None:
    out = io.StringIO()
    progress = DownloadProgress(out, interactive=True, min_interval=0)
    progress("x.gz", 500_000, 1_000_000)
    progress("x.gz", 1_000_000, 1_000_000)
    text = out.getvalue()
    assert text.startswith("\r  x.gz: 500.0 kB / 1.0 MB  50%")
    assert text.endswith("\r" + "  x.gz: 1.0 MB downloaded".ljust(60) + "\n")
    assert text.count("\n") == 1
    # Throttled: within min_interval only the first update and the end are drawn.
    out = io.StringIO()
    progress = DownloadProgress(out, interactive=True, min_interval=3600)
    for done in range(1, 100):
        progress("y", done, 100)
    progress("y", 100, 100)
    assert out.getvalue().count("\r") == 2
    # A download that fails midway leaves an open line: close() ends it.
    out = io.StringIO()
    progress = DownloadProgress(out, interactive=True, min_interval=0)
    progress("z", 5, None)
    progress.close()
    progress.close()
    assert out.getvalue() == "\r" + "  z: 5 B".ljust(60) + "\n"


def test_progress_follows_the_stream_being_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert DownloadProgress(Tty()).interactive
    assert not DownloadProgress(io.StringIO()).interactive


# --------------------------------------------------------------------------- fetch


def test_fetch_reports_progress_for_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = {"vowel.train": os.urandom(LOG_STEPS_FROM + 12345), "vowel.test": b"x" * 700}
    _publish(monkeypatch, tmp_path / "src", data)
    calls: list[tuple[str, int, int | None]] = []
    ds.fetch("vowel", tmp_path / "dest", progress=lambda *a: calls.append(a))
    big = [c for c in calls if c[0] == "vowel.train"]
    assert big[-1] == ("vowel.train", len(data["vowel.train"]), len(data["vowel.train"]))
    assert all(done < total for _, done, total in big[:-1])  # done == total marks the end
    assert [done for _, done, _ in big] == sorted(done for _, done, _ in big)
    assert calls[-1] == ("vowel.test", 700, 700)
    # Present and verified: nothing is downloaded, nothing reported.
    calls.clear()
    ds.fetch("vowel", tmp_path / "dest", progress=lambda *a: calls.append(a))
    assert calls == []


def test_cli_fetch_writes_the_per_user_folder_with_log_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    user_dir = _isolate(tmp_path, monkeypatch)
    data = {"vowel.train": os.urandom(3 * LOG_STEPS_FROM), "vowel.test": b"y" * 100}
    _publish(monkeypatch, tmp_path / "src", data)
    assert main(["data", "fetch", "vowel"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [str(user_dir / "vowel" / n) for n in ("vowel.train", "vowel.test")]
    for name, content in data.items():
        assert (user_dir / "vowel" / name).read_bytes() == content
    # stderr is not a terminal here: a line per 10 % of the big file, one per file at the end.
    lines = err.splitlines()
    assert lines[0] == f"vowel: into {user_dir / 'vowel'}"
    assert sum("vowel.train: " in line and "%" in line for line in lines) == 9
    assert lines[-2:] == ["  vowel.train: 3.0 MB downloaded", "  vowel.test: 100 B downloaded"]
    assert len(lines) == 12


class _FailingResponse(io.BytesIO):
    """A response that delivers ``good`` bytes and then fails with ``error``."""

    def __init__(self, good: bytes, error: BaseException) -> None:
        super().__init__(good)
        self.error = error
        self.headers = {"Content-Length": str(10 * len(good))}

    def read(self, size: int = -1) -> bytes:
        chunk = super().read(size)
        if not chunk:
            raise self.error
        return chunk


@pytest.mark.parametrize("error", [ConnectionResetError("reset by peer"), KeyboardInterrupt()])
def test_interrupted_download_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    monkeypatch.setattr(
        urllib.request, "urlopen", lambda url, timeout: _FailingResponse(b"z" * 200_000, error)
    )
    with pytest.raises(UserError if isinstance(error, OSError) else KeyboardInterrupt) as exc:
        ds.fetch("vowel", tmp_path, progress=DownloadProgress(io.StringIO()))
    if isinstance(error, OSError):
        assert "reset by peer" in str(exc.value) and "could not download" in str(exc.value)
    assert list((tmp_path / "vowel").iterdir()) == []  # no target, no temporary


def test_fetch_zip_is_removed_when_it_is_bad(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "spatialpyramidfeatures4caltech101.zip"
    bad.write_bytes(b"not a zip")
    monkeypatch.setitem(ds.URLS, "spatialpyramidfeatures4caltech101.mat", (bad.as_uri(),))
    with pytest.raises(UserError, match="could not download"):
        ds.fetch("caltech101", tmp_path / "dest")
    assert list((tmp_path / "dest" / "caltech101").iterdir()) == []


# --------------------------------------------------------------------------- list, verify


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """vowel verified, satimage corrupt, mnist incomplete, caltech101 unverifiable,
    letter and norb absent."""
    _isolate(tmp_path, monkeypatch)
    root = tmp_path / "data"
    files = {
        "vowel/vowel.train": b"a", "vowel/vowel.test": b"b",
        "satimage/sat.trn": b"c", "satimage/sat.tst": b"d",
        "mnist/train-images-idx3-ubyte.gz": b"e",
        "caltech101/spatialpyramidfeatures4caltech101.mat": b"f",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        monkeypatch.setitem(ds.CHECKSUMS, Path(rel).name, _sha(data))
    monkeypatch.setitem(ds.CHECKSUMS, "spatialpyramidfeatures4caltech101.mat", None)
    (root / "satimage/sat.tst").write_bytes(b"D")  # corrupted after publication
    return root


def test_check_files_states(data_dir: Path) -> None:
    states = {n: [c.status for c in ds.check_files(n, data_dir)] for n in ds.DATASETS}
    assert states == {
        "digits": [], "synthetic": [],
        "vowel": ["verified", "verified"],
        "satimage": ["verified", "mismatch"],
        "letter": ["missing"],
        "mnist": ["verified", "missing", "missing", "missing"],
        "norb": ["missing"] * 4,
        "caltech101": ["unverified"],
    }
    bad = ds.check_files("satimage", data_dir)[1]
    assert bad.path == data_dir / "satimage" / "sat.tst" and not bad.usable
    assert "sha256 mismatch" in bad.message and "dssfn-mpi data fetch satimage" in bad.message


def test_data_list_says_what_is_present_and_verified(
    data_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["data", "list", "--data-dir", str(data_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"data directory: {data_dir}"
    status = {line.split()[0]: line.split(None, 1)[1] for line in lines[1:]}
    assert list(status) == list(ds.DATASETS)
    assert status["digits"] == status["synthetic"] == "built in, no files needed"
    assert status["vowel"] == "present, verified"
    assert status["satimage"].startswith("present, sha256 MISMATCH: sat.tst")
    assert status["letter"] == "not present (get it: dssfn-mpi data fetch letter)"
    assert status["mnist"].startswith("incomplete, 3 of 4 files missing")
    assert status["caltech101"].startswith("present, not verified: no published sha256")
    # Names restrict the list.
    assert main(["data", "list", "vowel", "--data-dir", str(data_dir)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["  vowel  present, verified"]


def test_data_list_without_a_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    user_dir = _isolate(tmp_path, monkeypatch)
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert f"(none: {user_dir} does not exist" in out
    assert "  vowel       not present (get it: dssfn-mpi data fetch vowel)\n" in out


def test_data_verify_exit_status_and_one_line_per_bad_file(
    data_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    # Everything present is checked: satimage's corrupt file and mnist's missing ones fail.
    assert main(["data", "verify", "--data-dir", str(data_dir)]) == 1
    out, err = capsys.readouterr()
    errors = err.splitlines()
    assert all(line.startswith("dssfn-mpi: error: ") for line in errors)
    assert len(errors) == 4  # sat.tst + three mnist files
    assert "sat.tst: sha256 mismatch" in errors[0]
    assert all("not found" in e and "data fetch mnist" in e for e in errors[1:])
    assert f"OK          {data_dir / 'vowel' / 'vowel.train'}" in out
    assert "UNVERIFIED  " in out and "letter" not in out and "norb" not in out
    assert out.splitlines()[-1] == "5 file(s) good, 4 bad"
    # Only good datasets named: exit 0.
    assert main(["data", "verify", "vowel", "caltech101", "digits",
                 "--data-dir", str(data_dir)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.splitlines()[-1] == "3 file(s) good, 0 bad"
    # A dataset named but absent is bad; an unknown name is a user error (exit 2).
    assert main(["data", "verify", "letter", "--data-dir", str(data_dir)]) == 1
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert main(["data", "verify", "imagenet", "--data-dir", str(data_dir)]) == 2
    assert "unknown dataset 'imagenet'" in capsys.readouterr().err


def test_data_verify_with_nothing_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    _isolate(tmp_path, monkeypatch)
    assert main(["data", "verify"]) == 0
    assert "nothing to verify" in capsys.readouterr().out


def test_data_fetch_needs_a_known_name(capsys: pytest.CaptureFixture) -> None:
    assert main(["data", "fetch"]) == 2
    assert main(["data", "fetch", "vowel", "imagenet"]) == 2  # checked before any download
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("dssfn-mpi: error: data fetch needs a dataset name")
    assert err[1].startswith("dssfn-mpi: error: unknown dataset 'imagenet'")


# --------------------------------------------------------------------------- quiet exits


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (extra.pop("PREPEND", ""), str(REPO), env.get("PYTHONPATH", "")) if p
    )
    env.update(extra)
    return env


@pytest.mark.parametrize(
    "args, status", [(["data", "list"], EXIT_BROKEN_PIPE), (["--help"], 0)]  # argparse's own
)
def test_closed_stdout_is_no_traceback(tmp_path: Path, args: list[str], status: int) -> None:
    # The reader goes away before anything is written, as `| head -1` may do.
    proc = subprocess.Popen(
        [sys.executable, "-m", "dssfn_mpi", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=_env(DSSFN_DATA_DIR=str(tmp_path)),
    )
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == status, err
    assert err == ""


def test_data_list_into_head(tmp_path: Path) -> None:
    res = subprocess.run(
        f"'{sys.executable}' -m dssfn_mpi data list | head -1", shell=True,
        capture_output=True, text=True, timeout=60, env=_env(DSSFN_DATA_DIR=str(tmp_path)),
    )
    assert res.stdout == f"data directory: {tmp_path}\n"
    assert res.stderr == ""


BLOCK_MATPLOTLIB = """\
import sys


class _NoMatplotlib:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "matplotlib":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoMatplotlib())
"""


def test_plot_without_matplotlib_names_the_extra(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(BLOCK_MATPLOTLIB)
    res = subprocess.run(
        [sys.executable, "-m", "dssfn_mpi", "plot", str(tmp_path / "run.h5")],
        capture_output=True, text=True, timeout=60, env=_env(PREPEND=str(shim)),
    )
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("dssfn-mpi: error: plot needs matplotlib")
    assert "pip install 'dssfn-mpi[plot]'" in res.stderr
    assert not (tmp_path / "figures").exists()


def test_plot_extra_is_the_one_pyproject_declares() -> None:
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert any(r.startswith("matplotlib") for r in meta["project"]["optional-dependencies"]["plot"])
