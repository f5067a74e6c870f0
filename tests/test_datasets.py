"""Tests of dssfn_mpi.datasets (serial, no MPI).

Tests on the public files skip when the files are absent; every error path
and the NORB / Caltech101 readers run on small files generated here.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dssfn_mpi import datasets as ds
from dssfn_mpi.datasets import (
    CHECKSUMS,
    DATASETS,
    Dataset,
    fetch,
    find_data_dir,
    load_dataset,
    verify,
)
from dssfn_mpi.errors import UserError

# Files of the public datasets in the data folder's layout (independent of the
# module's own tables, so a typo there is caught).
PUBLIC_FILES = {
    "vowel": ["vowel/vowel.train", "vowel/vowel.test"],
    "satimage": ["satimage/sat.trn", "satimage/sat.tst"],
    "letter": ["letter/letter-recognition.data"],
    "mnist": [
        "mnist/train-images-idx3-ubyte.gz",
        "mnist/train-labels-idx1-ubyte.gz",
        "mnist/t10k-images-idx3-ubyte.gz",
        "mnist/t10k-labels-idx1-ubyte.gz",
    ],
}

NORB_NAMES = {
    "train_dat": "smallnorb-5x46789x9x18x6x2x96x96-training-dat.mat",
    "train_cat": "smallnorb-5x46789x9x18x6x2x96x96-training-cat.mat",
    "test_dat": "smallnorb-5x01235x9x18x6x2x96x96-testing-dat.mat",
    "test_cat": "smallnorb-5x01235x9x18x6x2x96x96-testing-cat.mat",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def public_dir(name: str) -> Path:
    """The data directory holding ``name``'s files, or skip the test."""
    root = find_data_dir()
    fix = f"set DSSFN_DATA_DIR or run `dssfn-mpi data fetch {name}`"
    if root is None:
        pytest.skip(f"{name} files not found (no data directory); {fix}")
    missing = [f for f in PUBLIC_FILES[name] if not (root / f).is_file()]
    if missing:
        pytest.skip(f"{name} files {missing} not found in {root}; {fix}")
    return root


def class_counts(y: np.ndarray, q: int) -> list[int]:
    return np.bincount(y, minlength=q).tolist()


def assert_zscored(d: Dataset) -> None:
    """Training features have mean 0 / std 1 (or are constant); test uses the same stats."""
    mean = d.X_train.mean(axis=1)
    std = d.X_train.std(axis=1)
    assert np.allclose(mean, 0.0, atol=1e-10)
    assert np.allclose(std[std > 0], 1.0, atol=1e-10)
    # Test statistics are the training ones, so the test mean is not exactly 0.
    assert np.abs(d.X_test.mean(axis=1)).max() > 1e-6


def assert_well_formed(d: Dataset, p: int, q: int, n_train: int, n_test: int) -> None:
    assert (d.n_features, d.n_classes, d.n_train, d.n_test) == (p, q, n_train, n_test)
    assert d.X_train.shape == (p, n_train) and d.X_test.shape == (p, n_test)
    assert d.X_train.dtype == np.float64 and d.X_test.dtype == np.float64
    assert d.y_train.dtype == np.int64 and d.y_test.dtype == np.int64
    assert d.y_train.min() >= 0 and d.y_train.max() == q - 1
    assert np.isfinite(d.X_train).all() and np.isfinite(d.X_test).all()


# ---------------------------------------------------------------------------
# names and options
# ---------------------------------------------------------------------------


def test_every_dataset_is_documented() -> None:
    # The paper's six plus the embedded and synthetic ones, each with a row in
    # data/README.md's table (a dataset added without its documentation fails here).
    assert {"vowel", "satimage", "letter", "mnist", "norb", "caltech101"} <= set(DATASETS)
    readme = (Path(__file__).resolve().parents[1] / "data" / "README.md").read_text()
    for name in DATASETS:
        assert f"| `{name}` |" in readme, name


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(UserError) as exc:
        load_dataset("cifar10")
    msg = str(exc.value)
    assert "cifar10" in msg
    for name in DATASETS:
        assert name in msg


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"seed": True}, "seed"),
        ({"n_classes": 3}, "unknown option"),  # only synthetic takes it
        ({"verify": "no"}, "verify"),
    ],
)
def test_bad_arguments(kwargs: dict, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        load_dataset("digits", **kwargs)


def test_dataset_rejects_inconsistent_arrays() -> None:
    X = np.zeros((3, 4))
    y = np.zeros(4, dtype=np.int64)
    with pytest.raises(ValueError, match="y_train"):
        Dataset("x", X, y[:3], X, y, 2)
    with pytest.raises(ValueError, match="labels"):
        Dataset("x", X, y + 5, X, y, 2)


# ---------------------------------------------------------------------------
# digits (bundled) and synthetic (generated)
# ---------------------------------------------------------------------------


def test_digits_shapes_range_and_split() -> None:
    from sklearn.datasets import load_digits

    d = load_dataset("digits")
    assert_well_formed(d, 64, 10, 1200, 597)
    assert d.X_train.min() == 0.0 and d.X_train.max() == 1.0  # pixels 0..16 divided by 16
    assert d.X_test.min() >= 0.0 and d.X_test.max() <= 1.0
    assert set(d.y_test.tolist()) == set(range(10))
    # Train and test together are exactly the 1797 bundled samples, each once.
    full = load_digits()
    rows = np.vstack([d.X_train.T, d.X_test.T]) * 16.0
    labels = np.concatenate([d.y_train, d.y_test])
    want = np.column_stack([full.data, full.target])
    got = np.column_stack([np.round(rows), labels])
    assert np.array_equal(np.unique(want, axis=0), np.unique(got, axis=0))
    assert got.shape == want.shape


def test_digits_table_is_scikit_learns_with_or_without_its_import(monkeypatch) -> None:
    import importlib.util

    from sklearn.datasets import load_digits

    from dssfn_mpi.datasets import bundled

    full = load_digits()
    want = np.column_stack([full.data, full.target])
    direct = bundled.digits_table()  # the CSV file, read directly
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    fallback = bundled.digits_table()
    for got in (direct, fallback):
        assert got.dtype == np.float64 and np.array_equal(got, want)


def test_digits_loads_without_importing_scikit_learn() -> None:
    code = ("import sys; from dssfn_mpi.datasets import load_dataset; "
            "d = load_dataset('digits'); assert d.n_train == 1200; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_digits_deterministic_given_seed() -> None:
    a = load_dataset("digits", seed=3)
    b = load_dataset("digits", seed=3)
    c = load_dataset("digits", seed=4)
    assert np.array_equal(a.X_train, b.X_train) and np.array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.y_train, c.y_train)


def test_synthetic_defaults_and_normalisation() -> None:
    d = load_dataset("synthetic")
    assert_well_formed(d, 20, 5, 2000, 500)
    assert class_counts(d.y_train, 5) == [400] * 5
    assert_zscored(d)


def test_synthetic_deterministic_and_seeded() -> None:
    a = load_dataset("synthetic", seed=7, n_features=8, n_classes=3, n_train=90, n_test=30)
    b = load_dataset("synthetic", seed=7, n_features=8, n_classes=3, n_train=90, n_test=30)
    c = load_dataset("synthetic", seed=8, n_features=8, n_classes=3, n_train=90, n_test=30)
    assert_well_formed(a, 8, 3, 90, 30)
    assert np.array_equal(a.X_train, b.X_train) and np.array_equal(a.X_test, b.X_test)
    assert np.array_equal(a.y_train, b.y_train)
    assert not np.allclose(a.X_train, c.X_train)


def test_synthetic_is_learnable_but_not_linear() -> None:
    from sklearn.neighbors import KNeighborsClassifier

    d = load_dataset("synthetic", seed=0)
    # Least-squares linear classifier with a bias, like one SSFN output layer.
    T = np.eye(d.n_classes)[d.y_train].T
    O = T @ np.linalg.pinv(np.vstack([d.X_train, np.ones(d.n_train)]))
    lin = np.mean(np.argmax(O @ np.vstack([d.X_test, np.ones(d.n_test)]), axis=0) == d.y_test)
    knn = KNeighborsClassifier(5).fit(d.X_train.T, d.y_train).score(d.X_test.T, d.y_test)
    assert 2.0 / d.n_classes < lin < 0.9, lin
    assert knn > lin + 0.05, (knn, lin)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_features": 0},
        {"n_classes": 1},
        {"n_train": -5},
        {"n_test": 2.5},
        {"n_features": True},
        {"n_classes": 10, "n_train": 5},
        {"n_feature": 5},  # typo
    ],
)
def test_synthetic_rejects_bad_options(kwargs: dict) -> None:
    with pytest.raises(UserError):
        load_dataset("synthetic", **kwargs)


# ---------------------------------------------------------------------------
# the public files (skipped when absent)
# ---------------------------------------------------------------------------


def _isolate_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME at an empty folder and unset the data variables; return HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("DSSFN_DATA_DIR", raising=False)
    return home


def test_find_data_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _isolate_home(tmp_path, monkeypatch)
    user_dir = home / ".local" / "share" / "dssfn-mpi"
    env_dir, arg_dir = tmp_path / "env", tmp_path / "arg"
    env_dir.mkdir()
    arg_dir.mkdir()
    # Nothing named and no per-user folder yet: no data directory, but fetch's
    # default target is the per-user folder (which it will create).
    assert find_data_dir() is None
    assert ds.default_data_dir() == user_dir
    user_dir.mkdir(parents=True)
    assert find_data_dir() == user_dir
    # $DSSFN_DATA_DIR wins over the per-user folder, --data-dir over both.
    monkeypatch.setenv("DSSFN_DATA_DIR", str(env_dir))
    assert find_data_dir() == env_dir
    assert ds.default_data_dir() == env_dir
    assert find_data_dir(arg_dir) == arg_dir
    # A named folder that does not exist is an error, never a silent fallback.
    monkeypatch.setenv("DSSFN_DATA_DIR", str(tmp_path / "nope"))
    with pytest.raises(UserError, match="DSSFN_DATA_DIR"):
        find_data_dir()
    with pytest.raises(UserError, match="not a directory"):
        find_data_dir(tmp_path / "nope")
    # An empty $DSSFN_DATA_DIR counts as unset.
    monkeypatch.setenv("DSSFN_DATA_DIR", "")
    assert find_data_dir() == user_dir


def test_per_user_folder_follows_xdg_data_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _isolate_home(tmp_path, monkeypatch)
    xdg = tmp_path / "xdg"
    (xdg / "dssfn-mpi").mkdir(parents=True)
    (home / ".local" / "share" / "dssfn-mpi").mkdir(parents=True)
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
    assert find_data_dir() == ds.default_data_dir() == xdg / "dssfn-mpi"
    # A relative XDG_DATA_HOME is invalid (XDG base-directory rules) and ignored.
    monkeypatch.setenv("XDG_DATA_HOME", "relative/path")
    assert find_data_dir() == home / ".local" / "share" / "dssfn-mpi"


def test_data_fetch_writes_to_the_folder_that_is_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dssfn_mpi.cli import main

    _isolate_home(tmp_path, monkeypatch)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    source = write_vowel(tmp_path / "src")
    for name in ("vowel.train", "vowel.test"):
        monkeypatch.setitem(ds.URLS, name, ((source / name).as_uri(),))
        monkeypatch.setitem(CHECKSUMS, name, sha256(source / name))
    assert main(["data", "fetch", "vowel"]) == 0
    assert (tmp_path / "xdg" / "dssfn-mpi" / "vowel" / "vowel.train").is_file()
    assert load_dataset("vowel").n_test == 462  # found with nothing named


@pytest.mark.data
def test_vowel_published_counts() -> None:
    d = load_dataset("vowel", data_dir=public_dir("vowel"))
    assert_well_formed(d, 10, 11, 528, 462)
    assert class_counts(d.y_train, 11) == [48] * 11
    assert class_counts(d.y_test, 11) == [42] * 11
    assert_zscored(d)


@pytest.mark.data
def test_satimage_published_counts() -> None:
    d = load_dataset("satimage", data_dir=public_dir("satimage"))
    assert_well_formed(d, 36, 6, 4435, 2000)
    # Labels 1,2,3,4,5,7 -> 0..5.
    assert class_counts(d.y_train, 6) == [1072, 479, 961, 415, 470, 1038]
    assert class_counts(d.y_test, 6) == [461, 224, 397, 211, 237, 470]
    assert_zscored(d)


@pytest.mark.data
def test_letter_split_sizes_counts_and_reproducibility() -> None:
    root = public_dir("letter")
    d = load_dataset("letter", data_dir=root, seed=0)
    assert_well_formed(d, 16, 26, 13333, 6667)
    total = np.bincount(d.y_train, minlength=26) + np.bincount(d.y_test, minlength=26)
    published = dict(
        A=789, B=766, C=736, D=805, E=768, F=775, G=773, H=734, I=755, J=747, K=739, L=761,
        M=792, N=783, O=753, P=803, Q=783, R=758, S=748, T=796, U=813, V=764, W=752, X=787,
        Y=786, Z=734,
    )  # fmt: skip
    assert total.tolist() == [published[chr(65 + k)] for k in range(26)]
    assert_zscored(d)
    again = load_dataset("letter", data_dir=root, seed=0)
    other = load_dataset("letter", data_dir=root, seed=1)
    assert np.array_equal(d.X_train, again.X_train) and np.array_equal(d.y_test, again.y_test)
    assert not np.array_equal(d.y_train, other.y_train)


@pytest.mark.data
def test_mnist_published_counts_and_speed() -> None:
    root = public_dir("mnist")
    # CPU time, not wall: other work on a shared machine must not fail the test.
    t0 = time.process_time()
    d = load_dataset("mnist", data_dir=root)
    elapsed = time.process_time() - t0
    assert elapsed < 10.0, f"MNIST took {elapsed:.1f} s of CPU to load"
    assert_well_formed(d, 784, 10, 60000, 10000)
    train_counts = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    test_counts = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert class_counts(d.y_train, 10) == train_counts
    assert class_counts(d.y_test, 10) == test_counts
    assert d.X_train.min() == 0.0 and d.X_train.max() == 1.0
    # First training image is a 5 (the well-known first MNIST sample).
    assert d.y_train[0] == 5


@pytest.mark.data
def test_files_found_directly_in_data_dir(tmp_path: Path) -> None:
    root = public_dir("vowel")
    for f in PUBLIC_FILES["vowel"]:
        shutil.copy(root / f, tmp_path)  # no vowel/ sub-folder
    d = load_dataset("vowel", data_dir=tmp_path)
    assert d.n_train == 528


@pytest.mark.data
def test_corrupted_real_copy_fails_checksum(tmp_path: Path) -> None:
    root = public_dir("satimage")
    (tmp_path / "satimage").mkdir()
    for f in PUBLIC_FILES["satimage"]:
        shutil.copy(root / f, tmp_path / f)
    trn = tmp_path / "satimage" / "sat.trn"
    os.chmod(trn, 0o644)
    data = bytearray(trn.read_bytes())
    data[0:2] = b"99" if data[0:2] != b"99" else b"98"  # same size, still parseable
    trn.write_bytes(bytes(data))
    with pytest.raises(UserError) as exc:
        load_dataset("satimage", data_dir=tmp_path)
    msg = str(exc.value)
    assert "sat.trn: sha256 mismatch" in msg
    assert CHECKSUMS["sat.trn"] in msg and sha256(trn) in msg
    assert "dssfn-mpi data fetch satimage" in msg
    assert load_dataset("satimage", data_dir=tmp_path, verify=False).n_train == 4435


# ---------------------------------------------------------------------------
# error paths on generated files
# ---------------------------------------------------------------------------


def write_vowel(root: Path, seed: int = 0) -> Path:
    """A file pair in the ESL vowel format with random values (wrong checksums)."""
    rng = np.random.default_rng(seed)
    folder = root / "vowel"
    folder.mkdir(parents=True, exist_ok=True)
    head = "row.names,y," + ",".join(f"x.{i}" for i in range(1, 11))
    for name, n in (("vowel.train", 528), ("vowel.test", 462)):
        lines = [head]
        for i in range(n):
            vals = ",".join(f"{v:.3f}" for v in rng.normal(size=10))
            lines.append(f"{i + 1},{i % 11 + 1},{vals}")
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def test_missing_file_message(tmp_path: Path) -> None:
    with pytest.raises(UserError) as exc:
        load_dataset("vowel", data_dir=tmp_path)
    msg = str(exc.value)
    assert "\n" not in msg
    assert "vowel.train" in msg and CHECKSUMS["vowel.train"] in msg
    assert "https://" in msg and "dssfn-mpi data fetch vowel --dest" in msg
    assert f"dssfn-mpi data fetch vowel --dest {tmp_path}`" in msg  # fetch where it looks
    assert "--data-dir" in msg and "DSSFN_DATA_DIR" in msg


def test_missing_second_file_is_named(tmp_path: Path) -> None:
    folder = write_vowel(tmp_path)
    (folder / "vowel.test").unlink()
    with pytest.raises(UserError, match=r"vowel\.test .*94720047"):
        load_dataset("vowel", data_dir=tmp_path, verify=False)


def test_no_data_dir_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _isolate_home(tmp_path, monkeypatch)
    with pytest.raises(UserError, match="no data directory.*sat.trn|sat.trn.*no data directory"):
        load_dataset("satimage")
    with pytest.raises(UserError) as exc:
        load_dataset("satimage")
    # It names the per-user folder and the command that fills it.
    msg = str(exc.value)
    assert str(home / ".local" / "share" / "dssfn-mpi") in msg
    assert "`dssfn-mpi data fetch satimage`" in msg


def test_checksum_mismatch_and_bypass(tmp_path: Path) -> None:
    folder = write_vowel(tmp_path)
    with pytest.raises(UserError) as exc:
        load_dataset("vowel", data_dir=tmp_path)
    msg = str(exc.value)
    assert "sha256 mismatch" in msg and CHECKSUMS["vowel.train"] in msg
    assert sha256(folder / "vowel.train") in msg
    d = load_dataset("vowel", data_dir=tmp_path, verify=False)
    assert_well_formed(d, 10, 11, 528, 462)
    assert_zscored(d)


def test_checksum_cached_per_path_mtime_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_vowel(tmp_path)
    for name in ("vowel.train", "vowel.test"):
        monkeypatch.setitem(CHECKSUMS, name, sha256(folder / name))
    calls: list[Path] = []
    real = verify._sha256_file

    def counting(path: Path) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(verify, "_sha256_file", counting)
    load_dataset("vowel", data_dir=tmp_path)
    load_dataset("vowel", data_dir=tmp_path)
    assert len(calls) == 2  # one hash per file, not per load
    # Same size, new content and mtime: hashed again and rejected.
    train = folder / "vowel.train"
    text = train.read_text()
    train.write_text(text.replace(",1,", ",2,", 1))
    st = train.stat()
    os.utime(train, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(UserError, match="sha256 mismatch"):
        load_dataset("vowel", data_dir=tmp_path)
    assert len(calls) == 3


def test_truncated_text_file(tmp_path: Path) -> None:
    folder = write_vowel(tmp_path)
    train = folder / "vowel.train"
    data = train.read_text()
    lines = data.splitlines()
    cut = len("\n".join(lines[:300])) + 20  # 20 characters into line 301
    train.write_text(data[:cut])
    with pytest.raises(UserError, match=r"vowel\.train, line 301: expected 12 fields, got"):
        load_dataset("vowel", data_dir=tmp_path, verify=False)
    train.write_text("\n".join(lines[:300]) + "\n" + lines[300].rsplit(",", 1)[0] + ",")
    with pytest.raises(UserError, match=r"vowel\.train, line 301: non-numeric value ''"):
        load_dataset("vowel", data_dir=tmp_path, verify=False)
    train.write_text("\n".join(lines[:300]) + "\n")  # cut at a line end
    with pytest.raises(UserError, match="expected 528 data rows, found 299"):
        load_dataset("vowel", data_dir=tmp_path, verify=False)


def test_wrong_columns_and_header(tmp_path: Path) -> None:
    folder = write_vowel(tmp_path)
    test = folder / "vowel.test"
    lines = test.read_text().splitlines()
    test.write_text("\n".join(line.rsplit(",", 1)[0] for line in lines) + "\n")
    with pytest.raises(UserError, match="vowel.test"):
        load_dataset("vowel", data_dir=tmp_path, verify=False)
    test.write_text("\n".join(lines[1:]) + "\n")  # headerless copy
    with pytest.raises(UserError, match="header"):
        load_dataset("vowel", data_dir=tmp_path, verify=False)


@pytest.mark.parametrize("bad", ["NaN", "inf", "-Inf"])
def test_nan_or_inf_rejected(tmp_path: Path, bad: str) -> None:
    folder = write_vowel(tmp_path)
    test = folder / "vowel.test"
    lines = test.read_text().splitlines()
    fields = lines[5].split(",")
    fields[4] = bad
    lines[5] = ",".join(fields)
    test.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=r"vowel\.test.*NaN/inf.*data row 5"):
        load_dataset("vowel", data_dir=tmp_path, verify=False)


def test_satimage_unknown_label(tmp_path: Path) -> None:
    folder = tmp_path / "satimage"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, n in (("sat.trn", 4435), ("sat.tst", 2000)):
        feats = rng.integers(27, 158, size=(n, 36))
        labels = np.array([1, 2, 3, 4, 5, 7])[np.arange(n) % 6]
        if name == "sat.tst":
            labels[17] = 6  # "mixture" never occurs in the real data
        np.savetxt(folder / name, np.column_stack([feats, labels]), fmt="%d")
    with pytest.raises(UserError, match=r"sat\.tst: unexpected class label.*\[6\]"):
        load_dataset("satimage", data_dir=tmp_path, verify=False)


def write_idx(path: Path, magic: int, dims: tuple[int, ...], payload: bytes) -> None:
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(header + payload)


@pytest.fixture(scope="module")
def fake_mnist(tmp_path_factory) -> Path:
    """MNIST's four files at the published sizes (zero images, labels 0..9), written once."""
    folder = tmp_path_factory.mktemp("fake") / "mnist"
    folder.mkdir()
    for prefix, n in (("train", 60000), ("t10k", 10000)):
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", 2051, (n, 28, 28), bytes(n * 784))
        labels = (np.arange(n) % 10).astype(np.uint8).tobytes()
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", 2049, (n,), labels)
    return folder


def write_fake_mnist(fake_mnist: Path, root: Path) -> Path:
    """A copy of :func:`fake_mnist`'s files in ``root/mnist`` (a test may spoil its copy)."""
    return Path(shutil.copytree(fake_mnist, root / "mnist"))


def test_idx_parser_accepts_well_formed_file(fake_mnist: Path, tmp_path: Path) -> None:
    write_fake_mnist(fake_mnist, tmp_path)
    d = load_dataset("mnist", data_dir=tmp_path, verify=False)
    assert_well_formed(d, 784, 10, 60000, 10000)
    assert class_counts(d.y_test, 10) == [1000] * 10


@pytest.mark.parametrize(
    ("magic", "dims", "payload", "fragment"),
    [
        (2049, (10000, 28, 28), bytes(10000 * 784), "bad IDX magic number 2049"),
        (2051, (10000, 28, 28), bytes(100), "the header says 7840000"),
        (2051, (10000, 28, 27), bytes(10000 * 756), "IDX dimensions"),
        (2051, (), b"", "too short"),
    ],
)
def test_idx_rejects_bad_files(
    fake_mnist: Path, tmp_path: Path, magic: int, dims: tuple[int, ...], payload: bytes,
    fragment: str,
) -> None:
    folder = write_fake_mnist(fake_mnist, tmp_path)
    write_idx(folder / "t10k-images-idx3-ubyte.gz", magic, dims, payload)
    with pytest.raises(UserError, match=fragment):
        load_dataset("mnist", data_dir=tmp_path, verify=False)


def test_idx_rejects_broken_gzip(fake_mnist: Path, tmp_path: Path) -> None:
    folder = write_fake_mnist(fake_mnist, tmp_path)
    lab = folder / "train-labels-idx1-ubyte.gz"
    lab.write_bytes(lab.read_bytes()[:-20])  # truncated gzip stream
    with pytest.raises(UserError, match=r"train-labels-idx1-ubyte\.gz: corrupt or truncated"):
        load_dataset("mnist", data_dir=tmp_path, verify=False)
    lab.write_bytes(b"not gzip at all")
    with pytest.raises(UserError, match="corrupt or truncated"):
        load_dataset("mnist", data_dir=tmp_path, verify=False)


# ---------------------------------------------------------------------------
# small NORB reader on generated files
# ---------------------------------------------------------------------------


def norb_bytes(magic: int, array: np.ndarray) -> bytes:
    """The NORB binary-matrix format: magic, ndim, max(3, ndim) dims, data (LE)."""
    dims = list(array.shape) + [1] * max(0, 3 - array.ndim)
    head = struct.pack("<ii", magic, array.ndim) + struct.pack(f"<{len(dims)}i", *dims)
    return head + array.tobytes()


def write_norb(folder: Path, n_train: int = 7, n_test: int = 5, gz: bool = False) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        images = rng.integers(0, 256, size=(n, 2, 96, 96), dtype=np.uint8)
        labels = (np.arange(n) % 5).astype("<i4")
        out[split] = (images, labels)
        for kind, blob in (
            ("dat", norb_bytes(0x1E3D4C55, images)),
            ("cat", norb_bytes(0x1E3D4C54, labels)),
        ):
            name = NORB_NAMES[f"{split}_{kind}"]
            if gz:
                with gzip.open(folder / (name + ".gz"), "wb") as f:
                    f.write(blob)
            else:
                (folder / name).write_bytes(blob)
    return out


def test_norb_reader_downsamples_stereo_pairs(tmp_path: Path) -> None:
    raw = write_norb(tmp_path / "norb")
    d = load_dataset("norb", data_dir=tmp_path)  # .mat files have no checksum to verify
    assert_well_formed(d, 2048, 5, 7, 5)
    assert d.y_train.tolist() == [0, 1, 2, 3, 4, 0, 1]
    assert 0.0 <= d.X_train.min() and d.X_train.max() <= 1.0
    images = raw["test"][0]
    for j in (0, 4):
        expected = np.empty((2, 32, 32))
        for cam in range(2):
            for r in range(32):
                for c in range(32):
                    block = images[j, cam, 3 * r : 3 * r + 3, 3 * c : 3 * c + 3]
                    expected[cam, r, c] = block.astype(float).mean() / 255.0
        assert np.allclose(d.X_test[:, j], expected.ravel(), atol=1e-12)


def test_norb_gz_and_aliases(tmp_path: Path) -> None:
    write_norb(tmp_path / "a" / "norb")
    write_norb(tmp_path / "b" / "smallnorb", gz=True)  # the archive's folder name
    plain = load_dataset("norb", data_dir=tmp_path / "a")
    packed = load_dataset("norb", data_dir=tmp_path / "b", verify=False)
    assert np.array_equal(plain.X_train, packed.X_train)
    assert np.array_equal(plain.y_test, packed.y_test)
    # The .mat.gz files have published checksums, which generated files fail.
    with pytest.raises(UserError, match="training-dat.mat.gz: sha256 mismatch"):
        load_dataset("norb", data_dir=tmp_path / "b")


def test_norb_missing_file_mentions_gz_and_url(tmp_path: Path) -> None:
    with pytest.raises(UserError) as exc:
        load_dataset("norb", data_dir=tmp_path)
    msg = str(exc.value)
    assert NORB_NAMES["train_dat"] + ".gz" in msg
    assert CHECKSUMS[NORB_NAMES["train_dat"] + ".gz"] in msg
    assert "cs.nyu.edu" in msg


def test_norb_rejects_bad_files(tmp_path: Path) -> None:
    folder = tmp_path / "norb"
    raw = write_norb(folder)
    dat = folder / NORB_NAMES["train_dat"]
    good = dat.read_bytes()
    dat.write_bytes(struct.pack("<i", 0x1E3D4C51) + good[4:])
    with pytest.raises(UserError, match="bad NORB magic 0x1E3D4C51"):
        load_dataset("norb", data_dir=tmp_path)
    dat.write_bytes(good[:-1000])
    with pytest.raises(UserError, match="truncated"):
        load_dataset("norb", data_dir=tmp_path)
    dat.write_bytes(norb_bytes(0x1E3D4C55, raw["train"][0][:6]))  # 6 images, 7 labels
    with pytest.raises(UserError, match="6 images but .* 7 labels"):
        load_dataset("norb", data_dir=tmp_path)
    dat.write_bytes(norb_bytes(0x1E3D4C55, np.zeros((7, 2, 90, 90), dtype=np.uint8)))
    with pytest.raises(UserError, match="2 x 96 x 96"):
        load_dataset("norb", data_dir=tmp_path)
    dat.write_bytes(good)
    cat = folder / NORB_NAMES["test_cat"]
    cat.write_bytes(norb_bytes(0x1E3D4C54, np.array([0, 1, 2, 3, 9], dtype="<i4")))
    with pytest.raises(UserError, match="0..4"):
        load_dataset("norb", data_dir=tmp_path)


# ---------------------------------------------------------------------------
# Caltech101 (LC-KSVD features) reader on generated files
# ---------------------------------------------------------------------------


def caltech_arrays(n: int, p: int = 12, q: int = 4, seed: int = 0) -> tuple:
    """Features clustered by class (so a bad label alignment is detectable)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % q
    rng.shuffle(labels)
    centres = rng.normal(scale=5.0, size=(p, q))
    feats = centres[:, labels] + rng.normal(size=(p, n))
    onehot = np.zeros((q, n))
    onehot[labels, np.arange(n)] = 1.0
    return feats, onehot, labels


def write_caltech(folder: Path, feats: np.ndarray, onehot: np.ndarray) -> Path:
    from scipy.io import savemat

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spatialpyramidfeatures4caltech101.mat"
    savemat(path, {"featureMat": feats, "labelMat": onehot, "filenameMat": np.zeros((1, 1))})
    return path


def nearest_mean_accuracy(d: Dataset) -> float:
    means = np.stack([d.X_train[:, d.y_train == k].mean(axis=1) for k in range(d.n_classes)])
    dist = ((d.X_test.T[:, None, :] - means[None]) ** 2).sum(axis=2)
    return float(np.mean(np.argmin(dist, axis=1) == d.y_test))


def test_caltech_small_file_two_thirds_split(tmp_path: Path) -> None:
    feats, onehot, labels = caltech_arrays(60)
    write_caltech(tmp_path / "caltech101", feats, onehot)
    d = load_dataset("caltech101", data_dir=tmp_path, seed=5)
    assert_well_formed(d, 12, 4, 40, 20)
    assert_zscored(d)
    assert nearest_mean_accuracy(d) == 1.0  # labels stay with their columns
    total = np.bincount(d.y_train, minlength=4) + np.bincount(d.y_test, minlength=4)
    assert total.tolist() == np.bincount(labels).tolist()
    again = load_dataset("caltech101", data_dir=tmp_path, seed=5)
    other = load_dataset("caltech101", data_dir=tmp_path, seed=6)
    assert np.array_equal(d.X_train, again.X_train)
    assert not np.array_equal(d.y_train, other.y_train)


def test_caltech_paper_split_6000_3000(tmp_path: Path) -> None:
    feats, onehot, _ = caltech_arrays(9144, p=3, q=102)
    write_caltech(tmp_path / "spatialpyramidfeatures4caltech101", feats, onehot)  # zip's folder
    d = load_dataset("caltech101", data_dir=tmp_path)
    assert (d.n_features, d.n_classes, d.n_train, d.n_test) == (3, 102, 6000, 3000)


def test_caltech_v73_hdf5_and_sparse_labels(tmp_path: Path) -> None:
    import h5py
    from scipy.sparse import csc_matrix

    feats, onehot, _ = caltech_arrays(45)
    write_caltech(tmp_path / "v5" / "caltech101", feats, csc_matrix(onehot))
    # A sparse variable read by scipy.io.loadmat: no warning (scipy 1.18 warns about the
    # changing default of spmatrix= unless the caller passes it).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = load_dataset("caltech101", data_dir=tmp_path / "v5", seed=2)
    # MATLAB v7.3: HDF5 with a 512-byte user block; arrays stored transposed.
    folder = tmp_path / "v73" / "caltech101"
    folder.mkdir(parents=True)
    with h5py.File(folder / "spatialpyramidfeatures4caltech101.mat", "w", userblock_size=512) as f:
        f["featureMat"] = feats.T
        sp = csc_matrix(onehot)  # sparse: MATLAB's own CSC arrays, not transposed
        g = f.create_group("labelMat")
        g.attrs["MATLAB_sparse"] = onehot.shape[0]
        g["data"], g["ir"], g["jc"] = sp.data, sp.indices, sp.indptr
    # The text header MATLAB writes into the user block (version 0x0200, "IM").
    head = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: test HDF5 schema 1.00 ."
    with open(folder / "spatialpyramidfeatures4caltech101.mat", "r+b") as fh:
        fh.write(head.ljust(116, b" ") + bytes(8) + b"\x00\x02IM")
    got = load_dataset("caltech101", data_dir=tmp_path / "v73", seed=2)
    assert np.array_equal(ref.X_train, got.X_train) and np.array_equal(ref.y_test, got.y_test)


def test_caltech_rejects_bad_files(tmp_path: Path) -> None:
    feats, onehot, _ = caltech_arrays(30)
    folder = tmp_path / "caltech101"
    bad = onehot.copy()
    bad[:, 3] = 0.0
    write_caltech(folder, feats, bad)
    with pytest.raises(UserError, match="one-hot"):
        load_dataset("caltech101", data_dir=tmp_path)
    write_caltech(folder, feats[:, :29], onehot)
    with pytest.raises(UserError, match="same number of samples"):
        load_dataset("caltech101", data_dir=tmp_path)
    nan_feats = feats.copy()
    nan_feats[2, 7] = np.nan
    path = write_caltech(folder, nan_feats, onehot)
    with pytest.raises(UserError, match="spatialpyramidfeatures4caltech101.mat: 1 NaN/inf"):
        load_dataset("caltech101", data_dir=tmp_path)
    from scipy.io import savemat

    savemat(path, {"featureMat": feats})
    with pytest.raises(UserError, match="missing variable"):
        load_dataset("caltech101", data_dir=tmp_path)
    path.write_bytes(b"this is not a MATLAB file" * 20)
    with pytest.raises(UserError, match="not a readable MATLAB"):
        load_dataset("caltech101", data_dir=tmp_path)


# ---------------------------------------------------------------------------
# fetch (no real downloads)
# ---------------------------------------------------------------------------


def test_fetch_without_network_fails_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("vowel.train", "vowel.test"):
        monkeypatch.setitem(ds.URLS, name, (f"http://127.0.0.1:9/{name}",))
    t0 = time.perf_counter()
    with pytest.raises(UserError) as exc:
        fetch("vowel", tmp_path, timeout=5)
    assert time.perf_counter() - t0 < 10
    msg = str(exc.value)
    assert "could not download vowel.train" in msg and "no network?" in msg
    assert str(tmp_path / "vowel") in msg
    assert list((tmp_path / "vowel").iterdir()) == []  # no partial files left


def test_fetch_verifies_and_renames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_vowel(tmp_path / "src")
    for name in ("vowel.train", "vowel.test"):
        monkeypatch.setitem(ds.URLS, name, ((source / name).as_uri(),))
    dest = tmp_path / "dest"
    # Published checksums: the generated files are rejected and nothing is kept.
    with pytest.raises(UserError, match="checksum is wrong"):
        fetch("vowel", dest)
    assert list((dest / "vowel").iterdir()) == []
    for name in ("vowel.train", "vowel.test"):
        monkeypatch.setitem(CHECKSUMS, name, sha256(source / name))
    paths = fetch("vowel", dest)
    assert paths == [dest / "vowel" / "vowel.train", dest / "vowel" / "vowel.test"]
    assert sorted(p.name for p in (dest / "vowel").iterdir()) == ["vowel.test", "vowel.train"]
    assert load_dataset("vowel", data_dir=dest).n_test == 462
    # Present and verified: not downloaded again (the URL no longer works).
    for name in ("vowel.train", "vowel.test"):
        monkeypatch.setitem(ds.URLS, name, (f"http://127.0.0.1:9/{name}",))
    assert fetch("vowel", dest) == paths


def test_fetch_caltech_unzips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    feats, onehot, _ = caltech_arrays(30)
    mat = write_caltech(tmp_path / "src", feats, onehot)
    archive = tmp_path / "spatialpyramidfeatures4caltech101.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(mat, "spatialpyramidfeatures4caltech101/spatialpyramidfeatures4caltech101.mat")
    monkeypatch.setitem(ds.URLS, "spatialpyramidfeatures4caltech101.mat", (archive.as_uri(),))
    paths = fetch("caltech101", tmp_path / "dest")
    assert [p.name for p in paths] == ["spatialpyramidfeatures4caltech101.mat"]
    assert paths[0].read_bytes() == mat.read_bytes()
    assert [p.name for p in paths[0].parent.iterdir()] == [paths[0].name]  # zip removed


def test_fetch_bundled_and_unknown(tmp_path: Path) -> None:
    assert fetch("digits", tmp_path) == []
    assert fetch("synthetic", tmp_path) == []
    with pytest.raises(UserError, match="valid names"):
        fetch("imagenet", tmp_path)


def test_every_file_has_a_checksum_entry_and_url() -> None:
    for name, spec in ds.REGISTRY.items():
        assert spec.name == name
        assert bool(spec.files) == bool(spec.folders), name  # fetch needs a folder
        for f in spec.files:
            for variant in f.variants:
                assert variant in CHECKSUMS, (name, variant)
            assert f.variants[0] in ds.URLS, (name, f)
            assert ds.URLS[f.variants[0]] == f.urls and f.urls, (name, f)
    for value in CHECKSUMS.values():
        assert value is None or (len(value) == 64 and int(value, 16) >= 0)


def test_registry_is_the_one_source() -> None:
    assert tuple(ds.REGISTRY) == DATASETS
    # Each published value in the index is the record's, and only unpacked
    # copies of gzipped files (no published value) are unverified extras.
    files = [f for spec in ds.REGISTRY.values() for f in (*spec.files, *spec.documentation)]
    assert {f.variants[0]: f.sha256 for f in files} == {
        k: v for k, v in CHECKSUMS.items() if not any(k in f.variants[1:] for f in files)
    }
    assert {k for k, v in CHECKSUMS.items() if v is None} == {
        *(f.name for f in files if f.gzipped),
        *(f.variants[0] for f in files if f.sha256 is None),
    }
    # data/README.md lists every published value (and where none was found).
    readme = (Path(__file__).resolve().parents[1] / "data" / "README.md").read_text()
    for f in files:
        assert f"`{f.variants[0]}`" in readme, f.name
        if f.sha256 is not None:
            assert f.sha256 in readme, f.name
    with pytest.raises(TypeError):
        ds.REGISTRY["vowel"] = ds.REGISTRY["mnist"]  # type: ignore[index]


def test_dataset_options_come_from_the_record() -> None:
    d = load_dataset("synthetic", seed=1, n_train=40, n_test=10)
    defaults = ds.REGISTRY["synthetic"].options
    assert (d.n_features, d.n_classes, d.n_train, d.n_test) == (
        defaults["n_features"], defaults["n_classes"], 40, 10
    )
    with pytest.raises(UserError, match="n_features"):
        load_dataset("digits", n_features=3)
