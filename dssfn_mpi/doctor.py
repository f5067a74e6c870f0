"""``dssfn-mpi doctor``: what MPI, BLAS and one-sided setup this run really has.

Asynchronous results are only meaningful if puts are truly passive and each rank
runs one BLAS thread; this report shows both, with the versions a bug report
needs.
"""

from __future__ import annotations

import os

from mpi4py import MPI

from .rmacheck import passive_put_check

__all__ = ["doctor_report"]

_THREAD_LEVELS = {
    MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE",
    MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
    MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED",
    MPI.THREAD_MULTIPLE: "MPI_THREAD_MULTIPLE",
}


def _window_model(comm: MPI.Intracomm) -> str:
    """Memory model of an MPI-allocated window (collective)."""
    win = MPI.Win.Allocate(8, 8, comm=comm)
    try:
        model = win.model
    finally:
        win.Free()
    if model == MPI.WIN_UNIFIED:
        return "unified"
    if model == MPI.WIN_SEPARATE:
        return "separate"
    return f"unknown ({model})"


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


def doctor_report(comm: MPI.Intracomm) -> str:
    """Describe the MPI / BLAS environment and test one-sided passivity (collective).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        Communicator to inspect; with two or more ranks the report includes
        :func:`dssfn_mpi.rmacheck.passive_put_check` (takes about one second).

    Returns
    -------
    str
        The report on rank 0, ``""`` on the other ranks. Its first line is the
        MPI library version string.
    """
    import mpi4py

    size = comm.Get_size()
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    model = _window_model(comm)
    check = passive_put_check(comm, sleep=1.0, allocate=True) if size >= 2 else None
    if comm.Get_rank() != 0:
        return ""

    assert hosts is not None
    vendor, vversion = MPI.get_vendor()
    std = ".".join(map(str, MPI.Get_version()))
    config = mpi4py.get_config() or "(none recorded: binary wheel or default build)"
    per_host: dict[str, int] = {}
    for h in hosts:
        per_host[h] = per_host.get(h, 0) + 1
    lines = [
        MPI.Get_library_version().strip().splitlines()[0],
        f"MPI standard: {std}",
        f"vendor: {vendor} {'.'.join(map(str, vversion))}",
        f"mpi4py: {mpi4py.__version__}, build config: {config}",
        f"thread level: {_THREAD_LEVELS.get(MPI.Query_thread(), MPI.Query_thread())}",
        f"world size: {size}",
        "hosts: " + ", ".join(f"{h} x{c}" for h, c in per_host.items()),
        f"OMPI_MCA_osc: {os.environ.get('OMPI_MCA_osc', 'default')}",
        f"window memory model (Win.Allocate): {model}",
        "BLAS:",
        *_blas_lines(),
    ]
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        lines.append(f"{var}: {os.environ.get(var, '(unset)')}")
    if check is None:
        lines.append("passive put: run with 2 ranks to test passive puts")
    else:
        verdict = "PASS" if check["passive"] and check["data_ok"] else "FAIL"
        lines.append(
            f"passive put: {verdict} ({check['nbytes']} B put took "
            f"{check['put_seconds'] * 1e3:.3f} ms while the target slept "
            f"{check['sleep_seconds']:.2f} s; data arrived: {check['data_ok']})"
        )
    return "\n".join(lines)
