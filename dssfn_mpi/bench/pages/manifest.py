"""The manifest of the committed result data (``results/data/MANIFEST.json``): reading it,
and the one rule for the relaxation a file was measured at.

A file whose MANIFEST command pins a relaxation (``--set relax=X``, or ``--relax X`` /
``--eta X`` in the commands it names) was not measured at the engines' defaults: its figures
say so at the end of their titles and the pages name it (:func:`pinned_relaxation`,
:func:`relaxation`). The folder, its figures and pages: :mod:`dssfn_mpi.bench.pages.resultsdir`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...errors import UserError, require

__all__ = ["BUDGET_BYTES", "MANIFEST", "pinned_relaxation", "read_manifest", "relaxation"]

MANIFEST = "MANIFEST.json"
#: The size budget of the whole folder (manifest included).
BUDGET_BYTES = 20_000_000
#: An option of a MANIFEST command that pins a relaxation, and its value: ``--set relax=X``
#: of a sweep, ``--relax X`` (sync) or ``--eta X`` (async) of a run (never ``relaxes=``,
#: a sweep over several).
_PIN = re.compile(r"(?:--set relax=|--relax[ =]|--eta[ =])(\d+(?:\.\d+)?)")
_DEFAULTS = "the engines' default relaxations"


def read_manifest(data_dir: str | os.PathLike) -> dict[str, Any]:
    """The folder's manifest (``{"budget_bytes", "files"}``); empty when there is none yet."""
    path = Path(data_dir) / MANIFEST
    if not path.exists():
        return {"budget_bytes": BUDGET_BYTES, "files": {}}
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise UserError(f"{path}: not valid JSON ({exc}); restore it from git") from None
    require(isinstance(data.get("files"), dict), f"{path}: no 'files' table; restore it from git")
    return data


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def pinned_relaxation(command: str) -> str | None:
    """The relaxation a MANIFEST command pins, as figure titles and pages name it.

    Parameters
    ----------
    command : str
        A file's command in MANIFEST.json (with its notes on how it ran).

    Returns
    -------
    str or None
        ``"relaxation X"`` (``"relaxation X and Y"`` when it pins several), or None when
        the command leaves every engine at its default relaxation.
    """
    found = sorted(set(_PIN.findall(command)), key=float)
    return "relaxation " + _listing(found) if found else None


def relaxation(data_dir: str | os.PathLike, names: Iterable[str]) -> str:
    """The relaxation the files ``names`` (without ``.json``) were measured at, from their
    MANIFEST commands (:func:`pinned_relaxation`).

    Returns
    -------
    str
        ``"relaxation X"`` when every file pins X, the engines' defaults when none pins
        one, else each setting with its files (``"relaxation 1 for noise.json, the
        defaults for degree_tte.json"``).
    """
    files = read_manifest(data_dir).get("files", {})
    names = [f"{n}.json" for n in names]
    pins = {n: pinned_relaxation(files.get(n, {}).get("command", "")) or _DEFAULTS
            for n in names}
    settings = sorted(set(pins.values()), key=lambda p: p == _DEFAULTS)  # defaults last
    if len(settings) == 1:
        return settings[0]
    return ", ".join(f"{'the defaults' if p == _DEFAULTS else p} for "
                     f"{_listing([n for n in names if pins[n] == p])}" for p in settings)
