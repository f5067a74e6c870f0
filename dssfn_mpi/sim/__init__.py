"""``dssfn-mpi simulate``: the engines' arithmetic for M nodes in one process, in simulated time.

Every node's activation (iteration) runs the functions the live engines run
(:mod:`dssfn_mpi.algorithms.updates`, :mod:`dssfn_mpi.algorithms.stoprule`); what
is simulated is *when* each one happens and what it reads: a priority queue
of activations in simulated time, under a speed model (:mod:`.speed`) and one
of the replay's network models (:mod:`dssfn_mpi.analysis.network`), by the timing rules
the replay uses too, :mod:`dssfn_mpi.analysis.timeline` (docs/SIMULATE.md).

Modules: :mod:`.speed` (how long compute takes), :mod:`.nodes` (each node's
data, features and penalty), :mod:`.asyncsim` (the event loop of the async
engine), :mod:`.syncsim` (sync and sync-graph in lockstep, all nodes at once),
:mod:`.oneshotsim` (the one-shot modes), :mod:`.mixing` (rounds of neighbour mixing for
all nodes), :mod:`.testset` (the nodes' test accuracies), :mod:`.schedule`
(re-execution of a traced run's reads), :mod:`.layerloop` (the layer loop
and the run log).
"""

from __future__ import annotations

__all__ = ["layerloop", "speed"]
