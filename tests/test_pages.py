"""The shape of the front pages: README's answer fits one screen, and the results page
stays a page a reader reads through."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dssfn_mpi.bench.pages import mdtables

REPO = Path(__file__).resolve().parents[1]

#: README's answer block, lines between its markers, and the longest line of its prose as
#: read (without its links' targets).
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
    # each line of prose at most ANSWER_WIDTH characters as read (a link's target left out)
    prose = [re.sub(r"\]\([^)]*\)", "]", ln) for ln in block if not ln.startswith("|")]
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


# ------------------------------------------------------------------ no hand-typed numbers

#: What a digit may stand in outside the rendered blocks: dates, versions, references to a
#: section, figure, table or equation (of the paper or of these pages) and names.
ALLOWED = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b"                                  # a date
    r"|\b(?:19|20)\d\d\b"                                     # a year
    r"|(?:Python|python3?|numpy|Open MPI|MPI|mpi4py|v|>=|version)\s*\d+(?:\.\d+)+"  # a version
    r"|\b(?:[Ff]ig\.|[Ff]igure|Table|[Ee]q\.|[Ss]ection|§)\s*\(?\d+\)?"  # a reference
    r"|\b[A-Za-z][A-Za-z_]*\d\w*"                             # a name: HDF5, mpi4py
)
#: Spans that are not prose: code blocks, code spans, HTML comments and link targets.
NOT_PROSE = re.compile(r"```.*?```|`[^`\n]*`|<!--.*?-->|\]\([^)\s]*\)", re.S)


def stray_digits(text: str) -> list[str]:
    """``"line N: ..."`` for each line with a digit outside the rendered blocks
    (``<!-- table|text: ... -->`` ... ``<!-- /... -->``) that is not in code, a date, a
    version or a section reference."""
    lines = text.splitlines()
    for start, end, _name, _view in reversed(mdtables.blocks(text)):
        lines[start + 1:end] = [""] * (end - start - 1)
    prose = NOT_PROSE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), "\n".join(lines))
    out = []
    for n, line in enumerate(prose.splitlines(), 1):
        if re.search(r"\d", ALLOWED.sub("", line)):
            out.append(f"line {n}: {text.splitlines()[n - 1].strip()[:100]}")
    return out


@pytest.mark.parametrize("page", ["README.md", "BENCHMARKS.md"])
def test_no_hand_typed_number_outside_the_rendered_blocks(page):
    stray = stray_digits((REPO / page).read_text())
    assert not stray, f"{page}: numbers not rendered from results/data:\n" + "\n".join(stray)


def test_a_planted_number_is_caught():
    text = (REPO / "BENCHMARKS.md").read_text()
    assert stray_digits(text + "\nasync takes 0.25 s here.\n") != stray_digits(text)
    assert stray_digits("`--nodes 20` on 2026-11-26, Python 3.11.7, fig. 2, eq. (7)\n") == []
    assert stray_digits("M = 20 nodes\n") == ["line 1: M = 20 nodes"]
    assert stray_digits("HDF5 and mpi4py, 2x faster\n") == ["line 1: HDF5 and mpi4py, 2x faster"]
    block = "<!-- text: answer readme -->\n0.5x\n<!-- /text -->\n"
    assert stray_digits(block) == []
    assert stray_digits("```\nmpirun -n 4\n```\n12 runs\n") == ["line 4: 12 runs"]


def test_the_relaxation_and_the_commands_are_read_from_the_manifest(tmp_path):
    import json
    import shutil

    from dssfn_mpi.bench.pages import answer, notes
    from dssfn_mpi.errors import UserError

    data = tmp_path / "data"
    shutil.copytree(REPO / "results" / "data", data)
    manifest = json.loads((data / "MANIFEST.json").read_text())
    for name in answer.TTE:
        entry = manifest["files"][f"{name}.json"]
        entry["command"] = entry["command"].replace(" --set relax=1", "") + " (a note)"
    for name in notes.FIXED:  # the fixed-K sweeps at another relaxation
        entry = manifest["files"][f"{name}.json"]
        entry["command"] = entry["command"].replace(" --set relax=1", "") + " --set relax=1.2"
    (data / "MANIFEST.json").write_text(json.dumps(manifest))
    assert answer.relaxation(data) == "the engines' default relaxations"
    fixed = notes.notes_markdown(data, "fixed")
    assert "every engine at relaxation 1.2" in fixed and fixed.count("--set relax=1.2") == 3
    assert "the engines' default relaxations" in answer.answer_markdown(data, "readme")
    block = notes.notes_markdown(data, "commands")
    assert block.startswith("```bash\n") and "relax" not in block and "(a note)" not in block
    assert len(block.splitlines()) == 2 + len(answer.TTE)
    manifest["files"]["noise.json"]["command"] = "dssfn-mpi bench noise --set relax=1.3"
    (data / "MANIFEST.json").write_text(json.dumps(manifest))
    assert answer.relaxation(data) == ("relaxation 1.3 for noise.json, the defaults for "
                                       "degree_tte.json, nodes_tte.json and table2_tte.json")
    for name in answer.TTE:
        manifest["files"][f"{name}.json"]["command"] += " --set relax=1.3"
    (data / "MANIFEST.json").write_text(json.dumps(manifest))
    assert answer.relaxation(data) == "relaxation 1.3"
    assert "--set relax=1.3" in notes.notes_markdown(data, "figure")
    with pytest.raises(UserError, match="no notes view"):
        notes.notes_markdown(data, "nonesuch")


def test_the_notes_claims_follow_the_data(tmp_path):
    import json
    import shutil

    from dssfn_mpi.bench.pages import answer, notes

    data = tmp_path / "data"
    shutil.copytree(REPO / "results" / "data", data)
    summary = json.loads((data / "degree_tte.json").read_text())
    live = [r for r in summary["records"] if r["kind"] == "live" and r.get("ok")]
    degrees = sorted({r["value"] for r in live if r["mode"] == "async"})
    for r in live:  # sync 10x slower at the sparsest degree, sync-graph 100x faster there
        if r["value"] == degrees[0] and r["mode"] in ("sync", "sync-graph"):
            r["time_at_eps"] *= 10 if r["mode"] == "sync" else 0.01
    (data / "degree_tte.json").write_text(json.dumps(summary))
    text = notes.notes_markdown(data, "degree").replace("\n", " ")
    assert f"no later than async at {len(degrees) - 1} of {len(degrees)} degrees" in text
    where = answer.facts(data)["sg_where"]
    assert not where.startswith(f"faster at d <= {degrees[0]:g}") and "slower" in where
    assert "sync, not async," not in answer.answer_markdown(data, "readme").splitlines()[0]


def test_the_reference_pages_numbers_follow_the_data(tmp_path):
    import json
    import shutil

    from dssfn_mpi.bench.pages import refnotes
    from dssfn_mpi.errors import UserError

    page = (REPO / "docs" / "ALGORITHMS.md").read_text()
    views = {b[3] for b in mdtables.blocks(page) if b[2] == "refnotes"}
    assert views == set(refnotes.REFNOTES)
    data = tmp_path / "data"
    shutil.copytree(REPO / "results" / "data", data)
    before = {v: refnotes.refnotes_markdown(data, v) for v in views}
    table2 = json.loads((data / "table2.json").read_text())
    for r in table2["records"]:  # every run's numbers moved
        for key in ("acc_mean", "rel_distance", "projected_seconds", "train_seconds"):
            if isinstance(r.get(key), float):
                r[key] *= 0.9 if r["mode"] == "sync" else 1.07
        r["projected_per_layer"] = [1.3 * t for t in r.get("projected_per_layer", [])]
    (data / "table2.json").write_text(json.dumps(table2))
    degree = json.loads((data / "degree.json").read_text())
    for r in degree["records"]:
        r["projected_seconds"] = 2 * r["projected_seconds"] if r["value"] == 2 else \
            r["projected_seconds"]
    (data / "degree.json").write_text(json.dumps(degree))
    for v in views:
        assert refnotes.refnotes_markdown(data, v) != before[v], v
    assert len(mdtables.differences(page, data)) == len(views)
    manifest = json.loads((data / "MANIFEST.json").read_text())
    manifest["files"]["degree.json"]["command"] = "dssfn-mpi bench degree --preset mid"
    (data / "MANIFEST.json").write_text(json.dumps(manifest))
    assert "the engines' default relaxations)" in \
        refnotes.refnotes_markdown(data, "sync-graph").replace("\n", " ")
    with pytest.raises(UserError, match="no refnotes view"):
        refnotes.refnotes_markdown(data, "nonesuch")
