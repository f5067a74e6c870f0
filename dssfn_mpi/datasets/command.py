"""``dssfn-mpi data list | verify | fetch``: what the user sees of the datasets.

The datasets themselves (files, checksums, downloads) are the rest of
:mod:`dssfn_mpi.datasets`; this module only decides what is printed: one status per
dataset, one line per bad file, and download progress on stderr -- a live line on a
terminal, a line every 10 % in a log file, so a batch job's log gets no progress spam.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ..errors import UserError
from .download import fetch
from .locate import default_data_dir, find_data_dir
from .registry import DATASETS, REGISTRY
from .verify import FileCheck, check_files

__all__ = ["DownloadProgress", "data_fetch", "data_list", "data_verify", "format_size"]

PROG = "dssfn-mpi"

#: Files smaller than this get only the final line in a log (no 10 % steps).
LOG_STEPS_FROM = 1_000_000


def format_size(n: int) -> str:
    """A byte count for people: ``"532 B"``, ``"48.3 kB"``, ``"9.9 MB"``, ``"1.2 GB"``.

    Parameters
    ----------
    n
        Number of bytes (decimal units, as download tools print them).

    Returns
    -------
    str
        The size with one decimal above 1 kB.
    """
    if n < 1000:
        return f"{n} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n < 1000 * scale or unit == "GB":
            return f"{n / scale:.1f} {unit}"
    raise AssertionError(n)  # pragma: no cover


class DownloadProgress:
    """Prints how downloads proceed; a :data:`dssfn_mpi.datasets.Progress` callback.

    Parameters
    ----------
    stream
        Where to print (default ``sys.stderr``, so stdout stays a list of paths).
    interactive
        Rewrite one line in place (bytes, total and percent); default: whether
        ``stream`` is a terminal. Otherwise one line at each 10 % step of files of
        at least :data:`LOG_STEPS_FROM` bytes and one line when a file is done.
    min_interval
        Seconds between two rewrites of the terminal line.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        interactive: bool | None = None,
        min_interval: float = 0.2,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        if interactive is None:
            isatty = getattr(self.stream, "isatty", None)
            interactive = bool(isatty and isatty())
        self.interactive = interactive
        self.min_interval = min_interval
        self._open_line = False  # a terminal line is waiting for its newline
        self._last_print = -float("inf")
        self._step = 0  # last 10 % step printed (log mode)
        self._done = 0

    def __call__(self, name: str, done: int, total: int | None) -> None:
        finished = done == total
        if done < self._done:  # the same file again, from another address
            self._step = 0
        self._done = 0 if finished else done
        if self.interactive:
            self._terminal(name, done, total, finished)
        else:
            self._log(name, done, total, finished)

    def _terminal(self, name: str, done: int, total: int | None, finished: bool) -> None:
        now = time.monotonic()
        if not finished and now - self._last_print < self.min_interval:
            return
        self._last_print = now
        if finished:
            text = f"  {name}: {format_size(done)} downloaded"
        elif total:
            text = f"  {name}: {format_size(done)} / {format_size(total)} {100 * done // total:3d}%"
        else:
            text = f"  {name}: {format_size(done)}"
        # \r and padding overwrite the previous, possibly longer, text.
        self.stream.write(f"\r{text:<60}" + ("\n" if finished else ""))
        self.stream.flush()
        self._open_line = not finished

    def _log(self, name: str, done: int, total: int | None, finished: bool) -> None:
        if finished:
            self.stream.write(f"  {name}: {format_size(done)} downloaded\n")
            self._step = 0
        elif total and total >= LOG_STEPS_FROM:
            step = 10 * done // total
            if step <= self._step:
                return
            self._step = step
            self.stream.write(
                f"  {name}: {10 * step}% ({format_size(done)} of {format_size(total)})\n"
            )
        else:
            return
        self.stream.flush()

    def close(self) -> None:
        """End a terminal line left open by a download that failed midway."""
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False


def _check_names(names: Sequence[str]) -> list[str]:
    """The datasets named (all of them when none), validated before any work."""
    wanted = [str(n).strip().lower() for n in names] or list(DATASETS)
    unknown = [n for n, key in zip(names, wanted) if key not in REGISTRY]
    if unknown:
        raise UserError(f"unknown dataset {unknown[0]!r}; valid names: {', '.join(DATASETS)}")
    return list(dict.fromkeys(wanted))


def _status(checks: list[FileCheck], name: str) -> str:
    """One phrase saying whether a dataset is present and verified."""
    if not checks:
        return "built in, no files needed"
    fix = f"dssfn-mpi data fetch {name}"
    bad = [c.file for c in checks if c.status == "mismatch"]
    missing = [c for c in checks if c.status == "missing"]
    unverified = [c.file for c in checks if c.status == "unverified"]
    if bad:
        return f"present, sha256 MISMATCH: {', '.join(bad)} (fix: {fix})"
    if len(missing) == len(checks):
        return f"not present (get it: {fix})"
    if missing:
        return f"incomplete, {len(missing)} of {len(checks)} files missing (fix: {fix})"
    if unverified:
        return f"present, not verified: no published sha256 for {', '.join(unverified)}"
    return "present, verified"


def data_list(names: Sequence[str], data_dir: str | None, as_json: bool = False) -> int:
    """``dssfn-mpi data list``: the data folder in use and each dataset's state.

    Parameters
    ----------
    names
        Datasets to show (all when empty).
    data_dir
        ``--data-dir``, or None for the default search (:func:`find_data_dir`).
    as_json
        Print one JSON object instead: ``{"data_dir": PATH or null, "datasets":
        {NAME: {"status": PHRASE, "files": [{"file", "status", "path"}]}}}``,
        each file's status as :class:`~dssfn_mpi.datasets.FileCheck` gives it.

    Returns
    -------
    int
        0.
    """
    wanted = _check_names(names)
    where = find_data_dir(data_dir)
    if as_json:
        import json

        checks = {name: check_files(name, data_dir) for name in wanted}
        print(json.dumps({"data_dir": None if where is None else str(where), "datasets": {
            name: {"status": _status(c, name),
                   "files": [{"file": f.file, "status": f.status,
                              "path": None if f.path is None else str(f.path)} for f in c]}
            for name, c in checks.items()}}))
        return 0
    missing = f"(none: {default_data_dir()} does not exist; dssfn-mpi data fetch NAME makes it)"
    print(f"data directory: {where or missing}")
    width = max(len(n) for n in wanted)
    for name in wanted:
        print(f"  {name:<{width}}  {_status(check_files(name, data_dir), name)}")
    return 0


def data_verify(names: Sequence[str], data_dir: str | None) -> int:
    """``dssfn-mpi data verify [NAME ...]``: check files against their published sha256.

    With names, every file of those datasets must be present and match; without,
    every dataset with at least one file present is checked. Good files are
    listed on stdout, each bad one is one ``dssfn-mpi: error:`` line on stderr.

    Parameters
    ----------
    names
        Datasets to check (when empty: those present).
    data_dir
        ``--data-dir``, or None for the default search (:func:`find_data_dir`).

    Returns
    -------
    int
        0 if every file checked is good, 1 if any is missing or corrupt.
    """
    wanted = _check_names(names)
    checks = {name: check_files(name, data_dir) for name in wanted}
    if not names:
        checks = {n: c for n, c in checks.items() if any(f.path is not None for f in c)}
    n_ok = n_bad = 0
    for name, files in checks.items():
        if not files:
            print(f"{name}: built in, nothing to verify")
        for check in files:
            if check.status == "verified":
                print(f"OK          {check.path}", flush=True)
            elif check.status == "unverified":
                print(f"UNVERIFIED  {check.path} (no published sha256)", flush=True)
            else:
                print(f"{PROG}: error: {check.message}", file=sys.stderr, flush=True)
                n_bad += 1
                continue
            n_ok += 1
    if not checks:
        where = find_data_dir(data_dir)
        print(f"nothing to verify: no dataset files in {where or 'any data directory'}")
    print(f"{n_ok} file(s) good, {n_bad} bad")
    return 1 if n_bad else 0


def data_fetch(names: Sequence[str], dest: str | None) -> int:
    """``dssfn-mpi data fetch NAME ... [--dest DIR]``: download, verify, print the paths.

    Parameters
    ----------
    names
        Datasets to download (at least one).
    dest
        ``--dest``; default :func:`dssfn_mpi.datasets.default_data_dir`, the
        folder that ``train`` searches.

    Returns
    -------
    int
        0 (failures raise :class:`UserError`).
    """
    if not names:
        raise UserError("data fetch needs a dataset name, e.g. dssfn-mpi data fetch satimage")
    wanted = _check_names(names)
    target = Path(dest).expanduser() if dest else default_data_dir()
    progress = DownloadProgress()
    try:
        for name in wanted:
            spec = REGISTRY[name]
            if not spec.files:
                print(f"{name}: built in, nothing to fetch", file=sys.stderr, flush=True)
                continue
            print(f"{name}: into {target / spec.folders[0]}", file=sys.stderr, flush=True)
            for path in fetch(name, target, progress=progress):
                print(path, flush=True)
    finally:
        progress.close()
    return 0
