"""Every ``dssfn-mpi`` command the docs show parses with the real parser, and its settings
pass the checks that need no data: every option exists, required options are there, values
lie in range.

Commands are the lines of the pages' code blocks (continuation lines joined) and the inline
code spans that give options; the placeholders the pages use (``M``, ``MODE``, ...) stand
for a value, ``[...]`` for optional options and ``...`` for elided ones. HISTORY.md records
commands of code that is gone and is not read.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from dssfn_mpi.cli import build_parser
from dssfn_mpi.config import TrainConfig, config_from_args
from dssfn_mpi.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "BENCHMARKS.md", "benchmarks/README.md", "results/README.md",
         "slurm/README.md", *sorted(p.relative_to(ROOT).as_posix()
                                    for p in (ROOT / "docs").glob("*.md")
                                    if p.name != "HISTORY.md")]
#: The pages' placeholders and a value each stands for.
PLACEHOLDERS = {"M": "20", "D": "2", "MODE": "async", "S": "4", "F": "10", "K": "100",
                "N": "4", "E": "1e-2", "eps:E": "eps:1e-2", "{gram,identity}": "gram",
                "BENCH": "degree", "NAME": "degree"}
#: Options whose settings come from a file (a config, a checkpointed or a traced run).
FROM_A_FILE = ("config", "resume", "schedule")
_PROG = re.compile(r"(?:^|[\s(])(?:dssfn-mpi|python -m dssfn_mpi)\s+(.*)")
_MPIRUN = re.compile(r"mpirun\s+(?:-n|-np)\s+(\d+)")


def _lines(text: str) -> list[str]:
    """The page's command lines: code-block lines, and inline spans with an option."""
    out = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S):
        out += re.sub(r"\\\n\s*", " ", block).splitlines()
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    out += [span for span in re.findall(r"`([^`\n]+)`", prose) if " --" in span]
    return [line for line in out if _is_command(line)]


def _is_command(line: str) -> bool:
    """A command line, not a program's output that names one ("... with: dssfn-mpi ...")."""
    found = _PROG.search(line)
    return found is not None and ": " not in line[:found.start()]


def _argv(line: str) -> list[str]:
    """The command line after the program name, placeholders filled in."""
    rest = _PROG.search(line).group(1)
    rest = re.split(r"\s+(?:\|\||\||&&|;|#)\s*|\s+\d?>", rest)[0]
    rest = re.sub(r"\[[^\]]*\]", "", rest).replace("...", "")
    return [PLACEHOLDERS.get(tok, tok) for tok in shlex.split(rest)]


def _cases() -> list[tuple[str, str]]:
    return [(page, line.strip()) for page in PAGES if (ROOT / page).is_file()
            for line in _lines((ROOT / page).read_text(encoding="utf-8"))]


CASES = _cases()


def test_the_docs_show_commands():
    assert len(CASES) > 60 and {p for p, _ in CASES} >= {"README.md", "BENCHMARKS.md"}


@pytest.mark.parametrize("page, line", CASES, ids=[f"{p}:{i}" for i, (p, _) in
                                                     enumerate(CASES)])
def test_a_documented_command_parses_and_its_settings_are_valid(page, line):
    argv = _argv(line)
    if not argv or argv[0].startswith("<"):
        pytest.skip("a command's name only")
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0:  # --help
            return
        raise AssertionError(f"{page}: {line!r} does not parse") from None
    if argv[0] not in ("train", "simulate") or any(getattr(args, key, None)
                                                   for key in FROM_A_FILE):
        return
    world = int(_MPIRUN.search(line).group(1)) if _MPIRUN.search(line) else 1
    world = args.nodes or world if argv[0] == "simulate" else world
    try:
        TrainConfig(**config_from_args(args)).validate(world)
    except UserError as exc:
        raise AssertionError(f"{page}: {line!r}: {exc}") from None
