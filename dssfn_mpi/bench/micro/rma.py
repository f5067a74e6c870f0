"""Mailbox micro-benchmark: what the async engine's one-sided path costs per Z.

Run as its own 2-rank job::

    mpirun -n 2 python -m dssfn_mpi.bench.micro.rma --out rma.h5 [--reps 50] [--rma put]

(``dssfn-mpi bench rma`` does this for you: with stores and with puts under
``osc=sm``, and under ``osc=rdma``). The write path is the engine's (``--rma``
as in ``train``): ``auto`` writes with plain stores into a shared window where
the component gives one (one node, ``osc=sm``), else with ``MPI_Put``; ``put``
always with ``MPI_Put``. The file records which was measured (``write_path``).
Everything goes through the async engine's mailbox on the 2-node graph
(:class:`dssfn_mpi.bench.micro.mailbox.BenchMailbox`: :class:`dssfn_mpi.mailbox.transport.ZMailbox`
with one-neighbour writes and reads): rank 1 writes into rank 0's window.
Sizes: one Z = Q x n doubles with n = 2Q + 1000 for Q in {6, 10, 11, 26, 102}
(satimage ... caltech101), plus a one-element Z for the latency floor. Measured:

* ``put``: ``ZMailbox.put``, the seqlock write (begin counter; header and Z;
  end counter; a flush after each phase with puts, one memory barrier with
  stores), with the target **waiting inside MPI**
  (in ``MPI_Barrier``), **computing outside MPI** (a BLAS loop of
  ``--compute-ms``) and **sleeping outside MPI** (same time; separates
  "outside MPI" from "sharing the CPU"). If the put is one-sided in practice,
  the last two cost what the first does.
* ``read``: rank 0 reading its own window while rank 1 waits: ``ZMailbox.read``
  (into a new array) and ``ZMailbox.read_all`` (into the engine's preallocated
  buffer) of a slot written since the last read (the seqlock copy: end
  counter, header and data, begin counter), and ``read_all`` when nothing new
  was written (the kept copy; only the end counter is read from the window).
* ``contended``: rank 1 puts back to back while rank 0 calls ``read_all``: both
  latencies, and the copies the seqlock rejected (``torn_retries``) or gave up
  on (``fallbacks``, answered by the last consistent copy).
* ``activation``: an activation's traffic with 8 neighbours (8 ``read_all`` +
  8 ``put`` of one Z, both ranks at once) against its compute floor, the bare
  ``(Q x n) @ (n x n)`` product.
* ``passive_check``: :func:`dssfn_mpi.mailbox.rmacheck.passive_put_check` for the
  mailbox's ``Win.Allocate`` window and for ``Win.Create`` (a 0.5 s sleep on
  the target).

The layout of the HDF5 file is documented in benchmarks/README.md ("The /rma group").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ...ssfn.model import default_width

__all__ = ["Q_VALUES", "READS", "RMA_SCHEMA_VERSION", "SCENARIOS", "main", "measure",
           "write_rma", "z_shapes"]

#: Output classes Q of vowel (11), satimage (6), mnist/digits (10), letter (26), caltech101 (102).
Q_VALUES = (6, 10, 11, 26, 102)
#: 3: the write path of each group recorded (``write_path``: ``store`` or ``put``);
#: 2: the mailbox's put and reads, write path not recorded; 1: Lock/Put/Unlock on bare windows.
RMA_SCHEMA_VERSION = 3
_WORD = 8
_LAYER = 0  # every write and read of the benchmark is of one layer

#: Put scenarios: what the target does while the origin puts.
SCENARIOS = {
    "in_mpi": "target waiting inside MPI (MPI_Barrier)",
    "computing": "target computing outside MPI (BLAS loop, no MPI call)",
    "sleeping": "target sleeping outside MPI (time.sleep, no MPI call)",
}

#: Reads of rank 0's window, the writer waiting in MPI_Barrier.
READS = {
    "read_new": "ZMailbox.read (into a new array) of a slot written since the last read",
    "read_all_new": "ZMailbox.read_all (into a preallocated buffer) of a slot written since "
                    "the last read",
    "read_all_unchanged": "ZMailbox.read_all with nothing written since the last read "
                          "(answered by the kept copy)",
}


def z_shapes() -> list[tuple[int, int]]:
    """(Q, n) of each measured size: the one-double floor (0, 1), then Q x (2Q + 1000)."""
    return [(0, 1)] + [(q, default_width(q)) for q in Q_VALUES]


def _z(q: int, n: int) -> np.ndarray:
    """The Z put at size (q, n), the same on both ranks (the reader checks what it got)."""
    return np.random.default_rng(q).random((q, n) if q else (1, 1))


def _busy(seconds: float, a: np.ndarray) -> None:
    """Compute (BLAS, no MPI call) for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a @ a


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _timed(call: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    call(*args)
    return time.perf_counter() - t0


def _put_times(comm: Any, mb: Any, Z: np.ndarray, reps: int, compute_s: float) -> dict:
    """``ZMailbox.put`` latencies from rank 1 into rank 0 for every scenario (rank 1's)."""
    rank = comm.Get_rank()
    times = {name: np.full(reps, np.nan) for name in SCENARIOS}
    work = np.random.default_rng(2).random((96, 96))
    comm.Barrier()
    if rank == 1:
        for _ in range(2):  # warm-up: first touch of the target's slot
            mb.put(0, Z, _LAYER)
        for r in range(reps):
            times["in_mpi"][r] = _timed(mb.put, 0, Z, _LAYER)
    comm.Barrier()  # rank 0 waits in here, inside MPI, during the puts
    for name in ("computing", "sleeping"):
        for r in range(reps):
            comm.Barrier()
            if rank == 0:
                if name == "computing":
                    _busy(compute_s, work)
                else:
                    time.sleep(compute_s)
            elif rank == 1:
                # Spin (not sleep) until the target is surely outside MPI: a put
                # made straight after waking up would also time the wake-up.
                _spin(0.25 * compute_s)
                times[name][r] = _timed(mb.put, 0, Z, _LAYER)
            comm.Barrier()
    return times


def _read_times(comm: Any, mb: Any, Z: np.ndarray, reps: int) -> dict:
    """Rank 0's read latencies of its window (rank 0's), each after a completed put."""
    rank = comm.Get_rank()
    times = {name: np.full(reps, np.nan) for name in READS}
    out = np.empty((1, *Z.shape))
    versions = np.zeros(1, dtype=np.int64)
    for r in range(reps):
        for name in ("read_new", "read_all_new"):
            comm.Barrier()
            if rank == 1:
                mb.put(0, Z, _LAYER)
            comm.Barrier()  # the put is flushed: rank 0 reads a complete write
            if rank != 0:
                continue
            if name == "read_new":
                times[name][r] = _timed(mb.read, 1, _LAYER)
            else:
                times[name][r] = _timed(mb.read_all, _LAYER, out, versions)
                times["read_all_unchanged"][r] = _timed(mb.read_all, _LAYER, out, versions)
    if rank == 0 and not np.array_equal(out[0], Z):
        raise RuntimeError("the mailbox read back something else than was put")
    return times


def _contended(comm: Any, mb: Any, Z: np.ndarray, reps: int) -> dict:
    """Rank 1 puts ``reps`` times back to back while rank 0 calls ``read_all`` ``reps`` times."""
    rank = comm.Get_rank()
    seconds = np.full(reps, np.nan)
    out = np.empty((1, *Z.shape))
    versions = np.zeros(1, dtype=np.int64)
    mb.reset_counters()
    comm.Barrier()
    for r in range(reps):
        if rank == 1:
            seconds[r] = _timed(mb.put, 0, Z, _LAYER)
        elif rank == 0:
            seconds[r] = _timed(mb.read_all, _LAYER, out, versions)
    comm.Barrier()
    return {"put_seconds": comm.bcast(seconds, root=1),
            "read_all_seconds": comm.bcast(seconds, root=0),
            "torn_retries": comm.bcast(mb.torn_retries, root=0),
            "fallbacks": comm.bcast(mb.fallbacks, root=0)}


def _size_tables(comm: Any, reps: int, compute_s: float,
                 force_put: bool) -> dict[str, dict[str, np.ndarray]]:
    """put, read and contended tables, one row per size of :func:`z_shapes`."""
    from ...graph.topology import make_topology
    from .mailbox import BenchMailbox

    graph = make_topology("ring", 2)  # one edge
    rows: dict[str, dict[str, list]] = {"put": {}, "read": {}, "contended": {}}
    for q, n in z_shapes():
        Z = _z(q, n)
        # a window sized for this Z, as in a run
        with BenchMailbox(comm, graph, Z.size, force_put=force_put) as mb:
            puts = _put_times(comm, mb, Z, reps, compute_s)
            reads = _read_times(comm, mb, Z, reps)
            cont = _contended(comm, mb, Z, reps)
        for group, tab in (("put", comm.bcast(puts, root=1)), ("read", comm.bcast(reads, root=0)),
                           ("contended", cont)):
            for name, value in tab.items():
                rows[group].setdefault(name, []).append(value)
    return {group: {name: np.array(v) for name, v in tab.items()} for group, tab in rows.items()}


def _activation_tables(comm: Any, reps: int, force_put: bool) -> dict[str, np.ndarray]:
    """Per-activation mailbox traffic (8 read_all + 8 puts) vs the (Q x n)@(n x n) product."""
    from ...graph.topology import make_topology
    from .mailbox import BenchMailbox

    graph = make_topology("ring", 2)  # one neighbour each: 8 reads/puts stand for 8 neighbours
    other = 1 - comm.Get_rank()
    rng = np.random.default_rng(3 + comm.Get_rank())
    overhead = np.full((len(Q_VALUES), reps), np.nan)
    compute = np.full((len(Q_VALUES), reps), np.nan)
    for i, q in enumerate(Q_VALUES):
        n = default_width(q)
        Z = rng.random((q, n))
        Zr = np.empty((1, q, n))
        versions = np.zeros(1, dtype=np.int64)
        A, H = rng.random((q, n)), rng.random((n, n))
        with BenchMailbox(comm, graph, q * n, force_put=force_put) as mb:
            for _ in range(3):
                mb.put(other, Z, _LAYER)
                mb.read_all(_LAYER, Zr, versions)
            comm.Barrier()
            for r in range(reps):
                t0 = time.perf_counter()
                for _ in range(8):
                    mb.read_all(_LAYER, Zr, versions)
                for _ in range(8):
                    mb.put(other, Z, _LAYER)
                overhead[i, r] = time.perf_counter() - t0
            comm.Barrier()
        A @ H  # warm-up
        comm.Barrier()
        for r in range(reps):
            t0 = time.perf_counter()
            A @ H
            compute[i, r] = time.perf_counter() - t0
        comm.Barrier()
    both_o = np.stack(comm.allgather(overhead), axis=1)  # (Q, rank, reps)
    both_c = np.stack(comm.allgather(compute), axis=1)
    return {"overhead_seconds": both_o, "compute_seconds": both_c}


def _write_path(comm: Any, force_put: bool) -> str:
    """``store`` or ``put``: how this component and ``force_put`` make the mailbox write."""
    from ...graph.topology import make_topology
    from .mailbox import BenchMailbox

    with BenchMailbox(comm, make_topology("ring", 2), 1, force_put=force_put) as mb:
        return "store" if mb.direct else "put"


def measure(comm: Any, reps: int = 50, compute_ms: float = 20.0,
            force_put: bool = False) -> dict[str, Any]:
    """Run every measurement (collective over 2 ranks); the result is the same on both.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        Exactly 2 ranks.
    reps : int
        Timed repetitions per size and scenario.
    compute_ms : float
        How long the target computes outside MPI in the "computing" scenario.
    force_put : bool
        Write with ``MPI_Put`` even where plain stores into a shared window are
        possible (``--rma put``).

    Returns
    -------
    dict
        ``put``, ``read`` and ``contended`` (name -> table, one row per size),
        ``activation``, ``passive_check`` (window kind -> result) and ``info``
        (library, component, hosts, ``write_path``).
    """
    from mpi4py import MPI

    from ...errors import require
    from ...mailbox.rmacheck import passive_put_check

    require(comm.Get_size() == 2, "the RMA benchmark runs on exactly 2 ranks: mpirun -n 2 ...")
    tables = _size_tables(comm, reps, compute_ms / 1000.0, force_put)
    activation = _activation_tables(comm, reps, force_put)
    passive = {kind: passive_put_check(comm, sleep=0.5, allocate=kind == "allocate",
                                       nbytes=_WORD * 10 * 1020)
               for kind in ("allocate", "create")}
    lib = str(MPI.Get_library_version()).replace("\x00", "").strip().splitlines()
    info = {
        "mpi_library": lib[0] if lib else "",
        "osc": os.environ.get("OMPI_MCA_osc", ""),
        "hostnames": comm.allgather(MPI.Get_processor_name()),
        "reps": reps,
        "compute_ms": compute_ms,
        "write_path": _write_path(comm, force_put),
    }
    return {**tables, "activation": activation, "passive_check": passive, "info": info}


def _dataset(group: Any, name: str, data: np.ndarray, units: str, description: str) -> None:
    ds = group.create_dataset(name, data=data)
    ds.attrs["units"] = units
    ds.attrs["description"] = description


def _write_tables(g: Any, res: dict[str, Any]) -> None:
    """The datasets of one ``/rma/<label>`` group (layout in benchmarks/README.md)."""
    shapes = z_shapes()
    _dataset(g, "Q", np.array([q for q, _ in shapes]), "1",
             "classes Q of each size (0: a one-element Z, the latency floor)")
    _dataset(g, "n", np.array([n for _, n in shapes]), "1", "hidden width n = 2Q + 1000")
    _dataset(g, "bytes", np.array([_WORD * (q * n if q else 1) for q, n in shapes]), "bytes",
             "payload of one Z = Q x n doubles (a put adds 56 bytes of counters and header)")
    pg = g.create_group("put")
    for where, text in SCENARIOS.items():
        _dataset(pg, where, res["put"][where], "s",
                 f"ZMailbox.put latency from rank 1 into rank 0, {text}; shape (sizes, reps)")
    rg = g.create_group("read")
    for name, text in READS.items():
        _dataset(rg, name, res["read"][name], "s", f"{text}; shape (sizes, reps)")
    cg = g.create_group("contended")
    cont = res["contended"]
    _dataset(cg, "put_seconds", cont["put_seconds"], "s",
             "rank 1's back-to-back ZMailbox.put during rank 0's reads; shape (sizes, reps)")
    _dataset(cg, "read_all_seconds", cont["read_all_seconds"], "s",
             "rank 0's ZMailbox.read_all during rank 1's puts; shape (sizes, reps)")
    _dataset(cg, "torn_retries", cont["torn_retries"], "1",
             "copies the seqlock rejected (a write in flight) in those reads; shape (sizes,)")
    _dataset(cg, "fallbacks", cont["fallbacks"], "1",
             "reads answered by the last consistent copy after every retry was torn; "
             "shape (sizes,)")
    ag = g.create_group("activation")
    _dataset(ag, "Q", np.array(Q_VALUES), "1", "classes Q (n = 2Q + 1000)")
    _dataset(ag, "overhead_seconds", res["activation"]["overhead_seconds"], "s",
             "8 ZMailbox.read_all + 8 ZMailbox.put of one Q x n Z; shape (Q, rank, reps)")
    _dataset(ag, "compute_seconds", res["activation"]["compute_seconds"], "s",
             "bare (Q x n) @ (n x n) product, the activation's compute floor; "
             "shape (Q, rank, reps)")
    pcg = g.create_group("passive_check")
    for kind, chk in res["passive_check"].items():
        sub = pcg.create_group(kind)
        for key, value in chk.items():
            sub.attrs[key] = "" if value is None else value


def write_rma(path: str | os.PathLike, label: str, res: dict[str, Any]) -> None:
    """Write one measurement as ``/rma/<label>`` of a new HDF5 file, atomically."""
    import h5py

    from ...fileio import atomic_write
    from ...runlog import software_versions, utc_now

    def write(tmp: Path) -> None:
        with h5py.File(tmp, "w") as f:
            f.attrs["schema_version"] = RMA_SCHEMA_VERSION
            f.attrs["kind"] = "rma"
            f.attrs["write_time"] = utc_now()
            g = f.create_group("rma").create_group(label)
            info = res["info"]
            g.attrs["label"] = label
            for key in ("mpi_library", "osc", "reps", "compute_ms", "write_path"):
                g.attrs[key] = info[key]
            g.attrs["hostnames"] = ",".join(info["hostnames"])
            for key, value in software_versions().items():
                g.attrs[key] = value
            _write_tables(g, res)

    atomic_write(Path(path), write)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m dssfn_mpi.bench.micro.rma`` (run on 2 ranks)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(prog="python -m dssfn_mpi.bench.micro.rma",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="HDF5 file to write (rank 0)")
    parser.add_argument("--reps", type=int, default=50, help="timed repetitions (50)")
    parser.add_argument("--compute-ms", type=float, default=20.0,
                        help="target compute time outside MPI per put, ms (20)")
    parser.add_argument("--rma", choices=("auto", "put"), default="auto",
                        help="the mailbox's write path, as train --rma: auto (plain stores "
                        "into a shared window where possible) or put (MPI_Put) (auto)")
    parser.add_argument("--label", help="group name under /rma (default: osc-$OMPI_MCA_osc, "
                        "-put with --rma put)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    args = parser.parse_args(argv)

    from mpi4py import MPI
    from threadpoolctl import threadpool_limits

    from ...errors import UserError
    from ...runlog import check_output_path

    comm = MPI.COMM_WORLD
    error = None
    try:
        if comm.Get_size() != 2:
            raise UserError("the RMA benchmark runs on exactly 2 ranks: mpirun -n 2 "
                            "python -m dssfn_mpi.bench.micro.rma --out FILE")
        if args.reps < 1:
            raise UserError(f"--reps must be >= 1, got {args.reps}")
        if comm.Get_rank() == 0:
            check_output_path(args.out, args.overwrite)
    except UserError as exc:
        error = str(exc)
    error = comm.bcast(error, root=0)  # every rank leaves together, none waits alone
    if error is not None:
        if comm.Get_rank() == 0:
            print(f"dssfn_mpi.bench.micro.rma: error: {error}", file=sys.stderr, flush=True)
        return 2
    force_put = args.rma == "put"
    label = args.label or ("osc-" + (os.environ.get("OMPI_MCA_osc") or "default")
                           + ("-put" if force_put else ""))
    with threadpool_limits(limits=1):
        res = measure(comm, args.reps, args.compute_ms, force_put)
    if comm.Get_rank() == 0:
        write_rma(args.out, label, res)
        print(f"wrote {args.out} (/rma/{label}, writes by {res['info']['write_path']})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
