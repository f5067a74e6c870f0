"""Busy processes beside a benchmark job, and signals that end a sweep cleanly.

``bench contention`` runs each training beside ``count`` CPU hogs (the
``python -c "while True: pass"`` of the shared-laptop measurements of
2026-11-23: what a browser tab or a compiler does to a laptop). They are
started just before the job and killed right after it. Nothing may outlive
the sweep, whatever way it ends:

* a normal end, an exception or ``KeyboardInterrupt`` (SIGINT): the
  ``finally`` of :func:`busy_processes` kills and reaps them;
* SIGTERM or SIGHUP: :func:`exit_on_signals` turns them into ``SystemExit``,
  so the same ``finally`` runs;
* the driver killed outright (SIGKILL, a crash): each busy process checks
  every few milliseconds that its parent is still the driver and otherwise
  exits; and every one has a deadline (``lifetime`` seconds) after which it
  exits by itself.

Each busy process carries :data:`BUSY_MARKER` and the driver's pid in its
command line, so it can be found (``/proc/PID/cmdline``) by tests or by hand.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BUSY_MARKER", "busy_command", "busy_processes", "exit_on_signals"]

#: Second word of every busy process's command line (after ``-c CODE``).
BUSY_MARKER = "dssfn-mpi-busy"

# Pure-Python spinning, like `while True: pass`, with a check every ~2 ms that the
# driver (the parent) is alive and the deadline not passed. The signal mask is
# cleared first: the driver starts it with SIGINT/SIGTERM/SIGHUP held.
_CODE = """\
import os, signal, sys, time
signal.pthread_sigmask(signal.SIG_SETMASK, [])
owner, end = int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while os.getppid() == owner and time.monotonic() < end:
    for _ in range(100000):
        pass
"""

_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                 if hasattr(signal, name))


def busy_command(owner: int, lifetime: float) -> list[str]:
    """Command line of one busy process.

    Parameters
    ----------
    owner : int
        Pid of the process that starts it; it exits as soon as its parent is
        another process (the owner died and it was re-parented).
    lifetime : float
        Seconds after which it exits by itself.
    """
    return [sys.executable, "-c", _CODE, BUSY_MARKER, str(owner), f"{lifetime:g}"]


@contextmanager
def _signals_blocked() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP while starting or killing the busy processes, so a
    signal cannot cut the bookkeeping in half; a pending one is raised afterwards."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()


@contextmanager
def busy_processes(count: int, lifetime: float) -> Iterator[list[subprocess.Popen]]:
    """Run ``count`` busy processes for the duration of the ``with`` block.

    Parameters
    ----------
    count : int
        How many (0: none, the block runs idle).
    lifetime : float
        Deadline of each busy process in seconds; set it above the longest
        the block may take (the job timeout), it only matters if the driver
        hangs.

    Yields
    ------
    list of subprocess.Popen
        The running busy processes; all killed and reaped when the block
        ends, however it ends.
    """
    procs: list[subprocess.Popen] = []
    try:
        with _signals_blocked():
            for _ in range(count):
                procs.append(subprocess.Popen(
                    busy_command(os.getpid(), lifetime), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield procs
    finally:
        with _signals_blocked():
            _stop(procs)


@contextmanager
def exit_on_signals() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP raise ``SystemExit(128 + signal)``.

    Python's default for them is to die at once, skipping every ``finally``:
    the running job and its busy processes would be left behind. SIGINT
    already raises ``KeyboardInterrupt``. Outside the main thread (where
    handlers cannot be set) the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    old = {}
    for sig in _SIGNALS:
        if sig != signal.SIGINT:
            old[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
