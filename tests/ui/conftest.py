"""Fixtures of the browser tests: the tools a browser test needs, or a skip (a failure in CI)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.browser_session import NODE
from tests.support.services import require_service

HERE = Path(__file__).parent
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def browser_tools() -> None:
    """Chromium, Node and playwright-core, or a skip (a failure in CI) before any run starts."""
    require_service(
        shutil.which(CHROMIUM) is not None and NODE.exists() and (
            HERE / "node_modules" / "playwright-core").is_dir(),
        "the browser test needs /usr/bin/chromium (apt chromium), tests/mcp's Node and tests/ui/node_modules "
        "(run scripts/bootstrap.sh)",
    )

