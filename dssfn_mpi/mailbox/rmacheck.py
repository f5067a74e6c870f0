"""Is a one-sided put truly passive here? The check behind ``dssfn-mpi doctor``.

The asynchronous engine's mailbox (:mod:`dssfn_mpi.mailbox.transport`) assumes that a
``Put`` + ``Flush`` into a neighbour's window completes while the neighbour is
busy computing outside MPI. That holds for MPI-allocated windows
(``Win.Allocate``) but, on plain Open MPI, not for windows over user memory
(``Win.Create``), whose puts complete only when the target next enters MPI.
:func:`passive_put_check` measures it on the machine at hand, and
:func:`passive_verdict` repeats it until the answer is certain.

The certain sign of a passive put is the data already in the target's memory when
the target wakes, before it has made any MPI call: nothing but the origin and the
library's own progress can have put it there. A put that waits for its target
keeps the origin running inside ``Flush`` (polling for progress) for the target's
whole sleep. Anything else (the data not there yet, the origin not long in
``Flush`` or not running there: on a loaded machine it was not scheduled in time)
decides nothing, and the check is repeated with a longer sleep.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from mpi4py import MPI

from ..errors import require

__all__ = ["UNDECIDED", "passive_put_check", "passive_verdict", "shared_window_possible"]

#: The verdict when no attempt was conclusive (never guessed as passive or not).
UNDECIDED = "undecided"

_WORD = 8  # float64 words; disp_unit of the window


def passive_put_check(
    comm: MPI.Intracomm, sleep: float = 1.0, allocate: bool = True, nbytes: int = 1 << 20,
    origin: int = 1,
) -> dict[str, Any]:
    """Does a put complete while its target sits outside MPI? (collective)

    Rank 0 sleeps in ``time.sleep`` for ``sleep`` seconds, making no MPI call,
    while rank ``origin`` does ``Put`` (``nbytes``) + ``Flush`` into rank 0's window
    inside a ``Lock_all(MODE_NOCHECK)`` epoch, as
    :meth:`dssfn_mpi.mailbox.transport.ZMailbox.put_all` does, and times it — IMB-RMA's
    "truly passive put". Other ranks only take part in the collectives.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        At least 2 ranks.
    sleep : float
        Seconds rank 0 stays out of MPI.
    allocate : bool
        True: ``Win.Allocate`` (what the mailbox uses). False:
        ``Win.Create`` over a numpy buffer, which stalls on plain Open MPI and
        fails at once with ``OMPI_MCA_osc=sm``; a failure is reported, not raised.
    nbytes : int
        Size of the put.
    origin : int
        The rank that puts (not 0): across nodes, pick one on another node than rank 0,
        or the check proves nothing about the network.

    Returns
    -------
    dict
        The same on every rank: ``put_seconds`` (nan on error) and
        ``put_cpu_seconds`` (the origin's thread CPU time in it), ``sleep_seconds``,
        ``passive`` (``put_seconds < 0.25 * sleep``), ``data_ok`` (rank 0 saw
        the data after waking), ``arrived`` (it was in rank 0's memory the moment
        rank 0 woke, before any MPI call), ``allocate``, ``nbytes`` and ``error``
        (None or the MPI error text).
    """
    require(comm.Get_size() >= 2, "the passive-put check needs at least 2 MPI ranks")
    require(0 < origin < comm.Get_size(), f"origin {origin}: not a rank other than 0")
    words = max(nbytes // _WORD, 1)
    win, local, error = _open_window(comm, allocate, words if comm.Get_rank() == 0 else 1)
    result = {"allocate": allocate, "nbytes": words * _WORD, "error": error}
    if error is not None:
        return {"put_seconds": float("nan"), "put_cpu_seconds": float("nan"),
                "sleep_seconds": 0.0, "passive": False, "data_ok": False, "arrived": False,
                **result}
    assert win is not None
    put_seconds, put_cpu, sleep_seconds, data_ok, arrived = _race(comm, win, words, sleep,
                                                                   origin)
    win.Free()
    del local
    return {"put_seconds": put_seconds, "put_cpu_seconds": put_cpu,
            "sleep_seconds": sleep_seconds, "passive": bool(put_seconds < 0.25 * sleep),
            "data_ok": data_ok, "arrived": arrived, **result}


def _open_window(comm: MPI.Intracomm, allocate: bool, mine: int
                 ) -> tuple[MPI.Win | None, np.ndarray | None, str | None]:
    """The check's window of ``mine`` words (collective), or the error every rank agrees on."""
    win: MPI.Win | None = None
    local: np.ndarray | None = None
    error: str | None = None
    try:
        if allocate:
            win = MPI.Win.Allocate(mine * _WORD, _WORD, comm=comm)
        else:
            local = np.zeros(mine, dtype=np.float64)
            win = MPI.Win.Create(local, _WORD, comm=comm)
    except MPI.Exception as e:
        error = str(e).strip()
    # Agree on failure everywhere so no rank goes on into a collective alone.
    errors = comm.allgather(error)
    error = next((e for e in errors if e is not None), None)
    if error is not None:  # created here but failed elsewhere: cannot free collectively
        win = None
    return win, local, error


def _race(comm: MPI.Intracomm, win: MPI.Win, words: int, sleep: float, origin: int
          ) -> tuple[float, float, float, bool, bool]:
    """Rank 0 sleeps while ``origin`` puts (collective); the same on every rank: put
    seconds, its thread CPU, the sleep, whether rank 0 then had the data, and whether it
    had it on waking before any MPI call."""
    rank = comm.Get_rank()
    payload = np.arange(words, dtype=np.float64) + 0.5
    if rank == 0:
        win.Lock(0, MPI.LOCK_EXCLUSIVE)
        view = np.frombuffer(win.tomemory(), dtype=np.float64, count=words)
        view[:] = 0.0
        del view
        win.Unlock(0)
    comm.Barrier()
    win.Lock_all(MPI.MODE_NOCHECK)  # ZMailbox's epoch: no lock taken
    put_seconds = put_cpu = float("nan")
    sleep_seconds = 0.0
    arrived = False
    if rank == 0:
        t0 = time.perf_counter()
        time.sleep(sleep)
        sleep_seconds = time.perf_counter() - t0
        # Awake, no MPI call yet: is the data already here? (A torn copy reads as no.)
        view = np.frombuffer(win.tomemory(), dtype=np.float64, count=words)
        arrived = bool(np.array_equal(view, payload))
        del view
    elif rank == origin:
        time.sleep(min(0.1 * sleep, 0.1))  # be sure rank 0 is already asleep
        t0, c0 = time.perf_counter(), time.thread_time()
        _put(win, payload)
        put_seconds, put_cpu = time.perf_counter() - t0, time.thread_time() - c0
    comm.Barrier()
    data_ok = False
    if rank == 0:
        win.Sync()
        view = np.frombuffer(win.tomemory(), dtype=np.float64, count=words)
        data_ok = bool(np.array_equal(view, payload))
        del view
    win.Unlock_all()
    put_seconds, put_cpu = comm.bcast((put_seconds, put_cpu), root=origin)
    sleep_seconds, data_ok, arrived = comm.bcast((sleep_seconds, data_ok, arrived), root=0)
    return put_seconds, put_cpu, sleep_seconds, data_ok, arrived


def _put(win: MPI.Win, payload: np.ndarray) -> None:
    """The check's put + flush into rank 0 (one place, so a test can slow it down)."""
    win.Put(payload, 0, 0)
    win.Flush(0)


def passive_verdict(comm: MPI.Intracomm, sleep: float = 0.05, longest: float = 1.0,
                    nbytes: int = 1 << 16, origin: int = 1) -> dict[str, Any]:
    """A certain answer to "is a put passive here?", or :data:`UNDECIDED` (collective).

    Runs :func:`passive_put_check` (``Win.Allocate``) with sleeps ``sleep``,
    ``4 sleep``, ... up to ``max(sleep, longest)`` seconds, until one decides:

    * ``passive``: the data was in the target's memory when it woke, before any
      MPI call (``arrived``);
    * ``not passive``: the data was not, and the origin had been inside
      ``Put`` + ``Flush`` for at least half the target's sleep, running (thread
      CPU time) at least half of that: waiting for the target, not descheduled;
      or the window or the put failed;
    * otherwise the attempt decides nothing (the origin was not scheduled in
      time): the next one sleeps longer; after the last, :data:`UNDECIDED`.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        At least 2 ranks.
    sleep, longest : float
        The first and the longest sleep of the target [s].
    nbytes, origin
        As :func:`passive_put_check`.

    Returns
    -------
    dict
        The same on every rank: ``verdict``, ``put_seconds``, ``sleep_seconds``
        (how long the target slept, as it measured) and ``error`` of the deciding
        (else the last) attempt, and ``attempts``.
    """
    attempt, check = 0, None
    while True:
        attempt += 1
        check = passive_put_check(comm, sleep=sleep, allocate=True, nbytes=nbytes,
                                  origin=origin)
        if check["error"] is not None:
            verdict = "not passive"
        elif check["arrived"] and check["data_ok"]:
            verdict = "passive"
        elif check["put_seconds"] >= 0.5 * sleep and check["put_cpu_seconds"] >= 0.25 * sleep:
            verdict = "not passive"
        else:
            verdict = UNDECIDED
        if verdict != UNDECIDED or 4 * sleep > max(longest, sleep) * (1 + 1e-9):
            break
        sleep *= 4
    return {"verdict": verdict, "put_seconds": float(check["put_seconds"]),
            "sleep_seconds": float(check["sleep_seconds"]),
            "error": check["error"] or "", "attempts": attempt}


#: Why ``--rma store`` cannot run (every rank raises it alike).
NO_STORES = ("--rma store: plain stores need a shared-memory window, which needs every rank "
             "on one node and a one-sided component that makes one (Open MPI's osc/sm, not "
             "osc/rdma); this run cannot have one: use --rma put (or auto)")


def shared_window_possible(comm: MPI.Intracomm) -> bool:
    """Can the mailbox's window be a shared one here, for direct stores? (collective)

    True when every rank of ``comm`` (two or more) is on one node and
    ``Win.Allocate_shared`` succeeds (Open MPI's osc/rdma cannot make one): the
    conditions under which :class:`dssfn_mpi.mailbox.transport.ZMailbox` writes with
    plain stores. The same answer on every rank.
    """
    from .rmawindow import allocate

    if comm.Get_size() < 2:
        return False
    win = allocate(comm, _WORD)  # the mailbox's own choice of flavour
    shared = win.Get_attr(MPI.WIN_CREATE_FLAVOR) == MPI.WIN_FLAVOR_SHARED
    win.Free()
    return shared
