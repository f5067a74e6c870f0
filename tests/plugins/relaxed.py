"""A test-tree algorithm: over-relaxed consensus ADMM, registered from outside the package.

Over-relaxation (Boyd et al., ADMM, section 3.4.3) replaces ``O_m`` by
``Oh_m = alpha O_m + (1 - alpha) Zbar`` in the average and in the dual step; its fixed
point is consensus ADMM's, so every node must reach the exact ``O*``. It reuses the
consensus driver (one allreduce per iteration), the consensus penalties and the metric, and
the relaxed share and dual step of :class:`ConsensusADMM` (``--relax``), fixed at ``ALPHA``.
Importing this module registers it as ``--mode relaxed-sync``.
"""

from __future__ import annotations

from dssfn_mpi.algorithms import register
from dssfn_mpi.algorithms.consensus import ConsensusADMM

ALPHA = 1.6


class RelaxedConsensus(ConsensusADMM):
    """Consensus ADMM with over-relaxation ``alpha`` (1 is :class:`ConsensusADMM`)."""

    name = "relaxed-sync"
    summary = "over-relaxed consensus ADMM, one allreduce per iteration (a test plug-in)"
    relax = ALPHA


ALGORITHM = register(RelaxedConsensus())
