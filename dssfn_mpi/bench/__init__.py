"""Benchmark drivers and figures for dssfn_mpi (``dssfn-mpi bench`` / ``dssfn-mpi plot``).

Each benchmark is a list of training configurations; every configuration
runs as its own MPI job and its run log is appended to one HDF5 sweep file,
from which ``plot`` draws the figures. See BENCHMARKS.md; the repository's
``benchmarks/README.md`` lists every benchmark with its command.

Modules: ``command`` (the ``bench`` sweeps), ``presets`` (sizes),
``specs`` (configurations), ``jobs`` (running them and the sweep file), ``summary``
(numbers per run), ``projection`` (projected dedicated-core time and time to
eps, the one door to :mod:`dssfn_mpi.analysis.replay`), ``table2`` (the paper
comparison), ``tables`` (Markdown summaries), ``jitter`` (noisy and
slow-node clusters projected from one configuration), ``collect`` (Slurm
array results into one sweep), ``rma`` (the mailbox micro-benchmark, an MPI
program), ``rma_jobs`` (runs it as 2-rank jobs, one per one-sided component, and
merges their files), ``mailbox`` (the mailbox with the one-neighbour writes and
reads that ``rma`` and ``activation`` time), ``plot`` with ``timeplots`` (the
measured-vs-projected figures) and ``figstyle`` (what figures share), ``busy``
(the CPU hogs of ``bench contention`` and the signal handling that always
stops them), ``penalty`` (the serial ADMM penalty study behind the
``auto`` constants, run by hand), ``simcost`` (the simulator's CPU per activation against M
and n, run by hand), and ``links`` with ``netns`` (the replay's
network model against rate-capped links between two emulated hosts, run by
hand as root); ``parser`` declares every ``bench`` subcommand's options and the
function that runs it, ``toolargs`` the tools' options.
"""

from __future__ import annotations

import argparse

__all__ = ["run_bench"]


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark named by ``args.name`` (the ``dssfn-mpi bench`` subcommand).

    The function that runs it is the one its subcommand names
    (``args.bench_func``, see :mod:`dssfn_mpi.bench.parser`).

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
