"""The versions of the software stack a run log records (root attributes ``python`` ..
``numba``, see :data:`dssfn_mpi.runlog.rootschema.ATTRIBUTES`).

Nothing here talks to MPI: ``mpi4py`` is only consulted (never imported) for its
version strings.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys

import h5py
import numpy as np

__all__ = ["software_versions"]


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def software_versions() -> dict[str, str]:
    """Versions of the software stack, as stored in the run log root attributes.

    ``mpi_library`` is filled only if ``mpi4py.MPI`` is already imported:
    importing it here would initialise MPI as a side effect.

    Returns
    -------
    dict of str to str
        Keys ``python``, ``numpy``, ``scipy``, ``h5py``, ``hdf5``, ``mpi4py``,
        ``mpi_library``, ``numba``; ``""`` for anything not available.
    """
    mpi_library = ""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        try:
            # Open MPI ends the string with a NUL, which HDF5 strings cannot hold.
            lines = str(mpi.Get_library_version()).replace("\x00", "").strip().splitlines()
            mpi_library = " ".join(lines[0].split()) if lines else ""  # MPICH pads with spaces
        except Exception:  # a broken MPI must not lose the run log
            mpi_library = ""
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": _dist_version("scipy"),
        "h5py": h5py.__version__,
        "hdf5": h5py.version.hdf5_version,
        "mpi4py": _dist_version("mpi4py"),
        "mpi_library": mpi_library,
        # The async edge form runs compiled loops when numba is installed (algorithms/kernels.py).
        "numba": _dist_version("numba"),
    }
