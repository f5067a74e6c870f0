"""The sbatch templates without Slurm: syntax, DRY_RUN=1 commands, and their control flow
(doctor gate, a failing mode, the time-limit stop) against a fake ``srun`` on PATH.

tests/slurm/ submits the same templates to a real (one-node) Slurm.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SLURM = REPO / "slurm"
TEMPLATES = sorted(p.name for p in SLURM.glob("*.sbatch")) + ["nodes_submit.sh", "lib.sh",
                                                              "testcluster.sh"]


@pytest.mark.parametrize("name", TEMPLATES)
def test_slurm_template_syntax(name):
    res = subprocess.run(["bash", "-n", str(SLURM / name)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def _env(**env: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("SLURM_", "SBATCH_", "DSSFN_")) and k not in ("MODES", "MODE")}
    # No Slurm on PATH; PYTHONPATH so the driver imports from any working directory.
    clean.update(PATH="/usr/bin:/bin", DSSFN_PYTHON=sys.executable, PYTHONPATH=str(REPO), **env)
    return clean


def _dry(name: str, tmp_path: Path, **env: str) -> list[str]:
    """Run a template with DRY_RUN=1 on a PATH without sbatch or srun."""
    res = subprocess.run(["bash", str(SLURM / name)], cwd=tmp_path, env=_env(DRY_RUN="1", **env),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "results").exists()  # nothing was run, not even mkdir
    return res.stdout.splitlines()


def _trains(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith("srun --mpi=pmix") and " train " in ln]


def test_slurm_single_dry_run(tmp_path):
    lines = _dry("single.sbatch", tmp_path)
    doctor = [ln for ln in lines if ln.endswith("dssfn-mpi doctor ")]
    assert len(doctor) == 1 and " -n 2 " in doctor[0]
    assert lines.index(doctor[0]) < lines.index(_trains(lines)[0])  # the gate comes first
    sruns = _trains(lines)
    assert len(sruns) == 1 and " -n 20 " in sruns[0] and "--cpus-per-task=1" in sruns[0]
    assert "results/single-dryrun.h5" in sruns[0]


def test_slurm_single_variables(tmp_path):
    lines = _dry("single.sbatch", tmp_path, MODE="sync", DATASET="digits", DEGREE="4",
                 LAYERS="3", ITERS="7", EXTRA_ARGS="--hidden 50 --seed 2", RESULTS="out",
                 DSSFN_SRUN_MPI="pmi2", SLURM_NTASKS="6")
    train = [ln for ln in lines if " train " in ln]
    assert len(train) == 1 and train[0].startswith("srun --mpi=pmi2 ")
    for part in (" -n 6 ", "--mode sync", "--dataset digits", "--degree 4", "--layers 3",
                 "--iters 7", "--hidden 50 --seed 2", "out/single-dryrun.h5"):
        assert part in train[0]


def test_slurm_degree_array_dry_run(tmp_path):
    sruns = _trains(_dry("degree_array.sbatch", tmp_path))
    assert len(sruns) == 10 * 3 and all(" -n 20 " in s for s in sruns)
    assert sum("--degree 19 " in s for s in sruns) == 3
    one = _trains(_dry("degree_array.sbatch", tmp_path, SLURM_ARRAY_TASK_ID="3",
                       SLURM_ARRAY_JOB_ID="77"))
    assert len(one) == 3 and all("--degree 8 " in s and "degree-77_3-d8-" in s for s in one)
    mine = _trains(_dry("degree_array.sbatch", tmp_path, DEGREES="2 3", MODES="async",
                        SLURM_ARRAY_TASK_ID="1", SLURM_ARRAY_JOB_ID="5"))
    assert len(mine) == 1 and "--degree 3 " in mine[0] and "degree-5_1-d3-async" in mine[0]


def test_slurm_nodes_submit_dry_run(tmp_path):
    lines = _dry("nodes_submit.sh", tmp_path, NODE_COUNTS="2 6")
    sbatch = [ln for ln in lines if ln.startswith("sbatch")]
    assert len(sbatch) == 2 and "--ntasks=2" in sbatch[0] and "--ntasks=6" in sbatch[1]
    assert "--job-name=dssfn-nodes-M6" in sbatch[1]
    sruns = _trains(lines)
    assert len(sruns) == 6
    assert all(" -n 2 " in s for s in sruns[:3]) and all(" -n 6 " in s for s in sruns[3:])
    assert all("--topology ring" in s for s in sruns)
    # sbatch options after the script name reach every sbatch
    res = subprocess.run(["bash", str(SLURM / "nodes_submit.sh"), "--time=5", "-A", "proj"],
                         cwd=tmp_path, env=_env(DRY_RUN="1", NODE_COUNTS="2"),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == "mkdir -p results "  # before any sbatch
    assert "--time=5 -A proj " in res.stdout.splitlines()[1]


def test_slurm_table2_dry_run(tmp_path):
    lines = _dry("table2.sbatch", tmp_path, DATASETS="digits", SEEDS="1")
    assert any("bench table2" in ln and "--launcher" in ln for ln in lines)
    sruns = _trains(lines)
    # sync, sync-graph (the paper's synchronous dSSFN) and async
    assert len(sruns) == 3 and all(" -n 20 " in s for s in sruns)
    assert {m for s in sruns for m in ("sync", "sync-graph", "async") if f"--mode {m} " in s} \
        == {"sync", "sync-graph", "async"}
    assert any("--mode central" in ln and not ln.startswith("srun") for ln in lines)


def _dssfn_args(line: str):
    """The ``dssfn-mpi`` arguments of a printed command, parsed by the real parser.

    A template that prints a misspelt option would otherwise only fail on the cluster.
    """
    import shlex

    from dssfn_mpi.cli import build_parser

    words = shlex.split(line)
    for i, word in enumerate(words):
        if Path(word).name == "dssfn-mpi":
            argv = words[i + 1:]
            break
        if word == "-m" and words[i + 1:i + 2] == ["dssfn_mpi"]:
            argv = words[i + 2:]
            break
    else:
        return None
    try:
        return build_parser().parse_args(argv)
    except SystemExit as exc:
        raise AssertionError(f"dssfn-mpi rejects {argv} (exit {exc.code})") from None


@pytest.mark.parametrize(("name", "env"), [
    ("single.sbatch", {}),
    ("degree_array.sbatch", {}),
    ("nodes_submit.sh", {"NODE_COUNTS": "2 6"}),
    ("table2.sbatch", {"DATASETS": "digits", "SEEDS": "1"}),
])
def test_every_printed_command_parses(tmp_path, name, env):
    parsed = [a for a in map(_dssfn_args, _dry(name, tmp_path, **env)) if a is not None]
    trains = [a for a in parsed if a.command == "train"]
    assert trains and {a.command for a in parsed} <= {"train", "doctor", "bench"}
    if name == "degree_array.sbatch":
        assert sorted({a.degree for a in trains}) == [2, 4, 6, 8, 10, 12, 14, 16, 18, 19]
        assert {a.mode for a in trains} == {"async", "sync", "sync-graph"}
        # With the check (time to eps needs O*), the log written once at the end.
        assert all(a.check is not False and a.log_every == 0 for a in trains)
        assert len({a.out for a in trains}) == 30
    if name == "single.sbatch":
        a = trains[0]
        assert (a.dataset, a.mode, a.degree, a.layers, a.iters) == ("satimage", "async", 8, 20,
                                                                     200)
    if name == "table2.sbatch":
        (b,) = [a for a in parsed if a.command == "bench"]
        assert (b.name, b.preset, b.datasets, b.seeds) == ("table2", "paper", "digits", 1)


# --------------------------------------------------------------------------- fake srun

_FAKE_SRUN = """#!/bin/bash
# Records its command line; fails like the case asks.
echo "srun $*" >> "$FAKE_LOG"
case "$*" in
    *doctor*) [[ $FAKE_CASE == doctor-fails ]] && { echo "passive put: FAIL"; exit 1; } ;;
    *"--mode bogus"*) exit 2 ;;
    *"--mode sync "*) [[ $FAKE_CASE == stop-at-sync ]] && exit 75 ;;
esac
exit 0
"""


def _fake(tmp_path: Path, case: str, name: str, **env: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    srun = bin_dir / "srun"
    srun.write_text(_FAKE_SRUN)
    srun.chmod(0o755)
    if not (bin_dir / "dssfn-mpi").exists():  # "on PATH" is all the template checks
        (bin_dir / "dssfn-mpi").symlink_to("/bin/true")
    log = tmp_path / "srun.log"
    log.unlink(missing_ok=True)
    environ = _env(FAKE_LOG=str(log), FAKE_CASE=case, DSSFN_VENV=str(tmp_path / "novenv"),
                   **env)
    environ["PATH"] = f"{bin_dir}:{environ['PATH']}"
    res = subprocess.run(["bash", str(SLURM / name)], cwd=tmp_path, env=environ,
                         capture_output=True, text=True, timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return res, calls


def test_doctor_failure_stops_before_training(tmp_path):
    res, calls = _fake(tmp_path, "doctor-fails", "nodes.sbatch", SLURM_NTASKS="4")
    assert res.returncode == 1
    assert "stopping before any training: 'dssfn-mpi doctor' failed" in res.stderr
    assert len(calls) == 1 and "doctor" in calls[0]


def test_failing_mode_does_not_stop_the_others(tmp_path):
    res, calls = _fake(tmp_path, "", "nodes.sbatch", SLURM_NTASKS="4",
                       MODES="async bogus sync-graph")
    assert res.returncode == 1
    modes = [c.split("--mode ")[1].split()[0] for c in calls if " train " in c]
    assert modes == ["async", "bogus", "sync-graph"]
    assert "M=4 bogus: failed with exit status 2; going on with the next one" in res.stderr


def test_time_limit_stop_ends_the_loop(tmp_path):
    res, calls = _fake(tmp_path, "stop-at-sync", "degree_array.sbatch", SLURM_NTASKS="4",
                       SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_JOB_ID="9", DEGREES="2",
                       MODES="async sync sync-graph")
    assert res.returncode == 75
    modes = [c.split("--mode ")[1].split()[0] for c in calls if " train " in c]
    assert modes == ["async", "sync"]
    assert "stopped by the time limit" in res.stderr


def test_missing_venv_is_one_clear_line(tmp_path):
    environ = _env(DSSFN_VENV=str(tmp_path / "none"), SLURM_NTASKS="2")
    res = subprocess.run(["bash", str(SLURM / "single.sbatch")], cwd=tmp_path, env=environ,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip().startswith("dssfn-slurm: error: no virtualenv at")


def test_module_load_only_with_a_module_system(tmp_path):
    res, calls = _fake(tmp_path, "", "single.sbatch", SLURM_NTASKS="2", DEGREE="1",
                       DSSFN_MPI_MODULE="openmpi/5")
    assert res.returncode == 0, res.stderr
    assert "module: command not found" not in res.stderr
    assert ("no module system here" in res.stderr) or Path("/etc/profile.d/modules.sh").exists()
    assert any(" train " in c for c in calls)


# --------------------------------------------------------------------------- cluster install

SCRIPTS = sorted(SLURM.glob("*.sbatch")) + sorted(SLURM.glob("*.sh"))


def _maybe_empty_arrays(text: str) -> set[str]:
    """Arrays a script may leave empty: set to ``()`` or filled by ``read -a``."""
    import re

    return (set(re.findall(r"\b([A-Za-z_]\w*)=\(\)", text))
            | set(re.findall(r"\bread\b[^\n]*?-a\s+([A-Za-z_]\w*)", text)))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_empty_arrays_are_safe_under_set_u_on_bash_4_2(path):
    # Before bash 4.4, "${a[@]}" or "${a[*]}" of an empty array under set -u is an
    # "unbound variable" error (bash CHANGES, 4.4-rc2, item a); ${#a[@]} never was. Every
    # expansion of an array that may be empty must take the ${a[@]+"${a[@]}"} form.
    import re

    text = path.read_text()
    for name in _maybe_empty_arrays(text):
        guarded = re.sub(r"\$\{" + name + r"\[[@*]\]\+\"[^\"]*\"\}", "", text)
        bare = re.findall(r"\$\{!?" + name + r"\[[@*]\][^}]*\}", guarded)
        assert not bare, f"{path.name}: {bare} fails under set -u on bash < 4.4 when empty"


def test_empty_array_check_catches_a_bare_expansion():
    assert _maybe_empty_arrays('local a=()\nread -r -a b <<< "$x"') == {"a", "b"}
    text = 'x=()\nrun "${x[@]}"\n'
    assert _maybe_empty_arrays(text) == {"x"} and "${x[@]}" in text


@pytest.mark.parametrize("name", sorted(p.name for p in SLURM.glob("*.sbatch")))
def test_sbatch_asks_for_memory_and_writes_its_output_under_results(name):
    header = [ln for ln in (SLURM / name).read_text().splitlines() if ln.startswith("#SBATCH")]
    # --mem=0: all of each node's memory, as the job has the node to itself (--exclusive)
    assert "#SBATCH --mem=0" in header and "#SBATCH --exclusive" in header
    (output,) = [ln for ln in header if ln.startswith("#SBATCH --output=")]
    assert output.startswith("#SBATCH --output=results/%x-")
    # Slurm does not create an output's folder: results/ is in the repository (and ignored
    # by git apart from its README and the committed result data in results/data), so
    # `sbatch` from the repository root finds it.
    assert (REPO / "results" / "README.md").is_file()
    for path, tracked in (("results/README.md", True), ("results/data/MANIFEST.json", True),
                          ("results/data/degree.json", True),
                          ("results/dssfn-single-1.out", False),
                          ("results/degree-12_3.h5", False)):
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO)
        assert ignored.returncode == (1 if tracked else 0), path


def test_template_datasets_are_what_the_readme_fetches(tmp_path):
    import re

    readme = (REPO / "README.md").read_text()
    cluster = readme[readme.index("## On a Slurm cluster"):]
    fetched = set(re.findall(r"dssfn-mpi data fetch ([\w ]+?)\s+#", cluster)[0].split())
    for name in ("single.sbatch", "degree_array.sbatch", "nodes.sbatch"):
        env = {"SLURM_NTASKS": "4"} if name == "nodes.sbatch" else {}
        trains = [a for a in map(_dssfn_args, _dry(name, tmp_path, **env))
                  if a is not None and a.command == "train"]
        assert trains and {a.dataset for a in trains} <= fetched, name
    # The README's cluster section installs the compiled kernels (the [fast] extra).
    assert re.search(r"pip install -e '\.\[[^\]]*fast[^\]]*\]'", cluster)


def test_doctor_gate_spans_two_nodes_only_when_the_job_has_them(tmp_path):
    one = [ln for ln in _dry("single.sbatch", tmp_path) if " doctor" in ln]
    two = [ln for ln in _dry("single.sbatch", tmp_path, SLURM_JOB_NUM_NODES="2") if " doctor" in ln]
    assert len(one) == len(two) == 1
    assert " -N 2 " not in one[0] and " -n 2 -N 2 " in two[0]


_FAKE_MODULE = """#!/bin/bash
echo "$*" >> "$FAKE_MODULE_LOG"
[[ $2 != missing/1 ]]
"""


@pytest.mark.parametrize(("modules", "loaded", "rc"), [
    ("gcc/13,openmpi/5.0 ucx", ["gcc/13", "openmpi/5.0", "ucx"], 0),
    (" intel-oneapi-mpi/2021 ", ["intel-oneapi-mpi/2021"], 0),
    ("gcc/13 missing/1 openmpi/5.0", ["gcc/13", "missing/1"], 2),
    (" , ", [], 0),
])
def test_every_module_of_dssfn_mpi_module_is_loaded_in_order(tmp_path, modules, loaded, rc):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "module").write_text(_FAKE_MODULE)
    (bin_dir / "module").chmod(0o755)
    log = tmp_path / "module.log"
    res, calls = _fake(tmp_path, "", "single.sbatch", SLURM_NTASKS="2", DEGREE="1",
                       DSSFN_MPI_MODULE=modules, FAKE_MODULE_LOG=str(log))
    assert res.returncode == rc, res.stderr
    assert (log.read_text().splitlines() if log.exists() else []) == [f"load {m}" for m in loaded]
    if rc:
        assert res.stderr.strip() == ("dssfn-slurm: error: 'module load missing/1' failed "
                                      f"(DSSFN_MPI_MODULE={modules})")
        assert calls == []  # nothing ran
    else:
        assert any(" train " in c for c in calls)


@pytest.mark.skipif(__import__("shutil").which("shellcheck") is None,
                    reason="shellcheck is not installed")
def test_shellcheck_finds_no_warning():
    res = subprocess.run(["shellcheck", "-x", "-S", "warning", *map(str, SCRIPTS)], cwd=REPO,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
