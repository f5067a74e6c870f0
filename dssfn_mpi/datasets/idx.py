"""``mnist``: the four gzipped big-endian IDX files, scaled to [0, 1]."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import UserError
from .normalize import make_dataset
from .records import Dataset

__all__ = ["load_mnist"]


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


def load_mnist(
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
    return make_dataset("mnist", A_tr, y_tr, A_te, y_te, 10)
