"""Per-rank checkpoints: what a rank needs to continue after its last complete layer.

Each rank writes its own file after every layer (no communication, so the
asynchronous engine gains no synchronisation from it): its output matrices
``O_0 .. O_l``, its per-layer log rows (the ``engine`` and ``loop`` fields of
:mod:`dssfn_mpi.runlog.schema`, each field stored with its dtype) and, on rank 0, the
equivalence rows (the ``check`` fields).
Features are recomputed from the data and the saved ``O``'s on resume (cheap,
deterministic), and the random blocks come from the shared seed, so nothing
else is needed. Writes are atomic (:func:`dssfn_mpi.fileio.atomic_write`).

Layout: ``RUN.h5.ckpt/config.json`` (the run's settings, written by rank 0)
and ``RUN.h5.ckpt/rank-00012.npz``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..fileio import atomic_write
from ..fileio import remove_stale_temporaries as remove_stale_temporaries  # re-export
from ..runlog import schema

__all__ = [
    "RankCheckpoint",
    "checkpoint_dir",
    "load_config",
    "load_hosts",
    "remove",
    "remove_stale_temporaries",
    "save_config",
    "save_hosts",
]


def checkpoint_dir(out: str | os.PathLike) -> Path:
    """Folder holding the checkpoints of the run logged to ``out``."""
    return Path(str(out) + ".ckpt")


def save_config(out: str | os.PathLike, config: dict[str, Any], nodes: int) -> None:
    """Record the run's settings beside its checkpoints (rank 0, once)."""
    d = checkpoint_dir(out)
    d.mkdir(exist_ok=True)
    payload = json.dumps({"nodes": nodes, "config": config}, indent=1).encode()
    atomic_write(d / "config.json", lambda tmp: tmp.write_bytes(payload))


def load_config(out: str | os.PathLike) -> tuple[dict[str, Any], int]:
    """Settings and node count of the interrupted run logged to ``out``."""
    path = checkpoint_dir(out) / "config.json"
    if not path.is_file():
        raise UserError(
            f"--resume {out}: no checkpoint at {path.parent} (the run finished, never "
            "completed a layer, or was started without --out)"
        )
    try:
        data = json.loads(path.read_text())
        return dict(data["config"]), int(data["nodes"])
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"--resume {out}: {path} is damaged ({exc})") from None


def save_hosts(out: str | os.PathLike, hostnames: list[str]) -> None:
    """Record the host of each rank (rank 0): who was lost with a host, after the fact."""
    d = checkpoint_dir(out)
    d.mkdir(exist_ok=True)
    payload = json.dumps(hostnames).encode()
    atomic_write(d / "hosts.json", lambda tmp: tmp.write_bytes(payload))


def load_hosts(out: str | os.PathLike) -> list[str]:
    """The hosts :func:`save_hosts` recorded, ``[]`` if none (or unreadable)."""
    try:
        return [str(h) for h in json.loads((checkpoint_dir(out) / "hosts.json").read_text())]
    except (OSError, ValueError, TypeError):
        return []


def remove(out: str | os.PathLike) -> None:
    """Delete the checkpoints once the run log is complete."""
    shutil.rmtree(checkpoint_dir(out), ignore_errors=True)


def _savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    # Through a file object: given a path, np.savez would append ".npz" to the temp name.
    with open(path, "wb") as f:
        np.savez(f, **arrays)


class RankCheckpoint:
    """One rank's checkpoint file.

    Its rows are stored by field (``stat_<name>``, each of its dtype: the columns of
    the rank's rows, the form an older checkpoint has too) and read back as rows of
    :data:`~dssfn_mpi.runlog.schema.ROW_DTYPE`.
    """

    def __init__(self, out: str | os.PathLike, rank: int) -> None:
        self.path = checkpoint_dir(out) / f"rank-{rank:05d}.npz"

    def save(self, Os: list[np.ndarray], rows: np.ndarray,
             checks: dict[str, list]) -> None:
        """Atomically store everything up to and including layer ``len(Os) - 1``.

        ``rows`` holds the rank's rows of those layers (``len(Os)`` records of
        :data:`~dssfn_mpi.runlog.schema.ROW_DTYPE`), ``checks`` one list per ``check``
        field (empty lists on ranks other than 0).
        """
        arrays: dict[str, np.ndarray] = {f"O_{i}": O for i, O in enumerate(Os)}
        arrays.update({f"stat_{name}": rows[name] for name in schema.ROW_FIELDS})
        arrays.update({f"check_{k}": np.asarray(checks[k])
                       for k in schema.names(schema.CHECK) if checks.get(k)})
        self.path.parent.mkdir(exist_ok=True)
        atomic_write(self.path, lambda tmp: _savez(tmp, arrays))

    def load(self) -> tuple[list[np.ndarray], np.ndarray, dict[str, np.ndarray]]:
        """Saved ``O``'s, rows and (rank 0) equivalence rows; empty if none.

        A field the checkpoint lacks (written before the field existed) reads
        as "not measured" in every saved layer.
        """
        if not self.path.is_file():
            return [], schema.blank_rows(0), {}
        with np.load(self.path) as z:
            n = _layers_in(z)
            Os = [z[f"O_{i}"] for i in range(n)]
            rows, checks = _rows_and_checks(z, n)
        return Os, rows, checks

    def load_rows(self) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
        """Saved rows, (rank 0) equivalence rows and Q, the rows of ``O_0``; empty and 0
        if none.

        Reads only these: npz members load lazily, and the ``O`` matrices (the bulk of
        the file) are left alone but for ``O_0``'s shape.
        """
        if not self.path.is_file():
            return schema.blank_rows(0), {}, 0
        with np.load(self.path) as z:
            n = _layers_in(z)
            rows, checks = _rows_and_checks(z, n)
            q = int(z["O_0"].shape[0]) if n else 0
        return rows, checks, q


def _layers_in(z: Any) -> int:
    """Layers an open checkpoint holds (its ``O_*`` members)."""
    return sum(1 for k in z.files if k.startswith("O_"))


def _rows_and_checks(z: Any, n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The ``n`` rows and the check rows of an open checkpoint."""
    rows = schema.blank_rows(n)
    for name in schema.ROW_FIELDS:
        if f"stat_{name}" in z.files:
            rows[name] = z[f"stat_{name}"]
    checks = {k: z[f"check_{k}"] for k in schema.names(schema.CHECK)
              if f"check_{k}" in z.files}
    return rows, checks
