"""Public datasets in their original formats, checksummed and normalised.

Every loader returns a :class:`Dataset` whose matrices follow the paper:
samples are **columns**, so ``X_train`` is ``P x J_train``. Labels are
``int64`` in ``0..Q-1``.

Normalisation (done here, so every engine sees the same numbers)
---------------------------------------------------------------
* Pixel data -- ``digits`` (/16), ``mnist`` (/255), ``norb`` (/255 after a
  3x3 block average) -- is scaled to ``[0, 1]``.
* Every other dataset is z-scored per feature with the **training** mean and
  (population) standard deviation; the test set uses the same statistics, so
  its mean is close to, but not exactly, 0. A feature that is constant on the
  training set is divided by 1, not 0.

Splits
------
* Fixed published splits: ``vowel`` 528/462, ``satimage`` 4435/2000,
  ``mnist`` 60000/10000, ``norb`` 24300/24300.
* Random splits drawn with ``numpy.random.default_rng(seed).permutation(n)``
  (the first ``n_train`` indices train, the rest test, each kept in file
  order): ``digits`` 1200/597, ``letter`` 13333/6667, ``caltech101``
  6000/3000. The same ``seed`` gives the same split everywhere.

Files
-----
Files live in ``<data_dir>/<dataset>/`` (where ``dssfn-mpi data fetch`` puts them) or directly
in ``<data_dir>``; :func:`find_data_dir` says where ``data_dir`` comes from.
Each dataset is one :class:`DatasetSpec` record in :data:`REGISTRY` (its
files, their published sha256 and download addresses, its loader and
options); :data:`DATASETS`, :data:`CHECKSUMS` and :data:`URLS` are derived
from it. Each file with a published sha256 is verified before it is parsed,
unless ``verify=False`` is passed explicitly.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.client
import os
import shutil
import struct
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO, Optional, cast

import numpy as np

from .errors import UserError
from .fileio import atomic_write

__all__ = [
    "CHECKSUMS",
    "DATASETS",
    "REGISTRY",
    "URLS",
    "Dataset",
    "DatasetSpec",
    "FileCheck",
    "Progress",
    "SourceFile",
    "check_files",
    "fetch",
    "find_data_dir",
    "load_dataset",
    "default_data_dir",
]

ENV_DATA_DIR = "DSSFN_DATA_DIR"

FETCH_TIMEOUT = 60.0  # seconds per connection attempt

_NORB_TRAIN_DAT = "smallnorb-5x46789x9x18x6x2x96x96-training-dat.mat"
_NORB_TRAIN_CAT = "smallnorb-5x46789x9x18x6x2x96x96-training-cat.mat"
_NORB_TEST_DAT = "smallnorb-5x01235x9x18x6x2x96x96-testing-dat.mat"
_NORB_TEST_CAT = "smallnorb-5x01235x9x18x6x2x96x96-testing-cat.mat"
_CALTECH_MAT = "spatialpyramidfeatures4caltech101.mat"

_ESL = "https://web.stanford.edu/~hastie/ElemStatLearn/datasets/"
_ESL_NEW = "https://hastie.su.domains/ElemStatLearn/datasets/"  # same site, new domain
_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases/"
_LECUN = "http://yann.lecun.com/exdb/mnist/"
_MNIST_MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist/"  # torchvision's mirror
_NORB = "https://cs.nyu.edu/~ylclab/data/norb-v1.0-small/"
_LCKSVD = "http://www.umiacs.umd.edu/~zhuolin/LCKSVD/features/"


@dataclass(frozen=True)
class SourceFile:
    """One published file a dataset is read from.

    Attributes
    ----------
    name : str
        The file the loader reads (its key in the loader's ``paths``).
    sha256 : str or None
        Published sha256 of the file as downloaded; None when no value is
        published (the file is then used unverified).
    urls : tuple of str
        Where to download it, official first. Mirrors are safe to try because
        every download must match ``sha256`` before it is kept. A URL ending
        in ``.zip`` is an archive holding the file.
    gzipped : bool
        Published as ``name + ".gz"`` (what is downloaded and verified); an
        unpacked ``name`` is accepted too, unverified.
    """

    name: str
    sha256: str | None
    urls: tuple[str, ...] = ()
    gzipped: bool = False

    @property
    def variants(self) -> tuple[str, ...]:
        """Names the file may have on disk, the downloaded (verifiable) one first."""
        return (self.name + ".gz", self.name) if self.gzipped else (self.name,)


#: Signature of a loader: ``(paths, seed, options) -> Dataset``, where ``paths``
#: maps each :attr:`SourceFile.name` of the dataset to the file found on disk.
Loader = Callable[[Mapping[str, Path], int, Mapping[str, object]], "Dataset"]


@dataclass(frozen=True, eq=False)
class DatasetSpec:
    """Everything known about one dataset: the one record it is defined by.

    Attributes
    ----------
    name : str
        Name accepted by :func:`load_dataset`, :func:`fetch` and ``--dataset``.
    description : str
        One line: what the data are, the split, ``P`` and ``Q``.
    loader : Loader
        Reads, checks and normalises the files into a :class:`Dataset`.
    files : tuple of SourceFile
        The files the loader needs (none for bundled or generated data).
    folders : tuple of str
        Sub-folders of the data directory searched (then the directory
        itself); :func:`fetch` writes to the first. The others are the
        folders the original archives unpack to.
    options : mapping of str to int
        Extra keyword options of :func:`load_dataset` and their defaults.
    documentation : tuple of SourceFile
        Published files that only document the data: checksummed, never
        loaded or fetched.
    """

    name: str
    description: str
    loader: Loader
    files: tuple[SourceFile, ...] = ()
    folders: tuple[str, ...] = ()
    options: Mapping[str, int] = dataclasses.field(default_factory=dict)
    documentation: tuple[SourceFile, ...] = ()


@dataclass(frozen=True, eq=False)
class Dataset:
    """A classification dataset with samples as columns.

    Attributes
    ----------
    name : str
        Dataset name (one of :data:`DATASETS`).
    X_train : numpy.ndarray
        ``float64``, shape ``(P, J_train)``; one training sample per column
        (Fortran-ordered, so each sample is contiguous).
    y_train : numpy.ndarray
        ``int64``, shape ``(J_train,)``, labels in ``0..Q-1``.
    X_test : numpy.ndarray
        ``float64``, shape ``(P, J_test)``.
    y_test : numpy.ndarray
        ``int64``, shape ``(J_test,)``.
    n_classes : int
        Number of classes ``Q``.
    """

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_classes: int

    def __post_init__(self) -> None:
        # A malformed Dataset is a bug in a loader, not a user error.
        P = self.X_train.shape[0]
        checks = [
            (self.X_train.ndim == 2 and self.X_test.ndim == 2, "X_train/X_test must be 2-D"),
            (self.X_test.shape[0] == P, "X_train and X_test differ in feature count"),
            (self.y_train.shape == (self.X_train.shape[1],), "y_train does not match X_train"),
            (self.y_test.shape == (self.X_test.shape[1],), "y_test does not match X_test"),
            (
                self.X_train.dtype == np.float64 and self.X_test.dtype == np.float64,
                "features must be float64",
            ),
            (
                self.y_train.dtype == np.int64 and self.y_test.dtype == np.int64,
                "labels must be int64",
            ),
            (self.n_classes >= 2, "n_classes must be >= 2"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(f"Dataset {self.name!r}: {msg}")
        for y in (self.y_train, self.y_test):
            if y.size and (y.min() < 0 or y.max() >= self.n_classes):
                raise ValueError(f"Dataset {self.name!r}: labels outside 0..{self.n_classes - 1}")

    @property
    def n_features(self) -> int:
        """Number of features ``P`` (rows of ``X_train``)."""
        return int(self.X_train.shape[0])

    @property
    def n_train(self) -> int:
        """Number of training samples ``J_train``."""
        return int(self.X_train.shape[1])

    @property
    def n_test(self) -> int:
        """Number of test samples ``J_test``."""
        return int(self.X_test.shape[1])

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, P={self.n_features}, Q={self.n_classes}, "
            f"n_train={self.n_train}, n_test={self.n_test})"
        )


# --------------------------------------------------------------------------
# locating and verifying files
# --------------------------------------------------------------------------


def _user_data_dir() -> Path:
    """The per-user data folder: ``$XDG_DATA_HOME/dssfn-mpi``, default
    ``~/.local/share/dssfn-mpi`` (a relative ``XDG_DATA_HOME`` is ignored, as
    the XDG base-directory rules say)."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "dssfn-mpi"


def default_data_dir() -> Path:
    """The data folder used when none is named: where ``data fetch`` writes.

    Returns
    -------
    pathlib.Path
        ``$DSSFN_DATA_DIR`` if set, else the per-user folder
        ``$XDG_DATA_HOME/dssfn-mpi`` (``~/.local/share/dssfn-mpi`` when
        ``XDG_DATA_HOME`` is unset). It need not exist yet.
    """
    env = os.environ.get(ENV_DATA_DIR, "")
    return Path(env).expanduser() if env else _user_data_dir()


def find_data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """Find the directory that holds the dataset files.

    Parameters
    ----------
    data_dir : str or path-like, optional
        An explicit directory (``--data-dir``); it wins over everything else.

    Returns
    -------
    pathlib.Path or None
        ``data_dir`` if given, else ``$DSSFN_DATA_DIR`` if set, else the
        per-user folder of :func:`default_data_dir` if it exists; ``None``
        when there is none. Nothing outside these three is searched.

    Raises
    ------
    UserError
        If ``data_dir`` or ``$DSSFN_DATA_DIR`` is given but is not a directory.
    """
    if data_dir is not None and str(data_dir) != "":
        path = Path(data_dir).expanduser()
        if not path.is_dir():
            raise UserError(f"--data-dir {path} is not a directory")
        return path
    env = os.environ.get(ENV_DATA_DIR, "")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise UserError(f"{ENV_DATA_DIR}={env} is not a directory; fix or unset it")
        return path
    user = _user_data_dir()
    return user if user.is_dir() else None


def _missing_message(spec: DatasetSpec, file: SourceFile, root: Path | None) -> str:
    dataset, variants = spec.name, file.variants
    shown = variants[0] if len(variants) == 1 else f"{variants[0]} (or {variants[1]})"
    sha = CHECKSUMS.get(variants[0])
    sha_txt = f"sha256 {sha}" if sha else "no published sha256"
    url = URLS.get(variants[0], ("(no known URL)",))[0]
    if url.endswith(".zip"):
        url = f"{url} (unzip it)"
    if root is None:
        where = (
            f"not found: no data directory (no --data-dir, {ENV_DATA_DIR} unset, and no "
            f"per-user folder {_user_data_dir()})"
        )
    else:
        where = f"not found in {root / spec.folders[0]} or {root}"
    return (
        f"{dataset}: file {shown} ({sha_txt}) {where}; get it from {url} or run "
        f"`dssfn-mpi data fetch {dataset}{'' if root is None else f' --dest {root}'}`, "
        f"which puts it where it is looked for; for a copy elsewhere pass --data-dir DIR "
        f"or set {ENV_DATA_DIR}=DIR"
    )


def _find(spec: DatasetSpec, file: SourceFile, root: Path | None) -> Path | None:
    """Path of ``file`` under ``root/<folder>/`` or ``root/``; None if it is in neither."""
    if root is not None:
        dirs = [root / sub for sub in spec.folders] + [root]
        for d in dirs:
            for name in file.variants:
                if (d / name).is_file():
                    return d / name
    return None


def _locate(spec: DatasetSpec, file: SourceFile, root: Path | None) -> Path:
    """Path of ``file`` under ``root/<folder>/`` or ``root/``; UserError if missing."""
    path = _find(spec, file, root)
    if path is None:
        raise UserError(_missing_message(spec, file, root))
    return path


# In-process cache of computed digests, keyed by (path, mtime_ns, size), so a
# repeated load of an unchanged file does not hash it again.
_DIGESTS: dict[tuple[str, int, int], str] = {}


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _digest(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _DIGESTS:
        _DIGESTS[key] = _sha256_file(path)
    return _DIGESTS[key]


def _verify(dataset: str, path: Path) -> None:
    """Raise UserError unless ``path`` matches its published sha256 (if any)."""
    expected = CHECKSUMS.get(path.name)
    if expected is None:
        return  # no published checksum: nothing to compare with
    got = _digest(path)
    if got != expected:
        raise UserError(_mismatch_message(dataset, path, expected, got))


def _mismatch_message(dataset: str, path: Path, expected: str, got: str) -> str:
    return (
        f"{path}: sha256 mismatch (expected {expected}, got {got}); re-download it with "
        f"`dssfn-mpi data fetch {dataset}` or point --data-dir at a good copy"
    )


# --------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------


def _random_split(
    n: int, n_train: int, seed: int, n_test: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n)``: the first ``n_train`` of a permutation
    train, the next ``n_test`` (default: all the rest) test."""
    perm = np.random.default_rng(seed).permutation(n)
    stop = n if n_test is None else n_train + n_test
    # Sorted so that the split decides *which* samples, not their order.
    return np.sort(perm[:n_train]), np.sort(perm[n_train:stop])


def _standardize(A_train: np.ndarray, A_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Z-score rows-as-samples arrays with the training statistics."""
    mean = A_train.mean(axis=0)
    std = A_train.std(axis=0)
    # ptp is exact, unlike a tiny floating-point std of a constant column.
    std[np.ptp(A_train, axis=0) == 0] = 1.0
    return (A_train - mean) / std, (A_test - mean) / std


def _check_finite(A: np.ndarray, path: Path) -> None:
    bad = ~np.isfinite(A)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise UserError(
            f"{path}: {int(bad.sum())} NaN/inf feature value(s) (first in data row {row + 1}); "
            "replace it with a clean copy"
        )


def _make(
    name: str,
    A_train: np.ndarray,
    y_train: np.ndarray,
    A_test: np.ndarray,
    y_test: np.ndarray,
    n_classes: int,
) -> Dataset:
    """Build a Dataset from rows-as-samples arrays (transposed to columns)."""
    return Dataset(
        name=name,
        X_train=np.asfortranarray(A_train.T, dtype=np.float64),
        y_train=np.asarray(y_train, dtype=np.int64),
        X_test=np.asfortranarray(A_test.T, dtype=np.float64),
        y_test=np.asarray(y_test, dtype=np.int64),
        n_classes=int(n_classes),
    )


def _read_text_rows(
    path: Path, n_fields: int, sep: str | None, header: list[str] | None = None
) -> tuple[list[list[str]], list[int]]:
    """Split a text table into rows of exactly ``n_fields`` fields.

    Returns the rows and their 1-based line numbers (for error messages).
    """
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a plain-text table (non-ASCII bytes)") from None
    first = 1
    if header is not None:
        got = lines[0].strip().split(sep) if lines else []
        if [h.strip().strip('"') for h in got] != header:
            raise UserError(
                f"{path}: expected the header line {','.join(header)!r}; not the expected file"
            )
        lines, first = lines[1:], 2
    rows: list[list[str]] = []
    numbers: list[int] = []
    for i, line in enumerate(lines, start=first):
        if not line.strip():
            continue
        fields = line.split(sep)
        if len(fields) != n_fields:
            raise UserError(
                f"{path}, line {i}: expected {n_fields} fields, got {len(fields)}; "
                "the file is truncated or in another format"
            )
        rows.append(fields)
        numbers.append(i)
    return rows, numbers


def _to_float(rows: list[list[str]], numbers: list[int], path: Path) -> np.ndarray:
    try:
        return np.array(rows, dtype=np.float64)
    except ValueError:
        pass
    # Slow path, only to say where the bad value is.
    for fields, i in zip(rows, numbers):
        for field in fields:
            try:
                float(field)
            except ValueError:
                raise UserError(
                    f"{path}, line {i}: non-numeric value {field.strip()!r}; "
                    "the file is truncated or in another format"
                ) from None
    raise UserError(f"{path}: non-numeric values")  # unreachable in practice


def _require_rows(A: np.ndarray, expected: int, path: Path) -> None:
    if A.shape[0] != expected:
        raise UserError(
            f"{path}: expected {expected} data rows, found {A.shape[0]}; "
            "the file is truncated or a different version"
        )


def _integer_labels(values: np.ndarray, allowed: Mapping[int, int], path: Path) -> np.ndarray:
    """Map raw label values through ``allowed`` (raw -> 0-based)."""
    if not np.all(values == np.round(values)):
        raise UserError(f"{path}: class labels must be integers")
    raw = values.astype(np.int64)
    unknown = sorted(set(np.unique(raw).tolist()) - set(allowed))
    if unknown:
        raise UserError(
            f"{path}: unexpected class label(s) {unknown[:5]}; expected {sorted(allowed)}"
        )
    lut = np.zeros(max(allowed) + 1, dtype=np.int64)
    for k, v in allowed.items():
        lut[k] = v
    return lut[raw]


# --------------------------------------------------------------------------
# generated / bundled datasets
# --------------------------------------------------------------------------


def _load_digits(paths: Mapping[str, Path], seed: int, options: Mapping[str, object]) -> Dataset:
    from sklearn.datasets import load_digits  # slow import; only when asked for

    bunch = load_digits()
    A = np.asarray(bunch.data, dtype=np.float64) / 16.0  # pixel values are 0..16
    y = np.asarray(bunch.target, dtype=np.int64)
    tr, te = _random_split(A.shape[0], 1200, seed)
    return _make("digits", A[tr], y[tr], A[te], y[te], 10)


def _positive_int(options: Mapping[str, object], key: str) -> int:
    value = options[key]  # load_dataset fills in the defaults
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise UserError(f"synthetic: {key} must be a positive integer, got {value!r}")
    return int(value)


def _load_synthetic(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    """Seeded classes that a linear model separates only partly.

    Each class is a mixture of 3 Gaussian blobs (so classes are not convex),
    and the space is then warped by ``z + sin(1.5 z A)`` with a random
    orthogonal ``A`` plus a little extra noise. With the defaults a linear
    least-squares classifier gets roughly 65-80 % test accuracy and
    5-nearest-neighbours or a small MLP roughly 85-90 %.
    """
    P = _positive_int(options, "n_features")
    Q = _positive_int(options, "n_classes")
    n_train = _positive_int(options, "n_train")
    n_test = _positive_int(options, "n_test")
    if Q < 2:
        raise UserError(f"synthetic: n_classes must be >= 2, got {Q}")
    if n_train < Q:
        raise UserError(f"synthetic: n_train ({n_train}) must be at least n_classes ({Q})")
    rng = np.random.default_rng(seed)
    n, modes = n_train + n_test, 3
    # Centre spread ~ 1/sqrt(P) keeps the difficulty roughly independent of P.
    centres = rng.standard_normal((Q * modes, P)) * (2.2 / np.sqrt(P))
    # Balanced labels in each part, so every class is in the training set.
    y = np.concatenate([rng.permutation(np.arange(m) % Q) for m in (n_train, n_test)])
    mode = rng.integers(modes, size=n)
    z = centres[y * modes + mode] + 0.5 * rng.standard_normal((n, P))
    A, _ = np.linalg.qr(rng.standard_normal((P, P)))
    x = z + np.sin(1.5 * (z @ A)) + 0.1 * rng.standard_normal((n, P))
    A_tr, A_te = _standardize(x[:n_train], x[n_train:])
    return _make("synthetic", A_tr, y[:n_train], A_te, y[n_train:], Q)


# --------------------------------------------------------------------------
# file readers
# --------------------------------------------------------------------------


def _load_vowel(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    header = ["row.names", "y"] + [f"x.{i}" for i in range(1, 11)]
    parts = []
    for fname, n_rows in (("vowel.train", 528), ("vowel.test", 462)):
        path = paths[fname]
        A = _to_float(*_read_text_rows(path, 12, ",", header), path)
        _require_rows(A, n_rows, path)
        y = _integer_labels(A[:, 1], {k: k - 1 for k in range(1, 12)}, path)
        feats = A[:, 2:]
        _check_finite(feats, path)
        parts.append((feats, y))
    (A_tr, y_tr), (A_te, y_te) = parts
    A_tr, A_te = _standardize(A_tr, A_te)
    return _make("vowel", A_tr, y_tr, A_te, y_te, 11)


def _load_satimage(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    labels = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 7: 5}  # class 6 ("mixture") is absent
    parts = []
    for fname, n_rows in (("sat.trn", 4435), ("sat.tst", 2000)):
        path = paths[fname]
        A = _to_float(*_read_text_rows(path, 37, None), path)
        _require_rows(A, n_rows, path)
        y = _integer_labels(A[:, 36], labels, path)
        feats = A[:, :36]
        _check_finite(feats, path)
        parts.append((feats, y))
    (A_tr, y_tr), (A_te, y_te) = parts
    A_tr, A_te = _standardize(A_tr, A_te)
    return _make("satimage", A_tr, y_tr, A_te, y_te, 6)


def _load_letter(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    path = paths["letter-recognition.data"]
    rows, numbers = _read_text_rows(path, 17, ",")
    letters = [r[0].strip() for r in rows]
    bad = sorted({c for c in letters if len(c) != 1 or not ("A" <= c <= "Z")})
    if bad:
        raise UserError(f"{path}: first field must be a letter A-Z, found {bad[:5]}")
    y = np.frombuffer("".join(letters).encode("ascii"), dtype=np.uint8).astype(np.int64) - 65
    A = _to_float([r[1:] for r in rows], numbers, path)
    _require_rows(A, 20000, path)
    _check_finite(A, path)
    tr, te = _random_split(A.shape[0], 13333, seed)
    A_tr, A_te = _standardize(A[tr], A[te])
    return _make("letter", A_tr, y[tr], A_te, y[te], 26)


def _read_gz(path: Path) -> bytes:
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise UserError(f"{path}: corrupt or truncated gzip file ({exc})") from None


def _read_idx(path: Path, magic: int, shape: tuple[int, ...]) -> np.ndarray:
    """Parse a gzipped big-endian IDX file of ``uint8`` with a known shape."""
    raw = _read_gz(path)
    ndim = len(shape)
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise UserError(f"{path}: only {len(raw)} bytes, too short for an IDX header")
    got_magic = int.from_bytes(raw[:4], "big")
    if got_magic != magic:
        raise UserError(
            f"{path}: bad IDX magic number {got_magic} (expected {magic}); not the expected file"
        )
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    if dims != shape:
        raise UserError(f"{path}: IDX dimensions {dims}, expected {shape}")
    n_bytes = int(np.prod(shape))
    if len(raw) - head != n_bytes:
        raise UserError(
            f"{path}: {len(raw) - head} data bytes, the header says {n_bytes}; "
            "the file is truncated or damaged"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=head).reshape(shape)


def _load_mnist(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    out = []
    for prefix, n in (("train", 60000), ("t10k", 10000)):
        img_path = paths[f"{prefix}-images-idx3-ubyte.gz"]
        lab_path = paths[f"{prefix}-labels-idx1-ubyte.gz"]
        img = _read_idx(img_path, 2051, (n, 28, 28))
        lab = _read_idx(lab_path, 2049, (n,))
        if lab.max() > 9:
            raise UserError(f"{lab_path}: labels must be 0..9, found {int(lab.max())}")
        A = np.divide(img.reshape(n, 784), 255.0, dtype=np.float64)
        out.append((A, lab.astype(np.int64)))
    (A_tr, y_tr), (A_te, y_te) = out
    return _make("mnist", A_tr, y_tr, A_te, y_te, 10)


_NORB_BYTE_MAGIC = 0x1E3D4C55  # uint8 matrix ("-dat")
_NORB_INT_MAGIC = 0x1E3D4C54  # int32 matrix ("-cat")


def _open_maybe_gz(path: Path) -> BinaryIO:
    if path.suffix == ".gz":
        return cast(BinaryIO, gzip.open(path, "rb"))
    return open(path, "rb")


def _read_exact(f: BinaryIO, n: int, path: Path) -> bytes:
    buf = f.read(n)
    if len(buf) != n:
        raise UserError(f"{path}: file ends early (truncated)")
    return buf


def _norb_header(f: BinaryIO, path: Path, magic: int) -> tuple[int, ...]:
    """Read a NORB binary-matrix header; return the dimensions."""
    got_magic, ndim = struct.unpack("<ii", _read_exact(f, 8, path))
    if got_magic & 0xFFFFFFFF != magic:
        raise UserError(
            f"{path}: bad NORB magic 0x{got_magic & 0xFFFFFFFF:08X} (expected 0x{magic:08X})"
        )
    if not 1 <= ndim <= 16:
        raise UserError(f"{path}: implausible NORB ndim {ndim}")
    # The format always stores at least 3 dimensions (unused ones are 1).
    dims = struct.unpack(f"<{max(3, ndim)}i", _read_exact(f, 4 * max(3, ndim), path))
    return tuple(dims[:ndim])


def _read_norb_cat(path: Path) -> np.ndarray:
    try:
        with _open_maybe_gz(path) as f:
            dims = _norb_header(f, path, _NORB_INT_MAGIC)
            if len(dims) != 1:
                raise UserError(f"{path}: NORB category file must be 1-D, got dims {dims}")
            labels = np.frombuffer(_read_exact(f, 4 * dims[0], path), dtype="<i4")
            if f.read(1):
                raise UserError(f"{path}: trailing bytes after {dims[0]} labels")
    except (OSError, EOFError, zlib.error) as exc:
        raise UserError(f"{path}: cannot read NORB file ({exc})") from None
    if labels.size and (labels.min() < 0 or labels.max() > 4):
        raise UserError(f"{path}: NORB categories must be 0..4")
    return labels.astype(np.int64)


def _read_norb_dat(path: Path) -> np.ndarray:
    """Stereo pairs 2x96x96 -> 3x3 block means, scaled to [0, 1]; (N, 2048)."""
    try:
        with _open_maybe_gz(path) as f:
            dims = _norb_header(f, path, _NORB_BYTE_MAGIC)
            if len(dims) != 4 or tuple(dims[1:]) != (2, 96, 96):
                raise UserError(f"{path}: NORB images must be N x 2 x 96 x 96, got {dims}")
            n = dims[0]
            out = np.empty((n, 2 * 32 * 32), dtype=np.float64)
            per = 2 * 96 * 96
            step = 1024  # samples per chunk: bounds memory (~19 MB of uint8)
            for i in range(0, n, step):
                k = min(step, n - i)
                block = np.frombuffer(_read_exact(f, k * per, path), dtype=np.uint8)
                block = block.reshape(k, 2, 32, 3, 32, 3)
                sums = block.sum(axis=(3, 5), dtype=np.uint32)
                out[i : i + k] = sums.reshape(k, -1) / (9.0 * 255.0)
            if f.read(1):
                raise UserError(f"{path}: trailing bytes after {n} images")
    except (OSError, EOFError, zlib.error) as exc:
        raise UserError(f"{path}: cannot read NORB file ({exc})") from None
    return out


def _load_norb(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    parts = []
    for dat, cat in ((_NORB_TRAIN_DAT, _NORB_TRAIN_CAT), (_NORB_TEST_DAT, _NORB_TEST_CAT)):
        y = _read_norb_cat(paths[cat])
        A = _read_norb_dat(paths[dat])
        if A.shape[0] != y.shape[0]:
            raise UserError(
                f"{paths[dat]} has {A.shape[0]} images but {paths[cat]} has {y.shape[0]} labels"
            )
        parts.append((A, y))
    (A_tr, y_tr), (A_te, y_te) = parts
    return _make("norb", A_tr, y_tr, A_te, y_te, 5)


def _h5_matrix(f: Any, key: str, path: Path) -> np.ndarray:
    """A MATLAB v7.3 variable as MATLAB sees it (HDF5 stores it transposed)."""
    import h5py

    node = f[key]
    if isinstance(node, h5py.Group):  # MATLAB sparse: its own CSC arrays (m = attr)
        from scipy.sparse import csc_matrix

        if not {"data", "ir", "jc"} <= set(node.keys()):
            raise UserError(f"{path}: variable {key} has an unsupported HDF5 layout")
        n_rows = int(node.attrs.get("MATLAB_sparse", 0))
        jc = np.asarray(node["jc"], dtype=np.int64)
        mat = csc_matrix(
            (np.asarray(node["data"]), np.asarray(node["ir"], dtype=np.int64), jc),
            shape=(n_rows, jc.size - 1),
        )
        return mat.toarray()
    return np.asarray(node).T


def _read_mat(path: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Read MATLAB variables from a v4-v7 (scipy) or v7.3 (HDF5) .mat file."""
    import inspect

    import scipy.io
    import scipy.sparse
    from scipy.io.matlab import MatReadError

    # scipy >= 1.15 can return sparse variables as sparse arrays (spmatrix=False);
    # from 1.18 loadmat warns (DeprecationWarning: the default is changing to False
    # in 1.20) whenever a sparse variable is read without the argument. Either kind is
    # turned into a dense array below, so ask for the future default where it exists.
    takes_spmatrix = "spmatrix" in inspect.signature(scipy.io.loadmat).parameters
    sparse_kw = {"spmatrix": False} if takes_spmatrix else {}
    try:
        mat = scipy.io.loadmat(path, variable_names=list(keys), **sparse_kw)
    except (NotImplementedError, MatReadError, ValueError, OSError) as exc:
        mat, load_error = None, exc  # maybe a v7.3 (HDF5) file; tried below
    if mat is None:
        import h5py

        if not h5py.is_hdf5(path):
            raise UserError(f"{path}: not a readable MATLAB .mat file ({load_error})")
        with h5py.File(path, "r") as f:
            missing = [k for k in keys if k not in f]
            if missing:
                raise UserError(f"{path}: missing variable(s) {missing}")
            return {k: _h5_matrix(f, k, path) for k in keys}
    missing = [k for k in keys if k not in mat]
    if missing:
        raise UserError(f"{path}: missing variable(s) {missing}")
    return {
        k: mat[k].toarray() if scipy.sparse.issparse(mat[k]) else np.asarray(mat[k]) for k in keys
    }


def _load_caltech101(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    """LC-KSVD Caltech101 features; 6000/3000 random split.

    The published file has 9144 samples (P=3000, Q=102); the paper draws
    6000 train and 3000 test samples at random (the other 144 are unused).
    A file with fewer than 9000 samples is split 2/3 train, 1/3 test instead.
    """
    path = paths[_CALTECH_MAT]
    mat = _read_mat(path, ("featureMat", "labelMat"))
    feats = np.asarray(mat["featureMat"], dtype=np.float64)
    onehot = np.asarray(mat["labelMat"], dtype=np.float64)
    if feats.ndim != 2 or onehot.ndim != 2 or feats.shape[1] != onehot.shape[1]:
        raise UserError(
            f"{path}: featureMat {feats.shape} and labelMat {onehot.shape} must both be "
            "(rows x samples) with the same number of samples"
        )
    if not (np.all((onehot == 0) | (onehot == 1)) and np.all(onehot.sum(axis=0) == 1)):
        raise UserError(f"{path}: labelMat must be one-hot (one 1 per column)")
    if onehot.shape[0] < 2:
        raise UserError(f"{path}: labelMat needs at least 2 classes (rows)")
    A = feats.T
    _check_finite(A, path)
    y = np.argmax(onehot, axis=0).astype(np.int64)
    n = A.shape[0]
    n_train, n_test = (6000, 3000) if n >= 9000 else ((2 * n) // 3, n - (2 * n) // 3)
    tr, te = _random_split(n, n_train, seed, n_test)
    A_tr, A_te = _standardize(A[tr], A[te])
    return _make("caltech101", A_tr, y[tr], A_te, y[te], onehot.shape[0])


# --------------------------------------------------------------------------
# the registry: one record per dataset
# --------------------------------------------------------------------------


def _mnist_file(name: str, sha256: str) -> SourceFile:
    return SourceFile(name, sha256, (_LECUN + name, _MNIST_MIRROR + name))


def _norb_file(name: str, sha256_gz: str) -> SourceFile:
    # The sha256 values of the .mat.gz files are the ones TensorFlow Datasets
    # publishes for the NYU URLs (tensorflow_datasets/url_checksums/smallnorb.txt).
    return SourceFile(name, sha256_gz, (_NORB + name + ".gz",), gzipped=True)


_SPECS = (
    DatasetSpec(
        "digits",
        "scikit-learn's bundled 8x8 digits; 1200/597 random split, P=64, Q=10",
        _load_digits,
    ),
    DatasetSpec(
        "synthetic",
        "seeded Gaussian-mixture classes with a nonlinear warp; sizes are options",
        _load_synthetic,
        options={"n_features": 20, "n_classes": 5, "n_train": 2000, "n_test": 500},
    ),
    DatasetSpec(
        "vowel",
        "Deterding vowel data, ESL version; 528/462 fixed split, P=10, Q=11",
        _load_vowel,
        files=tuple(
            SourceFile(name, sha256, (_ESL + name, _ESL_NEW + name))
            for name, sha256 in (
                ("vowel.train", "6285d72a3ec5af71286e6e0a778b836c229e3c41d6e0c2076294ee671e3ed9fb"),
                ("vowel.test", "94720047d8e1d1f485b882347ad20b9b62fd04b080c855e23a10a4804e886f1b"),
            )
        ),
        folders=("vowel",),
    ),
    DatasetSpec(
        "satimage",
        "UCI Statlog (Landsat Satellite); 4435/2000 fixed split, P=36, Q=6",
        _load_satimage,
        files=(
            SourceFile(
                "sat.trn",
                "e896dc88a960fa2404160fc4c3cb3dc53fcf4afd80ba920bf2d261bd42d12613",
                (_UCI + "statlog/satimage/sat.trn",),
            ),
            SourceFile(
                "sat.tst",
                "4b9167b8a92baafafed7c8809aef86d0683a5e685c19d98d119fa6974f0f2479",
                (_UCI + "statlog/satimage/sat.tst",),
            ),
        ),
        folders=("satimage",),
    ),
    DatasetSpec(
        "letter",
        "UCI Letter Recognition; 13333/6667 random split, P=16, Q=26",
        _load_letter,
        files=(
            SourceFile(
                "letter-recognition.data",
                "2b89f3602cf768d3c8355267d2f13f2417809e101fc2b5ceee10db19a60de6e2",
                (_UCI + "letter-recognition/letter-recognition.data",),
            ),
        ),
        folders=("letter",),
        # Its value is that of the team's copy, not a published one.
        documentation=(
            SourceFile(
                "letter-recognition.names",
                "128b85adc32bd58a93ed6e1df136b1d7c636f85f290ba3db655ccaa19c86d324",
            ),
        ),
    ),
    DatasetSpec(
        "mnist",
        "MNIST handwritten digits (the four official IDX files); 60000/10000 fixed split, "
        "P=784, Q=10",
        _load_mnist,
        files=(
            _mnist_file(
                "train-images-idx3-ubyte.gz",
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            ),
            _mnist_file(
                "train-labels-idx1-ubyte.gz",
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            ),
            _mnist_file(
                "t10k-images-idx3-ubyte.gz",
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            ),
            _mnist_file(
                "t10k-labels-idx1-ubyte.gz",
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            ),
        ),
        folders=("mnist",),
    ),
    DatasetSpec(
        "norb",
        "small NORB, stereo pairs 2x96x96 averaged to 2x32x32; 24300/24300 fixed split, "
        "P=2048, Q=5",
        _load_norb,
        files=(
            _norb_file(
                _NORB_TRAIN_DAT, "5ffd6272a07d32695ee1082a26a41a93a37aab8c28da047f8c34ed348d214873"
            ),
            _norb_file(
                _NORB_TRAIN_CAT, "2784e542c1922060691090952b6cd6278879a216c90f81476f0f00256d42cdaa"
            ),
            _norb_file(
                _NORB_TEST_DAT, "cf7104eed3e51174d2f65b66d1e5878b9da233b886f161b0d88f4510ba2c7474"
            ),
            _norb_file(
                _NORB_TEST_CAT, "ecaf6d5bb8c3bc5eab9cf0258f6d2198dd474e016e374836fc097f2e5ff509ff"
            ),
        ),
        folders=("norb", "smallnorb"),
    ),
    DatasetSpec(
        "caltech101",
        "Caltech101 spatial-pyramid features of LC-KSVD (Jiang et al., CVPR 2011); "
        "6000/3000 random split, P=3000, Q=102",
        _load_caltech101,
        # No published checksum was found: the file is used unverified. The URL
        # is a zip holding spatialpyramidfeatures4caltech101/<the .mat>.
        files=(
            SourceFile(
                _CALTECH_MAT, None, (_LCKSVD + "spatialpyramidfeatures4caltech101.zip",)
            ),
        ),
        folders=("caltech101", "spatialpyramidfeatures4caltech101"),
    ),
)

#: Every dataset, by name, in the order they are listed to users.
REGISTRY: Mapping[str, DatasetSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})

#: The dataset names.
DATASETS: tuple[str, ...] = tuple(REGISTRY)


def _checksum_index() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for spec in REGISTRY.values():
        for file in (*spec.files, *spec.documentation):
            out[file.variants[0]] = file.sha256
            for unpacked in file.variants[1:]:
                out[unpacked] = None  # no value is published for an unpacked copy
    return out


# Indexes by file name, derived from REGISTRY. Verification and downloads look
# files up here, so a test (or a site with a local mirror) can patch one entry.

#: sha256 of every known file name on disk; None = none published, not verified.
CHECKSUMS: dict[str, str | None] = _checksum_index()

#: Download URLs of every file :func:`fetch` downloads, official first.
URLS: dict[str, tuple[str, ...]] = {
    f.variants[0]: f.urls for spec in REGISTRY.values() for f in spec.files
}


# --------------------------------------------------------------------------
# public entry points
# --------------------------------------------------------------------------


def _spec(name: str) -> DatasetSpec:
    key = str(name).strip().lower()
    if key not in REGISTRY:
        raise UserError(f"unknown dataset {name!r}; valid names: {', '.join(DATASETS)}")
    return REGISTRY[key]


def load_dataset(
    name: str,
    data_dir: str | os.PathLike | None = None,
    seed: int = 0,
    **options: object,
) -> Dataset:
    """Load, check and normalise one dataset.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    data_dir : str or path-like, optional
        Where the files are (see :func:`find_data_dir`); unused by
        ``digits`` and ``synthetic``.
    seed : int, default 0
        Non-negative seed of the random split (``digits``, ``letter``,
        ``caltech101``) or of the generator (``synthetic``); ignored by the
        datasets with a fixed split.
    **options
        ``verify`` (bool, default True): check each file's sha256 against
        :data:`CHECKSUMS`; ``verify=False`` is the only way to skip it.
        The dataset's own options (:attr:`DatasetSpec.options`): ``synthetic``
        takes ``n_features`` (20), ``n_classes`` (5), ``n_train`` (2000) and
        ``n_test`` (500).

    Returns
    -------
    Dataset
        Samples as columns, normalised as described in the module docstring.

    Raises
    ------
    UserError
        Unknown name or option, missing file, checksum mismatch, or a file
        that is truncated, malformed or holds NaN/inf.
    """
    spec = _spec(name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    allowed = {"verify", *spec.options}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise UserError(
            f"{spec.name}: unknown option(s) {', '.join(unknown)}; "
            f"valid: {', '.join(sorted(allowed))}"
        )
    verify = options.pop("verify", True)
    if not isinstance(verify, (bool, np.bool_)):
        raise UserError(f"verify must be True or False, got {verify!r}")

    paths: dict[str, Path] = {}
    if spec.files:
        root = find_data_dir(data_dir)
        # Locate every file first, so all missing-file errors come before any parsing.
        paths = {f.name: _locate(spec, f, root) for f in spec.files}
        if verify:
            for path in paths.values():
                _verify(spec.name, path)
    return spec.loader(paths, int(seed), {**spec.options, **options})


@dataclass(frozen=True)
class FileCheck:
    """The state on disk of one file of a dataset (see :func:`check_files`).

    Attributes
    ----------
    dataset : str
        The dataset the file belongs to.
    file : str
        The file's name as published (the variant that is downloaded and verified).
    path : pathlib.Path or None
        Where it was found; None when it is missing.
    status : str
        ``"verified"`` (its sha256 matches the published one), ``"unverified"``
        (present, but no sha256 is published for it, e.g. an unpacked ``.gz``
        or the Caltech101 features), ``"mismatch"`` or ``"missing"``.
    message : str
        One line for the user: what is wrong and what to do (for
        ``"unverified"``, why it is not verified; empty when verified).
    """

    dataset: str
    file: str
    path: Path | None
    status: str
    message: str = ""

    @property
    def usable(self) -> bool:
        """Present and not known to be corrupt (verified or unverifiable)."""
        return self.status in ("verified", "unverified")


def _check_file(spec: DatasetSpec, file: SourceFile, root: Path | None) -> FileCheck:
    name = file.variants[0]
    path = _find(spec, file, root)
    if path is None:
        where = f"{root / spec.folders[0]} or {root}" if root is not None else "no data directory"
        fix = f"dssfn-mpi data fetch {spec.name}{'' if root is None else f' --dest {root}'}"
        message = f"{spec.name}: {name} not found ({where}); get it with `{fix}`"
        return FileCheck(spec.name, name, None, "missing", message)
    expected = CHECKSUMS.get(path.name)
    if expected is None:
        why = f"{path}: no published sha256, not verified"
        return FileCheck(spec.name, name, path, "unverified", why)
    got = _digest(path)
    if got != expected:
        message = _mismatch_message(spec.name, path, expected, got)
        return FileCheck(spec.name, name, path, "mismatch", message)
    return FileCheck(spec.name, name, path, "verified")


def check_files(name: str, data_dir: str | os.PathLike | None = None) -> list[FileCheck]:
    """Look for a dataset's files and check each one found against its published sha256.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    data_dir : str or path-like, optional
        Where to look (see :func:`find_data_dir`).

    Returns
    -------
    list of FileCheck
        One per file the dataset's loader needs, in the registry's order;
        empty for ``digits`` and ``synthetic``, which need no files.

    Raises
    ------
    UserError
        Unknown dataset, or ``data_dir`` / ``$DSSFN_DATA_DIR`` is not a directory.
    """
    spec = _spec(name)
    root = find_data_dir(data_dir) if spec.files else None
    return [_check_file(spec, f, root) for f in spec.files]


class _ChecksumError(Exception):
    pass


#: ``progress(file, done, total)``, told how a download proceeds: after each
#: chunk with the bytes received so far and the size announced by the server
#: (None if unknown), then once more at the end with ``done == total`` (the only
#: call where they are equal). It must not raise.
Progress = Callable[[str, int, Optional[int]], None]

_CHUNK = 1 << 16  # bytes read at a time: a progress update every 64 KiB at most


def _content_length(resp: Any) -> int | None:
    """The size the server announced, or None."""
    headers = getattr(resp, "headers", None)
    value = headers.get("Content-Length") if headers is not None else None
    try:
        size = int(value) if value is not None else -1
    except ValueError:
        return None
    return size if size >= 0 else None


def _download(
    url: str, target: Path, expected: str | None, timeout: float,
    progress: Progress | None = None,
) -> None:
    """Stream ``url`` into a temp file next to ``target``; rename if it verifies."""

    def write(tmp: Path) -> None:
        h = hashlib.sha256()
        done = 0
        with open(tmp, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            total = _content_length(resp)
            for chunk in iter(lambda: resp.read(_CHUNK), b""):
                h.update(chunk)
                out.write(chunk)
                done += len(chunk)
                if progress is not None and done != total:
                    progress(target.name, done, total)
        if progress is not None:
            progress(target.name, done, done)
        if expected is not None and h.hexdigest() != expected:
            raise _ChecksumError(f"sha256 {h.hexdigest()}, expected {expected}")

    atomic_write(target, write)


def _extract_member(zip_path: Path, member_name: str, target: Path) -> None:
    with zipfile.ZipFile(zip_path) as zf:
        members = [m for m in zf.namelist() if Path(m).name == member_name]
        if not members:
            raise UserError(f"{zip_path}: no {member_name} inside the archive")

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as out, zf.open(members[0]) as src:
                shutil.copyfileobj(src, out, 1 << 20)

        atomic_write(target, write)


def fetch(
    name: str,
    dest: str | os.PathLike,
    timeout: float = FETCH_TIMEOUT,
    progress: Progress | None = None,
) -> list[Path]:
    """Download a dataset's files from their official URLs and verify them.

    Files go to ``<dest>/<name>/``, so ``--data-dir dest`` finds them. A file
    already present with the right checksum is not downloaded again. Each
    download goes to a temporary file that is renamed into place only after
    its sha256 matches :data:`CHECKSUMS` (files without a published checksum
    -- the Caltech101 features -- are kept unverified).

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`. ``digits`` (bundled with scikit-learn) and
        ``synthetic`` (generated) need nothing and return ``[]``.
    dest : str or path-like
        Target data directory.
    timeout : float, default 60
        Seconds per connection attempt.
    progress : callable, optional
        Told how each download proceeds (see :data:`Progress`); files already
        present and verified are not reported.

    Returns
    -------
    list of pathlib.Path
        The dataset's files in ``<dest>/<name>/``.

    Raises
    ------
    UserError
        No network / unreachable server, or a download whose checksum differs
        from the published one.
    """
    spec = _spec(name)
    if not spec.files:
        return []
    out_dir = Path(dest).expanduser() / spec.folders[0]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {out_dir} ({exc}); choose another --dest") from None
    return [_fetch_file(file, out_dir, timeout, progress) for file in spec.files]


def _fetch_file(
    file: SourceFile, out_dir: Path, timeout: float, progress: Progress | None
) -> Path:
    """Download one file into ``out_dir`` unless a verified copy is there; return its path."""
    fname = file.variants[0]  # download the verifiable variant
    target = out_dir / fname
    expected = CHECKSUMS.get(fname)
    if target.is_file() and (expected is None or _digest(target) == expected):
        return target
    errors: list[str] = []
    for url in URLS[fname]:
        try:
            if url.endswith(".zip"):
                zip_target = out_dir / Path(url).name
                try:
                    _download(url, zip_target, None, timeout, progress)
                    _extract_member(zip_target, fname, target)
                finally:
                    zip_target.unlink(missing_ok=True)  # the archive is never kept
            else:
                _download(url, target, expected, timeout, progress)
            return target
        except _ChecksumError as exc:
            errors.append(f"{url}: {exc}")
        except (
            OSError,
            urllib.error.URLError,
            http.client.HTTPException,
            zipfile.BadZipFile,
        ) as exc:
            errors.append(f"{url}: {exc}")
    if any("sha256" in e for e in errors):
        raise UserError(
            f"downloaded {fname} but its checksum is wrong ({'; '.join(errors)}); "
            f"copy a good copy by hand into {out_dir}"
        )
    raise UserError(
        f"could not download {fname} ({'; '.join(errors)}) (no network?) — "
        f"copy the files by hand into {out_dir}"
    )
