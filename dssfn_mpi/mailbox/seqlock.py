"""The mailbox's seqlock on a shared window as compiled loops (numba), with real fences.

:class:`dssfn_mpi.mailbox.transport.ZMailbox` reads and writes its slots with a seqlock
(the protocol and its proof are in the class notes; the Python path is
:mod:`dssfn_mpi.mailbox.slotreader` and :mod:`dssfn_mpi.mailbox.slotwriter`). With direct
stores (every rank on one node, a shared window) both sides touch plain memory, and in Python
each step is a numpy call or an ``MPI_Win_sync``: about 1 - 2 us of call overhead
per neighbour and phase, as much as copying a small ``Z``. Here the whole read
(every neighbour's counters, copies and checks, and the choice of rows) and the
whole write (three phases over all neighbours) are one compiled call each.

Where the Python code calls ``Win.Sync`` (a full memory barrier: Open MPI's
osc/sm and MPICH implement it as one), these loops execute a sequentially
consistent fence (LLVM ``fence seq_cst``: ``mfence`` or a locked instruction on
x86-64, ``dmb ish`` on AArch64), and the counters are loaded and stored as
relaxed atomic 8-byte accesses, so neither the compiler nor the processor can
split them, merge them or move them across a fence. That is everything the
proof uses: the writer's stores reach memory in the order ``begin``, payload,
``end``; the reader's loads happen in the order ``end``, ``begin``, payload,
``begin``. Only the direct-store mailbox calls these (the memory is plain shared
memory on one node); with MPI puts the Python path and ``Win.Sync`` remain.

The numpy/MPI path stays the reference: the stress tests,
the mutation control (``recheck=False``) and the stuck-writer test run against
both (tests/mpi/test_transport.py).
"""

from __future__ import annotations

from typing import Any

from .slotlayout import BEGIN, END, HEADER_FIELDS, HEADER_WORDS, LAYER

__all__ = ["AVAILABLE", "read_rows", "store"]

try:  # the optional compiled path (the ``fast`` extra)
    import numba
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic
except ImportError:  # pragma: no cover - depends on the install
    numba = None

#: True when numba imported and the loops compiled (or loaded from its cache).
AVAILABLE = False
read_rows: Any = None
store: Any = None

# The slot header's words: begin, end, then layer, version, nelems, rows, cols (_HEAD of
# them), _WORDS in all.
_BEGIN, _END, _LAYER, _HEAD, _WORDS = BEGIN, END, LAYER, HEADER_FIELDS, HEADER_WORDS

if numba is not None:

    @intrinsic
    def _fence(typingctx):  # pragma: no cover - compiled
        """A sequentially consistent memory fence (compiler and processor)."""
        def codegen(context, builder, signature, args):
            builder.fence("seq_cst")
            return context.get_dummy_value()
        return types.void(), codegen

    @intrinsic
    def _load(typingctx, arr, idx):  # pragma: no cover - compiled
        """``arr[idx]`` of an int64 array as one relaxed atomic 8-byte load."""
        def codegen(context, builder, signature, args):
            a = context.make_array(signature.args[0])(context, builder, args[0])
            return builder.load_atomic(builder.gep(a.data, [args[1]]), "monotonic", 8)
        return types.int64(arr, idx), codegen

    @intrinsic
    def _store(typingctx, arr, idx, val):  # pragma: no cover - compiled
        """``arr[idx] = val`` of an int64 array as one relaxed atomic 8-byte store."""
        def codegen(context, builder, signature, args):
            a = context.make_array(signature.args[0])(context, builder, args[0])
            builder.store_atomic(args[2], builder.gep(a.data, [args[1]]), "monotonic", 8)
            return context.get_dummy_value()
        return types.void(arr, idx, val), codegen

    @intrinsic
    def _memcpy(typingctx, dst, di, src, si, n):  # pragma: no cover - compiled
        """``dst[di : di + n] = src[si : si + n]`` (float64) as one ``memcpy``: the C
        library's copy (wide, non-temporal for large blocks) beats a compiled loop."""
        def codegen(context, builder, signature, args):
            d = context.make_array(signature.args[0])(context, builder, args[0])
            s = context.make_array(signature.args[2])(context, builder, args[2])
            cgutils.raw_memcpy(builder, builder.gep(d.data, [args[1]]),
                               builder.gep(s.data, [args[3]]), args[4], 8)
            return context.get_dummy_value()
        return types.void(dst, di, src, si, n), codegen


def _read_rows(words, vals, at, parity, todo, layer, size, attempts, recheck, kpar, kseq,
               khead, cur, spare, table, versions, rows, work, fresh,
               stats):  # pragma: no cover - compiled
    """The seqlock read of the in-slots ``todo`` of ``layer``'s parity, then the rows to use.

    ``SlotReader.refresh`` and ``SlotReader.read_rows`` in one loop (the rows only
    when ``rows`` has one entry per neighbour). ``words`` and
    ``vals``: this rank's window as int64 and float64; ``at[i]``: where neighbour
    i's slot of this parity starts. The kept copies' state (``kpar``, ``kseq``,
    ``khead``, ``cur``, ``spare``, the rows of ``table``) is the mailbox's, updated
    in place as its Python read does. ``recheck=False`` skips the second load of
    ``begin`` (the mutation control only). Scratch: ``work`` (deg,), ``fresh``
    (deg, 7: i, e and the header words layer .. cols). Fills
    ``versions`` and ``rows`` as ``read_rows`` returns them and adds the rejected
    copies and the fallbacks to ``stats[0]`` and ``stats[1]``. Returns how many
    neighbours need the Python check (a copy of ``layer`` whose header does not
    describe ``size`` values); their rows are the row of zeros.
    """
    deg = at.size
    max_elems = table.shape[1]
    m = todo.size
    for t in range(m):
        work[t] = todo[t]
    for _ in range(attempts):
        _fence()  # completed writes visible to the loads below, in order
        nf = 0
        for t in range(m):
            i = work[t]
            e = _load(words, at[i] + _END)
            if e != 0 and not (kpar[i] == parity and kseq[i] == e):
                fresh[nf, 0] = i
                fresh[nf, 1] = e
                nf += 1
        if nf == 0:
            m = 0
            break
        _fence()
        m = 0
        nc = 0  # copies made, compacted to the front of fresh
        for t in range(nf):
            i, e = fresh[t, 0], fresh[t, 1]
            o = at[i]
            if _load(words, o + _BEGIN) != e:  # a write is in flight: do not bother copying
                work[m] = i
                m += 1
                continue
            fresh[nc, 0], fresh[nc, 1] = i, e
            for w in range(_HEAD):
                fresh[nc, 2 + w] = words[o + _LAYER + w]
            nelems = fresh[nc, 4]
            nc += 1
            if nelems < 0 or nelems > max_elems:
                continue  # torn or bad: the recheck or the caller rejects it
            _memcpy(table[spare[i]], 0, vals, o + _WORDS, nelems)
        _fence()  # my copies' loads before the second load of begin
        for t in range(nc):
            i, e = fresh[t, 0], fresh[t, 1]
            if recheck and _load(words, at[i] + _BEGIN) != e:
                work[m] = i  # the copy overlapped a write: discard it
                m += 1
                continue
            # Consistent: header and data are exactly write e of the slot.
            kpar[i], kseq[i] = parity, e
            for w in range(_HEAD):
                khead[i, w] = fresh[t, 2 + w]
            spare[i] = 2 * i + cur[i]  # the old kept row takes the next copy
            cur[i] = 1 - cur[i]
        stats[0] += m
        if m == 0:
            break
    stats[1] += m  # every attempt overlapped a write
    if rows.size != deg:
        return 0
    return _pick_rows(parity, layer, size, kpar, khead, cur, table.shape[0] - 1, versions, rows)


def _pick_rows(parity, layer, size, kpar, khead, cur, nothing, versions,
               rows):  # pragma: no cover - compiled
    """The kept row and version of each neighbour for ``layer``'s ``size`` values (``read_rows``
    of :func:`_read_rows`); ``nothing`` (the row of zeros) and version 0 where no kept copy
    fits. Returns how many neighbours need the Python check (a copy of ``layer`` whose
    header does not describe ``size`` values)."""
    odd = 0
    for i in range(rows.size):
        mine = kpar[i] == parity and khead[i, 0] == layer and khead[i, 1] > 0
        if mine and khead[i, 2] == size and khead[i, 3] * khead[i, 4] == size:
            versions[i], rows[i] = khead[i, 1], 2 * i + cur[i]
            continue
        versions[i], rows[i] = 0, nothing
        odd += mine
    return odd


def _write(words, vals, at, counts, heads, src, off, size):  # pragma: no cover - compiled
    """The seqlock writes of ``src[k, off : off + size]`` into the slots starting at
    ``at[k]`` of the node's memory (``words``/``vals``: int64/float64), with counters
    ``counts[k]`` and header words ``heads[k]`` (layer .. cols): ``SlotWriter._store``."""
    k = at.size
    for t in range(k):
        _store(words, at[t] + _BEGIN, counts[t])
    _fence()  # begin reaches memory before any of the payload
    for t in range(k):
        o = at[t]
        for w in range(_HEAD):
            words[o + _LAYER + w] = heads[t, w]
        _memcpy(vals, o + _WORDS, src[t], off, size)
    _fence()  # the payload before end
    for t in range(k):
        _store(words, at[t] + _END, counts[t])
    _fence()  # end leaves the store buffer now, not at some later fence


if numba is not None:
    try:
        _opts = {"cache": True, "nogil": True, "boundscheck": False}
        _i1, _f1, _n, _b = numba.int64[::1], numba.float64[::1], numba.intp, numba.boolean
        _i2, _f2 = numba.int64[:, ::1], numba.float64[:, ::1]
        _f2a = numba.float64[:, :]
        _pick_rows = numba.njit(**_opts)(_pick_rows)  # compiled before _read_rows calls it
        read_rows = numba.njit(
            numba.intp(_i1, _f1, numba.intp[::1], _n, numba.intp[::1], _n, _n, _n, _b, _i1,
                       _i1, _i2, _i1,
                       numba.intp[::1], _f2, _i1, numba.intp[::1],
                       numba.intp[::1], _i2, _i1),
            **_opts)(_read_rows)
        store = numba.njit(
            numba.void(_i1, _f1, numba.intp[::1], _i1, numba.int64[:, :], _f2a, _n, _n),
            **_opts)(_write)
        AVAILABLE = True
    except Exception:  # pragma: no cover - a broken numba install: the Python path
        read_rows = store = None
