"""The links benchmark's pure parts (dssfn_mpi.bench.studies.links and netns); the
measurement itself needs root and runs by hand (docs/REPLAY.md, "Validation on rate-capped
links")."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from dssfn_mpi.bench.studies import links, netns
from dssfn_mpi.errors import UserError


def test_parse_rates_and_labels():
    assert links.parse_rates("10gbit, 1gbit,100mbit") == [1e10, 1e9, 1e8]
    assert links.parse_rates("1.5gbit") == [1.5e9]
    assert [links.rate_label(r) for r in (1e10, 1e9, 1e8, 1.5e9, 5e3, 10)] == [
        "10gbit", "1gbit", "100mbit", "1.5gbit", "5kbit", "10bit"]
    for bad in ("", "10", "fast", "0mbit", "10gb", "1gbit,,"):
        with pytest.raises(UserError, match="--rates"):
            links.parse_rates(bad)


def test_tbf_command_caps_with_a_small_bucket():
    cmd = netns.tbf_command("ns", "veth0", 1e8)
    assert cmd[:4] == ["ip", "netns", "exec", "ns"]
    assert cmd[cmd.index("rate") + 1] == "100000000bit"
    assert int(cmd[cmd.index("burst") + 1]) == 3028           # two frames: 100 us is less
    assert int(netns.tbf_command("ns", "v", 1e10)[cmd.index("burst") + 1]) == 125_000


def test_link_alpha_is_the_one_double_put(tmp_path):
    path = tmp_path / "rma.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("rma/x")
        g["bytes"] = [8, 48576]
        g["put/in_mpi"] = [[1e-4, 3e-4, 2e-4], [4e-3, 4e-3, 4e-3]]
    assert links.link_alpha(path) == pytest.approx(2e-4)


def test_table_from_a_folder(tmp_path):
    with pytest.raises(UserError, match="runs.json"):
        links.link_rows(tmp_path)
    (tmp_path / "runs.json").write_text(json.dumps({"runs": [
        {"rate": 1e8, "mode": "sync", "file": "sync-100mbit-0.h5", "rma": "rma-100mbit-0.h5",
         "load": "0.5 / 0.6"}]}))
    assert links.link_rows(tmp_path) == []  # its files are missing: no row, no crash
    row = links.LinkRow(1e8, "sync", "this run", 1.2e-4, 2.0, 1.8, 1.5, 1.65, 1.04, "0.5 / 0.6",
                        8.1e-3, 8.0e-3)
    assert row.error == pytest.approx(-0.1) and row.solve_error == pytest.approx(0.1)
    table = links.links_markdown([row]).splitlines()
    assert table[2] == ("| 100mbit | sync | this run | 120 | 2.000 | 1.800 | -10.0 % | 1.500 | "
                        "1.650 | +10.0 % | 8.100 / 8.000 | 1.04 | 0.5 / 0.6 |")


def test_cpu_stretch_is_wall_over_cpu_of_the_compute_phases():
    class Run:
        trace_attrs = {"phases": ["features", "penalty", "parity_wait", "factor"]}
        trace = {"phase_start": np.array([[[0.0, 1.0, 5.0, 5.0]]]),
                 "phase_end": np.array([[[1.0, 5.0, 5.0, 8.0]]]),
                 "phase_cpu": np.array([[[0.5, 1.0, 0.0, 1.5]]])}
    assert links.cpu_stretch(Run()) == pytest.approx(4.0 / 2.0)  # (1 + 3) / (0.5 + 1.5)


def test_comm_seconds_measured_against_the_model():
    from dssfn_mpi.analysis.network import Network

    class Run:
        nodes = 2
        attrs = {"mode": "sync", "mpi_library": "Open MPI v5.0.11"}
        trace = {"end": np.array([[[9.0, 9.0], [9.0, 9.0]], [[3.0, 5.0], [4.0, 7.0]]]),
                 "comm_start": np.array([[[8.0, 8.0], [8.0, 8.0]], [[2.5, 4.0], [3.0, 6.5]]]),
                 "message_bytes": np.array([8, 100])}
    net = Network("t", 0.1, 100.0)
    measured, model = links.comm_seconds(Run(), net)
    assert measured == pytest.approx(0.75)          # median of 0.5, 1, 1, 0.5 (last layer)
    assert model == pytest.approx(2 * (0.1 + 1.0))  # Open MPI binomial at M = 2
    Run.attrs = {"mode": "async"}
    assert links.comm_seconds(Run(), net)[1] == pytest.approx(1.1)


def test_solve_seconds_spans_first_start_to_last_end():
    class Run:
        trace = {"start": np.array([[[1.0, 2.0], [1.5, 2.5]]]),
                 "end": np.array([[[2.0, 4.0], [2.5, 3.0]]])}
    assert links.solve_seconds(Run()) == pytest.approx(3.0)


def test_refuses_clearly_without_root(monkeypatch, capsys):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert links.main(["run", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs root" in err


def test_refuses_clearly_without_ip(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: None if tool == "ip" else tool)
    assert links.main(["run", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("dssfn_mpi.bench.studies.links: error: the links benchmark needs ip on PATH "
                   "(iproute2, util-linux)")
    assert not (tmp_path / "x").exists()
