"""End a rank stuck inside MPI in a layer: its partners' host is gone.

The async engine's waits give up after ``--timeout`` (``RankError``), but only while
the rank is in Python: when a neighbour's host dies or its link goes down, a flush of
puts to it, or MPI's progress on a read, can sit inside MPI for many minutes (TCP
retransmits; seen on the emulated cluster as ranks spinning inside MPI, their own
timeout never firing). :class:`PutWatchdog` watches from a thread of its own, which
never calls MPI: when the mailbox's put counter has not moved for ``--timeout`` +
:data:`GRACE` seconds while the training thread is inside the async engine's solve,
it prints one line naming the neighbours on other hosts (the partners whose puts and
progress cross the network) and ends the process. One rank per host speaks (the
others end quietly), so a job's output holds at most one such line per host.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["EXIT_LOST", "GRACE", "PutWatchdog"]

#: Exit status of a rank ended by the watchdog.
EXIT_LOST = 1
#: Seconds past ``--timeout`` before the watchdog acts: the engine's own timeout goes first.
GRACE = 5.0
_ENGINE = str(Path(__file__).parents[1] / "engines" / "async_arock.py")


class PutWatchdog:
    """Watch the training thread's mailbox writes (collective constructor: an allgather).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The training communicator (used here only, at construction).
    mailbox : object
        The async engine's :class:`~dssfn_mpi.mailbox.transport.ZMailbox` (its ``puts`` counter).
    neighbors : sequence of int
        This rank's neighbours.
    timeout : float
        ``--timeout``; the watchdog fires :data:`GRACE` seconds later.
    out : str or None
        ``--out``: the hosts' "who speaks" files go beside its checkpoints.
    """

    def __init__(self, comm: Any, mailbox: Any, neighbors: Any, timeout: float,
                 out: str | None, prog: str = "dssfn-mpi") -> None:
        import socket

        self.hosts = comm.allgather(socket.gethostname())
        self.token = comm.bcast(uuid.uuid4().hex[:8] if comm.Get_rank() == 0 else None)
        self.rank = comm.Get_rank()
        self.mailbox, self.neighbors = mailbox, tuple(neighbors)
        self.limit = timeout + GRACE
        self.out, self.prog = out, prog
        self._ident = threading.get_ident()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="dssfn-puts", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the engine is about to be closed)."""
        self._stop.set()

    def _engine_frame(self) -> Any:
        """The training thread's frame in the async engine, if it is in there, else None."""
        frame = sys._current_frames().get(self._ident)
        while frame is not None and frame.f_code.co_filename != _ENGINE:
            frame = frame.f_back
        return frame

    def _watch(self) -> None:
        puts, since = self.mailbox.puts, time.monotonic()
        # Sleeps between looks (an Event wait, never a spin); one look a second suffices.
        while not self._stop.wait(min(1.0, self.limit / 8)):
            now = time.monotonic()
            if self.mailbox.puts != puts or self._engine_frame() is None:
                puts, since = self.mailbox.puts, now
            elif now - since >= self.limit:
                self._fire(now - since)

    def _fire(self, stuck: float) -> None:
        me = self.hosts[self.rank]
        away = [n for n in self.neighbors if self.hosts[n] != me] or list(self.neighbors)
        who = ", ".join(f"{n} ({self.hosts[n]})" for n in away)
        frame = self._engine_frame()
        layer = frame.f_locals.get("layer", "?") if frame is not None else "?"
        if self._speaks(me):
            sys.stdout.flush()
            print(f"{self.prog}: error: rank {self.rank} ({me}): layer {layer}: stuck "
                  f"inside MPI for {stuck:.0f} s (no activation, no timeout possible): "
                  f"rank(s) {who} lost (host down or unreachable); ending this rank",
                  file=sys.stderr, flush=True)
        os._exit(EXIT_LOST)

    def _speaks(self, host: str) -> bool:
        """The first rank of this host to fire speaks; the others end quietly."""
        if self.out is None:
            return True
        from .checkpoint import checkpoint_dir

        try:
            fd = os.open(checkpoint_dir(self.out) / f"lost-{self.token}-{host}",
                         os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        except OSError:
            return True
        os.close(fd)
        return True
