"""``--mode hood-jacobi``: neighbourhood consensus in its exact synchronous form (members send
``v_ij``, centres return fresh ``z_j``: two neighbour exchanges a round), live and simulated.

On the complete graph every neighbourhood is the whole graph, so its iterates (each node's
``z_i``) are global consensus ADMM's (``--mode sync``, its ``Zbar``) with ``rho = M
rho_hood`` and ``--relax`` = ``--eta``, at every layer, in the Gram metric at layer 0. On a
ring and at d = 4 every node reaches the exact centralized ``O*`` (the run log's
``rel_distance``) at every layer, bound inactive at layer 0 and active beyond; the live
run is the simulated one, round for round.
"""

from __future__ import annotations

import numpy as np
import pytest
from modeltools import simulate_saved, worst_gap
from mpitools import run_cli

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.algorithms.stoprule import reason_code
from dssfn_mpi.analysis.network import parse_network

# Label-skewed shards; the bound is inactive at layer 0 and active beyond; layer 0 in the
# Gram metric.
SETTINGS = ["--dataset", "synthetic", "--layers", "2", "--hidden", "40",
            "--partition", "dirichlet:0.5", "--metric", "gram", "--quiet"]
EXACT = [*SETTINGS, "--iters", "3000", "--stop", "eps:5e-7"]
# Four nodes on the complete graph, 30 rounds; hood's rho_ij = 0.5 is sync's rho = 4 x 0.5.
COMPLETE = [*SETTINGS, "--topology", "complete", "--iters", "30"]


def _sync(tmp_path, relax: str):
    return simulate_saved(tmp_path, f"sync{relax}", 4, "--mode", "sync", *COMPLETE, "--rho", "2",
                     "--relax", relax)


def test_two_exchanges_a_round_of_one_block_each():
    alg = lookup("hood-jacobi")
    assert alg.exchanges == 2 and not alg.one_sided and alg.per_neighbour
    # The round's messages to a neighbour: v_ij, then z_i (one Q x d block each).
    assert alg.message_floats(3, 10) == 60 and alg.sent(5, 2, 0, 480) == (0, 4800)
    net = parse_network("eth10")
    assert alg.round_exchanges(net, 480) == (2, net.message_seconds(240))
    assert lookup("hood-lockstep").round_exchanges(net, 480) == (1, net.message_seconds(480))


@pytest.mark.parametrize("relax", ["1", "1.6"])
def test_simulated_hood_jacobi_on_the_complete_graph_is_global_consensus_admm(tmp_path,
                                                                              relax):
    jac, jac_model = simulate_saved(tmp_path, "jacobi", 4, "--mode", "hood-jacobi", *COMPLETE,
                               "--rho", "0.5", "--eta", relax)
    sync, sync_model = _sync(tmp_path, relax)
    assert worst_gap(jac_model, sync_model) <= 1e-9
    lam = jac.layers["lambda_star"]
    assert (lam[0] == 0).all() and (lam[1:] > 0).all()
    assert (jac.layers["metric_bytes"][0] > 0).all()
    assert jac.layers["rel_distance"][1:].min() > 1e-4  # not converged: every iterate counts
    # Two exchanges of one Q x d block per neighbour per round.
    Q, width = int(jac.attrs["n_classes"]), np.array([20, 40, 40])  # synthetic: 20 inputs
    assert (jac.layers["bytes_sent"] == 30 * 3 * 2 * Q * width[:, None] * 8).all()


def _check_exact(log, nodes: int) -> None:
    rel, lam = log.layers["rel_distance"], log.layers["lambda_star"]
    assert rel.shape == (3, nodes) and rel.max() <= 1e-6, rel
    assert (lam[0] == 0).all() and (lam[1:] > 0).all()  # bound inactive, then active
    # Layer 0 in the Gram metric: two exchanges of a packed 20 x 20 matrix (synthetic: 20
    # inputs), the Grams to each centre and its metric back.
    assert (log.layers["metric_bytes"] == [[2 * 8 * 20 * 21 // 2], [0], [0]]).all()
    assert (log.layers["stop_reason"] == reason_code("eps")).all()
    acts = log.layers["activations"]
    assert (acts == acts[:, :1]).all() and (acts < 3000).all()  # all ranks end together


@pytest.mark.parametrize("nodes,degree", [(5, 2), (8, 4)], ids=["ring", "d4"])
def test_simulated_hood_jacobi_reaches_the_exact_solution(tmp_path, nodes, degree):
    log, _ = simulate_saved(tmp_path, "exact", nodes, "--mode", "hood-jacobi", *EXACT,
                       "--degree", str(degree))
    _check_exact(log, nodes)


@pytest.mark.mpirun
@pytest.mark.timeout(300)
def test_live_hood_jacobi_on_the_complete_graph_is_simulated_global_consensus(tmp_path):
    live_model = tmp_path / "live-model.h5"
    res = run_cli(4, "train", "--mode", "hood-jacobi", *COMPLETE, "--rho", "0.5", "--eta",
                  "1.6", "--out", str(tmp_path / "l.h5"), "--save-model", str(live_model),
                  timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    _, sync_model = _sync(tmp_path, "1.6")
    assert worst_gap(live_model, sync_model) <= 1e-9

