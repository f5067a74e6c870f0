"""Where the dataset files are: the data folder (``--data-dir``, ``$DSSFN_DATA_DIR``,
the per-user folder) and each file in it, with the one message for a missing file."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UserError
from .records import DatasetSpec, SourceFile
from .registry import CHECKSUMS, URLS

__all__ = ["ENV_DATA_DIR", "default_data_dir", "find_data_dir", "find_file", "locate",
           "user_data_dir"]

ENV_DATA_DIR = "DSSFN_DATA_DIR"


def user_data_dir() -> Path:
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
    return Path(env).expanduser() if env else user_data_dir()


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
    user = user_data_dir()
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
            f"per-user folder {user_data_dir()})"
        )
    else:
        where = f"not found in {root / spec.folders[0]} or {root}"
    return (
        f"{dataset}: file {shown} ({sha_txt}) {where}; get it from {url} or run "
        f"`dssfn-mpi data fetch {dataset}{'' if root is None else f' --dest {root}'}`, "
        f"which puts it where it is looked for; for a copy elsewhere pass --data-dir DIR "
        f"or set {ENV_DATA_DIR}=DIR"
    )


def find_file(spec: DatasetSpec, file: SourceFile, root: Path | None) -> Path | None:
    """Path of ``file`` under ``root/<folder>/`` or ``root/``; None if it is in neither."""
    if root is not None:
        dirs = [root / sub for sub in spec.folders] + [root]
        for d in dirs:
            for name in file.variants:
                if (d / name).is_file():
                    return d / name
    return None


def locate(spec: DatasetSpec, file: SourceFile, root: Path | None) -> Path:
    """Path of ``file`` under ``root/<folder>/`` or ``root/``; UserError if missing."""
    path = find_file(spec, file, root)
    if path is None:
        raise UserError(_missing_message(spec, file, root))
    return path
