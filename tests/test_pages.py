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
