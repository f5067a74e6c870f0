"""The one-shot cost benchmark: its byte rule, its projections and its figure."""

from __future__ import annotations

import json

import pytest

from dssfn_mpi.analysis.network import NETWORKS, allreduce_seconds
from dssfn_mpi.bench.micro.oneshot import main, measure


def test_break_even_in_bytes_is_n_over_2q_and_times_are_projected(tmp_path):
    data = measure(widths=(20, 60), n_classes=4, nodes=8, repeat=1)
    for row in data["rows"]:
        n = row["n"]
        assert row["breakeven_bytes"] == pytest.approx((n + 1) / 8 + 1)  # (n + 1) / (2Q) + 1
        assert row["solve"] > 0 and row["factor"] > 0 and row["iteration"] > 0
        for name, net in NETWORKS.items():
            reduce = allreduce_seconds(net, 8, row["stats_bytes"], "openmpi")
            assert row[f"oneshot_seconds_{name}"] == pytest.approx(row["solve"] + reduce)
            assert row[f"breakeven_time_{name}"] == pytest.approx(
                max(row[f"oneshot_seconds_{name}"] - row["factor"], 0)
                / row[f"round_seconds_{name}"])


def test_command_writes_the_data_and_the_figure(tmp_path, capsys):
    out = tmp_path / "o.json"
    assert main(["--widths", "20,40", "--repeat", "1", "--out", str(out),
                 "--figure", str(tmp_path)]) == 0
    assert [r["n"] for r in json.loads(out.read_text())["rows"]] == [20, 40]
    assert (tmp_path / "oneshot_cost.png").stat().st_size > 0
    assert "break-even K" in capsys.readouterr().out
    (tmp_path / "oneshot_cost.png").unlink()
    assert main(["--from", str(out), "--figure", str(tmp_path)]) == 0  # no new measurement
    assert (tmp_path / "oneshot_cost.png").stat().st_size > 0
