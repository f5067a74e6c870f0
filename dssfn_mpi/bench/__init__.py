"""Benchmark drivers and figures for dssfn_mpi (``dssfn-mpi bench`` / ``dssfn-mpi plot``).

Each benchmark is a list of training configurations; every configuration
runs as its own MPI job and its run log is appended to one HDF5 sweep file,
from which ``plot`` draws the figures. See BENCHMARKS.md; the repository's
``benchmarks/README.md`` lists every benchmark with its command.

Its folders, by job: ``summaries`` (a sweep's runs reduced to numbers and tables; it
imports no other folder), ``sweeps`` (what each sweep runs, the jobs, the ``bench`` command
line, whose ``parser`` and ``command`` import every folder's entry point), ``figures``
(``dssfn-mpi plot``), ``pages`` (``results/data`` and the pages written from it), ``micro``
(micro-benchmarks, programs of their own) and ``studies`` (the studies behind the models'
constants, run by hand). Beside them, ``variants`` reads a sweep's labels of its engines
(``async-lead16``, ``sync@1.8``) through the algorithm registry, which every folder asks
what a mode is.
"""

from __future__ import annotations

import argparse

__all__ = ["run_bench"]


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark named by ``args.name`` (the ``dssfn-mpi bench`` subcommand).

    The function that runs it is the one its subcommand names
    (``args.bench_func``, see :mod:`dssfn_mpi.bench.sweeps.parser`).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``bench`` arguments: ``bench_func``, ``name``, ``preset``, ``out``,
        ``overwrite``, ``launcher``, ``data_dir``, ``datasets``, ``seeds``,
        ``dry_run`` and the optional ``set``, ``values``, ``modes``,
        ``job_timeout``, ``inputs``, ``kind``; for a tool (``accuracy``,
        ``penalty``, ``activation``, ``links``) its own options.

    Returns
    -------
    int
        0 when every configuration ran, 1 when some failed (each is recorded
        in the sweep file with its error).

    Raises
    ------
    dssfn_mpi.errors.UserError
        Bad ``--out``, preset, override or dataset, before any job starts.
    """
    return args.bench_func(args)
