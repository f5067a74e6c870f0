"""One async activation against its floor: where the CPU of an activation goes.

Run as its own job with one rank more than the largest degree::

    mpirun -n 9 python -m dssfn_mpi.bench.activation --out act.h5 [--reps 200]

Rank 0 is a hub with ``d`` neighbours (ranks ``1 .. d`` of a star graph; the
other ranks take no part but the barriers) for each ``d`` of ``--degrees``
(1, 4, 8). It runs the async engine's activation in the ``edge`` form at the
paper's sizes (``Q`` classes, layer width ``n = 2Q + 1000``; a local inverse
of ``n x n`` built from ``--samples`` random samples), exactly as
:class:`dssfn_mpi.engines.async_arock.AsyncEngine` does it, in parts:

* ``read``: :meth:`ZMailbox.read_views` of the ``d`` neighbour slots, each
  holding a write made since the last read (the neighbours put a fresh ``Z``
  before every repetition, then wait), so every slot is copied and validated;
* ``update``: the update arithmetic without the local inverse
  (:meth:`dssfn_mpi.engines.updates.EdgeStep.rhs` and ``EdgeStep.dual``);
* ``inverse``: :meth:`dssfn_mpi.solver.LocalInverse.apply`, the activation's
  ``(Q x n)(n x n)`` product;
* ``put``: :meth:`ZMailbox.put_all`, the ``d`` seqlock writes;
* ``total``: all of it, timed around the whole sequence.

The floor is what no implementation can avoid: the product (``product``, the
same :meth:`LocalInverse.apply` timed alone on a ``Q x n`` right-hand side)
plus reading ``d`` and writing ``d`` matrices of ``Q x n`` once (``copy``: one
``numpy.copyto`` of the node's ``d`` stacked Z within its own memory, a strict
bound: the activation's reads and puts move data between cores, which costs
more). Both are measured in the same
process, interleaved with the activation (their order alternates between
repetitions), and every part is timed in **thread CPU time** (the CPU the
rank spends, which a loaded machine barely changes) and in wall time. The
ratio reported is the median over repetitions of ``total / floor`` in CPU
time; ratios are much less sensitive to other load on the machine than the
absolute times are.

Each repetition starts with an untimed activation (it reads the other parity
slot, which the neighbours write too), so that the timed one runs as in a
layer's steady state, right after the previous activation: without it, the
wake-up from the barrier's sleep with cold caches made every part 2 - 5 times
dearer. While the hub measures, the neighbours wait in a sleeping barrier (no
busy polling), so with fewer cores than ranks they do not take the hub's core.

The HDF5 layout (``/activation/<label>``) is documented in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ACTIVATION_SCHEMA_VERSION", "PARTS", "format_table", "main", "measure",
           "write_activation"]

#: 1: first version (2026-11-23).
ACTIVATION_SCHEMA_VERSION = 1
#: Timed parts of one repetition, in the order of the datasets' second axis.
PARTS = ("read", "update", "inverse", "put", "total", "product", "copy")
_LAYER = 0


def _star(size: int, degree: int) -> Any:
    """Graph over ``size`` nodes: node 0 linked to ``1 .. degree``, the rest isolated."""
    from ..topology import Graph

    return Graph(size, tuple((0, k) for k in range(1, degree + 1)), f"star(d={degree})")


def _sleeping_barrier(comm: Any) -> None:
    """A barrier that waits by sleeping (an MPI barrier would poll the CPU)."""
    from ..waiting import sleep_until

    request = comm.Ibarrier()
    if not sleep_until(request.Test, 600.0, max_delay=1e-3).ready:
        raise RuntimeError("a rank of the activation benchmark did not reach the barrier")


class _Clock:
    """Stamps of thread CPU and wall time, in nanoseconds."""

    def __init__(self, reps: int, stamps: int) -> None:
        self.cpu = np.zeros((reps, stamps), dtype=np.int64)
        self.wall = np.zeros((reps, stamps), dtype=np.int64)

    def __call__(self, r: int, k: int) -> None:
        self.wall[r, k] = time.perf_counter_ns()
        self.cpu[r, k] = time.thread_time_ns()


def _hub(mb: Any, inv: Any, degree: int, q: int, n: int, reps: int) -> dict[str, np.ndarray]:
    """Rank 0's repetitions: one activation and its floor each; seconds (parts, reps)."""
    from ..engines.updates import EdgeStep

    rng = np.random.default_rng(7)
    B2 = rng.standard_normal((q, n))
    step = EdgeStep(B2, np.ones(degree), 1.0, 1.0, inv)  # eta = gamma = eps = 1
    Z = step.Z
    Z[...] = 1e-3 * rng.standard_normal((degree, q, n))
    Zr: list[np.ndarray] = []
    scratch = np.empty((degree, q, n))
    versions = np.zeros(degree, dtype=np.int64)
    out = np.empty((q, n))
    act, flo, warm = _Clock(reps, 6), _Clock(reps, 3), _Clock(reps, 6)

    def activation(r: int, clock: Any, layer: int) -> None:
        clock(r, 0)
        Zr[:] = mb.read_views(layer, (q, n), versions)
        clock(r, 1)
        rhs = step.rhs(Zr)
        clock(r, 2)
        inv.apply(rhs, out=step.O)
        clock(r, 3)
        step.dual(step.O)
        clock(r, 4)
        mb.put_all(Z, _LAYER)
        clock(r, 5)

    for r in range(reps):
        _sleeping_barrier(mb.comm)  # the neighbours' fresh puts are complete
        # Steady state of back-to-back activations: the previous one has just run,
        # reading the other parity slot (the neighbours write both) so that the
        # fresh writes of _LAYER are left for the timed activation.
        activation(r, warm, _LAYER + 1)
        for part in ("floor", "activation") if r % 2 else ("activation", "floor"):
            if part == "floor":
                flo(r, 0)
                inv.apply(B2, out=out)  # any Q x n right-hand side costs the same
                flo(r, 1)
                np.copyto(scratch, Z)  # read d and write d Z (Q x n) once
                flo(r, 2)
            else:
                activation(r, act, _LAYER)
        if np.any(versions != r + 1):
            raise RuntimeError(f"read versions {versions}, expected {r + 1} from every neighbour")
        _sleeping_barrier(mb.comm)  # the neighbours may put again
    res = {}
    for kind in ("cpu", "wall"):
        a, f = np.diff(getattr(act, kind), axis=1), np.diff(getattr(flo, kind), axis=1)
        total = getattr(act, kind)[:, 5] - getattr(act, kind)[:, 0]
        update = a[:, 1] + a[:, 3]
        res[kind] = 1e-9 * np.stack([a[:, 0], update, a[:, 2], a[:, 4], total, f[:, 0], f[:, 1]])
    return res


def _leaf(mb: Any, q: int, n: int, reps: int) -> None:
    """A neighbour's repetitions: put a fresh Z into the hub, wait while it measures."""
    Z = 1e-3 * np.random.default_rng(mb.rank).standard_normal((q, n))
    for r in range(reps):
        Z[0, 0] = r  # a new value each time
        if 0 in mb.neighbors:
            mb.put(0, Z, _LAYER)
            mb.put(0, Z, _LAYER + 1)  # read by the hub's untimed activation
        _sleeping_barrier(mb.comm)
        _sleeping_barrier(mb.comm)


def measure(comm: Any, degrees: tuple[int, ...] = (1, 4, 8), classes: int = 10,
            samples: int = 3000, reps: int = 200) -> dict[str, Any] | None:
    """Run the benchmark (collective); rank 0 returns the result, the others None.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        At least ``max(degrees) + 1`` ranks.
    degrees : tuple of int
        Neighbour counts d of the hub.
    classes : int
        Q; the layer width is ``n = 2Q + 1000``.
    samples : int
        Samples behind the hub's local inverse (its form follows
        :class:`dssfn_mpi.solver.LocalInverse`: dense unless ``2 samples < n``).
    reps : int
        Repetitions per degree.

    Returns
    -------
    dict or None
        ``cpu_seconds`` and ``wall_seconds``, each of shape
        ``(len(degrees), len(PARTS), reps)``, and ``info``.
    """
    from ..solver import LocalInverse
    from ..transport import ZMailbox

    q, n = classes, 2 * classes + 1000
    rank, size = comm.Get_rank(), comm.Get_size()
    inv = None
    if rank == 0:
        Y = np.random.default_rng(5).standard_normal((n, samples)) / np.sqrt(samples)
        G = Y @ Y.T
    cpu, wall = [], []
    for d in degrees:
        with ZMailbox(comm, _star(size, d), q * n) as mb:
            if rank == 0:
                inv = LocalInverse(Y, float(d), G)  # c = sum_n gamma_mn, gamma = 1
                inv.apply(np.ones((q, n)))  # warm-up
                res = _hub(mb, inv, d, q, n, reps)
                cpu.append(res["cpu"])
                wall.append(res["wall"])
            else:
                _leaf(mb, q, n, reps)
    if rank != 0:
        return None
    info = {"classes": q, "width": n, "samples": samples, "reps": reps,
            "inverse_form": "woodbury" if inv is not None and inv.low_rank else "dense",
            "osc": os.environ.get("OMPI_MCA_osc", ""), "ranks": size}
    return {"degrees": np.array(degrees), "cpu_seconds": np.array(cpu),
            "wall_seconds": np.array(wall), "info": info}


def _medians(res: dict[str, Any], kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Median seconds per (degree, part) and median per-repetition total/floor ratio."""
    t = res[f"{kind}_seconds"]
    floor = t[:, PARTS.index("product")] + t[:, PARTS.index("copy")]
    ratio = np.median(t[:, PARTS.index("total")] / floor, axis=1)
    return np.median(t, axis=2), ratio


def format_table(res: dict[str, Any], kind: str = "cpu") -> str:
    """The readable table: median microseconds per part and the total/floor ratio."""
    med, ratio = _medians(res, kind)
    info = res["info"]
    lines = [f"one async activation (edge form), Q = {info['classes']}, n = {info['width']}, "
             f"{info['inverse_form']} inverse; median {kind} microseconds over "
             f"{info['reps']} repetitions",
             f"{'d':>3} {'read':>7} {'update':>7} {'inverse':>8} {'put':>7} {'total':>8} "
             f"{'product':>8} {'copy':>6} {'floor':>8} {'total/floor':>12}"]
    for k, d in enumerate(res["degrees"]):
        us = 1e6 * med[k]
        floor = us[PARTS.index("product")] + us[PARTS.index("copy")]
        lines.append(f"{d:>3} {us[0]:>7.1f} {us[1]:>7.1f} {us[2]:>8.1f} {us[3]:>7.1f} "
                     f"{us[4]:>8.1f} {us[5]:>8.1f} {us[6]:>6.1f} {floor:>8.1f} "
                     f"{ratio[k]:>12.3f}")
    lines.append("floor = product (the local inverse applied alone) + copy (read d and write d "
                 "Z once); total/floor is the median of the per-repetition ratios")
    return "\n".join(lines)


def _dataset(group: Any, name: str, data: np.ndarray, units: str, description: str) -> None:
    ds = group.create_dataset(name, data=data)
    ds.attrs["units"] = units
    ds.attrs["description"] = description


def write_activation(path: str | os.PathLike, label: str, res: dict[str, Any]) -> None:
    """Write one measurement as ``/activation/<label>`` of a new HDF5 file, atomically."""
    import h5py
    from mpi4py import MPI

    from ..fileio import atomic_write
    from ..runlog import software_versions, utc_now

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
                _, ratio = _medians(res, kind)
                _dataset(g, f"{kind}_ratio", ratio, "1",
                         f"median over repetitions of total / (product + copy), {kind} time; "
                         "shape (degrees,)")

    atomic_write(Path(path), write)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m dssfn_mpi.bench.activation`` (run under mpirun)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(prog="python -m dssfn_mpi.bench.activation",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="HDF5 file to write (rank 0); none: print only")
    parser.add_argument("--reps", type=int, default=200, help="repetitions per degree (200)")
    parser.add_argument("--degrees", default="1,4,8", help="neighbour counts (1,4,8)")
    parser.add_argument("--classes", type=int, default=10, help="Q (10: mnist); n = 2Q + 1000")
    parser.add_argument("--samples", type=int, default=3000,
                        help="samples of the local inverse (3000: mnist over 20 nodes)")
    parser.add_argument("--label", help="group name under /activation (default: "
                                        "osc-$OMPI_MCA_osc)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    args = parser.parse_args(argv)

    from mpi4py import MPI
    from threadpoolctl import threadpool_limits

    from ..errors import UserError
    from ..runlog import check_output_path

    comm = MPI.COMM_WORLD
    error = None
    try:
        degrees = tuple(int(x) for x in args.degrees.split(","))
        if min(degrees) < 1 or comm.Get_size() < max(degrees) + 1:
            raise UserError(f"--degrees {args.degrees} needs positive degrees and at least "
                            f"{max(degrees) + 1} ranks (mpirun -n {max(degrees) + 1})")
        if args.reps < 1 or args.classes < 1 or args.samples < 1:
            raise UserError("--reps, --classes and --samples must be >= 1")
        if comm.Get_rank() == 0 and args.out:
            check_output_path(args.out, args.overwrite)
    except ValueError:
        error = f"--degrees must be comma-separated integers, got {args.degrees!r}"
    except UserError as exc:
        error = str(exc)
    error = comm.bcast(error, root=0)  # every rank leaves together, none waits alone
    if error is not None:
        if comm.Get_rank() == 0:
            print(f"dssfn_mpi.bench.activation: error: {error}", file=sys.stderr, flush=True)
        return 2
    with threadpool_limits(limits=1):
        res = measure(comm, degrees, args.classes, args.samples, args.reps)
    if res is not None:
        print(format_table(res, "cpu"), flush=True)
        if args.out:
            label = args.label or ("osc-" + (os.environ.get("OMPI_MCA_osc") or "default"))
            write_activation(args.out, label, res)
            print(f"wrote {args.out} (/activation/{label})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
