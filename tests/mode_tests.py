"""Count the tests of a mode or update name in the package (AST), outside the algorithms
package and the registry: comparisons (==, !=, in, not in) with a mode or update name, a
``*MODES`` tuple or a variable called ``mode``/``update``, and ``startswith`` on a mode.
Code asks the mode's algorithm instead (``lookup(mode)``; in bench/, a label's,
``bench.variants.algorithm``).

Usage: python tests/mode_tests.py [PACKAGE_DIR]   (default: the package beside tests/)
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

NAMES = {"async", "sync", "sync-graph", "oneshot", "oneshot-graph", "central", "edge", "paper",
         "lockstep", "hood", "hood-lockstep", "hood-jacobi"}


def _is_mode(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and node.value in NAMES:
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_mode(e) for e in node.elts)
    if isinstance(node, ast.BinOp):
        return _is_mode(node.left) or _is_mode(node.right)
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name in ("mode", "update") or (isinstance(name, str) and name.endswith("MODES"))


def count(package: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith(("algorithms/",)):
            continue
        n = 0
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and any(
                    isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
                if any(_is_mode(x) for x in [node.left, *node.comparators]):
                    n += 1
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "startswith" and _is_mode(node.func.value)):
                n += 1
        if n:
            out[rel] = n
    return out


if __name__ == "__main__":
    pkg = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / "dssfn_mpi"
    found = count(pkg)
    for rel, n in sorted(found.items(), key=lambda kv: -kv[1]):
        print(f"{n:4d}  {rel}")
    print(f"{sum(found.values()):4d}  in {len(found)} files")
