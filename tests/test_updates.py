"""The engines' update functions, run serially: they reach the exact layer solution."""

import numpy as np
import pytest

from dssfn_mpi.algorithms.updates import (
    consensus_dual,
    consensus_primal,
    edge_activation,
    paper_activation,
)
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.ssfn.solver import LocalInverse, exact_solve


def _shards(M=4, d=10, J=80, Q=3, seed=0):
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(d, J))
    T = np.eye(Q)[:, rng.integers(0, Q, J)]
    parts = np.array_split(np.arange(J), M)
    Ys = [Y[:, p] for p in parts]
    Ts = [T[:, p] for p in parts]
    return Y, T, Ys, Ts


def _eps_active(Y, T):
    """A bound that cuts the unconstrained solution's norm in half (constraint active)."""
    free = exact_solve(Y @ Y.T, T @ Y.T, 1e12).O
    return 0.25 * float(np.vdot(free, free))


def _async(Ys, Ts, eps, gamma, iters, update):
    """Round-robin activations with fresh reads on a 4-node ring."""
    graph = make_topology("ring", len(Ys))
    nbrs = [graph.neighbors(m) for m in range(len(Ys))]
    Q, d = Ts[0].shape[0], Ys[0].shape[0]
    Z = [np.zeros((len(n), Q, d)) for n in nbrs]
    B2 = [2.0 * t @ y.T for y, t in zip(Ys, Ts)]
    g = [np.full(len(n), gamma) for n in nbrs]
    invs = [LocalInverse(y, gamma * len(n)) for y, n in zip(Ys, nbrs)]
    Os = [np.zeros((Q, d)) for _ in Ys]
    step = edge_activation if update == "edge" else paper_activation
    for _ in range(iters):
        for m, n in enumerate(nbrs):
            Zr = np.stack([Z[k][nbrs[k].index(m)] for k in n])
            Os[m] = step(Z[m], Zr, B2[m], g[m], 1.0, eps, invs[m])
    return Os


def test_edge_activation_reaches_the_exact_solution():
    Y, T, Ys, Ts = _shards()
    eps = _eps_active(Y, T)
    star = exact_solve(Y @ Y.T, T @ Y.T, eps)
    assert star.lam > 0
    Os = _async(Ys, Ts, eps, gamma=star.lam, iters=500, update="edge")
    for O in Os:
        assert np.linalg.norm(O - star.O) <= 1e-6 * np.linalg.norm(star.O)


def test_paper_activation_is_biased_when_the_constraint_is_active():
    # Eq. 7 projects each node's O onto the ball: its fixed point is not O*.
    Y, T, Ys, Ts = _shards()
    eps = _eps_active(Y, T)
    star = exact_solve(Y @ Y.T, T @ Y.T, eps)
    Os = _async(Ys, Ts, eps, gamma=star.lam, iters=500, update="paper")
    dist = max(np.linalg.norm(O - star.O) for O in Os) / np.linalg.norm(star.O)
    assert 1e-3 < dist < 1.0


def test_edge_activation_work_buffer_changes_nothing():
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(6, 20))
    inv = LocalInverse(Y, 3.0)
    Z0, Zr = rng.normal(size=(2, 2, 6)), rng.normal(size=(2, 2, 6))
    B2, gamma = rng.normal(size=(2, 6)), np.array([1.0, 2.0])
    Za, Zb = Z0.copy(), Z0.copy()
    Oa = edge_activation(Za, Zr, B2, gamma, 0.7, 0.5, inv)
    Ob = edge_activation(Zb, Zr, B2, gamma, 0.7, 0.5, inv, np.empty_like(Z0))
    assert np.array_equal(Oa, Ob) and np.array_equal(Za, Zb)
    assert not np.array_equal(Za, Z0)  # Z is updated in place


@pytest.mark.parametrize("active", [True, False])
def test_consensus_steps_reach_the_exact_solution(active):
    Y, T, Ys, Ts = _shards()
    eps = _eps_active(Y, T) if active else 1e12
    star = exact_solve(Y @ Y.T, T @ Y.T, eps)
    rho = 20.0
    invs = [LocalInverse(y, rho) for y in Ys]
    B2 = [2.0 * t @ y.T for y, t in zip(Ys, Ts)]
    Zbar = np.zeros_like(star.O)
    U = [np.zeros_like(Zbar) for _ in Ys]
    for _ in range(2000):
        Os = [consensus_primal(inv, b, rho, Zbar, u) for inv, b, u in zip(invs, B2, U)]
        mean = sum(o + u for o, u in zip(Os, U)) / len(Os)
        Zbar = [consensus_dual(mean, eps, o, u) for o, u in zip(Os, U)][0]
    assert np.linalg.norm(Zbar - star.O) <= 1e-6 * np.linalg.norm(star.O)
