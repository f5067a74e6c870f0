"""What a run records about MPI and the ranks' placement, measured once (collective).

:func:`mpi_facts` is the library, the one-sided component, the thread level, the
window model, the passive-put check and the placement; ``dssfn-mpi doctor``
(:mod:`dssfn_mpi.run.doctor`) reports them and training
(:func:`dssfn_mpi.run.runstate.prepare_run`) stores them in every run log.
"""

from __future__ import annotations

import json
import os
from typing import Any

from mpi4py import MPI

from ..errors import UserError
from ..mailbox.rmacheck import passive_verdict
from ..runlog.versions import software_versions

__all__ = ["RUN_CHECK_SLEEP", "check_pair", "mpi_facts"]

#: Seconds rank 0 sleeps in the passive-put check a training run takes at start-up
#: (``doctor`` sleeps 1 s). A 64 KiB put takes about 0.1 ms when passive, and
#: about this long when it waits for its target.
RUN_CHECK_SLEEP = 0.05

_THREAD_LEVELS = {
    MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE",
    MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
    MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED",
    MPI.THREAD_MULTIPLE: "MPI_THREAD_MULTIPLE",
}

# Launcher variables that say how the ranks were placed (recorded, not interpreted).
_PLACEMENT_VARS = (
    "SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE",
    "SLURM_CPUS_PER_TASK", "SLURM_CPU_BIND", "SLURM_DISTRIBUTION", "SLURM_HINT",
    "SLURM_JOB_PARTITION",
)


def _model_name(model: int) -> str:
    if model == MPI.WIN_UNIFIED:
        return "unified"
    if model == MPI.WIN_SEPARATE:
        return "separate"
    return f"unknown ({model})"


def _window_facts(comm: MPI.Intracomm) -> tuple[str, dict[str, str]]:
    """Memory model and info hints of an MPI-allocated window (collective)."""
    win = MPI.Win.Allocate(8, 8, comm=comm)
    try:
        model, info = win.model, win.Get_info()
        hints = {key: info.Get(key) or "" for key in info.keys()}
        info.Free()
    finally:
        win.Free()
    return _model_name(model), hints


def _osc_component(library: str, hints: dict[str, str]) -> str:
    """The one-sided component, as far as MPI lets one tell (no call names it).

    Open MPI reads ``OMPI_MCA_osc`` (``sm`` on one node; ``rdma`` or ``ucx``
    over a network): naming one component allows only that one (a window it
    cannot serve fails to allocate), so a set value is the component in use;
    unset means Open MPI's own choice. MPICH has one RMA implementation per
    device: its ``MPICH Device`` line, and whether the window is in shared
    memory (its ``alloc_shm`` hint).
    """
    if "Open MPI" in library:
        return os.environ.get("OMPI_MCA_osc") or "default (Open MPI's choice)"
    device = next((line.split(":", 1)[1].split() for line in MPI.Get_library_version()
                   .splitlines() if line.startswith("MPICH Device:")), None)
    if device is not None:
        shm = ", shared-memory window" if hints.get("alloc_shm") == "true" else ""
        return f"MPICH {' '.join(device)}{shm}"
    return "(the library's own RMA)"


def _affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return []


def check_pair(hosts: list[str]) -> int:
    """The rank that puts in the passive-put check: the first on another host than rank 0.

    On one host, rank 1. A check between two ranks of one node would prove nothing
    about the network a job spanning nodes depends on.
    """
    return next((r for r, h in enumerate(hosts) if h != hosts[0]), 1)


def _refuse_sm_across_hosts(library: str, hosts: list[str]) -> None:
    """One-line user error (every rank) for Open MPI's osc/sm in a job spanning hosts."""
    if "Open MPI" in library and os.environ.get("OMPI_MCA_osc") == "sm" and len(set(hosts)) > 1:
        raise UserError(
            f"OMPI_MCA_osc=sm is Open MPI's single-node one-sided component but the ranks run "
            f"on {len(set(hosts))} hosts ({', '.join(sorted(set(hosts)))}): unset "
            "OMPI_MCA_osc (the Slurm templates do) and run again")


def mpi_facts(comm: MPI.Intracomm, sleep: float = RUN_CHECK_SLEEP) -> dict[str, Any]:
    """What a run log records about MPI and the ranks' placement (collective).

    Costs two window allocations and, with two or more ranks,
    :func:`dssfn_mpi.mailbox.rmacheck.passive_verdict` of 64 KiB with rank 0 out of MPI
    for ``sleep`` seconds: about 0.06 s at the default when the first attempt
    decides, which training pays once per run (:func:`dssfn_mpi.run.runstate.prepare_run`);
    an undecided attempt (a loaded machine) is repeated with longer sleeps, up to
    1 s. When the ranks span hosts the put crosses them (:func:`check_pair`), and Open MPI's
    single-node ``osc/sm`` is refused with a :class:`~dssfn_mpi.errors.UserError`.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator training runs on.
    sleep : float
        Seconds rank 0 sleeps in the first passive-put check; a put is passive
        if its data is in rank 0's memory when rank 0 wakes (see
        :func:`~dssfn_mpi.mailbox.rmacheck.passive_verdict`).

    Returns
    -------
    dict
        The same on every rank, every value a str or float (ready to be
        stored as HDF5 attributes, declared in :data:`dssfn_mpi.runlog.rootschema.ATTRIBUTES`):
        ``mpi_library`` (first line of the library's version string),
        ``mpi_vendor``, ``mpi_standard``, ``mpi_osc`` (the one-sided
        component, see :func:`_osc_component`), ``mpi_thread_level`` (as
        provided, e.g. ``MPI_THREAD_FUNNELED``), ``mpi_window_model``
        (``unified`` or ``separate``), ``mpi_passive_put`` (``passive``,
        ``not passive``, ``undecided`` or ``n/a`` with one rank),
        ``mpi_passive_put_seconds`` (nan if n/a), ``mpi_passive_put_error``,
        ``mpi_passive_put_attempts`` (checks taken), ``placement`` (the
        ``DSSFN_PLACEMENT`` request a Slurm template exports, or ``""``),
        ``slurm_env`` (JSON of the ``SLURM_*`` placement variables) and
        ``cpu_affinity`` (JSON list, per rank, of the CPUs it may run on).
    """
    library = software_versions()["mpi_library"]
    hosts = comm.allgather(MPI.Get_processor_name())
    _refuse_sm_across_hosts(library, hosts)
    model, hints = _window_facts(comm)
    origin = check_pair(hosts)
    check = passive_verdict(comm, sleep=sleep, nbytes=1 << 16,
                            origin=origin) if comm.Get_size() >= 2 else None
    affinity = comm.allgather(_affinity())
    vendor, vversion = MPI.get_vendor()
    if check is None:
        verdict, seconds, error, pair, attempts = "n/a", float("nan"), "", "", 0
    else:
        pair = f"rank {origin} ({hosts[origin]}) -> rank 0 ({hosts[0]})"
        verdict, seconds, error = check["verdict"], check["put_seconds"], check["error"]
        attempts = check["attempts"]
    slurm = {v: os.environ[v] for v in _PLACEMENT_VARS if v in os.environ}
    return {
        "mpi_library": library,
        "mpi_vendor": f"{vendor} {'.'.join(map(str, vversion))}",
        "mpi_standard": ".".join(map(str, MPI.Get_version())),
        "mpi_osc": _osc_component(library, hints),
        "mpi_thread_level": _THREAD_LEVELS.get(MPI.Query_thread(), str(MPI.Query_thread())),
        "mpi_window_model": model,
        "mpi_passive_put": verdict,
        "mpi_passive_put_seconds": seconds,
        "mpi_passive_put_error": error,
        "mpi_passive_put_pair": pair,
        "mpi_passive_put_attempts": attempts,
        "placement": os.environ.get("DSSFN_PLACEMENT", ""),
        "slurm_env": json.dumps(slurm, sort_keys=True),
        "cpu_affinity": json.dumps(affinity),
    }
