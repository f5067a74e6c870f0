"""Asynchronous dSSFN: ARock-style ADMM with one-sided writes (the paper's method).

Each rank runs its K activations at its own pace. An activation reads the
latest ``Z_{n,m}`` its neighbours have written into its window (possibly
stale, never torn), updates ``O_m`` and ``Z_{m,n}``, and ``MPI_Put``s each
``Z_{m,n}`` into neighbour n's window. There is no handshake, receive call,
barrier or collective inside a layer (docs/ALGORITHMS.md section 4).

Two update forms:

``edge`` (default, exact)::

    Lam_mn = P_eps(-(Z_mn + Zr_nm) / (2 gamma))
    O_m    = (2 B_m + sum_n (Z_mn + 2 gamma Lam_mn)) (2 G_m + gamma d_m I)^-1
    Z_mn  += eta gamma (Lam_mn - O_m)

``paper`` (eq. 7 of the paper, biased when the norm constraint is active)::

    O_m    = P_eps((2 B_m - sum_n Zr_nm) (2 G_m + gamma d_m I)^-1)
    Z_mn  -= eta ((Z_mn + Zr_nm) / 2 + gamma O_m)

gamma may differ from edge to edge (``gamma_mn``, the same at both ends; then
``gamma d_m`` reads ``sum_n gamma_mn``): that is ADMM on the edge constraints
scaled by ``sqrt(gamma_mn)``, with the same fixed point. The ``auto`` penalty
uses it so that no rank needs anything from beyond its neighbours.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from ..errors import RankError
from ..mailbox.doneboard import DoneBoard
from ..mailbox.transport import NeighborTimeout, ZMailbox
from ..mailbox.waiting import WaitPolicy
from ..ssfn.solver import LocalInverse
from .base import LayerProblem, RunContext, SolveStats, Throttle
from .neighbours import NeighbourEngine
from .staleness import Staleness
from .trace import LayerTrace


class AsyncEngine(NeighbourEngine):
    """The one-sided asynchronous driver: ARock over the graph (``--mode async``).

    Runs any algorithm of the ``one-sided`` kind (:mod:`dssfn_mpi.algorithms`): its
    per-node step, penalties, metric and stopping test; this class owns the windows,
    the bounded delay, the votes and the timing.
    """

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.mailbox = ZMailbox(ctx.comm, ctx.graph,
                               self.alg.message_floats(ctx.n_classes, ctx.max_width),
                                force_put=ctx.cfg.rma == "put")
        if ctx.cfg.rma == "store" and not self.mailbox.direct:  # the same on every rank
            from ..errors import UserError
            from ..mailbox.rmacheck import NO_STORES

            self.mailbox.free()  # collective, as its creation was
            raise UserError(NO_STORES)
        #: How this rank writes into its neighbours' windows (run attribute rma_write_path).
        self.write_path = "store" if self.mailbox.direct else "put"
        self.throttle = Throttle(ctx.cfg.slow.get(ctx.rank, 1.0))
        # --stop eps / local: when every rank is done (no board for a fixed count).
        self.rule = ctx.cfg.stop_rule
        self.board = None if self.rule.fixed else DoneBoard(ctx.comm, ctx.cfg.layers + 1)
        self._ended = False  # the board said the current layer is over

    def solve(self, prob: LayerProblem,
              trace: LayerTrace | None = None) -> tuple[np.ndarray, SolveStats]:
        layer, record = prob.layer, _LayerRecord(self.mailbox, self.waits, trace)
        # Parity slots: nobody may write layer l before its neighbours left l-2.
        first_use = layer - 2 < self.ctx.first_layer
        record.parity_waited(0.0 if first_use else self._wait_neighbors_done(layer - 2, layer))
        gamma = self.penalties(prob)
        inv = self.alg.inverse(prob.Y, prob.G, gamma, prob.metric)
        record.factored()
        O, passed_O, done = self._activations(prob, gamma, inv, record)
        if not np.all(np.isfinite(O)):
            raise RankError(
                self.ctx.rank,
                f"layer {layer}: the async ADMM diverged (gamma={gamma.mean():g}, "
                f"eta={self.ctx.cfg.eta:g}); try a gamma closer to the layer's multiplier or a "
                "smaller --eta",
            )
        # The layer ended when every rank's test had passed; a rank may have activated again
        # since and moved a little: it returns the iterate its test accepted.
        O = passed_O if self._ended else O.copy()  # the edge step's O is one of its buffers
        record.close_trace(done, O)
        self.mailbox.finish_layer(layer)
        payload = self.alg.message_bytes(*prob.B.shape)
        _, sent = self.alg.sent(done, len(self.neighbors), 0, payload)
        return O, record.stats(done, self.rule.reason(self._ended), sent)

    def _wait_neighbors_done(self, done: int, layer: int) -> float:
        """Wait (sleeping) until every neighbour has finished layer ``done``; seconds waited."""
        try:
            return self.mailbox.wait_neighbors_done(done, self.ctx.cfg.timeout, self.waits)
        except NeighborTimeout as exc:
            raise RankError(self.ctx.rank, f"layer {layer}: {exc}") from None

    def _activations(self, prob: LayerProblem, gamma: np.ndarray, inv: LocalInverse,
                     record: _LayerRecord) -> tuple[np.ndarray, np.ndarray, int]:
        """This rank's activations of the layer: its last ``O_m``, the last that passed
        its own test (zeros if none did) and how many activations ran.

        Each activation reads the neighbours' latest Z (waiting, bounded delay),
        updates ``O_m`` and ``Z_{m,n}`` and puts every ``Z_{m,n}``; under
        ``--stop eps`` or ``local`` it then votes and leaves when the layer is over.
        """
        cfg, layer, mb = self.ctx.cfg, prob.layer, self.mailbox
        eta, eps, dm = cfg.eta, prob.eps, len(self.neighbors)
        Q, d = prob.B.shape
        size = self.alg.message_floats(Q, d)  # values of one neighbour's message
        B2 = 2.0 * prob.B
        # The step works on buffers allocated once per layer: the edge form's Z lives in the
        # mailbox's outbox, so that each put sends it as it is, header and all, in one call.
        step = self.alg.step(B2, gamma, eta, eps, inv, prob.metric, store=mb.outbox())
        Zr: list[np.ndarray] = [np.empty(0), np.empty(0)]  # the mailbox's rows (_caught_up)
        O = np.zeros((Q, d))
        versions = np.zeros(dm, dtype=np.int64)
        check = (None if self.board is None else
                 self.alg.node_check(self.rule, prob.target_O, B2, gamma, eta, prob.metric))
        self._ended, done = False, 0
        passed_O = np.zeros((Q, d))  # the last O_m that passed this rank's own test
        for k in range(cfg.iters):
            # Short sleeps (<= 2 ms): a neighbour's next put is usually well under 1 ms away.
            poll = partial(self._caught_up, layer, k, Zr, versions, size, record)
            ready, waited = self.waits.wait(poll, cfg.timeout, max_delay=2e-3)
            record.lead_waited(waited)
            if not ready:  # one wait this long: a neighbour is gone
                raise RankError(
                    self.ctx.rank,
                    f"layer {layer}: neighbours wrote nothing for {cfg.timeout:g} s "
                    "(a rank died or hangs; see --timeout)",
                )
            if self._ended:  # the layer ended while this rank waited for a neighbour
                break
            started = time.perf_counter()
            record.read(versions)
            O = step.step_rows(*Zr)
            # A slow node computes slowly, then sends (as in the sync engines).
            self.throttle.after(started)
            record.putting()
            mb.put_all(step.Z, layer)
            record.activation(k, O, versions)
            done = k + 1
            if check is not None:  # after the puts, so neighbours need not wait for it
                assert self.board is not None
                passed = check.async_done(O, step.rhs_buffer)
                if passed:  # what the rank returns if the layer ends before it passes again
                    passed_O[...] = O
                self.board.vote(layer, passed)
                if self.board.ended(layer):
                    self._ended = True
                    break
        return O, passed_O, done

    def close(self) -> None:
        super().close()
        self.mailbox.free()
        if self.board is not None:
            self.board.free()

    def _caught_up(self, layer: int, k: int, Zr: list[np.ndarray], versions: np.ndarray,
                   size: int, record: _LayerRecord) -> bool:
        """Read the neighbours' latest Z (``Zr[:] = table, rows``); True once ``k`` may run.

        Bounded delay (ARock's assumption): at most ``max_lead`` activations ahead
        of the slowest neighbour. A neighbour that has not written yet reads as 0.
        Only this rank's own window is read.
        """
        record.polled()  # this poll's start
        Zr[:] = self.mailbox.read_rows(layer, size, versions)
        lead = self.ctx.cfg.max_lead
        if lead is None or k <= versions.min() + lead:
            return True
        # Held back by a neighbour, which may have left the layer because it is over.
        self._ended = self.board is not None and self.board.ended(layer)
        return self._ended


class _LayerRecord:
    """The timing, counters and trace of one layer's solve, kept beside the algorithm.

    Times: from the start of the solve to the end of the parity wait, to the
    end of the local factorisation, to the end of the layer (after
    ``finish_layer``). Counters: the mailbox's and the wait policy's, as
    differences over the layer. Per activation (with a trace): from the start
    of the successful poll's read to the last put, with its thread CPU but
    without the puts' (MPI spins in their flushes while the link carries Z), as
    the sync engines leave out their collective's: the replay costs the puts
    itself.
    """

    def __init__(self, mailbox: ZMailbox, waits: WaitPolicy,
                 trace: LayerTrace | None) -> None:
        self.mailbox, self.waits, self.trace = mailbox, waits, trace
        self.slept0 = waits.slept
        self.start, self.start_cpu = time.perf_counter(), time.thread_time()
        self.counts0 = self._counts()
        self.staleness = Staleness(len(mailbox.neighbors))
        self.parity_wait = self.lead_wait = 0.0
        self.waited_at = self.waited_cpu = self.factored_at = 0.0
        self.poll_at = self.poll_cpu = 0.0  # the start of the last poll
        self.put_at = self.put_cpu = 0.0  # the start of the last activation's puts

    def _counts(self) -> tuple[int, int, int, int]:
        mb = self.mailbox
        return mb.puts, mb.bytes_sent, mb.torn_retries, mb.fallbacks

    def parity_waited(self, seconds: float) -> None:
        """The wait for the neighbours to leave layer l-2 is over; it took ``seconds``."""
        self.parity_wait = seconds
        self.waited_at, self.waited_cpu = time.perf_counter(), time.thread_time()

    def factored(self) -> None:
        """The local inverse is ready."""
        self.factored_at = time.perf_counter()
        if self.trace is not None:
            self.trace.phase("parity_wait", self.start, self.waited_at,
                             self.waited_cpu - self.start_cpu)
            self.trace.phase("factor", self.waited_at, self.factored_at,
                             time.thread_time() - self.waited_cpu)

    def polled(self) -> None:
        """A poll of the neighbours' Z starts."""
        self.poll_at, self.poll_cpu = time.perf_counter(), time.thread_time()

    def lead_waited(self, seconds: float) -> None:
        """An activation waited ``seconds`` for its neighbours (bounded delay)."""
        self.lead_wait += seconds

    def read(self, versions: np.ndarray) -> None:
        """An activation runs on the neighbours' Z of ``versions``."""
        self.staleness.record(versions)

    def putting(self) -> None:
        """The activation's puts start."""
        self.put_at, self.put_cpu = time.perf_counter(), time.thread_time()

    def activation(self, k: int, O: np.ndarray, versions: np.ndarray) -> None:
        """Activation ``k`` is over (its puts complete)."""
        if self.trace is not None:
            self.trace.record_activation(
                k, O, self.poll_at, self.poll_cpu + time.thread_time() - self.put_cpu,
                versions=versions, comm=self.put_at)

    def close_trace(self, done: int, O: np.ndarray) -> None:
        """The layer's last iterate ``O`` after ``done`` activations."""
        if self.trace is not None:
            self.trace.close(done, O)

    def stats(self, done: int, stop_reason: int, sent: int) -> SolveStats:
        """The layer's :class:`SolveStats`, its end now; ``sent`` payload bytes."""
        end = time.perf_counter()
        puts, _, torn, fallbacks = (a - b for a, b in zip(self._counts(), self.counts0))
        return SolveStats(
            wait_seconds=self.parity_wait + self.lead_wait,
            factor_seconds=self.factored_at - self.waited_at,
            solve_seconds=end - self.factored_at,
            activations=done,
            stop_reason=stop_reason,
            puts=puts,
            bytes_sent=sent,
            staleness_mean=self.staleness.mean,
            staleness_max=self.staleness.max,
            torn_retries=torn,
            fallbacks=fallbacks,
            waits_slept=self.waits.slept - self.slept0,
        )
