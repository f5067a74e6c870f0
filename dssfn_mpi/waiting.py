"""Waiting for other ranks: the one place in the package where a rank waits.

Every wait (a neighbour's layer-end announcement, the async engine's bounded
delay, a non-blocking collective, the exit handshake of a user error) is a
poll of some readiness test. :func:`sleep_until` polls it and sleeps between
polls with exponential backoff instead of spinning: with more ranks than cores
the CPU then goes to the ranks that still compute, which is what a waiting
rank is waiting for. How to wait (sleep, spin, or both) is decided here and
nowhere else.

Nothing here imports numpy or MPI, so the command line can use it before
either is loaded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["BACKOFF_MAX", "BACKOFF_MIN", "Waited", "sleep_until"]

#: First sleep between two polls, in seconds.
BACKOFF_MIN = 50e-6
#: Default longest sleep between two polls, in seconds: the most a wait can
#: overshoot the moment it could have ended.
BACKOFF_MAX = 10e-3


class Waited(NamedTuple):
    """Outcome of :func:`sleep_until` (unpacks as ``ready, seconds``).

    Attributes
    ----------
    ready : bool
        Whether the test became true before the timeout.
    seconds : float
        Seconds spent waiting: 0.0 if the first poll was already true.
    """

    ready: bool
    seconds: float


def sleep_until(
    ready: Callable[[], bool], timeout: float, *, max_delay: float = BACKOFF_MAX
) -> Waited:
    """Poll ``ready()`` until it is true or ``timeout`` seconds have passed.

    The first poll is immediate. After each false poll the caller sleeps,
    first :data:`BACKOFF_MIN` seconds, then twice as long each time up to
    ``max_delay`` (never past the timeout), and polls again. ``ready`` may do
    work, e.g. re-read a mailbox; the time it takes while waiting counts as
    waiting.

    Parameters
    ----------
    ready
        The readiness test; called at least once, and a last time once the
        timeout has passed (so a wait that ends just then still succeeds).
    timeout
        Seconds after which to give up (``float("inf")``: never).
    max_delay
        Longest sleep between two polls: a short one for waits that are
        usually brief and on the critical path (the async bounded delay), a
        long one for waits that only guard against a lost rank.

    Returns
    -------
    Waited
        ``(ready, seconds)``: whether ``ready()`` became true, and the time from
        the first poll to the start of the last one.
    """
    t0 = time.perf_counter()
    delay, first = BACKOFF_MIN, True
    while True:
        waited = time.perf_counter() - t0
        if ready():
            return Waited(True, 0.0 if first else waited)
        if waited >= timeout:
            return Waited(False, waited)
        time.sleep(min(delay, timeout - waited))
        delay, first = min(2.0 * delay, max_delay), False
