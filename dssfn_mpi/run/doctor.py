"""``dssfn-mpi doctor``: what MPI, BLAS and one-sided setup this run really has.

Asynchronous results are only meaningful if puts are truly passive and each rank
runs one BLAS thread; this report shows both, with the versions a bug report
needs. :func:`~dssfn_mpi.run.mpifacts.mpi_facts` is the measured part, the one every
training run takes at its start too; :func:`passive_put_ok` is the verdict that makes
``doctor`` (and the Slurm templates that run it first) stop on a broken set-up.
"""

from __future__ import annotations

import os
from typing import Any

from mpi4py import MPI

from ..mailbox.rmacheck import UNDECIDED
from .mpifacts import RUN_CHECK_SLEEP, mpi_facts

__all__ = ["RUN_CHECK_SLEEP", "doctor_json", "doctor_report", "mpi_facts", "passive_put_ok"]


def passive_put_ok(facts: dict[str, Any]) -> bool:
    """True when puts were found passive, or not tested (one rank: n/a)."""
    return facts["mpi_passive_put"] in ("passive", "n/a")


def _blas_lines() -> list[str]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["  threadpoolctl not installed: cannot list BLAS libraries"]
    info = threadpool_info()
    if not info:
        return ["  none loaded"]
    lines = []
    for lib in info:
        extra = ", ".join(
            f"{k}={lib[k]}" for k in ("architecture", "threading_layer") if lib.get(k)
        )
        lines.append(
            f"  {lib.get('internal_api', '?')} {lib.get('version') or '?'} "
            f"({lib.get('user_api', '?')}): {lib.get('num_threads')} thread(s)"
            + (f", {extra}" if extra else "")
            + f"  [{lib.get('filepath', '?')}]"
        )
    return lines


def _passive_line(facts: dict[str, Any]) -> str:
    verdict = facts["mpi_passive_put"]
    if verdict == "n/a":
        return "passive put: run with 2 ranks to test passive puts"
    if facts["mpi_passive_put_error"]:
        return f"passive put: FAIL (window or put failed: {facts['mpi_passive_put_error']})"
    if verdict == UNDECIDED:
        return ("passive put: UNDECIDED (the put never got to run while the target slept: "
                "the machine is too loaded to tell; run the doctor again)")
    word = "PASS" if passive_put_ok(facts) else "FAIL"
    return (f"passive put: {word} (64 KiB put + flush, {facts['mpi_passive_put_pair']}, took "
            f"{facts['mpi_passive_put_seconds'] * 1e3:.3f} ms while the target slept "
            "outside MPI)")


def doctor_json(comm: MPI.Intracomm, facts: dict[str, Any]) -> dict[str, Any] | None:
    """What ``doctor --json`` prints: :func:`mpi_facts` and the placement (collective).

    Returns
    -------
    dict or None
        On rank 0: every fact (NaN as None), ``world_size``, ``hosts`` (rank
        count per host), ``omp_num_threads`` and ``passive_put_ok``
        (:func:`passive_put_ok`); None on the other ranks.
    """
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    if comm.Get_rank() != 0:
        return None
    assert hosts is not None
    out: dict[str, Any] = {k: (None if isinstance(v, float) and v != v else v)
                           for k, v in facts.items()}
    out.update(world_size=comm.Get_size(), hosts={h: hosts.count(h) for h in dict.fromkeys(hosts)},
               omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
               passive_put_ok=passive_put_ok(facts))
    return out


def doctor_report(comm: MPI.Intracomm, facts: dict[str, Any] | None = None) -> str:
    """Describe the MPI / BLAS environment and test one-sided passivity (collective).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        Communicator to inspect; with two or more ranks the report includes
        the passive-put check (about one second).
    facts : dict, optional
        :func:`mpi_facts` of ``comm`` if already taken (then nothing is measured).

    Returns
    -------
    str
        The report on rank 0, ``""`` on the other ranks. Its first line is the
        MPI library version string.
    """
    import mpi4py

    if facts is None:
        facts = mpi_facts(comm, sleep=1.0)
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    if comm.Get_rank() != 0:
        return ""
    assert hosts is not None
    config = mpi4py.get_config() or "(none recorded: binary wheel or default build)"
    per_host: dict[str, int] = {}
    for h in hosts:
        per_host[h] = per_host.get(h, 0) + 1
    lines = [
        facts["mpi_library"],
        f"MPI standard: {facts['mpi_standard']}",
        f"vendor: {facts['mpi_vendor']}",
        f"mpi4py: {mpi4py.__version__}, build config: {config}",
        f"thread level: {facts['mpi_thread_level']}",
        f"world size: {comm.Get_size()}",
        "hosts: " + ", ".join(f"{h} x{c}" for h, c in per_host.items()),
        f"CPU affinity per rank: {facts['cpu_affinity']}",
        f"placement: {facts['placement'] or '(DSSFN_PLACEMENT unset)'}",
        f"OMPI_MCA_osc: {os.environ.get('OMPI_MCA_osc', 'default')}",
        f"one-sided component: {facts['mpi_osc']}",
        f"window memory model (Win.Allocate): {facts['mpi_window_model']}",
        "BLAS:",
        *_blas_lines(),
    ]
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        lines.append(f"{var}: {os.environ.get(var, '(unset)')}")
    from ..algorithms.kernels import compiled_status  # numba's import and cache: rank 0 only

    lines.append(f"compiled kernels: {compiled_status()}")
    lines.append(_passive_line(facts))
    return "\n".join(lines)
