"""End a rank whose one-sided puts stopped completing: its partners' host is gone.

A put into a neighbour's window completes without the neighbour (``dssfn-mpi doctor``
checks it), so in milliseconds; but when the neighbour's host dies or its link goes
down, ``MPI_Win_flush`` waits for an answer that never comes (TCP retransmits for
many minutes). The rank then sits inside MPI: no ``--timeout`` of its own waits can
fire, and a rank of the same host that waits for it times out blaming the wrong
partner. :class:`PutWatchdog` watches from a thread of its own, which never calls MPI:
when the mailbox's put counter has not moved for half of ``--timeout`` while the
training thread is inside a mailbox write, it prints one line naming the neighbours
on other hosts (the only puts that can hold a flush that long: same-host puts go
through shared memory) and ends the process. One rank per host speaks (the others
end quietly), so a job's output holds one such line per surviving host.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["EXIT_LOST", "PutWatchdog"]

#: Exit status of a rank ended by the watchdog.
EXIT_LOST = 1
_WRITE = "_write"  # ZMailbox's method around every put and flush
_TRANSPORT = str(Path(__file__).with_name("transport.py"))


class PutWatchdog:
    """Watch the training thread's mailbox writes (collective constructor: an allgather).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The training communicator (used here only, at construction).
    mailbox : object
        The async engine's :class:`~dssfn_mpi.transport.ZMailbox` (its ``puts`` counter).
    neighbors : sequence of int
        This rank's neighbours.
    timeout : float
        ``--timeout``; the watchdog fires after half of it.
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
        self.limit = 0.5 * timeout
        self.out, self.prog = out, prog
        self._ident = threading.get_ident()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="dssfn-puts", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the engine is about to be closed)."""
        self._stop.set()

    def _write_frame(self) -> Any:
        """The training thread's frame if it is inside a mailbox write, else None."""
        frame = sys._current_frames().get(self._ident)
        if frame is not None and frame.f_code.co_name == _WRITE \
                and frame.f_code.co_filename == _TRANSPORT:
            return frame
        return None

    def _watch(self) -> None:
        puts, since = self.mailbox.puts, time.monotonic()
        # Sleeps between looks (an Event wait, never a spin); one look a second suffices.
        while not self._stop.wait(min(1.0, self.limit / 4)):
            now = time.monotonic()
            if self.mailbox.puts != puts or self._write_frame() is None:
                puts, since = self.mailbox.puts, now
            elif now - since >= self.limit:
                self._fire(now - since)

    def _fire(self, stuck: float) -> None:
        me = self.hosts[self.rank]
        away = [n for n in self.neighbors if self.hosts[n] != me] or list(self.neighbors)
        who = ", ".join(f"{n} ({self.hosts[n]})" for n in away)
        frame = self._write_frame()
        layer = frame.f_locals.get("layer", "?") if frame is not None else "?"
        if self._speaks(me):
            sys.stdout.flush()
            print(f"{self.prog}: error: rank {self.rank} ({me}): layer {layer}: puts to "
                  f"rank(s) {who} have not completed for {stuck:.0f} s: lost (host down or "
                  "unreachable); ending this rank (see --timeout)", file=sys.stderr, flush=True)
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
