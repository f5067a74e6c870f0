"""Atomic file replacement: the one way this package writes a file others may read.

A reader (or a crash) sees either the previous complete file or the new complete
one, never a half-written file. The data go to ``<name>.tmp-<pid>`` beside the
target (same directory, so the rename stays on one file system), which is
synced and then renamed over the target; the directory is synced afterwards so
the rename itself survives a power loss. A ``kill -9`` mid-write leaves the
target untouched and a stale ``.tmp-<pid>`` file, which
:func:`remove_stale_temporaries` deletes.
"""

from __future__ import annotations

import errno
import glob
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Union

__all__ = ["atomic_write", "remove_stale_temporaries", "temp_path"]

PathLike = Union[str, "os.PathLike[str]"]

# fsync errors that only say "this file system cannot sync": nothing to lose by
# going on (the rename alone already protects against kill -9). Any other
# error (EIO, ENOSPC) means the data may not be on disk and is raised.
_UNSUPPORTED = {errno.EINVAL, errno.EROFS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF}


def temp_path(path: PathLike) -> Path:
    """The temporary file :func:`atomic_write` uses for ``path`` in this process.

    Parameters
    ----------
    path
        The target file.

    Returns
    -------
    pathlib.Path
        ``<path>.tmp-<pid>``, in the target's directory.
    """
    target = Path(path)
    return target.with_name(f"{target.name}.tmp-{os.getpid()}")


def _fsync(path: Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if directory:
            return  # some platforms cannot open a directory: best effort
        raise
    try:
        os.fsync(fd)  # syncs the inode, whichever descriptor wrote it
    except OSError as exc:
        # A directory sync is best effort (many file systems refuse it); a file
        # sync error is raised unless it only says "not supported here".
        if not directory and exc.errno not in _UNSUPPORTED:
            raise
    finally:
        os.close(fd)


#: Held by every :func:`atomic_write` of this process: two threads (the training
#: loop and a graceful stop, :mod:`dssfn_mpi.run.jobstop`) never write at once, and
#: a stop that keeps it until the process exits has the last word.
WRITE_LOCK = threading.RLock()


def atomic_write(path: PathLike, write: Callable[[Path], object]) -> None:
    """Create or replace ``path`` atomically with what ``write`` puts in a temporary file.

    ``write(tmp)`` must create and fill the file ``tmp`` (``<path>.tmp-<pid>``,
    beside ``path``) and close it. Then the file is synced, renamed onto
    ``path`` (``os.replace``) and the directory is synced. On any exception,
    including ``KeyboardInterrupt``, the temporary file is removed, ``path``
    is left as it was and the exception propagates.

    Parameters
    ----------
    path
        The target file; its directory must exist.
    write
        Called once with the temporary path; its return value is ignored.

    Raises
    ------
    OSError
        The file cannot be written, synced or renamed (the target is unchanged).
    """
    target = Path(path)
    tmp = temp_path(target)
    with WRITE_LOCK:
        try:
            write(tmp)
            _fsync(tmp)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync(target.parent if str(target.parent) else Path("."), directory=True)


def remove_stale_temporaries(path: PathLike) -> None:
    """Delete the temporary files killed writers left beside ``path`` (never ``path``).

    Parameters
    ----------
    path
        A target file written with :func:`atomic_write`.
    """
    target = Path(path)
    for tmp in target.parent.glob(f"{glob.escape(target.name)}.tmp-*"):
        tmp.unlink(missing_ok=True)
