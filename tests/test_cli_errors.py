"""Every user mistake ends with one line on stderr, status 2, no traceback, no hang, no file."""

from __future__ import annotations

import json

import pytest
from mpitools import run_cli

pytestmark = [pytest.mark.mpirun, pytest.mark.timeout(120)]


def _assert_user_error(res, *fragments: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr)  # EXIT_USER_ERROR, not just != 0
    assert "Traceback" not in res.stderr, res.stderr
    assert "usage:" not in res.stderr, res.stderr
    ours = [line for line in res.stderr.splitlines() if line.startswith("dssfn-mpi: error:")]
    assert len(ours) == 1, res.stderr  # one rank speaks, once
    for fragment in fragments:
        assert fragment in ours[0], ours[0]


SMALL = ("--dataset", "synthetic", "--layers", "1", "--hidden", "30", "--iters", "5")


#: One bad setting for each stage that refuses settings under mpirun, in the order a run
#: meets them: argparse, the settings (before MPI starts), their check against the rank
#: count, the graph, the layer width, the dataset, its partition, the per-host memory.
STAGES = [
    (("--iters", "abc"), ("--iters", "invalid int", "--help")),
    (("--gamma", "-1"), ("--gamma", "positive")),
    (("--eta", "3"), ("--eta", "(0, 2)")),
    (("--degree", "7"), ("degree",)),
    (("--hidden", "6"), ("--hidden 6", "2Q")),
    (("--dataset", "imagenet"), ("imagenet",)),
    (("--partition", "dirichlet:-1"), ("dirichlet",)),
    # n x n statistics that no host holds: refused before the engine is built
    (("--mode", "oneshot", "--hidden", "300000"), ("--mode oneshot", "300000 x 300000",
                                                   "available", "lower --hidden")),
]

#: Refused at the first four stages, checked in this process (:func:`_refusal`) with the
#: calls the ranks make: the same message as under mpirun.
EARLY = [
    (("--gamma", "abc"), ("--gamma",)),
    (("--iters", "0"), ("--iters",)),
    (("--layers", "-1"), ("--layers",)),
    (("--norm-bound", "0"), ("--norm-bound",)),
    (("--mode", "magic"), ("--mode",)),
    (("--topology", "exponential", "--degree", "2"),
     ("an exponential graph on 2 nodes has degree 1, not 2",)),
    (("--topology", "random-regular", "--degree", "2"),
     ("degree 2 is out of range for random-regular on 2 nodes",)),
    (("--slow", "9:2"), ("--slow",)),
    (("--slow", "1:0.5"), ("FACTOR",)),
    (("--mode", "central"), ("one process",)),
    (("--mode", "oneshot-graph", "--mix-tol", "2"), ("--mix-tol", "(0, 1)")),
    # the one-sided driver's options, where the mode's driver has none
    (("--mode", "lockstep", "--max-lead", "0"),
     ("--max-lead applies to the one-sided modes (async, hood)", "--mode lockstep")),
    (("--mode", "hood-jacobi", "--rma", "put"), ("--rma", "--mode hood-jacobi")),
    (("--mode", "sync", "--max-lead", "-1"), ("--max-lead", "--mode sync")),
    # argparse's own errors: one line too, not the usage block
    (("--frobnicate",), ("unrecognized arguments: --frobnicate",)),
]


@pytest.mark.parametrize("args, fragments", STAGES)
def test_bad_settings_under_mpirun(tmp_path, args, fragments):
    out = tmp_path / "run.h5"
    res = run_cli(2, "train", *SMALL, "--out", str(out), *args)
    _assert_user_error(res, *fragments)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def _refusal(capsys, args: tuple[str, ...], size: int = 2) -> str:
    """The one error line ``train ARGS`` on ``size`` ranks stops with, from the calls every
    rank makes before any MPI work (parse, settings, their check, the graph); checked to be
    one line with no traceback."""
    from dssfn_mpi.cli import _train_config, build_parser
    from dssfn_mpi.errors import UserError
    from dssfn_mpi.run.runstate import make_graph

    try:
        cfg = _train_config(build_parser().parse_args(["train", *SMALL, *args]))
        cfg.validate(size)
        make_graph(cfg, size)
    except SystemExit as exc:
        assert exc.code == 2
        line = capsys.readouterr().err.strip()
    except UserError as exc:
        line = f"dssfn-mpi: error: {exc}"
    else:
        raise AssertionError(f"train {' '.join(args)} was not refused")
    assert "\n" not in line and "Traceback" not in line, line
    return line


@pytest.mark.parametrize("args, fragments", EARLY)
def test_bad_settings_are_refused_before_any_mpi_work(capsys, args, fragments):
    line = _refusal(capsys, args)
    for fragment in fragments:
        assert fragment in line, line


# The graph stage in this process (``--degree 7`` above shows it under mpirun).
def test_random_regular_with_an_odd_degree_sum_is_refused(capsys):
    line = _refusal(capsys, ("--topology", "random-regular", "--degree", "3"), 5)
    assert "random-regular graph needs n_nodes*degree even (got 5*3=15)" in line


def test_rank_count_must_match_edge_list(capsys, tmp_path):
    edges = tmp_path / "g.txt"
    edges.write_text("0 1\n1 2\n2 3\n3 0\n")
    line = _refusal(capsys, ("--topology", "file", "--edges", str(edges)), 3)
    assert "4 nodes but 3 ranks" in line and "mpirun -n 4" in line


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("0 1\n1 1\n2 0\n", "line 2"),  # self-loop
        ("0 1\n1 2\n0 1\n", "line 3"),  # duplicate edge
        ("0 1\n2 2\n", "line 2"),  # self-loop and node 2 cut off
        ("0 1\n1 x\n", "line 2"),  # malformed
    ],
)
def test_bad_edge_list(capsys, tmp_path, text, fragment):
    edges = tmp_path / "g.txt"
    edges.write_text(text)
    line = _refusal(capsys, ("--topology", "file", "--edges", str(edges)), 3)
    assert "g.txt" in line and fragment in line, line


def test_disconnected_edge_list(capsys, tmp_path):
    edges = tmp_path / "g.txt"
    edges.write_text("0 1\n2 3\n")
    assert "connected" in _refusal(capsys, ("--topology", "file", "--edges", str(edges)), 4)


def test_corrupted_dataset_file(tmp_path):
    from dssfn_mpi.datasets import find_data_dir

    src = find_data_dir()
    if src is None or not (src / "satimage" / "sat.trn").exists():
        pytest.skip("satimage files not found; set DSSFN_DATA_DIR")
    d = tmp_path / "satimage"
    d.mkdir()
    text = (src / "satimage" / "sat.trn").read_text()
    (d / "sat.trn").write_text(text[: len(text) // 2])  # truncated
    (d / "sat.tst").write_text((src / "satimage" / "sat.tst").read_text())
    res = run_cli(2, "train", "--dataset", "satimage", "--data-dir", str(tmp_path))
    _assert_user_error(res, "sat.trn", "sha256")


def test_missing_dataset_names_file_and_fix(tmp_path):
    empty = tmp_path / "nodata"
    empty.mkdir()
    res = run_cli(3, "train", "--dataset", "satimage", "--data-dir", str(empty), "--iters", "2")
    _assert_user_error(res, "sat.trn", "--data-dir")


def test_unwritable_output(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    res = run_cli(3, "train", *SMALL, "--out", str(blocker / "run.h5"))
    _assert_user_error(res, "afile", "--out")
    res = run_cli(2, "train", *SMALL, "--out", str(tmp_path / "missing" / "run.h5"))
    _assert_user_error(res, "missing")


def test_existing_output_needs_overwrite(tmp_path):
    out = tmp_path / "run.h5"
    out.write_bytes(b"precious")
    res = run_cli(2, "train", *SMALL, "--out", str(out))
    _assert_user_error(res, "--overwrite")
    assert out.read_bytes() == b"precious"


def test_nan_in_data_is_refused(tmp_path):
    from dssfn_mpi.datasets import find_data_dir

    src = find_data_dir()
    if src is None or not (src / "vowel" / "vowel.train").exists():
        pytest.skip("vowel files not found; set DSSFN_DATA_DIR")
    d = tmp_path / "data" / "vowel"
    d.mkdir(parents=True)
    lines = (src / "vowel" / "vowel.train").read_text().splitlines()
    fields = lines[5].split(",")
    fields[3] = "NaN"
    lines[5] = ",".join(fields)
    (d / "vowel.train").write_text("\n".join(lines) + "\n")
    (d / "vowel.test").write_text((src / "vowel" / "vowel.test").read_text())
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"dataset_options": {"verify": False}}))
    out = tmp_path / "run.h5"
    res = run_cli(2, "train", "--dataset", "vowel", "--data-dir", str(tmp_path / "data"),
                  "--config", str(cfg), "--iters", "2", "--out", str(out))
    _assert_user_error(res, "vowel.train")
    assert not out.exists()


@pytest.mark.parametrize(
    "content, fragment",
    [
        ({"gama": 1.0}, "unknown key"),
        ({"iters": "many"}, "iters"),
        ({"check": "yes"}, "check"),
    ],
)
def test_bad_config_file(tmp_path, content, fragment):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(content))
    res = run_cli(None, "train", "--config", str(cfg))
    _assert_user_error(res, fragment)


def test_report_of_missing_file(tmp_path):
    res = run_cli(None, "report", str(tmp_path / "nope.h5"))
    _assert_user_error(res, "nope.h5")
