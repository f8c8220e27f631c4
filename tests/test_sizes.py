"""PSMR reads in small pieces: no function in slotrelay/psmr/ over 80 lines and no module over 800.

A function's length is that of its `def` (decorators excluded) to its last line. What is still over is
named in `STILL_OVER` with the work that will bring it under, so the list says what remains; an entry
that is no longer over fails too, so the list only shrinks. Entries name a module by its file name,
which holds wherever PSMR's sub-package layout puts it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PSMR = Path(__file__).resolve().parents[1] / "slotrelay" / "psmr"
FUNCTION_MAX = 80
MODULE_MAX = 800

# (file name, qualified name or None for the module itself): why it is still over.
STILL_OVER: dict[tuple[str, str | None], str] = {
    ("extract.py", None): "the fast pass's extractor, split with the resolver (issue 35)",
    ("extract.py", "extract"): "the fast pass's entry, split with the resolver (issue 35)",
}


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


def _over() -> dict[tuple[str, str | None], int]:
    """Every module and function of PSMR over its limit, with its lines."""
    over: dict[tuple[str, str | None], int] = {}
    for path in sorted(PSMR.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MODULE_MAX:
            over[(path.name, None)] = lines
        for name, length in _functions(ast.parse(text, filename=str(path))):
            if length > FUNCTION_MAX:
                over[(path.name, name)] = length
    return over


def _describe(entries: set[tuple[str, str | None]], over: dict[tuple[str, str | None], int]) -> list[str]:
    return sorted(f"{file}{'' if name is None else '::' + name} ({over.get((file, name), '-')} lines)"
                  for file, name in entries)


def test_psmr_file_names_are_unique() -> None:
    names = [path.name for path in PSMR.rglob("*.py") if path.name != "__init__.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_no_psmr_function_over_80_lines_nor_module_over_800() -> None:
    over = _over()
    assert _describe(set(over) - set(STILL_OVER), over) == []


def test_every_entry_still_over_is_still_over() -> None:
    over = _over()
    assert _describe(set(STILL_OVER) - set(over), over) == []
