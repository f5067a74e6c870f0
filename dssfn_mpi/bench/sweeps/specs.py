"""The training configurations of each benchmark, as :class:`RunSpec` lists.

A spec is what one job runs: the ``dssfn-mpi train`` arguments, the rank
count, the group name it gets in the sweep file and the ``bench_*``
attributes that label it there (what plots and tables group by). Nothing
here starts a process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from typing import Any

from ...errors import require
from ..variants import mode_args, read, relax_args
from .presets import ONESHOT_MODES, WAIT_POLICIES, Preset, topology_args

__all__ = ["RunSpec", "contention_specs", "degree_specs", "eps_form", "noise_specs",
           "nodes_graphs", "nodes_specs", "simulate_args", "simulated_specs", "slow_ranks",
           "straggler_specs", "table2_specs", "wait_args"]


@dataclass
class RunSpec:
    """One training configuration of a sweep.

    Attributes
    ----------
    group : str
        Name of its run group in the sweep file (``/runs/<group>``).
    label : str
        Short human-readable description for progress lines.
    nodes : int or None
        MPI ranks; ``None`` runs one process without a launcher (central).
    train_args : list of str
        Arguments after ``dssfn-mpi`` (``--out`` is added by the driver).
    meta : dict
        ``bench_*`` attributes stored with the run.
    busy : int
        Busy processes the driver runs beside the job (contention), started
        just before it and killed right after it.
    """

    group: str
    label: str
    nodes: int | None
    train_args: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    busy: int = 0


def _common(p: Preset, dataset: str, data_dir: str | None, seed: int = 0) -> list[str]:
    args = ["train", "--dataset", dataset, "--layers", str(p.layers), "--iters", str(p.iters),
            "--seed", str(seed)]
    if p.hidden is not None:
        args += ["--hidden", str(p.hidden)]
    if p.stop != "iters":
        args += ["--stop", p.stop]
    if data_dir:
        args += ["--data-dir", data_dir]
    return args


def _central(bench: str, p: Preset, data_dir: str | None, extra: list[str]) -> RunSpec:
    return RunSpec(
        group="central",
        label="central (1 process, exact)",
        nodes=None,
        train_args=[*_common(p, p.dataset, data_dir), "--mode", "central", *extra],
        meta={"bench": bench, "bench_mode": "central", "bench_value": -1},
    )


def _mode_iters(p: Preset, mode: str) -> list[str]:
    """``--iters`` of the iterations averaged by neighbour mixing (sync-graph) when the
    preset shortens them (``sync_graph_iters``)."""
    alg = read(mode).algorithm
    if alg.mixes and not alg.direct and p.sync_graph_iters is not None:
        return ["--iters", str(p.sync_graph_iters)]
    return []


# Timing runs: the log written at the end only (no per-layer gather of rows to rank 0). The
# equivalence check stays on: the trajectories' distances to O* (time to eps) need its O*.
_NO_SYNC = ("--log-every", "0")


def degree_specs(p: Preset, data_dir: str | None) -> list[RunSpec]:
    """Paper figure 2: M fixed on the circular graph, every degree in ``p.values``.

    Timing runs use ``--log-every 0`` (no per-layer gather of log rows). The
    equivalence check stays on, since the time to eps needs each layer's O*;
    it synchronises the ranks between layers (outside the timed region), so
    the measured wall time hides async's layer overlap. The projected time
    (:mod:`dssfn_mpi.bench.summaries.projection`) replays the run without that
    synchronisation. Accuracy is evaluated.
    """
    M = p.nodes
    specs = [_central("degree", p, data_dir, [*_NO_SYNC])] if p.central else []
    for d in p.values:
        for mode in p.modes:
            args = [*_common(p, p.dataset, data_dir), *_mode_args(p, mode), "--topology",
                    "circular", "--degree", str(d), *_NO_SYNC, *_mode_iters(p, mode)]
            specs.append(RunSpec(
                group=f"{mode}-d{int(d):02d}",
                label=f"{mode} M={M} d={d}",
                nodes=M,
                train_args=args,
                meta={"bench": "degree", "bench_mode": mode, "bench_value": int(d)},
            ))
    return specs


def nodes_graphs(p: Preset, M: int) -> list[tuple[list[str], str, str]]:
    """The graphs of ``bench nodes`` at M nodes: ``(topology arguments, group suffix,
    graph label)`` for each degree of ``p.degrees`` (2: the ring, no suffix; a degree
    d > 2 only where M > d, on the circular graph, suffix ``-dDD``).

    Raises
    ------
    UserError
        M < 2 or a degree < 2.
    """
    require(int(M) >= 2, f"nodes: every node count must be >= 2, got {M}")
    out = []
    for d in p.degrees:
        require(int(d) >= 2, f"nodes: every degree must be >= 2 (2: the ring), got {d}")
        if int(d) == 2:
            out.append((["--topology", "ring"], "", "ring"))
        elif int(M) > int(d):
            out.append((["--topology", "circular", "--degree", str(int(d))], f"-d{int(d):02d}",
                        f"d{int(d)}"))
    return out


def nodes_specs(p: Preset, data_dir: str | None) -> list[RunSpec]:
    """Paper figure 3: with M in ``p.values``, the ring (d = 2; d = 1 for M = 2) and each
    other degree of ``p.degrees`` (:func:`nodes_graphs`)."""
    specs = [_central("nodes", p, data_dir, [*_NO_SYNC])] if p.central else []
    for M in p.values:
        for graph, suffix, name in nodes_graphs(p, int(M)):
            for mode in p.modes:
                args = [*_common(p, p.dataset, data_dir), *_mode_args(p, mode), *graph,
                        *_NO_SYNC, *_mode_iters(p, mode)]
                specs.append(RunSpec(
                    group=f"{mode}-M{int(M):02d}{suffix}",
                    label=f"{mode} M={M} {name}",
                    nodes=int(M),
                    train_args=args,
                    meta={"bench": "nodes", "bench_mode": mode, "bench_value": int(M),
                          "bench_graph": name},
                ))
    return specs


def table2_specs(p: Preset, datasets: list[str], data_dir: str | None,
                 paper_ok: dict[str, bool]) -> list[RunSpec]:
    """Paper Table 2: central / sync / sync-graph / async on M nodes, degree d, per
    dataset and seed (sync-graph at ``p.sync_graph_iters`` if set, its times then scaled).

    Two settings: ``exact`` (the project's defaults: edge update, auto
    penalty) and ``paper`` (``--preset paper``: Table 3 gammas and rhos, eq. 7
    update, eta = 0.5, and the central model by the SSFN authors' ADMM with
    Table 3's mu), the latter only for datasets the paper covers
    (``paper_ok``). The equivalence check stays on, so each
    run records its distance to the exact solution (and each layer ends with
    that synchronisation).
    """
    specs: list[RunSpec] = []
    for ds in datasets:
        for seed in range(p.seeds):
            base = _common(p, ds, data_dir, seed)
            for setting, extra in (("exact", []), ("paper", ["--preset", "paper"])):
                if extra and not paper_ok.get(ds, False):
                    continue
                for mode in p.modes:
                    # the paper's setting runs the paper's steps (train --preset paper)
                    how = ["--mode", mode] if extra else _mode_args(p, mode)
                    alg = read(mode).algorithm
                    topo = ["--topology", "circular", "--degree", str(p.degree)] \
                        if alg.decentralized else []
                    specs.append(RunSpec(
                        group=f"{ds}-{setting}-{mode}-s{seed}",
                        label=f"{ds} {setting} {mode} seed {seed}",
                        nodes=None if alg.max_ranks == 1 else p.nodes,
                        train_args=[*base, *how, *topo, *extra, *_mode_iters(p, mode)],
                        meta={"bench": "table2", "bench_mode": mode, "bench_setting": setting,
                              "bench_dataset": ds, "bench_seed": seed, "bench_value": -1},
                    ))
    return specs


def slow_ranks(M: int, pattern: str) -> list[int]:
    """Ranks slowed down in a straggler ``pattern``: ``one`` or ``several`` (a quarter,
    spread around the circle so their neighbourhoods barely overlap)."""
    if pattern == "none":
        return []
    if pattern == "one":
        return [0]
    count = max(2, M // 4)
    return sorted({(i * M) // count for i in range(count)})


def straggler_specs(p: Preset, data_dir: str | None) -> list[RunSpec]:
    """Stragglers (``--slow RANK:FACTOR``) against async with bounded and unbounded
    delay and sync; one baseline run per variant without a straggler.

    The equivalence check stays on: the distance to the exact solution is the
    price unbounded delay pays for its speed, and the time to eps needs O*.
    The modes that average by neighbour mixing (``sync-graph``) run only the baseline
    (:func:`_slows_live`); the plots project their stragglers from that run's trace.
    """
    M = p.nodes
    variants = {mode: _straggler_args(p, mode) for mode in p.modes}
    for f in p.values:
        require(float(f) >= 1.0, f"straggler: slow-down factors must be >= 1 (times slower), "
                f"got {f:g}")
    cases = [("none", 1.0)] + [(pat, float(f)) for pat in ("one", "several") for f in p.values]
    specs: list[RunSpec] = []
    for pattern, factor in cases:
        ranks = slow_ranks(M, pattern)
        slow: list[str] = []
        for r in ranks:
            slow += ["--slow", f"{r}:{factor:g}"]
        for mode in p.modes:
            if ranks and not _slows_live(mode):
                continue  # projected from its baseline
            args = [*_common(p, p.dataset, data_dir), *_pinned(p, variants[mode]),
                    "--topology", "circular", "--degree", str(p.degree), *slow]
            tag = "base" if pattern == "none" else f"{pattern}-x{factor:g}"
            specs.append(RunSpec(
                group=f"{mode}-{tag}",
                label=f"{mode} {pattern} x{factor:g}" + (f" ranks {ranks}" if ranks else ""),
                nodes=M,
                train_args=args,
                meta={"bench": "straggler", "bench_mode": mode, "bench_pattern": pattern,
                      "bench_factor": factor, "bench_slow_ranks": ",".join(map(str, ranks)),
                      "bench_value": factor},
            ))
    return specs


#: The bounded delay a straggler sweep's one-sided modes run with where their label names
#: none (``async`` against ``async-unbounded``), given explicitly.
_STRAGGLER_LEAD = "4"


def _straggler_args(p: Preset, label: str) -> list[str]:
    """``--mode`` and the options of a straggler variant
    (:func:`~dssfn_mpi.bench.variants.mode_args`), a one-sided mode's bound
    :data:`_STRAGGLER_LEAD` where it names none."""
    args = [*mode_args(label), *_mode_iters(p, label)]
    if read(label).algorithm.one_sided and "--max-lead" not in args:
        args[2:2] = ["--max-lead", _STRAGGLER_LEAD]
    return args


def _slows_live(label: str) -> bool:
    """Whether ``train --slow`` slows a label's live runs; the stragglers of the modes that
    average by neighbour mixing are projected from their unslowed runs instead."""
    return not read(label).algorithm.mixes


def wait_args(policy: str) -> list[str]:
    """The ``dssfn-mpi train`` arguments that select wait policy ``policy``."""
    return ["--wait", policy]


def contention_specs(p: Preset, data_dir: str | None) -> list[RunSpec]:
    """A shared laptop: every mode and wait policy, idle and beside 1, 2, ... busy processes.

    ``p.values`` are the busy-process counts (0 = idle), ``p.policies`` the
    wait policies, ``p.reps`` the repetitions of each configuration (the tables
    take medians). The busy counts are the innermost loop, so a configuration's
    idle run and its busy runs are made one right after the other (their ratio
    is the slowdown; a drift of the machine's background load between them
    would bias it). Timing runs: ``--no-check --log-every 0``, no per-layer
    synchronisation outside the engine.
    """
    specs: list[RunSpec] = []
    for busy in p.values:
        require(int(busy) >= 0, f"contention: busy-process counts must be >= 0, got {busy}")
    for policy in p.policies:
        require(policy in WAIT_POLICIES, f"contention: unknown wait policy {policy!r}; "
                f"choose from {', '.join(WAIT_POLICIES)}")
    reps = int(p.reps)
    require(reps >= 1, f"contention: reps must be >= 1, got {p.reps}")
    for mode, policy, rep, busy in product(p.modes, p.policies, range(reps), p.values):
        busy = int(busy)
        args = [*_common(p, p.dataset, data_dir), *_mode_args(p, mode), "--topology", "ring",
                "--no-check", *_NO_SYNC, *_mode_iters(p, mode), *wait_args(policy)]
        nth = rep + 1 if reps > 1 else None  # a single run keeps the plain names
        specs.append(RunSpec(
            group=f"{mode}-{policy}-b{busy}" + (f"-r{nth}" if nth else ""),
            label=f"{mode} wait={policy} busy={busy}" + (f" #{nth}" if nth else ""),
            nodes=p.nodes,
            train_args=args,
            meta={"bench": "contention", "bench_mode": mode, "bench_wait": policy,
                  "bench_busy": busy, "bench_value": busy, "bench_rep": rep},
            busy=busy,
        ))
    return specs


# ----------------------------------------------------------------- time to eps, simulated


def eps_form(p: Preset, eps: float, modes_given: bool) -> Preset:
    """The time-to-eps form of a preset (``bench degree|nodes|table2 --to-eps E``): every
    layer, the input layer included, runs until every node is within ``eps`` of O*
    (``--stop eps:E``) with the preset's ``eps_iters`` as the cap K, and the one-shot
    baseline (``oneshot``, ``oneshot-graph``) joins the modes unless ``--modes`` chose."""
    from dataclasses import replace

    modes = p.modes if modes_given else tuple(dict.fromkeys((*p.modes, *ONESHOT_MODES)))
    return replace(p, stop=f"eps:{eps:g}", iters=p.eps_iters, modes=modes)


def simulate_args(p: Preset, dataset: str, data_dir: str | None, nodes: int,
              graph: list[str], mode: str, seed: int = 0) -> list[str]:
    """``dssfn-mpi simulate`` arguments of one configuration (no evaluation: the
    simulated runs give times and distances)."""
    args = ["simulate", "--dataset", dataset, "--nodes", str(nodes), "--layers", str(p.layers),
            "--iters", str(p.iters), "--seed", str(seed), "--stop", p.stop, "--no-eval",
            *graph, *_mode_args(p, mode)]
    if p.hidden is not None:
        args += ["--hidden", str(p.hidden)]
    if data_dir:
        args += ["--data-dir", data_dir]
    return args


def _mode_args(p: Preset, mode: str) -> list[str]:
    """``--mode`` and the options of a mode or variant
    (:func:`~dssfn_mpi.bench.variants.mode_args`), relaxed by ``p.relax`` where the
    variant names no relaxation (:func:`_pinned`)."""
    args = mode_args(mode)
    return args if read(mode).relax is not None else _pinned(p, args)


def _pinned(p: Preset, args: list[str]) -> list[str]:
    """A variant's arguments (``--mode MODE ...``) with ``p.relax`` as its relaxation
    (:func:`~dssfn_mpi.bench.variants.relax_args`); as they are without ``p.relax`` or
    where the mode solves directly."""
    if p.relax is None or read(args[1]).algorithm.direct:
        return args
    return [*args, *relax_args(args[1], p.relax)]


def simulated_specs(bench: str, p: Preset, data_dir: str | None,
                    datasets: list[str] | None = None) -> list[RunSpec]:
    """The time-to-eps form's simulated runs (one process each, simulated time): degree at
    M = ``p.nodes`` for every degree (``p.sim_values`` or the live ones), nodes on the ring
    and each other degree of ``p.degrees`` for every M of ``p.sim_values`` (past the live
    ones), table2 every dataset at M, d."""
    cases: list[tuple[str, int, list[str], dict]] = []
    if bench == "degree":
        for d in p.sim_values or p.values:
            cases.append((p.dataset, p.nodes, ["--topology", "circular", "--degree", str(d)],
                          {"bench_value": int(d), "tag": f"d{int(d):02d}"}))
    elif bench == "nodes":
        for M in p.sim_values or p.values:
            for graph, suffix, name in nodes_graphs(p, int(M)):
                cases.append((p.dataset, int(M), graph, {"bench_value": int(M),
                              "bench_graph": name, "tag": f"M{int(M):03d}{suffix}"}))
    elif bench == "table2":
        for ds in datasets or []:
            cases.append((ds, p.nodes, ["--topology", "circular", "--degree", str(p.degree)],
                          {"bench_value": -1, "bench_dataset": ds, "bench_setting": "exact",
                           "bench_seed": 0, "tag": f"{ds}-exact"}))
    specs = []
    for dataset, nodes, graph, meta in cases:
        tag = meta.pop("tag")
        for mode in (m for m in p.modes if read(m).algorithm.decentralized):
            specs.append(RunSpec(
                group=f"sim-{tag}-{mode}" if bench == "table2" else f"sim-{mode}-{tag}",
                label=f"simulated {mode} M={nodes} {' '.join(graph[1:])} {dataset}",
                nodes=None,
                train_args=simulate_args(p, dataset, data_dir, nodes, graph, mode),
                meta={"bench": bench, "bench_mode": mode, "bench_kind": "simulated", **meta},
            ))
    return specs


def _noise_cases(p: Preset) -> list[tuple[str, str, list[str]]]:
    """(case, jitter, slow args) of the noise benchmark: none, each jitter, each factor."""
    cases = [("none", "", [])]
    cases += [(j, j, []) for j in p.jitters]
    cases += [(f"slow:{float(f):g}", "", ["--slow", f"0:{float(f):g}"]) for f in p.values]
    return cases


def noise_specs(p: Preset, data_dir: str | None) -> list[RunSpec]:
    """Time to eps under noise on M nodes of the graph (``p.topology``): every mode
    live without noise and with one straggler (rank 0 slowed by each factor; engines
    without ``--slow`` are projected from their unslowed run), and simulated in every case
    (no noise, each ``exp:MEAN`` jitter, each straggler). The jitter's live side is the
    unslowed run replayed with it (``plot``)."""
    for f in p.values:
        require(float(f) >= 1.0, f"noise: slow-down factors must be >= 1, got {f:g}")
    graph = topology_args(p.topology, p.degree)
    specs: list[RunSpec] = []
    for case, jitter, slow in _noise_cases(p):
        factor = float(slow[1].split(":")[1]) if slow else 1.0
        meta = {"bench": "noise", "bench_case": case, "bench_jitter": jitter,
                "bench_factor": factor, "bench_slow_ranks": "0" if slow else "",
                "bench_value": factor}
        for mode in p.modes:
            if not jitter and (not slow or _slows_live(mode)):
                specs.append(RunSpec(
                    group=f"{mode}-{case.replace(':', '')}", label=f"{mode} {case}",
                    nodes=p.nodes, train_args=[*_common(p, p.dataset, data_dir),
                                               *_mode_args(p, mode), *graph, *slow],
                    meta={**meta, "bench_mode": mode, "bench_kind": "live"}))
            noise = ["--jitter", jitter, "--jitter-seed", "0"] if jitter else slow
            specs.append(RunSpec(
                group=f"sim-{mode}-{case.replace(':', '')}", label=f"simulated {mode} {case}",
                nodes=None, train_args=[*simulate_args(p, p.dataset, data_dir, p.nodes, graph,
                                                       mode), *noise],
                meta={**meta, "bench_mode": mode, "bench_kind": "simulated"}))
    return specs
