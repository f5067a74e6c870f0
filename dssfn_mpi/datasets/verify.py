"""Checksums: each file against its published sha256 (hashed once per path, mtime and
size), and the state on disk of a dataset's files (:func:`check_files`)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from .locate import find_data_dir, find_file
from .records import DatasetSpec, SourceFile
from .registry import CHECKSUMS, get_spec

__all__ = ["FileCheck", "check_files", "digest", "mismatch_message", "verify_file"]


# In-process cache of computed digests, keyed by (path, mtime_ns, size), so a
# repeated load of an unchanged file does not hash it again.
_DIGESTS: dict[tuple[str, int, int], str] = {}


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def digest(path: Path) -> str:
    """sha256 of ``path`` (hex), hashed once per path, modification time and size."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _DIGESTS:
        _DIGESTS[key] = _sha256_file(path)
    return _DIGESTS[key]


def verify_file(dataset: str, path: Path) -> None:
    """Raise UserError unless ``path`` matches its published sha256 (if any)."""
    expected = CHECKSUMS.get(path.name)
    if expected is None:
        return  # no published checksum: nothing to compare with
    got = digest(path)
    if got != expected:
        raise UserError(mismatch_message(dataset, path, expected, got))


def mismatch_message(dataset: str, path: Path, expected: str, got: str) -> str:
    """The one line for a file whose sha256 is not the published one."""
    return (
        f"{path}: sha256 mismatch (expected {expected}, got {got}); re-download it with "
        f"`dssfn-mpi data fetch {dataset}` or point --data-dir at a good copy"
    )


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
    path = find_file(spec, file, root)
    if path is None:
        where = f"{root / spec.folders[0]} or {root}" if root is not None else "no data directory"
        fix = f"dssfn-mpi data fetch {spec.name}{'' if root is None else f' --dest {root}'}"
        message = f"{spec.name}: {name} not found ({where}); get it with `{fix}`"
        return FileCheck(spec.name, name, None, "missing", message)
    expected = CHECKSUMS.get(path.name)
    if expected is None:
        why = f"{path}: no published sha256, not verified"
        return FileCheck(spec.name, name, path, "unverified", why)
    got = digest(path)
    if got != expected:
        message = mismatch_message(spec.name, path, expected, got)
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
    spec = get_spec(name)
    root = find_data_dir(data_dir) if spec.files else None
    return [_check_file(spec, f, root) for f in spec.files]
