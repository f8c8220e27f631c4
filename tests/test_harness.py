"""The benchmarks and the harness they share with the tests import nothing from `tests/`: what both use
lives in `harness/`, so a bench runs from a checkout whatever the tests' folders hold."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(REPO / "bench").glob("*.py"), *(REPO / "harness").glob("*.py")])


def reaches_into_tests(source: str) -> list[str]:
    """The imports of `tests` and the sys.path entries into the `tests` folder, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.path.insert", "sys.path.append"):
            if "tests" in ast.get_source_segment(source, node):
                found.append(f"line {node.lineno}: {ast.get_source_segment(source, node)}")
            continue
        else:
            continue
        found += [f"line {node.lineno}: imports {m}" for m in modules if m.split(".")[0] == "tests"]
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(REPO)))
def test_no_bench_nor_harness_module_reaches_into_tests(path: Path) -> None:
    assert reaches_into_tests(path.read_text()) == []


def test_the_harness_is_not_installed() -> None:
    import tomllib

    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert not any(pattern.startswith("harness") for pattern in include["include"])
