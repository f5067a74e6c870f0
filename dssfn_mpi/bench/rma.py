"""RMA micro-benchmark: what one-sided puts cost for the Z sizes of this workload.

Run as its own 2-rank job::

    mpirun -n 2 python -m dssfn_mpi.bench.rma --out rma.h5 [--reps 50] [--label osc-sm]

(``dssfn-mpi bench rma`` does this for you, once per one-sided component).
Rank 0 is the target, rank 1 the origin. Sizes: one Z = Q x n doubles with
n = 2Q + 1000 for Q in {6, 10, 11, 26, 102} (vowel... caltech101), plus an
8-byte put for the latency floor. Measured:

* ``put``: ``Lock(EXCLUSIVE)`` / ``Put`` / ``Unlock`` (what
  :class:`dssfn_mpi.transport.ZMailbox` does per Z), for an MPI-allocated
  window (``Win.Allocate``) and a window over user memory (``Win.Create``),
  each with the target **waiting inside MPI** (in ``MPI_Barrier``), the
  target **computing outside MPI** (a BLAS loop of ``--compute-ms``) and the
  target **sleeping outside MPI** (same time; separates "outside MPI" from
  "sharing the CPU"). A put that needs the target's help takes about as long
  as the target stays outside MPI: it is not one-sided in practice.
* ``activation``: the async engine's per-activation communication on a
  2-node graph (8 ``ZMailbox.read`` + 8 ``ZMailbox.put`` of one Z, both
  ranks at once, as in an activation with 8 neighbours) against the compute
  floor of an activation, the bare ``(Q x n) @ (n x n)`` product.
* ``passive_check``: :func:`dssfn_mpi.transport.passive_put_check` for both
  window kinds (a 1 s sleep on the target).

The layout of the HDF5 file is documented in BENCHMARKS.md ("The /rma group").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Q_VALUES", "SCENARIOS", "main", "measure", "write_rma", "z_shapes"]

#: Output classes Q of vowel (11), satimage (6), mnist/digits (10), letter (26), caltech101 (102).
Q_VALUES = (6, 10, 11, 26, 102)
_WORD = 8


def z_shapes() -> list[tuple[int, int]]:
    """(Q, n) of each measured size: the 8-byte floor (0, 1), then Q x (2Q + 1000)."""
    return [(0, 1)] + [(q, 2 * q + 1000) for q in Q_VALUES]


def _elems(q: int, n: int) -> int:
    return q * n if q else 1


def _busy(seconds: float, a: np.ndarray) -> None:
    """Compute (BLAS, no MPI call) for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a @ a


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _make_window(comm: Any, words: int, allocate: bool) -> tuple[Any, Any, str | None]:
    """A window of ``words`` doubles on rank 0 (1 elsewhere); agree on failure."""
    from mpi4py import MPI

    mine = words if comm.Get_rank() == 0 else 1
    win, local, error = None, None, None
    try:
        if allocate:
            win = MPI.Win.Allocate(mine * _WORD, _WORD, comm=comm)
        else:
            local = np.zeros(mine)
            win = MPI.Win.Create(local, _WORD, comm=comm)
    except MPI.Exception as exc:
        error = str(exc).strip() or "window creation failed"
    errors = comm.allgather(error)
    error = next((e for e in errors if e), None)
    if error is not None:
        return None, None, error  # a window made on one rank only cannot be freed collectively
    return win, local, None


def _put_once(win: Any, buf: np.ndarray) -> float:
    from mpi4py import MPI

    t0 = time.perf_counter()
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    win.Put(buf, 0, 0)
    win.Unlock(0)
    return time.perf_counter() - t0


#: Put scenarios: what the target does while the origin puts.
SCENARIOS = {
    "in_mpi": "target waiting inside MPI (MPI_Barrier)",
    "computing": "target computing outside MPI (BLAS loop, no MPI call)",
    "sleeping": "target sleeping outside MPI (time.sleep, no MPI call)",
}


def _put_tables(comm: Any, reps: int, compute_s: float, allocate: bool) -> dict[str, Any]:
    """Put latencies (sizes x reps) for every scenario of :data:`SCENARIOS`."""
    shapes = z_shapes()
    rank = comm.Get_rank()
    biggest = max(_elems(q, n) for q, n in shapes)
    tables = {name: np.full((len(shapes), reps), np.nan) for name in SCENARIOS}
    win, local, error = _make_window(comm, biggest, allocate)
    if error is not None:
        return {**tables, "error": error}
    payload = np.random.default_rng(1).random(biggest)
    work = np.random.default_rng(2).random((96, 96))
    for i, (q, n) in enumerate(shapes):
        buf = payload[: _elems(q, n)]
        comm.Barrier()
        if rank == 1:
            for _ in range(2):  # warm-up: first-touch and lock set-up
                _put_once(win, buf)
            for r in range(reps):
                tables["in_mpi"][i, r] = _put_once(win, buf)
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
                    tables[name][i, r] = _put_once(win, buf)
                comm.Barrier()
    win.Free()
    del local
    tables = {name: comm.bcast(tab, root=1) for name, tab in tables.items()}
    return {**tables, "error": ""}


def _activation_tables(comm: Any, reps: int) -> dict[str, np.ndarray]:
    """Per-activation mailbox traffic (8 reads + 8 puts) vs the (Q x n)@(n x n) product."""
    from ..topology import make_topology
    from ..transport import ZMailbox

    graph = make_topology("ring", 2)  # one neighbour each: 8 reads/puts stand for 8 neighbours
    other = 1 - comm.Get_rank()
    rng = np.random.default_rng(3 + comm.Get_rank())
    overhead = np.full((len(Q_VALUES), reps), np.nan)
    compute = np.full((len(Q_VALUES), reps), np.nan)
    for i, q in enumerate(Q_VALUES):
        n = 2 * q + 1000
        Z = rng.random((q, n))
        A, H = rng.random((q, n)), rng.random((n, n))
        with ZMailbox(comm, graph, q * n) as mb:
            for _ in range(3):
                mb.put(other, Z, 0)
                mb.read(other, 0)
            comm.Barrier()
            for r in range(reps):
                t0 = time.perf_counter()
                for _ in range(8):
                    mb.read(other, 0)
                for _ in range(8):
                    mb.put(other, Z, 0)
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


def measure(comm: Any, reps: int = 50, compute_ms: float = 20.0) -> dict[str, Any]:
    """Run every measurement (collective over 2 ranks); the result is the same on both.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        Exactly 2 ranks.
    reps : int
        Timed repetitions per size and scenario.
    compute_ms : float
        How long the target computes outside MPI in the "computing" scenario.

    Returns
    -------
    dict
        ``put`` (window kind -> tables), ``activation``, ``passive_check``
        and ``info`` (library, component, hosts).
    """
    from mpi4py import MPI

    from ..errors import require
    from ..transport import passive_put_check

    require(comm.Get_size() == 2, "the RMA benchmark runs on exactly 2 ranks: mpirun -n 2 ...")
    compute_s = compute_ms / 1000.0
    put = {kind: _put_tables(comm, reps, compute_s, kind == "allocate")
           for kind in ("allocate", "create")}
    activation = _activation_tables(comm, reps)
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
    }
    return {"put": put, "activation": activation, "passive_check": passive, "info": info}


def _dataset(group: Any, name: str, data: np.ndarray, units: str, description: str) -> None:
    ds = group.create_dataset(name, data=data)
    ds.attrs["units"] = units
    ds.attrs["description"] = description


def write_rma(path: str | os.PathLike, label: str, res: dict[str, Any]) -> None:
    """Write one measurement as ``/rma/<label>`` of a new HDF5 file, atomically."""
    import h5py

    from ..runlog import software_versions, utc_now

    target = Path(path)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shapes = z_shapes()
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["schema_version"] = 1
            f.attrs["kind"] = "rma"
            f.attrs["write_time"] = utc_now()
            g = f.create_group("rma").create_group(label)
            info = res["info"]
            g.attrs["label"] = label
            for key in ("mpi_library", "osc", "reps", "compute_ms"):
                g.attrs[key] = info[key]
            g.attrs["hostnames"] = ",".join(info["hostnames"])
            for key, value in software_versions().items():
                g.attrs[key] = value
            _dataset(g, "Q", np.array([q for q, _ in shapes]), "1",
                     "classes Q of each size (0: the 8-byte latency floor)")
            _dataset(g, "n", np.array([n for _, n in shapes]), "1", "hidden width n = 2Q + 1000")
            _dataset(g, "bytes", np.array([_WORD * _elems(q, n) for q, n in shapes]), "bytes",
                     "payload of one put (one Z = Q x n doubles)")
            pg = g.create_group("put")
            for kind, tab in res["put"].items():
                for where, text in SCENARIOS.items():
                    _dataset(pg, f"{kind}_{where}", tab[where], "s",
                             f"Lock/Put/Unlock latency, Win.{kind.capitalize()} window, {text}; "
                             "shape (sizes, reps)")
                pg.attrs[f"{kind}_error"] = tab["error"]
            ag = g.create_group("activation")
            _dataset(ag, "Q", np.array(Q_VALUES), "1", "classes Q (n = 2Q + 1000)")
            _dataset(ag, "overhead_seconds", res["activation"]["overhead_seconds"], "s",
                     "8 ZMailbox.read + 8 ZMailbox.put of one Q x n Z; shape (Q, rank, reps)")
            _dataset(ag, "compute_seconds", res["activation"]["compute_seconds"], "s",
                     "bare (Q x n) @ (n x n) product, the activation's compute floor; "
                     "shape (Q, rank, reps)")
            cg = g.create_group("passive_check")
            for kind, chk in res["passive_check"].items():
                sub = cg.create_group(kind)
                for key, value in chk.items():
                    sub.attrs[key] = "" if value is None else value
            f.flush()
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m dssfn_mpi.bench.rma`` (run on 2 ranks)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(prog="python -m dssfn_mpi.bench.rma",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="HDF5 file to write (rank 0)")
    parser.add_argument("--reps", type=int, default=50, help="timed repetitions (50)")
    parser.add_argument("--compute-ms", type=float, default=20.0,
                        help="target compute time outside MPI per put, ms (20)")
    parser.add_argument("--label", help="group name under /rma (default: osc-$OMPI_MCA_osc)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    args = parser.parse_args(argv)

    from mpi4py import MPI
    from threadpoolctl import threadpool_limits

    from ..errors import UserError
    from ..runlog import check_output_path

    comm = MPI.COMM_WORLD
    error = None
    try:
        if comm.Get_size() != 2:
            raise UserError("the RMA benchmark runs on exactly 2 ranks: mpirun -n 2 "
                            "python -m dssfn_mpi.bench.rma --out FILE")
        if args.reps < 1:
            raise UserError(f"--reps must be >= 1, got {args.reps}")
        if comm.Get_rank() == 0:
            check_output_path(args.out, args.overwrite)
    except UserError as exc:
        error = str(exc)
    error = comm.bcast(error, root=0)  # every rank leaves together, none waits alone
    if error is not None:
        if comm.Get_rank() == 0:
            print(f"dssfn_mpi.bench.rma: error: {error}", file=sys.stderr, flush=True)
        return 2
    label = args.label or ("osc-" + (os.environ.get("OMPI_MCA_osc") or "default"))
    with threadpool_limits(limits=1):
        res = measure(comm, args.reps, args.compute_ms)
    if comm.Get_rank() == 0:
        write_rma(args.out, label, res)
        print(f"wrote {args.out} (/rma/{label})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
