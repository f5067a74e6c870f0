"""The async event loop (``sim.asyncsim``) against a plain re-implementation of its rules.

The reference below places every activation by brute force: at each step it asks every
node when its next activation could start (:func:`~dssfn_mpi.analysis.timeline.activation_start`
on the end times so far), runs the earliest (ties: lower node), and reads of each neighbour
the latest ``Z`` whose activation has ended by then, kept in a full history; the done flags
of ``--stop`` are replayed in time order before each activation. With jitter, a slow node,
``--max-lead`` and ``--stop eps`` the event loop must give exactly (==) its iterates,
activation counts, starts, ends, versions, waits and computes (however its records
grew); and re-executing the loop's reads (:func:`~dssfn_mpi.sim.schedule.replay_reads`)
must give its iterates.
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import pytest

from dssfn_mpi.algorithms import lookup
from dssfn_mpi.algorithms.stoprule import parse_stop
from dssfn_mpi.analysis.network import parse_network
from dssfn_mpi.analysis.timeline import activation_start
from dssfn_mpi.engines.staleness import Staleness, staleness
from dssfn_mpi.graph.topology import make_topology
from dssfn_mpi.sim import asyncsim
from dssfn_mpi.sim.asyncsim import solve_async
from dssfn_mpi.sim.schedule import replay_reads
from dssfn_mpi.sim.speed import SpeedModel
from dssfn_mpi.ssfn.solver import exact_solve

M, Q, D, N = 9, 3, 12, 30  # nodes, classes, features, samples per node
EPS = 2.0 * Q  # the norm bound
PUT = 3e-5


def _problem(seed: int = 4):
    """Each node's data and the graph: (neighbours, Ys, Ts, O*)."""
    rng = np.random.default_rng(seed)
    graph = make_topology("random-regular", M, 4, seed=seed)
    nbrs = [graph.neighbors(m) for m in range(M)]
    W = rng.normal(size=(Q, D))
    Ys = [rng.normal(size=(D, N)) for _ in range(M)]
    Ts = [W @ Y + 0.3 * rng.normal(size=(Q, N)) for Y in Ys]
    G = sum(Y @ Y.T for Y in Ys)
    B = sum(T @ Y.T for T, Y in zip(Ts, Ys))
    return nbrs, Ys, Ts, exact_solve(G, B, EPS).O


def _nodes(nbrs, Ys, Ts, target, rule, eta=1.0):
    """Fresh edge steps (Z at zero) and checks of every node."""
    alg = lookup("async")
    steps, checks = [], []
    for m, (Y, T) in enumerate(zip(Ys, Ts)):
        gamma = np.full(len(nbrs[m]), 20.0 + m)
        B2 = 2.0 * T @ Y.T
        inv = alg.inverse(Y, Y @ Y.T, gamma)
        steps.append(alg.step(B2, gamma, eta, EPS, inv))
        checks.append(None if rule.fixed else alg.node_check(rule, target, B2, gamma, eta))
    return steps, checks


def _speed(iters: int) -> SpeedModel:
    return SpeedModel.build("const:1e-4", M, 1, iters, {2: 3.0}, None, "exp:1.0", 7)


def _reference(steps, checks, nbrs, begin, rule, iters, lead, speed, alpha):
    """The rules by brute force (see the module docstring)."""
    slot = [{n: i for i, n in enumerate(nb)} for nb in nbrs]
    history = [[s.Z.reshape(len(nbrs[m]), -1).copy()] for m, s in enumerate(steps)]
    starts, ends = [[] for _ in range(M)], [[] for _ in range(M)]
    versions, prev = [[] for _ in range(M)], [float(b) for b in begin]
    O = [np.zeros_like(s.O) for s in steps]
    passed, flags, state, stop_at = [None] * M, [], [False] * M, math.inf
    wait, compute = [0.0] * M, [0.0] * M
    while True:
        cands = [(activation_start(prev[m], len(ends[m]), lead, [ends[n] for n in nbrs[m]]), m)
                 for m in range(M) if len(ends[m]) < iters]
        cands = [c for c in cands if c[0] is not None]
        if not cands:
            break
        t, m = min(cands)
        if not rule.fixed and stop_at == math.inf:
            for when, n, done in sorted(f for f in flags if f[0] <= t):
                flags.remove((when, n, done))
                state[n] = done
                if all(state):
                    stop_at = when + alpha
                    break
        if t >= stop_at:
            break
        k = len(ends[m])
        seen = [bisect.bisect_right(ends[n], t) for n in nbrs[m]]
        Zr = [history[n][v][slot[n][m]].reshape(steps[m].O.shape)
              for n, v in zip(nbrs[m], seen)]
        O[m] = steps[m](Zr).copy()
        done = checks[m].async_done(O[m], steps[m].rhs_buffer) if checks[m] else False
        cost = speed.activation(0, m, k, 0.0)
        if done:
            passed[m] = O[m].copy()
        history[m].append(steps[m].Z.reshape(len(nbrs[m]), -1).copy())
        wait[m] += t - prev[m]
        compute[m] += cost
        starts[m].append(t)
        ends[m].append(t + cost + PUT)
        versions[m].append(seen)
        prev[m] = ends[m][-1]
        if not rule.fixed:
            flags.append((ends[m][-1], m, done))
    if not rule.fixed and stop_at == math.inf:
        for when, n, done in sorted(flags):
            state[n] = done
            if all(state):
                stop_at = when + alpha
                break
    stopped = stop_at < math.inf
    final = [passed[m] if stopped and passed[m] is not None else O[m] for m in range(M)]
    left = [max(prev[m], stop_at) if stopped else prev[m] for m in range(M)]
    return dict(O=final, starts=starts, ends=ends, versions=versions, wait=wait,
                compute=compute, end=left, all_done=stopped)


def _loop(stop: str, iters: int, lead: int | None):
    """The event loop's and the reference's layer on the same problem."""
    nbrs, Ys, Ts, target = _problem()
    rule = parse_stop(stop)
    net = parse_network("alpha=1e-5,beta=1e9")
    begin = np.linspace(0.0, 2e-4, M)[::-1].copy()
    nbytes = (PUT - net.alpha) * net.beta
    steps, checks = _nodes(nbrs, Ys, Ts, target, rule)
    res = solve_async(0, steps, checks, nbrs, begin, rule, iters, lead, _speed(iters), net,
                      nbytes)
    steps, checks = _nodes(nbrs, Ys, Ts, target, rule)
    ref = _reference(steps, checks, nbrs, begin, rule, iters, lead, _speed(iters), net.alpha)
    return nbrs, Ys, Ts, target, res, ref


@pytest.mark.parametrize("stop,iters,lead", [("eps:1e-4", 3000, 2), ("local:1e-4", 3000, 1),
                                             ("iters", 120, 0), ("iters", 120, None)])
def test_event_loop_equals_the_brute_force_reference(monkeypatch, stop, iters, lead):
    monkeypatch.setattr(asyncsim, "FIRST_RECORDS", 3)  # the records grow several times
    *_, res, ref = _loop(stop, iters, lead)
    assert res.all_done == ref["all_done"] == (stop != "iters")
    counts = [r.activations for r in res.nodes]
    assert counts == [len(s) for s in ref["starts"]]
    if stop != "iters":  # ended by the rule, not the cap, with the slow node behind
        assert max(counts) < iters and counts[2] < min(counts[:2] + counts[3:])
    for m, run in enumerate(res.nodes):
        assert np.array_equal(run.O, ref["O"][m])
        assert np.array_equal(np.asarray(run.starts), ref["starts"][m])
        assert np.array_equal(np.asarray(run.ends), ref["ends"][m])
        assert np.array_equal(np.asarray(run.versions).reshape(-1, len(ref["versions"][m][0])),
                              ref["versions"][m])
        assert (run.wait, run.compute, run.end) == (ref["wait"][m], ref["compute"][m],
                                                     ref["end"][m])


def test_the_reads_re_executed_give_the_loops_iterates():
    nbrs, Ys, Ts, target, res, _ = _loop("iters", 120, 2)
    steps, _ = _nodes(nbrs, Ys, Ts, target, parse_stop("iters"))
    versions = np.stack([np.asarray(r.versions).reshape(120, -1) for r in res.nodes])
    final, _ = replay_reads(steps, nbrs, versions)
    for O, run in zip(final, res.nodes):
        assert np.abs(O - run.O).max() <= 1e-12 * np.abs(run.O).max()
    stale = [staleness(r.versions, len(nb)) for r, nb in zip(res.nodes, nbrs)]
    assert max(s[1] for s in stale) >= 1  # some reads skipped versions: the reads mattered


def test_staleness_of_all_reads_at_once_equals_one_read_at_a_time():
    rng = np.random.default_rng(5)
    reads = np.cumsum(rng.integers(0, 4, size=(50, 3)), axis=0)
    reads[20] = reads[19] - 1  # an older version read again (a stale read)
    one = Staleness(3)
    for v in reads:
        one.record(v)
    assert staleness(reads, 3) == (one.mean, float(one.max))
    assert staleness(np.zeros((0, 3), dtype=np.int64), 3) == (0.0, 0.0)
