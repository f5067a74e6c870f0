"""``python -m dssfn_mpi``: the same as the ``dssfn-mpi`` command."""

import sys

from .cli import main

sys.exit(main())
