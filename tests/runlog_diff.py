"""Compare two run logs' numbers: every dataset and attribute, times and paths aside.

Usage: python tests/runlog_diff.py A.h5 B.h5 [A2.h5 B2.h5 ...]
Exit status 0 when every pair is identical (bit for bit, NaN equal to NaN), 1 otherwise.
"""
from __future__ import annotations

import json
import re
import sys

import h5py
import numpy as np

# Measured times, clocks, host facts, the command line, and two measured counts (sleeps of the
# waiting policy, the peak of the statistics buffers): these differ between any two runs.
IGNORED = re.compile(
    r"(seconds|_time$|^time|wall|cpu_affinity|command_line|git_revision|mpi_passive_put|"
    r"wait_resolved|peak_rss|load_average|^trace/(start|end|cpu|comm_start|phase_start|phase_end|phase_cpu)$|"
    r"hostname|waits_slept|stats_peak_bytes|^REFERENCE_LIST$|^DIMENSION_LIST$|^sim_schedule$)")
CONFIG_IGNORED = ("out", "save_model", "resume", "schedule")


def _flatten(f: h5py.File) -> dict:
    items: dict = {}

    def visit(name: str, obj) -> None:
        if isinstance(obj, h5py.Dataset) and not IGNORED.search(name):
            items[f"D {name}"] = obj[()]
        for key, value in obj.attrs.items():
            if not IGNORED.search(key):
                items[f"A {name}@{key}"] = value

    for key, value in f.attrs.items():
        if IGNORED.search(key):
            continue
        if key == "config":
            cfg = json.loads(value)
            value = json.dumps({k: v for k, v in cfg.items() if k not in CONFIG_IGNORED},
                               sort_keys=True)
        items[f"A /@{key}"] = value
    f.visititems(visit)
    return items


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
        return False
    if a.dtype.kind == "f":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def diff(path_a: str, path_b: str) -> list[str]:
    """The names of the items that differ between two run logs (empty when identical)."""
    with h5py.File(path_a, "r") as fa, h5py.File(path_b, "r") as fb:
        a, b = _flatten(fa), _flatten(fb)
    out = [f"only in one: {k}" for k in sorted(set(a) ^ set(b))]
    out += [f"differs: {k}" for k in sorted(set(a) & set(b)) if not _same(a[k], b[k])]
    return out


def main(argv: list[str]) -> int:
    bad = 0
    for path_a, path_b in zip(argv[::2], argv[1::2]):
        lines = diff(path_a, path_b)
        print(f"{path_a} vs {path_b}: {'identical' if not lines else f'{len(lines)} differ'}")
        for line in lines:
            print("   ", line)
        bad += bool(lines)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
