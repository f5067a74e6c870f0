"""Every sbatch template, submitted unchanged to a real Slurm, and what the jobs wrote.

Run by ``make slurm-test``, which starts a throwaway one-node cluster
(slurm/testcluster.sh) and sets DSSFN_SLURM_TEST=1; skipped otherwise, so that
``pytest tests`` never submits jobs to a cluster it happens to find. Only
environment variables and sbatch options differ from a user's submission: tiny
problems (digits, one or two layers, --hidden 60) and ``--oversubscribe`` so
the test jobs share the node (the first job keeps the templates' --exclusive).

All jobs are submitted at once and waited for together (a few minutes, most
of it the job that runs into its two-minute time limit).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from slurmjobs import SLURM, TINY, job_env, job_info, run_cli, sbatch, wait_for

pytestmark = [
    pytest.mark.skipif(os.environ.get("DSSFN_SLURM_TEST") != "1" or not os.environ.get(
        "SLURM_CONF") or shutil.which("sbatch") is None,
        reason="needs the test cluster: make slurm-test (slurm/testcluster.sh)"),
    pytest.mark.timeout(1500),
]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict:
    """Submit every template at once from a fresh submission directory; wait for all."""
    sub = tmp_path_factory.mktemp("submit")
    share = ["--oversubscribe", "--time=10"]
    ids = {
        # single.sbatch as is (exclusive, one task per core), partition from SBATCH_PARTITION.
        "single": sbatch(sub, ["-n", "4"], "single.sbatch", MODE="async", DATASET="digits",
                          DEGREE="2", LAYERS="2", ITERS="20", EXTRA_ARGS=TINY,
                          SBATCH_PARTITION="debug"),
        "degree": sbatch(sub, ["--array=0-1", "-n", "4", *share], "degree_array.sbatch",
                          DEGREES="2 3", MODES="async sync", DATASET="digits", LAYERS="1",
                          ITERS="10", EXTRA_ARGS=TINY),
        "table2": sbatch(sub, ["-n", "4", *share], "table2.sbatch", PRESET="quick",
                          DATASETS="digits", SEEDS="1",
                          BENCH_ARGS="--set layers=1 --set iters=10 --set hidden=60"),
        # Runs into its time limit: --signal makes dssfn-mpi stop with an incomplete log.
        "timeout": sbatch(sub, ["-n", "4", "--oversubscribe", "--time=2",
                                                  "--signal=USR1@20"], "single.sbatch",
                           MODE="async", DATASET="digits", DEGREE="2", LAYERS="2000",
                           ITERS="400", EXTRA_ARGS=f"{TINY} --no-check --quiet"),
    }
    # nodes_submit.sh: one nodes.sbatch per M; a bogus mode between two good ones.
    res = subprocess.run(["bash", str(SLURM / "nodes_submit.sh"), "--parsable", *share],
                         cwd=sub, capture_output=True, text=True, timeout=120,
                         env=job_env(NODE_COUNTS="2 4", MODES="async bogus sync-graph",
                                  DATASET="digits", LAYERS="1", ITERS="10", EXTRA_ARGS=TINY))
    assert res.returncode == 0, res.stderr
    nodes = [line.split(";")[0] for line in res.stdout.split()]
    assert len(nodes) == 2
    wait_for([*ids.values(), *nodes], 1200, poll=3)
    return {"dir": sub, "ids": ids, "nodes": nodes}


def _out(jobs: dict, pattern: str) -> str:
    files = sorted((jobs["dir"] / "results").glob(pattern))  # --output=results/%x-%j.out
    assert not list(jobs["dir"].glob("*.out"))  # none in the submission directory itself
    assert files, f"no job output {pattern} in {jobs['dir']}"
    return "\n".join(f.read_text() for f in files)


def test_single_writes_a_complete_run_log_after_the_doctor(jobs):
    from dssfn_mpi.runlog import read_runlog

    job = jobs["ids"]["single"]
    info = job_info(job)
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", info
    assert info["Partition"] == "debug" and info["OverSubscribe"] == "NO"  # --exclusive
    run = read_runlog(jobs["dir"] / "results" / f"single-{job}.h5")
    assert run.complete and run.layers_done == 3
    assert run.attrs["mode"] == "async" and run.nodes == 4 and run.attrs["degree"] == 2
    out = _out(jobs, f"dssfn-single-{job}.out")
    assert "passive put: PASS" in out and "thread level: MPI_THREAD_FUNNELED" in out
    assert "placement: sbatch --exclusive --hint=nomultithread" in out
    assert out.index("passive put:") < out.index("layer   0/2")  # the doctor ran first


def test_degree_array_collects_and_plots(jobs):
    from dssfn_mpi.runlog import read_runlog

    job, res_dir = jobs["ids"]["degree"], jobs["dir"] / "results"
    logs = sorted(res_dir.glob(f"degree-{job}_*.h5"))
    assert [p.name for p in logs] == [f"degree-{job}_{i}-d{d}-{m}.h5"
                                      for i, d in ((0, 2), (1, 3)) for m in ("async", "sync")]
    for p in logs:
        run = read_runlog(p)
        assert run.complete and run.nodes == 4 and run.layers_done == 2
    assert [job_info(f"{job}_{i}")["JobState"] for i in (0, 1)] == ["COMPLETED"] * 2
    _collect_and_plot(jobs["dir"], logs, "degree", {"async-d02", "async-d03", "sync-d02",
                                                    "sync-d03"})


def _collect_and_plot(cwd: Path, logs: list[Path], kind: str, groups: set[str]) -> None:
    from dssfn_mpi.runlog import read_sweep

    sweep = cwd / f"{kind}.h5"
    res = run_cli("bench", "collect", *map(str, logs), "--kind", kind, "--out", str(sweep),
               "--overwrite", cwd=cwd)
    assert res.returncode == 0, res.stderr
    runs = read_sweep(sweep)
    assert set(runs) == groups
    assert all(r.attrs["bench_status"] == "ok" for r in runs.values())
    res = run_cli("plot", str(sweep), "--out", str(cwd / f"fig-{kind}"), cwd=cwd)
    assert res.returncode == 0, res.stderr
    assert list((cwd / f"fig-{kind}").glob("*.png"))


def test_nodes_sweep_survives_a_failing_mode_then_collects_and_plots(jobs):
    from dssfn_mpi.runlog import read_runlog

    res_dir, logs = jobs["dir"] / "results", []
    for job, M in zip(jobs["nodes"], (2, 4)):
        info = job_info(job)
        assert info["JobName"] == f"dssfn-nodes-M{M}"
        assert info["JobState"] == "FAILED" and info["ExitCode"] == "1:0", info  # bogus failed
        out = _out(jobs, f"dssfn-nodes-M{M}-{job}.out")
        assert f"M={M} bogus: failed with exit status 2; going on with the next one" in out
        assert not list(res_dir.glob(f"nodes-{job}-M{M}-bogus*"))
        for mode in ("async", "sync-graph"):  # the modes before and after the failure
            path = res_dir / f"nodes-{job}-M{M}-{mode}.h5"
            run = read_runlog(path)
            assert run.complete and run.nodes == M
            logs.append(path)
    _collect_and_plot(jobs["dir"], logs, "nodes", {"async-M02", "async-M04", "sync-graph-M02",
                                                   "sync-graph-M04"})


def test_table2_sweep_and_plot(jobs):
    from dssfn_mpi.runlog import read_sweep

    job = jobs["ids"]["table2"]
    assert job_info(job)["JobState"] == "COMPLETED"
    sweep = jobs["dir"] / "results" / f"table2-{job}.h5"
    runs = read_sweep(sweep)
    modes = {r.attrs["bench_mode"] for r in runs.values()}
    assert {"sync", "async"} <= modes
    assert all(r.attrs["bench_status"] == "ok" and r.nodes in (1, 4) for r in runs.values())
    res = run_cli("plot", str(sweep), "--out", str(jobs["dir"] / "fig-table2"), cwd=jobs["dir"])
    assert res.returncode == 0, res.stderr


def test_time_limit_leaves_an_incomplete_run_log(jobs):
    from dssfn_mpi.runlog import read_runlog

    job = jobs["ids"]["timeout"]
    info = job_info(job)
    assert info["JobState"] in ("FAILED", "TIMEOUT"), info
    out = _out(jobs, f"dssfn-single-{job}.out")
    assert re.search(r"dssfn-mpi: error: stopped by SIG(USR1|TERM) .* after \d+ layer", out), out
    path = jobs["dir"] / "results" / f"single-{job}.h5"
    run = read_runlog(path)  # recorded, not vanished
    assert not run.complete and 1 <= run.layers_done < 2001
    assert run.attrs["stopped_by"] in ("SIGUSR1", "SIGTERM") and run.nodes == 4
    assert Path(f"{path}.ckpt").is_dir()  # --resume can continue it


def test_cluster_wrote_nothing_outside_its_folder(jobs):
    conf = Path(os.environ["SLURM_CONF"])
    started = conf.stat().st_mtime
    for default in ("/run/munge", "/var/run/munge", "/var/lib/munge", "/var/log/munge",
                    "/var/lib/slurm", "/var/spool/slurmd", "/var/spool/slurmctld",
                    "/var/log/slurm", "/run/slurm", "/var/run/slurm"):
        path = Path(default)
        if not path.exists():
            continue
        newer = [str(p) for p in [path, *path.rglob("*")] if p.stat().st_mtime > started]
        assert not newer, f"the test cluster wrote outside {conf.parent}: {newer}"
