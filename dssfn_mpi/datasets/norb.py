"""``norb``: small NORB's binary matrices (gzipped or not), stereo pairs averaged
over 3x3 blocks and scaled to [0, 1]."""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np

from ..errors import UserError
from .normalize import make_dataset
from .records import Dataset

__all__ = ["TEST_CAT", "TEST_DAT", "TRAIN_CAT", "TRAIN_DAT", "load_norb"]

TRAIN_DAT = "smallnorb-5x46789x9x18x6x2x96x96-training-dat.mat"
TRAIN_CAT = "smallnorb-5x46789x9x18x6x2x96x96-training-cat.mat"
TEST_DAT = "smallnorb-5x01235x9x18x6x2x96x96-testing-dat.mat"
TEST_CAT = "smallnorb-5x01235x9x18x6x2x96x96-testing-cat.mat"

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


def load_norb(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    parts = []
    for dat, cat in ((TRAIN_DAT, TRAIN_CAT), (TEST_DAT, TEST_CAT)):
        y = _read_norb_cat(paths[cat])
        A = _read_norb_dat(paths[dat])
        if A.shape[0] != y.shape[0]:
            raise UserError(
                f"{paths[dat]} has {A.shape[0]} images but {paths[cat]} has {y.shape[0]} labels"
            )
        parts.append((A, y))
    (A_tr, y_tr), (A_te, y_te) = parts
    return make_dataset("norb", A_tr, y_tr, A_te, y_te, 5)
