"""The package's modules form layers: no import cycle, also none through an import in a function."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dssfn_mpi"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("dssfn_mpi",) + path.relative_to(PACKAGE).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that importing ``name`` may run, at any depth of its code.

    Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` too; a module's
    own packages are already running when it is imported, so they do not count.
    """
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            targets += [base] + [f"{base}.{a.name}" for a in node.names]
    out = set()
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in known and prefix != name and not name.startswith(prefix + "."):
                out.add(prefix)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (depth-first search), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        state[m] = 2
        path.pop()
        return []

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return []


def test_no_import_cycle_in_the_package():
    modules = _modules()
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    assert "dssfn_mpi.algorithms.stoprule" in graph["dssfn_mpi.config"]  # the walk sees imports
    assert _cycle(graph) == []


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


#: The package's folders (and top-level modules) from the top down: each imports only from
#: those below it (docs/ARCHITECTURE.md, "Folders").
LAYERS = ("__main__", "cli", "bench", "sim", "run", "analysis", "config", "options",
          "algorithms", "drivers", "engines", "ssfn", "datasets", "graph", "mailbox", "runlog",
          "launch", "errors", "fileio", "fmt")


def _folder_arrows() -> set[tuple[str, str, str, str]]:
    """``(folder, imported folder, module, imported module)`` of every import that crosses
    folders."""
    modules = _modules()
    out = set()
    for name, path in modules.items():
        for target in _imports(name, path, set(modules)):
            a, b = name.split(".")[1], target.split(".")[1]
            if a != b:
                out.add((a, b, name, target))
    return out


def test_every_folder_imports_only_from_the_folders_below_it():
    arrows = _folder_arrows()
    folders = {a for a, *_ in arrows} | {b for _, b, *_ in arrows}
    assert folders <= set(LAYERS), f"add {sorted(folders - set(LAYERS))} to LAYERS"
    up = sorted(f"{m} -> {t}" for a, b, m, t in arrows if LAYERS.index(b) < LAYERS.index(a))
    assert up == []
    # the walk sees the arrows it checks: an algorithm names its driver kind
    assert ("algorithms", "drivers") in {(a, b) for a, b, *_ in arrows}
