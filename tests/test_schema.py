"""The one definition of the run log's per-layer fields and everything derived from it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from dssfn_mpi import runlog
from dssfn_mpi.engines.base import SolveStats
from dssfn_mpi.run.checkpoint import RankCheckpoint
from dssfn_mpi.runlog import schema

DOC = Path(__file__).resolve().parents[1] / "docs" / "RUNLOG.md"


def _doc_table(heading: str) -> list[str]:
    """The lines of the first markdown table after ``heading`` in docs/RUNLOG.md."""
    text = DOC.read_text()
    start = text.index(heading)
    lines = text[start:].splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    table = []
    for ln in lines[first:]:
        if not ln.startswith("|"):
            break
        table.append(ln)
    return table


def _cells(line: str) -> list[str]:
    # Split on unescaped pipes only: descriptions contain \|\|O\|\|.
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def test_docs_layer_table_is_the_schema() -> None:
    table = _doc_table("### `/layers`")
    documented = {}
    for line in table[2:]:
        name, dtype, unit, source, _meaning = _cells(line)
        documented[name.strip("`")] = (dtype, unit, source)
    expected = {f.name: (f.dtype.name, f.unit, f.source) for f in schema.LAYER_SCHEMA}
    assert set(documented) - set(expected) == set(), "documented fields that do not exist"
    assert set(expected) - set(documented) == set(), "fields missing from docs/RUNLOG.md"
    assert documented == expected
    # The whole table, descriptions included, is generated from the schema.
    assert "\n".join(table) == schema.markdown_table(), "run python -m dssfn_mpi.runlog.schema"


def test_docs_rank_and_attribute_tables_match_runlog() -> None:
    ranks = {_cells(ln)[0].strip("`") for ln in _doc_table("### `/ranks`")[2:]}
    assert ranks == set(runlog.RANK_FIELDS)
    attrs = {_cells(ln)[0].strip("`") for ln in _doc_table("### Root attributes")[2:]}
    assert attrs == set(runlog.ATTRIBUTES)


def test_schema_is_well_formed_and_runlog_tables_derive_from_it() -> None:
    names = [f.name for f in schema.LAYER_SCHEMA]
    assert len(names) == len(set(names))
    assert {f.source for f in schema.LAYER_SCHEMA} == set(schema.SOURCES)
    assert {f.dtype for f in schema.LAYER_SCHEMA} == {np.dtype(np.float64), np.dtype(np.int64)}
    assert all(f.unit and f.description for f in schema.LAYER_SCHEMA)
    assert runlog.LAYER_FIELDS == {f.name: (f.dtype, f.description) for f in schema.LAYER_SCHEMA}
    assert runlog.LAYER_UNITS == {f.name: f.unit for f in schema.LAYER_SCHEMA}
    assert schema.names() == tuple(names)
    assert set(schema.names(schema.ENGINE, schema.LOOP, schema.CHECK)) == set(names)
    with pytest.raises(ValueError, match="unknown source"):
        schema.names("nobody")


def test_solve_stats_are_the_engine_fields() -> None:
    fields = dataclasses.fields(SolveStats)
    assert {f.name for f in fields} == set(schema.names(schema.ENGINE))
    # Python types agree with the stored dtypes, and the defaults with "not measured" or 0.
    for f in fields:
        want = schema.layer_field(f.name)
        assert f.type == ("int" if want.dtype == np.int64 else "float"), f.name
        if f.default is not dataclasses.MISSING:
            assert f.default == 0 or f.default == want.missing or (
                np.isnan(f.default) and np.isnan(want.missing)
            ), f.name


def test_checkpoint_stores_the_schema_fields_with_their_dtypes(tmp_path: Path) -> None:
    rows = schema.set_fields(schema.blank_rows(2), activations=[-1, 3], gamma=[np.nan, 3])
    checks = {name: [np.arange(3.0), np.ones(3)] for name in schema.names(schema.CHECK)}
    ckpt = RankCheckpoint(tmp_path / "run.h5", 0)
    ckpt.save([np.zeros((2, 2)), np.ones((2, 2))], rows, checks)
    with np.load(ckpt.path) as z:
        for name in schema.ROW_FIELDS:
            assert z[f"stat_{name}"].dtype == schema.layer_field(name).dtype, name
    Os, back_rows, back = ckpt.load()
    assert len(Os) == 2 and back_rows.dtype == schema.ROW_DTYPE and set(back) == set(checks)
    assert list(back_rows["activations"]) == [-1, 3] and np.isnan(back_rows["gamma"][0])
    again, checks_again, q = ckpt.load_rows()  # without the solutions
    assert q == 2 and all(np.array_equal(again[k], back_rows[k], equal_nan=True)
                          for k in schema.ROW_FIELDS)
    assert set(checks_again) == set(checks)


def test_checkpoint_without_a_newer_field_reads_it_as_not_measured(tmp_path: Path) -> None:
    rows = schema.set_fields(schema.blank_rows(2), **{
        name: [1, 2] for name in schema.names(schema.ENGINE, schema.LOOP)})
    ckpt = RankCheckpoint(tmp_path / "run.h5", 1)
    ckpt.save([np.zeros((1, 1))] * 2, rows, {})
    with np.load(ckpt.path) as z:  # as written before mix_rounds existed
        kept = {k: z[k] for k in z.files if k != "stat_mix_rounds"}
    np.savez(ckpt.path, **kept)
    _, back, checks = ckpt.load()
    assert list(back["mix_rounds"]) == [-1, -1] and list(back["puts"]) == [1, 2]
    assert checks == {}


def test_rows_are_one_record_type_whose_fields_are_the_layers() -> None:
    """A row is built once (blank, then its fields set); a run's rows ``(L, M)`` are the
    ``/layers`` arrays as they are, without a conversion."""
    row = schema.blank_rows(())
    assert row.shape == () and set(row.dtype.names) == set(schema.ROW_FIELDS)
    for f in schema.LAYER_SCHEMA:
        if f.source != schema.CHECK:
            assert row.dtype[f.name] == f.dtype
            assert row[f.name] == f.missing or np.isnan(f.missing), f.name
    schema.set_fields(row, activations=7, gamma=0.5)
    with pytest.raises(ValueError):
        schema.set_fields(row, rel_distance=1.0)  # a check field is no row field
    rows = schema.blank_rows((2, 3))
    rows[1, 2] = row
    layers = schema.layer_arrays(rows, {"rel_distance": [np.ones(3), np.zeros(3)]})
    assert layers["activations"][1, 2] == 7 and layers["activations"][0, 0] == -1
    assert np.shares_memory(layers["gamma"], rows)
    assert layers["rel_distance"].shape == (2, 3) and "lambda_star" not in layers


def test_docs_trace_tables_are_the_trace_schema() -> None:
    for group in (schema.TRACE, schema.TRAJECTORY):
        table = _doc_table(f"### `/{group}`")
        assert "\n".join(table) == schema.trace_markdown_table(group), (
            "run python -m dssfn_mpi.runlog.schema")
    attrs = _doc_table("Attributes of `/trace`")
    assert "\n".join(attrs) == schema.trace_attributes_table()
    assert all(f.unit and f.description for f in schema.TRACE_SCHEMA)
    assert {f.group for f in schema.TRACE_SCHEMA} == {schema.TRACE, schema.TRAJECTORY}
