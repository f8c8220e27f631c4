"""The core stays free of Prefect and the MCP SDK (import-linter's contract in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_core_imports_neither_prefect_nor_mcp() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is a dev dependency: pip install -e '.[dev]'"
    done = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
