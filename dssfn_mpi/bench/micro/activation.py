"""One async activation against its floor: where the CPU of an activation goes.

Run as its own job with one rank more than the largest degree::

    mpirun -n 17 dssfn-mpi bench activation --out act.h5 [--reps 200]

Rank 0 is a hub with ``d`` neighbours (ranks ``1 .. d`` of a star graph; the
other ranks take no part but the barriers) for each ``d`` of ``--degrees``
(1, 2, 4, 8, 16). It runs the async engine's activation in the ``edge`` form
(``Q`` classes, layer width ``--width``, default the paper's ``n = 2Q + 1000``;
a local inverse of ``n x n`` from ``--samples`` random samples) exactly as
:class:`dssfn_mpi.engines.async_arock.AsyncEngine` does it, in parts:

* ``read``: :meth:`ZMailbox.read_rows` of the ``d`` neighbour slots, each
  holding a write made since the last read (the neighbours put a fresh ``Z``
  before every repetition, then wait), so every slot is copied and validated;
* ``update``: the update arithmetic without the local inverse
  (:meth:`dssfn_mpi.algorithms.updates.EdgeStep.rhs_rows` and ``dual_rows``: the
  compiled loops when numba is installed, ``--numpy`` for the numpy path);
* ``inverse``: :meth:`dssfn_mpi.ssfn.solver.LocalInverse.apply`, the activation's
  ``(Q x n)(n x n)`` product;
* ``put``: :meth:`ZMailbox.put_all` of the step's ``Z`` (the mailbox's outbox),
  the ``d`` seqlock writes;
* ``total``: all of it, timed around the whole sequence.

The floor is what no implementation can avoid, in two parts:

* ``product``: the same :meth:`LocalInverse.apply` timed alone on a ``Q x n``
  right-hand side (the compute floor);
* ``data_in`` and ``data_out``: the bytes an activation must move, as plain
  memory copies between the same processes on the same cores: ``d`` matrices of
  ``Q x n`` that the neighbours have just written into the hub's memory copied
  into the hub's own (in), and ``d`` copied from the hub's memory into the
  neighbours' (out). The memory is an MPI shared-memory window
  (``Win.Allocate_shared``), written and read with numpy copies: no MPI call, no
  protocol, no arithmetic (the data floor).

Beside the floor, ``edge`` times the edge form's update alone (``rhs_rows`` and
``dual_rows`` of a second :class:`EdgeStep`) on the rows the data
floor has just copied in: the arithmetic on ``d`` blocks that the algorithm
needs and the floor leaves out. The table gives ``total / floor`` (the figure of
merit) and ``total / (floor + edge)``.

After each repetition the neighbours read what the hub wrote, in the floor's
memory and in their windows, as nodes of a run read their windows: the hub's
next stores, of the floor and of the puts alike, find lines another process
has read.

The sync engines' iterations run on the same stars against their floors (the
product plus their collective alone): :mod:`dssfn_mpi.bench.micro.syncstep`.

Floor and activation are measured in the same process, interleaved (their
order alternates between repetitions), and every part is timed in **thread
CPU time** (the CPU the rank spends, which a loaded machine barely changes)
and in wall time. The ratio reported is the median over repetitions of
``total / (product + data_in + data_out)`` in CPU time; ratios are much less sensitive to
other load on the machine than the absolute times are.

Each repetition starts with an untimed activation (it reads the other parity
slot, which the neighbours write too), so that the timed one runs as in a
layer's steady state, right after the previous activation: without it, the
wake-up from the barrier's sleep with cold caches made every part 2 - 5 times
dearer. While the hub measures, the neighbours wait in a sleeping barrier (no
busy polling), so with fewer cores than ranks they do not take the hub's core.

The HDF5 layout (``/activation/<label>``) is documented in benchmarks/README.md.
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

__all__ = ["ACTIVATION_SCHEMA_VERSION", "PARTS", "format_table", "main",
           "measure", "run", "write_activation"]

#: 1: first version (2026-11-23); 2: the data floor between processes (``data``, was
#: ``copy`` within one), degrees to 16, ``--width``, ``compiled`` attribute (2026-11-25);
#: 3: the data floor in its two directions (``data_in``, ``data_out``), the edge form's
#: arithmetic alone (``edge``), the neighbours read what the hub puts (2026-11-25).
ACTIVATION_SCHEMA_VERSION = 3
#: Timed parts of one repetition, in the order of the datasets' second axis.
PARTS = ("read", "update", "inverse", "put", "total", "product", "data_in", "data_out", "edge")
#: The parts that make the floor.
_FLOOR = ("product", "data_in", "data_out")
_LAYER = 0


def _star(size: int, degree: int) -> Any:
    """Graph over ``size`` nodes: node 0 linked to ``1 .. degree``, the rest isolated."""
    from ...graph.topology import Graph

    return Graph(size, tuple((0, k) for k in range(1, degree + 1)), f"star(d={degree})")


def _sleeping_barrier(comm: Any) -> None:
    """A barrier that waits by sleeping (an MPI barrier would poll the CPU)."""
    from .syncstep import await_sleeping

    await_sleeping(comm.Ibarrier())


class _Clock:
    """Stamps of thread CPU and wall time, in nanoseconds."""

    def __init__(self, reps: int, stamps: int) -> None:
        self.cpu = np.zeros((reps, stamps), dtype=np.int64)
        self.wall = np.zeros((reps, stamps), dtype=np.int64)

    def __call__(self, r: int, k: int) -> None:
        self.wall[r, k] = time.perf_counter_ns()
        self.cpu[r, k] = time.thread_time_ns()


class _Shared:
    """The data floor's memory: ``slots`` rows of ``size`` values per rank, in a shared window.

    ``rows[r]`` is rank r's ``(slots, size)`` block, which every rank on the node
    can load from and store to directly (``Win.Allocate_shared``, ``Shared_query``).
    """

    def __init__(self, comm: Any, slots: int, size: int) -> None:
        from mpi4py import MPI

        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        same = node.Get_size() == comm.Get_size()
        node.Free()
        if not comm.allreduce(same, op=MPI.LAND):
            raise RuntimeError("the activation benchmark's data floor needs every rank on one "
                               "node (its memory is shared between them)")
        slots = comm.allreduce(slots, op=MPI.MAX)
        self.win = MPI.Win.Allocate_shared(slots * size * 8, 8, comm=comm)
        self.rows = []
        for r in range(comm.Get_size()):
            buf, _ = self.win.Shared_query(r)
            self.rows.append(np.frombuffer(buf, dtype=np.float64,
                                           count=slots * size).reshape(slots, size))
        self.rows[comm.Get_rank()][...] = 0.0
        comm.Barrier()

    def __enter__(self) -> _Shared:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.rows = []  # no view of the window may outlive it
        # Win.Free is collective: a rank that failed alone would wait in it for ranks that
        # wait for it, so on an error it is left to the abort (main), as ZMailbox does.
        if exc_type is None:
            self.win.Free()


def _hub(mb: Any, sh: _Shared, inv: Any, degree: int, q: int, n: int, reps: int,
         compiled: bool | None) -> dict[str, np.ndarray]:
    """Rank 0's repetitions: one activation and its floor each; seconds (parts, reps)."""
    from ...algorithms.updates import EdgeStep

    rng = np.random.default_rng(7)
    size = q * n
    B2 = rng.standard_normal((q, n))
    step = EdgeStep(B2, np.ones(degree), 1.0, 1.0, inv, store=mb.outbox(), compiled=compiled)
    step.Z[...] = 1e-3 * rng.standard_normal((degree, q, n))
    Zr: list[Any] = [None, None]
    private = np.empty((degree, size))  # the hub's own memory for the data floor
    # The edge form's arithmetic alone: the same update on a Z of its own, with the rows the
    # data floor has just copied in as the neighbours' values (no read).
    alone = EdgeStep(B2, np.ones(degree), 1.0, 1.0, inv, compiled=compiled)
    alone.Z[...] = step.Z
    every = np.arange(degree, dtype=np.intp)
    mine = sh.rows[0][:degree]  # the rows the neighbours write into (the hub is rank 0)
    theirs = [sh.rows[k][0] for k in range(1, degree + 1)]  # neighbour k's row
    versions = np.zeros(degree, dtype=np.int64)
    out = np.empty((q, n))
    act, flo, warm = _Clock(reps, 6), _Clock(reps, 5), _Clock(reps, 6)

    def activation(r: int, clock: Any, layer: int) -> None:
        clock(r, 0)
        Zr[:] = mb.read_rows(layer, size, versions)
        clock(r, 1)
        rhs = step.rhs_rows(*Zr)
        clock(r, 2)
        inv.apply(rhs, out=step.O)
        clock(r, 3)
        step.dual_rows(step.O)
        clock(r, 4)
        mb.put_all(step.Z, _LAYER)
        clock(r, 5)

    def floor(r: int) -> None:
        flo(r, 0)
        inv.apply(B2, out=out)  # any Q x n right-hand side costs the same
        flo(r, 1)
        np.copyto(private, mine)  # read d fresh Z written by the neighbours
        flo(r, 2)
        for row, z in zip(theirs, private):
            row[:] = z  # write d Z into the neighbours' memory
        flo(r, 3)
        alone.rhs_rows(private, every)
        alone.dual_rows(alone.O)  # its own O: no copy of step.O in the timing
        flo(r, 4)

    _repeat(mb, sh, reps, versions, lambda r: activation(r, warm, _LAYER + 1),
            lambda r: activation(r, act, _LAYER), floor)
    return _parts(act, flo)


def _repeat(mb: Any, sh: _Shared, reps: int, versions: np.ndarray, warm: Any,
            timed: Any, floor: Any) -> None:
    """The hub's ``reps`` repetitions: a warm-up activation, then the timed activation and
    the floor in alternating order, between the neighbours' writes."""
    for r in range(reps):
        _sleeping_barrier(mb.comm)  # the neighbours' fresh puts and stores are complete
        sh.win.Sync()
        # Steady state of back-to-back activations: the previous one has just run,
        # reading the other parity slot (the neighbours write both) so that the
        # fresh writes of _LAYER are left for the timed activation.
        warm(r)
        for part in (floor, timed) if r % 2 else (timed, floor):
            part(r)
        if np.any(versions != r + 1):
            raise RuntimeError(f"read versions {versions}, expected {r + 1} from every neighbour")
        sh.win.Sync()
        _sleeping_barrier(mb.comm)  # the neighbours may put again


def _parts(act: Any, flo: Any) -> dict[str, np.ndarray]:
    """The activation's parts (read, update, solve, put, total) and the floor's, seconds
    (parts, reps), from the two clocks' nanosecond stamps, for ``cpu`` and ``wall``."""
    res = {}
    for kind in ("cpu", "wall"):
        a, f = np.diff(getattr(act, kind), axis=1), np.diff(getattr(flo, kind), axis=1)
        total = getattr(act, kind)[:, 5] - getattr(act, kind)[:, 0]
        update = a[:, 1] + a[:, 3]
        res[kind] = 1e-9 * np.stack([a[:, 0], update, a[:, 2], a[:, 4], total, *f.T])
    return res


def _leaf(mb: Any, sh: _Shared, q: int, n: int, reps: int) -> None:
    """A neighbour's repetitions: put a fresh Z into the hub, wait while it measures.

    It also stores a fresh Z into the hub's shared row (the data floor's read),
    reads its own row, which the hub's data floor wrote, and reads its window,
    which the hub's activations wrote, as a node of a run reads its window
    (so the hub's next stores, there as in the floor, find lines its neighbours
    have read).
    """
    Z = 1e-3 * np.random.default_rng(mb.rank).standard_normal((q, n))
    me = mb.rank
    hub_row = sh.rows[0][me - 1] if 0 in mb.neighbors else None
    my_row = sh.rows[me][0]
    seen = np.empty(q * n)
    versions = np.zeros(len(mb.neighbors), dtype=np.int64)
    for r in range(reps):
        Z[0, 0] = r  # a new value each time
        if hub_row is not None:
            mb.put(0, Z, _LAYER)
            mb.put(0, Z, _LAYER + 1)  # read by the hub's untimed activation
            hub_row[:] = Z.reshape(-1)
            np.copyto(seen, my_row)
            for layer in (_LAYER, _LAYER + 1):
                mb.read_rows(layer, q * n, versions)
        sh.win.Sync()
        _sleeping_barrier(mb.comm)
        _sleeping_barrier(mb.comm)


def measure(comm: Any, degrees: tuple[int, ...] = (1, 2, 4, 8, 16), classes: int = 10,
            samples: int = 3000, reps: int = 200, width: int | None = None,
            compiled: bool | None = None, force_put: bool = False) -> dict[str, Any] | None:
    """Run the benchmark (collective); rank 0 returns the result, the others None.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        At least ``max(degrees) + 1`` ranks, all on one node.
    degrees : tuple of int
        Neighbour counts d of the hub.
    classes : int
        Q.
    samples : int
        Samples behind the hub's local inverse (its form follows
        :class:`dssfn_mpi.ssfn.solver.LocalInverse`: dense unless ``2 samples < n``).
    reps : int
        Repetitions per degree.
    width : int, optional
        The layer width n; default ``2Q + 1000`` (the paper's).
    compiled : bool, optional
        The activation's compiled loops (True), its numpy path (False) or the
        engine's choice (None: compiled when numba is installed).
    force_put : bool
        The mailbox writes with ``MPI_Put`` even where it could store directly
        (``train --rma put``); ``info["write_path"]`` says which path was measured.

    Returns
    -------
    dict or None
        ``cpu_seconds`` and ``wall_seconds``, each of shape
        ``(len(degrees), len(PARTS), reps)``, and ``info``.
    """
    from ...algorithms import kernels
    from ...ssfn.solver import LocalInverse
    from .mailbox import BenchMailbox
    from .syncstep import measure_sync

    q = classes
    n = default_width(classes) if width is None else width
    rank, size = comm.Get_rank(), comm.Get_size()
    inv = Y = G = None
    if rank == 0:
        Y = np.random.default_rng(5).standard_normal((n, samples)) / np.sqrt(samples)
        G = Y @ Y.T
    cpu, wall = [], []
    with _Shared(comm, max(degrees), q * n) as sh:
        for d in degrees:
            with BenchMailbox(comm, _star(size, d), q * n, force_put=force_put) as mb:
                path = "store" if mb.direct else "put"
                if rank == 0:
                    inv = LocalInverse(Y, float(d), G)  # c = sum_n gamma_mn, gamma = 1
                    inv.apply(np.ones((q, n)))  # warm-up
                    res = _hub(mb, sh, inv, d, q, n, reps, compiled)
                    cpu.append(res["cpu"])
                    wall.append(res["wall"])
                else:
                    _leaf(mb, sh, q, n, reps)
    # The sync engines' iterations on the same stars, against their own floors.
    sync = measure_sync(comm, degrees, q, n, samples, Y, G, reps)
    if rank != 0:
        return None
    used = kernels.AVAILABLE if compiled is None else compiled
    info = {"classes": q, "width": n, "samples": samples, "reps": reps,
            "inverse_form": "woodbury" if inv is not None and inv.low_rank else "dense",
            "osc": os.environ.get("OMPI_MCA_osc", ""), "ranks": size, "write_path": path,
            "compiled": bool(used), "numba": kernels.NUMBA_VERSION if used else ""}
    assert sync is not None
    return {"degrees": np.array(degrees), "cpu_seconds": np.array(cpu),
            "wall_seconds": np.array(wall), "info": info,
            "sync_cpu_seconds": sync["cpu_seconds"], "sync_wall_seconds": sync["wall_seconds"]}


def _medians(res: dict[str, Any], kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median seconds per (degree, part) and the median per-repetition ratios of the total
    to the floor (product + data in + data out) and to the floor plus the edge arithmetic."""
    t = res[f"{kind}_seconds"]
    floor = sum(t[:, PARTS.index(p)] for p in _FLOOR)
    total = t[:, PARTS.index("total")]
    return (np.median(t, axis=2), np.median(total / floor, axis=1),
            np.median(total / (floor + t[:, PARTS.index("edge")]), axis=1))


def format_table(res: dict[str, Any], kind: str = "cpu") -> str:
    """The readable table: median microseconds per part and the total/floor ratios."""
    med, ratio, ratio_edge = _medians(res, kind)
    info = res["info"]
    impl = f"compiled (numba {info['numba']})" if info.get("compiled") else "numpy"
    lines = [f"one async activation (edge form, {impl}), Q = {info['classes']}, "
             f"n = {info['width']}, {info['inverse_form']} inverse, writes by "
             f"{info.get('write_path', '?')}; median {kind} "
             f"microseconds over {info['reps']} repetitions",
             f"{'d':>3} {'read':>7} {'update':>7} {'inverse':>8} {'put':>7} {'total':>8} "
             f"{'product':>8} {'in':>6} {'out':>6} {'floor':>8} {'total/floor':>12} "
             f"{'edge':>6} {'/(floor+edge)':>14}"]
    for k, d in enumerate(res["degrees"]):
        us = 1e6 * med[k]
        floor = sum(us[PARTS.index(p)] for p in _FLOOR)
        lines.append(f"{d:>3} {us[0]:>7.1f} {us[1]:>7.1f} {us[2]:>8.1f} {us[3]:>7.1f} "
                     f"{us[4]:>8.1f} {us[5]:>8.1f} {us[6]:>6.1f} {us[7]:>6.1f} {floor:>8.1f} "
                     f"{ratio[k]:>12.3f} {us[8]:>6.1f} {ratio_edge[k]:>14.3f}")
    lines.append("floor = product (the local inverse applied alone) + data: in (d Z copied in "
                 "from the neighbours' memory) and out (d Z copied into theirs); edge = the edge "
                 "form's update alone on the copied-in data; ratios are medians of the "
                 "per-repetition ratios")
    if "sync_cpu_seconds" in res:
        from .syncstep import ENGINES, SYNC_PARTS, sync_ratios

        t = res[f"sync_{kind}_seconds"]
        med, ratio = np.median(t, axis=-1), sync_ratios(t)
        lines.append(f"one sync iteration on the same stars; median {kind} microseconds")
        lines.append(f"{'engine':>10} {'d':>3} " + " ".join(f"{p:>10}" for p in SYNC_PARTS)
                     + f" {'floor':>8} {'total/floor':>12}")
        for e, engine in enumerate(ENGINES):
            for k, d in enumerate(res["degrees"]):
                us = 1e6 * med[e, k]
                floor = us[SYNC_PARTS.index("product")] + us[SYNC_PARTS.index("alone")]
                lines.append(f"{engine:>10} {d:>3} " + " ".join(f"{x:>10.1f}" for x in us)
                             + f" {floor:>8.1f} {ratio[e, k]:>12.3f}")
        lines.append("floor = product + alone (the same collective with no arithmetic); "
                     "sync-graph: one mixing round")
    return "\n".join(lines)


def _dataset(group: Any, name: str, data: np.ndarray, units: str, description: str) -> None:
    ds = group.create_dataset(name, data=data)
    ds.attrs["units"] = units
    ds.attrs["description"] = description


def write_activation(path: str | os.PathLike, label: str, res: dict[str, Any]) -> None:
    """Write one measurement as ``/activation/<label>`` of a new HDF5 file, atomically."""
    import h5py
    from mpi4py import MPI

    from ...fileio import atomic_write
    from ...runlog import software_versions, utc_now
    from .syncstep import ENGINES, SYNC_PARTS, sync_ratios

    def write(tmp: Path) -> None:
        with h5py.File(tmp, "w") as f:
            f.attrs["schema_version"] = ACTIVATION_SCHEMA_VERSION
            f.attrs["kind"] = "activation"
            f.attrs["write_time"] = utc_now()
            g = f.create_group("activation").create_group(label)
            for key, value in res["info"].items():
                g.attrs[key] = value
            lib = str(MPI.Get_library_version()).replace("\x00", "").strip().splitlines()
            g.attrs["mpi_library"] = lib[0] if lib else ""
            for key, value in software_versions().items():
                g.attrs[key] = value
            g.attrs["parts"] = ",".join(PARTS)
            _dataset(g, "degrees", res["degrees"], "1", "neighbours d of the measuring rank")
            shape = "shape (degrees, parts, reps); parts in the order of the 'parts' attribute"
            _dataset(g, "cpu_seconds", res["cpu_seconds"], "s",
                     f"thread CPU time of each part of one activation and of its floor; {shape}")
            _dataset(g, "wall_seconds", res["wall_seconds"], "s",
                     f"wall time of the same parts; {shape}")
            for kind in ("cpu", "wall"):
                _, ratio, ratio_edge = _medians(res, kind)
                _dataset(g, f"{kind}_ratio", ratio, "1",
                         "median over repetitions of total / (product + data_in + data_out), "
                         f"{kind} time; shape (degrees,)")
                _dataset(g, f"{kind}_ratio_edge", ratio_edge, "1",
                         "median over repetitions of total / (product + data_in + data_out + "
                         f"edge), {kind} time; shape (degrees,)")
            s = g.create_group("sync")
            s.attrs["engines"] = ",".join(ENGINES)
            s.attrs["parts"] = ",".join(SYNC_PARTS)
            sshape = "shape (engines, degrees, parts, reps)"
            for kind, what in (("cpu", "thread CPU time"), ("wall", "wall time")):
                _dataset(s, f"{kind}_seconds", res[f"sync_{kind}_seconds"], "s",
                         f"{what} of each part of one sync iteration and of its floor; {sshape}")
                _dataset(s, f"{kind}_ratio", sync_ratios(res[f"sync_{kind}_seconds"]), "1",
                         f"median over repetitions of total / (product + alone), {kind} time; "
                         "shape (engines, degrees)")

    atomic_write(Path(path), write)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m dssfn_mpi.bench.micro.activation`` (run under mpirun)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from ..sweeps.toolargs import tool_parser

    module = "dssfn_mpi.bench.micro.activation"
    return run(tool_parser(module, __doc__.split("\n\n")[0]).parse_args(argv), module)


def run(args: argparse.Namespace, prog: str = "dssfn-mpi") -> int:
    """Measure (collective, under mpirun); errors are printed as ``PROG: error: ...``."""
    from mpi4py import MPI
    from threadpoolctl import threadpool_limits

    from ...errors import UserError
    from ...runlog import check_output_path

    comm = MPI.COMM_WORLD
    error = None
    try:
        degrees = tuple(int(x) for x in args.degrees.split(","))
        if min(degrees) < 1 or comm.Get_size() < max(degrees) + 1:
            raise UserError(f"--degrees {args.degrees} needs positive degrees and at least "
                            f"{max(degrees) + 1} ranks (mpirun -n {max(degrees) + 1})")
        if args.reps < 1 or args.classes < 1 or args.samples < 1 or (args.width or 1) < 1:
            raise UserError("--reps, --classes, --width and --samples must be >= 1")
        if comm.Get_rank() == 0 and args.out:
            check_output_path(args.out, args.overwrite)
    except ValueError:
        error = f"--degrees must be comma-separated integers, got {args.degrees!r}"
    except UserError as exc:
        error = str(exc)
    error = comm.bcast(error, root=0)  # every rank leaves together, none waits alone
    if error is not None:
        if comm.Get_rank() == 0:
            print(f"{prog}: error: {error}", file=sys.stderr, flush=True)
        return 2
    try:
        with threadpool_limits(limits=1):
            res = measure(comm, degrees, args.classes, args.samples, args.reps, args.width,
                          False if args.numpy else None, args.rma == "put")
    except Exception as exc:  # the others wait in a barrier for this rank: end them all
        print(f"{prog}: error: rank {comm.Get_rank()}: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        comm.Abort(1)
        return 1  # pragma: no cover - Abort does not return
    if res is not None:
        print(format_table(res, "cpu"), flush=True)
        if args.out:
            label = args.label or ("osc-" + (os.environ.get("OMPI_MCA_osc") or "default")
                                   + ("-put" if args.rma == "put" else ""))
            write_activation(args.out, label, res)
            print(f"wrote {args.out} (/activation/{label})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
