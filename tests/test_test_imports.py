"""A test module and a conftest are not libraries: what tests share lives in `tests/support` (and what
bench/ shares with them in `harness/`), imported by name. Importing a test module runs its module-level
set-up and couples two files' tests; a conftest is pytest's fixture file, loaded by pytest by folder."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Trees that are the tests' material, not tests: real packages copied unmodified (tests/vendor) and the
# code PSMR's tests analyse (tests/psmr/corpus).
SKIPPED = ("tests/vendor/", "tests/psmr/corpus/")


def python_files() -> list[str]:
    """The Python files git tracks under tests/, bench/ and harness/ (not node_modules), but `SKIPPED`."""
    listed = subprocess.run(["git", "ls-files", "--", "tests/*.py", "bench/*.py", "harness/*.py"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()
    return [name for name in listed if not name.startswith(SKIPPED)]


def _is_test_file(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return module.split(".")[0] == "tests" and (last == "conftest" or last.startswith("test_"))


def module_name(path: str) -> str:
    """The dotted name of the file at `path` (`tests/sensor/test_up.py` -> `tests.sensor.test_up`); a
    package's `__init__.py` keeps its `__init__`, so that its package is what comes before the last dot."""
    return path.removesuffix(".py").replace("/", ".")


def library_imports(source: str, module: str) -> list[str]:
    """The test modules and conftests that `source`, the code of the module named `module`
    (`tests.sensor.test_up`), imports from (`tests.chain.conftest`, ...); a relative import is read
    against `module`'s package (`from .test_x import y` in `tests.sensor.test_up`: `tests.sensor.test_x`)."""
    package = module.split(".")[:-1]
    found: list[str] = []
    for statement in ast.walk(ast.parse(source)):
        if isinstance(statement, ast.Import):
            found += [alias.name for alias in statement.names if _is_test_file(alias.name)]
        elif isinstance(statement, ast.ImportFrom):
            base = ".".join(package[:len(package) - statement.level + 1]) if statement.level else ""
            named = ".".join(part for part in (base, statement.module) if part)
            if _is_test_file(named):
                found.append(named)
            else:
                found += [f"{named}.{alias.name}" for alias in statement.names
                          if _is_test_file(f"{named}.{alias.name}")]
    return found


def test_library_imports_finds_a_conftest_and_a_test_module_however_imported() -> None:
    # Written with placeholders so that a grep of the suite for such imports does not find this sample.
    source = (
        "from {t}.conftest import require_service\n"
        "from {t}.chain.conftest import node\n"
        "import {t}.mcp.test_tools\n"
        "from {t}.pen import test_chain_node\n"
        "def later():\n"
        "    from {t}.chain.test_arbitration import decide\n"
        "from {t}.support.waiting import wait_until\n"
        "from {t}.ui.browser_session import BrowserSession\n"
        "from harness.ports import free_port\n"
        "from {d}test_deployment_path import ROOT\n"
        "from {d} import sensor_proc, test_routing\n"
        "from {d}{d}chain.conftest import node\n"
        "from {d}{d} import conftest\n"
        "from {d}sensor_proc import main\n"
        "from {d}{d}support.waiting import wait_until\n"
    ).format(t="tests", d=".")
    assert library_imports(source, "tests.sensor.test_sample") == [
        "tests.conftest", "tests.chain.conftest", "tests.mcp.test_tools", "tests.pen.test_chain_node",
        "tests.sensor.test_deployment_path", "tests.sensor.test_routing", "tests.chain.conftest",
        "tests.conftest", "tests.chain.test_arbitration",
    ]
    # A package's own relative imports are read against the package itself.
    in_package = module_name("tests/sensor/__init__.py")
    assert library_imports("from {d}test_x import y\n".format(d="."), in_package) == ["tests.sensor.test_x"]


def test_no_test_module_or_conftest_is_imported_as_a_library() -> None:
    files = python_files()
    assert "tests/conftest.py" in files and "harness/ports.py" in files
    offenders = [
        f"{name}: {module}"
        for name in files
        for module in library_imports((REPO / name).read_text(encoding="utf-8"), module_name(name))
    ]
    assert not offenders, "\n".join(offenders)
