"""The shape of the front pages: README's answer fits one screen, and the results page
stays a page a reader reads through."""

from __future__ import annotations

from pathlib import Path

from dssfn_mpi.bench.pages import mdtables

REPO = Path(__file__).resolve().parents[1]

#: README's answer block, lines between its markers, and the longest line of its prose.
ANSWER_LINES = 12
ANSWER_WIDTH = 280
#: The results page's length in lines.
BENCHMARKS_LINES = 300


def _answer_block(text: str) -> list[str]:
    lines = text.splitlines()
    start, end, _name, _view = next(b for b in mdtables.blocks(text)
                                    if (b[2], b[3]) == ("answer", "readme"))
    return lines[start + 1:end]


def test_readme_answer_fits_twelve_lines():
    block = _answer_block((REPO / "README.md").read_text())
    assert 0 < len(block) <= ANSWER_LINES, len(block)
    prose = [ln for ln in block if not ln.startswith("|")]
    assert all(len(ln) <= ANSWER_WIDTH for ln in prose), max(map(len, prose))
    # the verdict says which way the ratio reads, and the answer has a table of ratios
    assert "below 1, sync is faster" in block[0]
    assert sum(ln.startswith("| sync") for ln in block) >= 1


def test_a_longer_answer_is_caught():
    text = (REPO / "README.md").read_text()
    lines = text.splitlines()
    start = next(b[0] for b in mdtables.blocks(text) if b[2] == "answer")
    longer = lines[:start + 1] + ["- one bullet too many"] * ANSWER_LINES + lines[start + 1:]
    assert len(_answer_block("\n".join(longer))) > ANSWER_LINES


def test_readme_defaults_table_is_rendered_from_the_data_and_the_registry(tmp_path):
    import json

    from dssfn_mpi.algorithms import lookup

    data = REPO / "results" / "data"
    readme = (REPO / "README.md").read_text()
    assert ("decomposition.json", "defaults") in {(b[2], b[3]) for b in mdtables.blocks(readme)}
    table = mdtables.table_for(data, "decomposition.json", "defaults")
    rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.strip("|").split("|")]
            for ln in table.splitlines() if ln.startswith("| ") and "`" in ln}
    assert rows["async"][1:3] == ["`--eta`", f"{lookup('async').step_size:g}"]
    assert rows["sync, sync-graph"][1:3] == ["`--relax`", f"{lookup('sync').relax:g}"]
    # a changed count changes the table: async's default run on the ring, one more activation
    summary = json.loads((data / "decomposition.json").read_text())
    for r in summary["records"]:
        if (r["mode"], r.get("graph"), r.get("relax"), r["value"]) == \
                ("async", "ring", lookup("async").step_size, 20):
            r["activations_per_layer"][-1] += 1
    (tmp_path / "decomposition.json").write_text(json.dumps(summary))
    changed = mdtables.table_for(tmp_path, "decomposition.json", "defaults")
    old, new = rows["async"][4].split(" / ")[0], int(rows["async"][4].split(" / ")[0]) + 1
    assert f"| {old} / " not in changed.split("| async |")[1].split("\n")[0].split("|")[4]
    assert f" {new} / " in changed.split("| async |")[1].split("\n")[0]


def test_the_results_page_is_at_most_three_hundred_lines():
    lines = (REPO / "BENCHMARKS.md").read_text().splitlines()
    assert len(lines) <= BENCHMARKS_LINES, len(lines)
