"""Plain-text tables: ``vowel`` (ESL's CSV), ``satimage`` (UCI Statlog, space-separated)
and ``letter`` (UCI's CSV, the class letter first)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import UserError
from .normalize import check_finite, make_dataset, random_split, standardize
from .records import Dataset

__all__ = ["load_letter", "load_satimage", "load_vowel"]


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


def load_vowel(
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
        check_finite(feats, path)
        parts.append((feats, y))
    (A_tr, y_tr), (A_te, y_te) = parts
    A_tr, A_te = standardize(A_tr, A_te)
    return make_dataset("vowel", A_tr, y_tr, A_te, y_te, 11)


def load_satimage(
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
        check_finite(feats, path)
        parts.append((feats, y))
    (A_tr, y_tr), (A_te, y_te) = parts
    A_tr, A_te = standardize(A_tr, A_te)
    return make_dataset("satimage", A_tr, y_tr, A_te, y_te, 6)


def load_letter(
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
    check_finite(A, path)
    tr, te = random_split(A.shape[0], 13333, seed)
    A_tr, A_te = standardize(A[tr], A[te])
    return make_dataset("letter", A_tr, y[tr], A_te, y[te], 26)
