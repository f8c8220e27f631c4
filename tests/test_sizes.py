"""PSMR reads in small pieces: no function in slotrelay/psmr/ over 80 lines and no module over 800.

A function's length is that of its `def` (decorators excluded) to its last line; methods and nested
functions count on their own.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PSMR = Path(__file__).resolve().parents[1] / "slotrelay" / "psmr"
FUNCTION_MAX = 80
MODULE_MAX = 800


def _functions(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function of a module, nested ones and methods included."""

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert child.end_lineno is not None
                yield f"{prefix}{child.name}", child.end_lineno - child.lineno + 1
                yield from visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(tree, "")


def test_no_psmr_function_over_80_lines_nor_module_over_800() -> None:
    over = []
    for path in sorted(PSMR.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(PSMR).as_posix()
        lines = len(text.splitlines())
        if lines > MODULE_MAX:
            over.append(f"{where} ({lines} lines)")
        over += [f"{where}::{name} ({length} lines)"
                 for name, length in _functions(ast.parse(text, filename=str(path))) if length > FUNCTION_MAX]
    assert over == []
