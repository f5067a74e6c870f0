"""Run ``dssfn-mpi ARGS`` with the test plug-ins registered (``python launch.py train ...``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import relaxed  # noqa: E402, F401  (registers --mode relaxed-sync)

from dssfn_mpi.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
