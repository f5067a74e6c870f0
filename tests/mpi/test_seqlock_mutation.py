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


def _no_second_check(self, copied):
    """``SlotReader._recheck`` with the mutation: the copies are never re-validated.

    The real reader re-reads ``begin`` after its copies and discards those
    during which a write started.
    """
    return [True] * len(copied)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("compiled", [None, False], ids=["engine", "python"])
@pytest.mark.parametrize("mode", ["read", "read_all", "read_views"])
@pytest.mark.parametrize("shape", [(26, 1052), (128, 1024)], ids=["26x1052", "1MiB"])
def test_stress_test_catches_a_reader_that_skips_the_second_check(monkeypatch, shape, mode,
                                                                  compiled):
    from dssfn_mpi.mailbox.slotreader import SlotReader

    # The mutation in both readers: the Python one and the compiled one (dssfn_mpi.mailbox.seqlock,
    # used with direct stores and numba), which takes the switch as an argument.
    monkeypatch.setattr(SlotReader, "_recheck", _no_second_check)
    monkeypatch.setattr(SlotReader, "second_check", False)
    # The settings of test_seqlock_reads_never_tear_under_concurrent_puts, ended
    # at the first torn read. Usually within 0.1 s; but the compiled reader's copy is short
    # (~10 us for 26 x 1052), so where reader and writer share a core (beside a busy process)
    # a tear needs a switch inside it: once 9 s (read, 2 ranks, 2026-11-25). Hence 40 s.
    t = _stress(_comm(), shape, mode, min_seconds=0.0, max_seconds=40.0,
                enough_fresh=10**9, stop_on_first_tear=True, burst=8, compiled=compiled)
    print(f"mutant {shape} {mode} compiled={compiled}: {t}")
    assert t["torn"] > 0, f"a reader without the second check went unnoticed: {t}"
