"""Neighbourhood consensus ADMM (``--mode hood``): exact, and global consensus on the
complete graph.

Every node must reach the exact centralized ``O*`` (the run log's ``rel_distance``) at every
layer, bound active or not, asynchronous (a 3x slow node, exponential jitter) under a small
and a large ``--max-lead``. Run synchronously (``--mode hood-jacobi``'s steps, every centre's
``z_j`` fresh), its iterates on the complete graph are global consensus ADMM's (``--mode
sync``) with ``rho = M rho_hood`` and ``--relax`` = ``--eta``: the same operator.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.cli import main
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.runlog import read_runlog

# Label-skewed shards on a ring; the bound is inactive at layer 0 and active beyond.
PROBLEM = ["--dataset", "synthetic", "--layers", "2", "--hidden", "40", "--degree", "2",
           "--partition", "dirichlet:0.5", "--quiet"]
# Four simulated nodes, one of them 3x slower, each activation's time jittered.
UNEVEN = ["--nodes", "4", "--speed", "const:1e-3", "--jitter", "exp:1", "--speeds",
          "0.25:3,0.75:1"]


@pytest.mark.parametrize("lead", ["1", "10"])
@pytest.mark.parametrize("bound", [[], ["--norm-bound", "0.1"]], ids=["beyond-0", "all"])
def test_simulated_hood_reaches_the_exact_solution(tmp_path, lead, bound):
    # The auto penalties; layer 0 in the Gram metric (the default --metric gram).
    out = tmp_path / "h.h5"
    assert main(["simulate", "--mode", "hood", *PROBLEM, *UNEVEN, *bound, "--iters", "600",
                 "--max-lead", lead, "--out", str(out)]) == 0
    log = read_runlog(out)
    active = log.layers["lambda_star"] > 0
    assert active[1:].all() and active[0].all() == bool(bound)
    assert log.layers["staleness_max"].max() >= 2  # asynchronous: stale reads happened
    assert log.layers["metric_bytes"][0].all() and not log.layers["metric_bytes"][1:].any()
    rel = log.layers["rel_distance"]
    assert rel.shape == (3, 4) and rel.max() <= 1e-6, rel
    # One put of [v_ij, z_i] per neighbour per activation: two Q x d blocks.
    Q, width = int(log.attrs["n_classes"]), np.array([20, 40, 40])  # synthetic: 20 inputs
    acts = log.layers["activations"]
    assert (log.layers["bytes_sent"] == acts * 2 * 2 * Q * width[:, None] * 8).all()


def _problem(M, d, J, Q, seed):
    rng = np.random.default_rng(seed)
    Ys = [rng.normal(size=(d, J)) for _ in range(M)]
    Ts = [np.eye(Q)[rng.integers(0, Q, J)].T for _ in range(M)]
    return Ys, [2.0 * T @ Y.T for T, Y in zip(Ts, Ys)]


def _jacobi_round(steps, graph):
    """One round of ``hood-jacobi``'s steps (:class:`JacobiHoodStep`): every member's
    ``x_i`` against the centres' current ``z_j``, then every centre's ``z_j`` fresh from its
    members' new ``v_ij``; returns the ``x_i``."""
    nbrs = [list(graph.neighbors(m)) for m in range(len(steps))]

    def tables(outbox):  # node m's row k: neighbour n's message for m
        return [np.array([getattr(steps[n], outbox)[nbrs[n].index(m)].reshape(-1)
                          for n in nb]) for m, nb in enumerate(nbrs)]

    rows = [np.arange(len(nb)) for nb in nbrs]
    xs = [s.step_rows(t, r).copy() for s, t, r in zip(steps, tables("Zc"), rows)]
    for s, t, r in zip(steps, tables("Z"), rows):
        s.centre_rows(t, r)
    return xs


@pytest.mark.parametrize("relax", [1.0, 1.6])
@pytest.mark.parametrize("eps", [1e3, 0.05], ids=["free", "projected"])
@pytest.mark.parametrize("gram", [False, True], ids=["scalar", "metric"])
def test_synchronous_hood_on_the_complete_graph_is_global_consensus_admm(relax, eps, gram):
    M, d, J, Q, r = 4, 10, 15, 3, 0.7
    graph = make_topology("complete", M)
    Ys, B2s = _problem(M, d, J, Q, 1)
    Gs = [Y @ Y.T for Y in Ys]
    hood = lookup("hood-jacobi")
    sync = copy.copy(lookup("sync"))
    sync.relax = relax
    # The metric: each centre's S_j (the mean of G over H_j), relayed to its members; on the
    # complete graph every S_j is consensus ADMM's S, the network mean.
    own = [hood.metric(Gs[m], [Gs[n] for n in graph.neighbors(m)]) for m in range(M)]
    metrics = [hood.relayed_metric(own[m], [own[n] for n in graph.neighbors(m)]) if gram
               else None for m in range(M)]
    S = sync.metric(None, sum(Gs) / M) if gram else None
    steps = [hood.step(B2, hood.fixed_penalty(r, M - 1), relax, eps,
                       hood.inverse(Y, G, hood.fixed_penalty(r, M - 1), mt), mt)
             for Y, G, B2, mt in zip(Ys, Gs, B2s, metrics)]
    invs = [sync.inverse(Y, G, M * r, S) for Y, G in zip(Ys, Gs)]

    Zbar, U = np.zeros((Q, d)), [np.zeros((Q, d)) for _ in range(M)]
    worst = 0.0
    for _ in range(25):
        Os = [sync.primal(inv, B2, M * r, Zbar, u, S) for inv, B2, u in zip(invs, B2s, U)]
        shares = [np.empty((Q, d)) for _ in range(M)]
        for O, u, sh in zip(Os, U, shares):
            sync.share(O, u, Zbar, sh)
        mean = sum(shares) / M
        Zbar = [sync.dual(mean, eps, O, u, Zbar, S) for O, u in zip(Os, U)][0]
        xs = _jacobi_round(steps, graph)
        worst = max(worst, max(np.linalg.norm(x - O) / np.linalg.norm(O)
                               for x, O in zip(xs, Os)))
    assert worst <= 1e-9
    if eps < 1:
        assert np.linalg.norm(Zbar) ** 2 == pytest.approx(eps)  # the bound is active


def test_auto_penalties_agree_at_both_ends_and_sum_to_about_consensus_rho():
    graph = make_topology("circular", 8, degree=4)
    rng = np.random.default_rng(0)
    stats = [np.array([rng.uniform(0.5, 2), rng.uniform(1, 3), rng.uniform(5, 9)])
             for _ in range(8)]
    hood = lookup("hood")
    pens = [hood.auto_penalty(stats[m], [stats[n] for n in graph.neighbors(m)], graph, m)
            for m in range(8)]
    for m in range(8):
        assert pens[m].shape == (5,)
        for k, n in enumerate(graph.neighbors(m)):
            assert pens[m][1 + k] == pens[n][1 + list(graph.neighbors(n)).index(m)]
    rho = lookup("sync").auto_penalty(None, np.mean(stats, axis=0), graph, 0)
    assert 0.5 * rho < np.mean([p.sum() for p in pens]) < 2 * rho


def test_message_is_two_blocks():
    hood = lookup("hood")
    assert hood.message_floats(3, 10) == 60 and hood.message_bytes(3, 10) == 480
    assert hood.sent(5, 2, 0, 480) == (10, 4800)


def test_simulated_metric_relay_sends_twice_the_edge_forms_bytes(tmp_path):
    # The Grams go to each centre and its metric comes back: two exchanges of a packed
    # 20 x 20 matrix (synthetic: 20 inputs) where the edge form (async) takes one.
    sent = {}
    for mode in ("async", "hood", "hood-lockstep", "hood-jacobi"):
        out = tmp_path / f"{mode}.h5"
        assert main(["simulate", "--mode", mode, *PROBLEM, "--layers", "0", "--nodes", "4",
                     "--speed", "const:1e-3", "--iters", "5", "--metric", "gram", "--no-eval",
                     "--out", str(out)]) == 0
        sent[mode] = read_runlog(out).layers["metric_bytes"]
    assert sent["async"].shape == (1, 4) and (sent["async"] == 8 * 20 * 21 // 2).all()
    for mode in ("hood", "hood-lockstep", "hood-jacobi"):
        assert lookup(mode).metric_exchanges == 2
        assert (sent[mode] == 2 * sent["async"]).all(), mode
