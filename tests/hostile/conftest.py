"""Fixtures of the hostile-clone tests: a cloned-looking repository (`tests.support.clones`), and anyio on
asyncio. The `slotrelay` command and the MCP client they run on it are `tests.support.slotrelay_cli`'s.
Files a test plants (links, records, FIFOs) are the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clones import make_clone


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A cloned-looking repository holding `PACKAGE` (tmp_path/clone); tmp_path itself is 'outside'."""
    return make_clone(tmp_path / "clone")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
