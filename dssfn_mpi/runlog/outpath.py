"""Where a run log may be written: the output-path policy of ``--out``.

One check, before anything is created, of the folder and the target file, so a
bad ``--out`` is a one-line user error at start-up and never a half-written file.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UserError
from ..fileio import PathLike

__all__ = ["check_output_path"]


def _exists_message(path: PathLike) -> str:
    """The one-line error for an existing ``path`` without ``--overwrite``."""
    return f"{path} exists; pass --overwrite or choose another --out"


def check_output_path(path: PathLike, overwrite: bool) -> None:
    """Check that a run log can be written at ``path``, without creating anything.

    Parameters
    ----------
    path
        The intended output file.
    overwrite
        Whether an existing file may be replaced.

    Raises
    ------
    UserError
        The directory does not exist or is not a directory, is not writable,
        ``path`` is a directory, or ``path`` exists and ``overwrite`` is False.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UserError(f"{target} is a directory; give a file name for --out")
    if not parent.exists():
        raise UserError(f"directory {parent} does not exist; create it or choose another --out")
    if not parent.is_dir():
        raise UserError(f"{parent} is not a directory; choose another --out")
    # os.access also reports read-only file systems (EROFS), even for root.
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"directory {parent} is not writable; choose another --out")
    if (target.exists() or target.is_symlink()) and not overwrite:
        raise UserError(_exists_message(target))
