"""Network models for the dedicated-core replay: message and allreduce costs.

A network is two numbers: ``alpha``, the latency of one message in seconds,
and ``beta``, the bandwidth in bytes per second, so that one message of
``n`` bytes takes ``alpha + n / beta`` (the Hockney model). The named
networks and where their numbers come from:

- ``shm``: this machine, one-sided puts between two ranks through shared
  memory, from the project's own RMA micro-benchmark (``ZMailbox.put`` latency
  with the target in MPI, ``osc=sm``, puts; docs/HISTORY.md, "The mailbox"): a
  least-squares line through its six sizes (8 B to 982 kB;
  4.6, 3.4, 3.6, 3.7, 6.6 and 20.9 µs) gives alpha = 2.8 µs and
  beta = 55 GB/s.
- ``ib``: HDR 200 Gb/s InfiniBand, the OSU micro-benchmark figures that
  Microsoft publishes for its HBv3 virtual machines ("HBv3-series virtual
  machine performance", learn.microsoft.com/azure/virtual-machines/
  hbv3-performance): RDMA latency 1.2 µs (1 byte), bandwidth 192 Gb/s one
  way = 24 GB/s.
- ``eth10``: 10 Gigabit Ethernet with kernel TCP: 20 µs end-to-end
  application latency as measured by Hurwitz and Feng, "Initial end-to-end
  performance evaluation of 10-Gigabit Ethernet", Hot Interconnects 11
  (2003); bandwidth 9.41 Gb/s = 1.18 GB/s, the line rate times the TCP
  payload share of a 1500-byte-MTU frame (1448 payload bytes per 1538 bytes
  on the wire, counting preamble, inter-frame gap, Ethernet, IP and TCP
  headers with timestamps).

The allreduce cost depends on the library, since the sync engine's
``MPI_Iallreduce`` runs that library's algorithm (see
:func:`allreduce_seconds`): for MPICH (and the libraries built on it) the model
of Thakur, Rabenseifner and Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1):49-66, 2005, with MPICH's switch between
its two algorithms at 2 KB: recursive doubling for short messages,
Rabenseifner's reduce-scatter + allgather for long ones; for Open MPI, whose
non-blocking collectives come from its ``libnbc`` component
(ompi/mca/coll/libnbc/nbc_iallreduce.c), a binomial reduce to rank 0 and a
binomial broadcast back below 4 ranks or 64 KiB, Rabenseifner's above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UserError

__all__ = [
    "ALLREDUCE_SHORT_BYTES",
    "LIBNBC_BINOMIAL_BYTES",
    "NETWORKS",
    "Network",
    "allreduce_library",
    "allreduce_seconds",
    "parse_network",
]

#: MPICH's MPIR_ALLREDUCE_SHORT_MSG: recursive doubling up to this many bytes.
ALLREDUCE_SHORT_BYTES = 2048
#: Open MPI libnbc's MPI_Iallreduce: binomial below this many bytes (or below 4 ranks).
LIBNBC_BINOMIAL_BYTES = 65536
#: The allreduce rules of :func:`allreduce_seconds`.
ALLREDUCE_LIBRARIES = ("mpich", "openmpi")


@dataclass(frozen=True)
class Network:
    """A point-to-point network: latency ``alpha`` [s], bandwidth ``beta`` [B/s]."""

    name: str
    alpha: float
    beta: float

    def message_seconds(self, nbytes: float) -> float:
        """Time of one message of ``nbytes`` bytes: ``alpha + nbytes / beta``."""
        return self.alpha + float(nbytes) / self.beta


#: The named networks (sources in the module docstring).
NETWORKS: dict[str, Network] = {
    "shm": Network("shm", 2.8e-6, 55e9),
    "ib": Network("ib", 1.2e-6, 24e9),
    "eth10": Network("eth10", 20e-6, 1.18e9),
}

_USAGE = "choose shm, ib, eth10 or alpha=SECONDS,beta=BYTES_PER_S (e.g. alpha=2e-6,beta=1e10)"


def parse_network(text: str) -> Network:
    """The network named by ``--network``.

    Parameters
    ----------
    text
        ``shm``, ``ib``, ``eth10``, or ``alpha=SECONDS,beta=BYTES_PER_S``
        (both keys, any order) for a custom network named ``custom``.

    Returns
    -------
    Network

    Raises
    ------
    UserError
        Unknown name, malformed pair, alpha < 0 or beta <= 0.
    """
    spec = str(text).strip()
    if spec in NETWORKS:
        return NETWORKS[spec]
    values: dict[str, float] = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or key.strip() not in ("alpha", "beta") or not math.isfinite(number):
            raise UserError(f"--network {text!r}: {_USAGE}")
        values[key.strip()] = number
    if set(values) != {"alpha", "beta"}:
        raise UserError(f"--network {text!r}: {_USAGE}")
    if values["alpha"] < 0 or values["beta"] <= 0:
        raise UserError(f"--network {text!r}: alpha must be >= 0 seconds and beta > 0 bytes/s")
    return Network("custom", values["alpha"], values["beta"])


def allreduce_library(mpi_library: str) -> str:
    """The allreduce rule of a run: ``"openmpi"`` for Open MPI, else ``"mpich"``.

    Parameters
    ----------
    mpi_library
        The run log's ``mpi_library`` (first line of ``MPI_Get_library_version``);
        MPICH, Intel MPI, others and an empty text (unknown) get MPICH's rule.
    """
    return "openmpi" if "open mpi" in str(mpi_library).lower() else "mpich"


def allreduce_seconds(network: Network, ranks: int, nbytes: float,
                      library: str = "mpich") -> float:
    """Time of an ``MPI_(I)allreduce`` of ``nbytes`` bytes over ``ranks`` ranks.

    ``library="mpich"``: Thakur, Rabenseifner and Gropp (2005), section 4.4,
    without the reduction arithmetic (their gamma term): with
    ``p' = 2**floor(log2 p)`` and ``lg = log2 p'``,

    - ``nbytes <= 2048`` (recursive doubling):
      ``lg (alpha + n/beta)``;
    - longer (Rabenseifner: reduce-scatter by recursive halving, allgather by
      recursive doubling): ``2 lg alpha + 2 (p'-1)/p' n/beta``;
    - when ``p`` is not a power of two, both add one step before (the extra
      ranks hand their data to a partner) and one after (they get the
      result back): ``2 (alpha + n/beta)``.

    ``library="openmpi"``: Open MPI's ``libnbc`` ``MPI_Iallreduce`` (what the
    sync engine calls) takes, for ``p < 4`` or ``nbytes < 65536``, a binomial
    tree: the whole buffer is reduced up to rank 0 in ``ceil(log2 p)`` steps
    and broadcast back down in as many, ``2 ceil(log2 p) (alpha + n/beta)``
    (measured on a 100 Mbit/s link, two ranks, 48.6 kB: 7.8 - 8.2 ms, twice
    MPICH's rule); otherwise Rabenseifner's algorithm, costed as above.

    Parameters
    ----------
    network
        The point-to-point model.
    ranks
        p, the number of ranks (1 costs nothing).
    nbytes
        Size of the reduced buffer in bytes.
    library
        ``"mpich"`` or ``"openmpi"`` (:func:`allreduce_library`).

    Returns
    -------
    float
        Seconds.
    """
    if library not in ALLREDUCE_LIBRARIES:
        raise ValueError(f"library must be one of {ALLREDUCE_LIBRARIES}, got {library!r}")
    if ranks <= 1:
        return 0.0
    step = network.message_seconds(nbytes)
    if library == "openmpi" and (ranks < 4 or nbytes < LIBNBC_BINOMIAL_BYTES):
        return 2 * math.ceil(math.log2(ranks)) * step
    pof2 = 1 << (int(ranks).bit_length() - 1)
    lg = pof2.bit_length() - 1
    if library == "mpich" and nbytes <= ALLREDUCE_SHORT_BYTES:
        cost = lg * step
    else:
        cost = 2 * lg * network.alpha + 2 * (pof2 - 1) / pof2 * nbytes / network.beta
    if pof2 != ranks:
        cost += 2 * step
    return cost
