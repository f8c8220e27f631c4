"""Fixtures of the sandbox tests: each backend (real Docker daemon, real bwrap). The local HTTP host they
share with the pen's tests (`local_host`) is tests/conftest.py's.

Every test that runs code takes `backend`, which is parametrized over docker and bwrap and
carries the matching marker; a backend that cannot run here is skipped locally and fails in CI.
The docker backend is the process-wide one, so its pool is shared by the whole session.
"""

from __future__ import annotations

import pytest

from slotrelay.sandbox import SandboxUnavailable, get_backend
from tests.support.sandbox_images import images_built
from tests.support.services import require_service


def _usable(name: str) -> str:
    if name == "docker":
        images_built()
    try:
        get_backend(name, lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the {name} sandbox cannot run python here: {missing.message}")
    return name


@pytest.fixture(
    params=[
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("bwrap", marks=pytest.mark.bwrap),
    ]
)
def backend(request: pytest.FixtureRequest) -> str:
    """The name of a backend that can run code here."""
    return _usable(request.param)


@pytest.fixture
def bwrap_ready() -> str:
    """The bwrap backend's name, once it is known to run here."""
    return _usable("bwrap")


@pytest.fixture
def docker_backend():
    """The process-wide docker backend (its pool included)."""
    return get_backend(_usable("docker"), lang="python")
