"""``--update paper`` (eq. 7 of the paper) against a serial simulation of eq. 7.

Eq. 7, one activation of node m with neighbours n (Zr_nm: the latest Z_nm received)::

    O_m   = P_eps((2 B_m - sum_n Zr_nm) H_m^-1),   H_m = 2 G_m + gamma d_m I
    Z_mn -= eta ((Z_mn + Zr_nm) / 2 + gamma O_m)

Its fixed points, where P_eps(x) = x / w_m with w_m >= 1: every Z update is
zero, so ``Z_mn + Z_nm = -2 gamma O`` on every edge and the nodes agree on O;
summing ``u_m = 2 B_m - sum_n Z_nm = w_m O H_m`` over the nodes gives::

    sum_m w_m O H_m = 2 B + 2 gamma |E| O,     w_m >= 1,     ||O||^2 = eps

(``||O||^2 = eps`` because some w_m > 1: with every w_m = 1 this is the
unconstrained least-squares solution, outside the ball when the constraint is
active). That is a family of fixed points, one free weight per node but one,
and which member an asynchronous run ends at depends on its schedule. So the
run is bounded from both sides:

* exactly: each node's O is a fixed point of eq. 7 (the weights w are a
  least-squares fit; the exact solution O* misses by 1e-3 - 1e-2 here);
* against an independent serial (synchronous) simulation of eq. 7, written
  below: the run is within a tenth of the bias of the simulation's fixed point,
  and about as far from O* as the simulation (the bias of eq. 7, 5 - 7 % here).
  The run uses ``--max-lead 0`` (every activation waits for its neighbours'
  previous one), the schedule closest to the simulation's: measured 0.3 - 1.4 %
  of the bias from it, also with four runs at once on two busy cores. With the
  default lead of 4 it was 2 - 24 %, and the family itself reaches about one
  bias from the simulation, so only the lock-step schedule makes a tight bound
  robust. Every member of the family is 1.0 - 1.44 biases from O* (sampled),
  so the bounds on the distance to O* hold whatever the schedule;
* and it is not a trivial answer: O is on the sphere ``||O||^2 = eps`` (not 0).

Features of layer l are rebuilt for each node from that node's own saved O of
layer l-1, so each layer is checked on the problem the node really solved.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from mpitools import run_cli

from dssfn_mpi.datasets import load_dataset
from dssfn_mpi.datasets.partition import partition
from dssfn_mpi.runlog import read_runlog
from dssfn_mpi.ssfn.model import forward, one_hot
from dssfn_mpi.ssfn.modelio import load_model
from dssfn_mpi.ssfn.solver import exact_solve

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(300)]

N_TRAIN, N_TEST, SEED, LAYERS, HIDDEN = 300, 100, 7, 2, 30
NODES, GAMMA, ETA, ITERS = 4, 3.0, 0.5, 1200


def _project(O: np.ndarray, eps: float) -> np.ndarray:
    norm = np.linalg.norm(O)
    return O if norm <= np.sqrt(eps) else O * (np.sqrt(eps) / norm)


def simulate_eq7(Ys, Ts, nbrs, gamma, eta, eps, iters):
    """Eq. 7, every node activated once per round on the previous round's Z (Jacobi)."""
    Q, d = Ts[0].shape[0], Ys[0].shape[0]
    Hinv = [np.linalg.inv(2 * Y @ Y.T + gamma * len(nbrs[m]) * np.eye(d))
            for m, Y in enumerate(Ys)]
    B2 = [2 * T @ Y.T for Y, T in zip(Ys, Ts)]
    Z = {(m, n): np.zeros((Q, d)) for m in range(len(Ys)) for n in nbrs[m]}
    O = [np.zeros((Q, d)) for _ in Ys]
    for _ in range(iters):
        Zr = {key: z.copy() for key, z in Z.items()}
        for m in range(len(Ys)):
            O[m] = _project((B2[m] - sum(Zr[n, m] for n in nbrs[m])) @ Hinv[m], eps)
            for n in nbrs[m]:
                Z[m, n] = Z[m, n] - eta * ((Z[m, n] + Zr[n, m]) / 2 + gamma * O[m])
    return O


def fixed_point_residual(O, Ys, Ts, nbrs, gamma):
    """Relative residual of ``sum_m w_m O H_m = 2 B + 2 gamma |E| O`` at the best w."""
    cols = [(2 * O @ (Y @ Y.T) + gamma * len(nbrs[m]) * O).ravel() for m, Y in enumerate(Ys)]
    A = np.stack(cols, axis=1)
    rhs = (sum(2 * T @ Y.T for Y, T in zip(Ys, Ts)) + gamma * sum(map(len, nbrs)) * O).ravel()
    w, *_ = np.linalg.lstsq(A, rhs, rcond=None)
    return float(np.linalg.norm(A @ w - rhs) / np.linalg.norm(rhs)), w


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("paper")
    cfg = tmp / "cfg.json"
    cfg.write_text(json.dumps({"dataset": "synthetic", "layers": LAYERS, "hidden": HIDDEN,
                               "seed": SEED,
                               "dataset_options": {"n_train": N_TRAIN, "n_test": N_TEST}}))
    out, model = tmp / "run.h5", tmp / "model.h5"
    res = run_cli(NODES, "train", "--config", str(cfg), "--mode", "async", "--update", "paper",
                  "--degree", "2", "--iters", str(ITERS), "--gamma", f"100,{GAMMA}",
                  "--eta", str(ETA),
                  "--max-lead", "0", "--out", str(out), "--save-model", str(model), "--quiet")
    assert res.returncode == 0, res.stderr[-3000:]
    return read_runlog(out), load_model(model)


@pytest.mark.parametrize("layer", range(1, LAYERS + 1))
def test_paper_update_ends_at_a_fixed_point_of_eq7_away_from_the_exact_solution(
        paper_run, layer):
    log, model = paper_run
    assert log.attrs["update"] == "paper" and log.nodes == NODES
    assert np.all(log.layers["activations"][layer] == ITERS)
    nbrs = [[int(n) for n in row if n >= 0] for row in log.ranks["neighbors"]]
    assert nbrs == [sorted({(m - 1) % NODES, (m + 1) % NODES}) for m in range(NODES)]

    ds = load_dataset("synthetic", seed=SEED, n_train=N_TRAIN, n_test=N_TEST)
    eps = 2.0 * ds.n_classes
    shards = partition(ds.y_train, NODES, "uniform", seed=SEED)
    assert [len(s) for s in shards] == list(log.attrs["shard_sizes"])
    Ys = [list(forward(ds.X_train[:, s], model.nodes[m][: layer + 1], SEED, HIDDEN))[-1]
          for m, s in enumerate(shards)]
    Ts = [one_hot(ds.y_train[s], ds.n_classes) for s in shards]
    Ostar = exact_solve(sum(Y @ Y.T for Y in Ys), sum(T @ Y.T for Y, T in zip(Ys, Ts)), eps).O
    ref = np.linalg.norm(Ostar)
    sim = simulate_eq7(Ys, Ts, nbrs, GAMMA, ETA, eps, 3000)

    # The simulation itself: converged, to a fixed point, with a clear bias.
    assert max(np.linalg.norm(O - sim[0]) for O in sim) <= 1e-9 * ref
    assert fixed_point_residual(sim[0], Ys, Ts, nbrs, GAMMA)[0] <= 1e-9
    bias = np.linalg.norm(sim[0] - Ostar) / ref
    assert bias >= 5e-3, bias
    # The exact solution is no fixed point of eq. 7: the residual test tells them apart.
    assert fixed_point_residual(Ostar, Ys, Ts, nbrs, GAMMA)[0] >= 1e-3

    for m, Os in enumerate(model.nodes):
        O = Os[layer]
        assert abs(np.vdot(O, O) / eps - 1.0) <= 1e-6, (m, np.vdot(O, O), eps)
        residual, w = fixed_point_residual(O, Ys, Ts, nbrs, GAMMA)
        assert residual <= 1e-6, (m, residual)
        assert np.all(w >= 1.0 - 1e-6), (m, w)  # the projection only ever shrinks
        to_sim = np.linalg.norm(O - sim[m]) / ref
        to_star = np.linalg.norm(O - Ostar) / ref
        assert to_sim <= 0.1 * bias, (m, to_sim, bias)
        assert 0.5 * bias <= to_star <= 2.0 * bias, (m, to_star, bias)
