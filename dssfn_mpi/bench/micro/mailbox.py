"""The mailbox with one-neighbour entry points, for the benchmarks and the tests.

The engine writes to all its neighbours at once and reads them all as rows of
one table (:class:`dssfn_mpi.mailbox.transport.ZMailbox`). The RMA micro-benchmark
times one put and one read of one neighbour, the activation benchmark's leaves
write only to their hub, and the tests check every path of the seqlock; they
use :class:`BenchMailbox`, the same mailbox (same window, same protocol, same
counters) with these entry points added.
"""

from __future__ import annotations

import numpy as np

from ...mailbox.transport import ZMailbox

__all__ = ["BenchMailbox"]


class BenchMailbox(ZMailbox):
    """:class:`~dssfn_mpi.mailbox.transport.ZMailbox` plus writes and reads of one neighbour."""

    def put(self, n: int, Z: np.ndarray, layer: int) -> None:
        """Write my ``Z_{me,n}`` for ``layer`` into neighbour ``n``'s window.

        :meth:`~dssfn_mpi.mailbox.transport.ZMailbox.put_all` for one neighbour: the
        same seqlock write, with one flush per phase.

        Parameters
        ----------
        n : int
            Neighbour rank.
        Z : numpy.ndarray
            2-D array with at most ``max_elems`` elements (converted to float64).
        layer : int
            Non-negative layer index; selects the parity slot ``layer % 2``.
        """
        self.layout.index_of(n)  # ValueError when n is not a neighbour
        Z = np.ascontiguousarray(Z, dtype=np.float64)  # no copy in the usual case
        if Z.ndim != 2:
            raise ValueError(f"Z must be 2-D, got shape {Z.shape}")
        self.writer.write((n,), Z[None], layer)

    def read(self, n: int, layer: int) -> tuple[np.ndarray | None, int]:
        """Latest ``Z_{n,me}`` that neighbour ``n`` put for ``layer``.

        Never waits: if ``n`` is writing the slot during every attempt, returns
        the last consistent value this rank read from it.

        Parameters
        ----------
        n : int
            Neighbour rank.
        layer : int
            Layer index.

        Returns
        -------
        Z : numpy.ndarray or None
            A private copy shaped as ``n`` put it, or None if ``n`` has not written
            for this layer (or has already overwritten the slot with ``layer + 2``,
            which the engine contract rules out, or if no consistent copy could
            be made yet).
        version : int
            ``n``'s put counter for this layer (1, 2, ...), 0 when ``Z`` is None.
        """
        self.window.check_open()
        i = self.layout.index_of(n)
        self.reader.refresh(layer, [i])
        version, data, shape = self.reader.kept(layer, i)
        if data is None:
            return None, 0
        return data.reshape(shape).copy(), version

    def read_all(self, layer: int, out: np.ndarray, versions: np.ndarray) -> None:
        """Copy every neighbour's latest Z for ``layer``; never waits.

        Parameters
        ----------
        layer : int
            Layer index.
        out : numpy.ndarray, shape (degree, rows, cols)
            Receives ``Z_{n,me}`` in the order of ``graph.neighbors(me)``; zeros
            for a neighbour that has not written for this layer (or of which no
            consistent copy exists yet).
        versions : numpy.ndarray of int64, shape (degree,)
            Receives each neighbour's put counter, as in
            :meth:`~dssfn_mpi.mailbox.transport.ZMailbox.read_rows`.
        """
        self.window.check_open()
        self.reader.refresh(layer)
        for i in range(len(self.neighbors)):
            version, data, _ = self.reader.kept(layer, i)
            versions[i] = version
            if data is None:
                out[i] = 0.0
            elif data.size != out[i].size:
                raise ValueError(f"rank {self.neighbors[i]} wrote {data.size} values for layer "
                                 f"{layer}, expected {out[i].size}")
            else:
                out[i] = data.reshape(out[i].shape)

    def read_views(
        self, layer: int, shape: tuple[int, int], versions: np.ndarray
    ) -> list[np.ndarray]:
        """Every neighbour's latest Z for ``layer`` without copying it out; never waits.

        :meth:`~dssfn_mpi.mailbox.transport.ZMailbox.read_rows` as a list of arrays.

        Parameters
        ----------
        layer : int
            Layer index.
        shape : tuple of int
            ``(rows, cols)`` every neighbour's Z must have.
        versions : numpy.ndarray of int64, shape (degree,)
            Receives each neighbour's put counter, as in ``read_rows``.

        Returns
        -------
        list of numpy.ndarray
            ``Z_{n,me}`` in the order of ``graph.neighbors(me)``, read-only views
            valid until the next read of this mailbox (zeros for a neighbour that
            has not written for ``layer``).
        """
        rows, cols = shape
        table, which = self.read_rows(layer, rows * cols, versions)
        views = []
        for r in which.tolist():
            view = table[r, : rows * cols].reshape(rows, cols)
            view.flags.writeable = False
            views.append(view)
        return views

    def reset_counters(self) -> None:
        """Zero :attr:`puts`, :attr:`bytes_sent`, :attr:`torn_retries` and :attr:`fallbacks`."""
        self.writer.puts = 0
        self.writer.bytes_sent = 0
        self.reader.counts[:] = 0
