"""Every relative link and image in the repository's Markdown points at a file that exists and,
with a ``#fragment``, at a heading of that file (GitHub's anchor rules)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _markdown_files() -> list[Path]:
    skip = {"runs", "results", "node_modules", "build", "dist"}
    return sorted(
        p for p in REPO.rglob("*.md")
        if not any(part.startswith(".") or part in skip for part in p.relative_to(REPO).parts)
    )


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.strip().lower().replace("`", "")
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in _prose(path.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_slug_follows_github():
    assert _slug("Time to accuracy (`--stop eps`)") == "time-to-accuracy---stop-eps"
    assert _slug("Accuracy at the paper's size") == "accuracy-at-the-papers-size"
    assert _slug("7. When a layer ends (`--stop`)") == "7-when-a-layer-ends---stop"


def test_every_relative_link_resolves():
    files = _markdown_files()
    assert REPO / "README.md" in files
    broken = []
    for md in files:
        for line in _prose(md.read_text(encoding="utf-8")):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                path, _, fragment = target.partition("#")
                dest = (md.parent / path).resolve() if path else md
                where = f"{md.relative_to(REPO)}: {target}"
                if not dest.exists():
                    broken.append(f"{where} (no such file)")
                elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
                    broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)
