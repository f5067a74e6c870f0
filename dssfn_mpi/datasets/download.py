"""Downloads: a dataset's files from their official addresses (mirrors after), each
kept only once its sha256 matches the published one (:func:`fetch`)."""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from ..errors import UserError
from ..fileio import atomic_write
from .records import SourceFile
from .registry import CHECKSUMS, URLS, get_spec
from .verify import digest

__all__ = ["FETCH_TIMEOUT", "Progress", "fetch"]

FETCH_TIMEOUT = 60.0  # seconds per connection attempt


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
    spec = get_spec(name)
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
    if target.is_file() and (expected is None or digest(target) == expected):
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
