"""Mutation control for the seqlock stress test: a broken reader must be caught.

``test_transport.py`` shows that raw, unprotected copies of a slot tear, and
that the real reader never returns a torn copy. This file closes the gap in
between: a reader that keeps the seqlock's first counter check (``begin ==
end`` before copying) but skips the second one (``begin`` unchanged after the
copy) looks plausible and is wrong, since a write can start during the copy.
The same stress run as the real test (writers putting in bursts) must catch it.

Run: ``mpirun -n 2 python -m pytest --with-mpi -q tests/mpi/test_seqlock_mutation.py``.
"""

from __future__ import annotations

import os

import pytest
from test_transport import _comm, _stress

pytestmark = [
    pytest.mark.timeout(60, method="thread"),
    # A torn copy needs a put's data to land while the reader copies. Under Open MPI's
    # osc/rdma over TCP that is rare when the machine is loaded: beside one busy process
    # on 2 cores, 12 s of stress caught the mutant in only 4 of 6 cases (0 torn reads in
    # 585 000; make test, 2026-11-23), so the control would be flaky there. Its power is
    # shown under osc/sm (make test) and MPICH and Intel MPI (make test-matrix); the real
    # reader's stress test (test_transport.py) still runs under osc/rdma.
    pytest.mark.skipif(os.environ.get("OMPI_MCA_osc") == "rdma",
                       reason="the mutation control is too weak under osc/rdma over TCP "
                       "on a loaded machine (see the module); run under osc/sm"),
]


def _read_slot_without_second_check(self, i: int, layer: int, dest):
    """``ZMailbox._read_slot`` with the mutation: the copy is never re-validated."""
    from dssfn_mpi.transport import _ATTEMPTS, _S_BEGIN, _S_END, _S_LAYER, HEADER_WORDS

    win, i64, f64 = self._win, self._i64, self._f64
    off = self._slot_offset(i, layer % 2)
    first = off + HEADER_WORDS
    for _ in range(_ATTEMPTS):
        win.Sync()
        e = int(i64[off + _S_END])
        if e == 0:
            return 0, None, (0, 0)
        win.Sync()
        if int(i64[off + _S_BEGIN]) != e:  # first check kept: no write in flight yet
            self.torn_retries += 1
            continue
        layer_w, version, nelems, rows, cols = i64[off + _S_LAYER : first].tolist()
        if layer_w != layer or version <= 0 or not 0 <= nelems <= self.max_elems:
            return 0, None, (0, 0)
        if dest is None:
            got = f64[first : first + nelems].copy()
        else:
            dest[:] = f64[first : first + nelems]
            got = dest
        # MUTATION: the real reader re-reads `begin` here and discards the copy if
        # a write started meanwhile.
        return version, got, (rows, cols)
    self.fallbacks += 1
    return 0, None, (0, 0)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("mode", ["read", "read_all", "read_views"])
@pytest.mark.parametrize("shape", [(26, 1052), (128, 1024)], ids=["26x1052", "1MiB"])
def test_stress_test_catches_a_reader_that_skips_the_second_check(monkeypatch, shape, mode):
    from dssfn_mpi.transport import ZMailbox

    monkeypatch.setattr(ZMailbox, "_read_slot", _read_slot_without_second_check)
    # The settings of test_seqlock_reads_never_tear_under_concurrent_puts, ended
    # at the first torn read.
    t = _stress(_comm(), shape, mode, min_seconds=0.0, max_seconds=12.0,
                enough_fresh=10**9, stop_on_first_tear=True, burst=8)
    print(f"mutant {shape} {mode}: {t}")
    assert t["torn"] > 0, f"a reader without the second check went unnoticed: {t}"
