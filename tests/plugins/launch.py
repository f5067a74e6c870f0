"""Run ``dssfn-mpi ARGS`` with the test plug-ins registered (``python launch.py train ...``).

Commands separated by ``---`` run one after the other in the same MPI job
(``python launch.py train A --- train B``), so a test that needs several runs pays the
ranks' start-up once; the first non-zero exit status ends the job.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import relaxed  # noqa: E402, F401  (registers --mode relaxed-sync)

from dssfn_mpi.cli import main  # noqa: E402

SEPARATOR = "---"


def commands(argv: list[str]) -> list[list[str]]:
    """``argv`` split at each :data:`SEPARATOR`."""
    out: list[list[str]] = [[]]
    for arg in argv:
        if arg == SEPARATOR:
            out.append([])
        else:
            out[-1].append(arg)
    return [c for c in out if c]


def run_all(argv: list[str]) -> int:
    """Each command of ``argv`` in turn; the first non-zero exit status, else 0."""
    for command in commands(argv):
        status = main(command)
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(run_all(sys.argv[1:]))
