"""Fixtures of the pen's tests: the stub code model, a root folder, model settings, Docker, a local host."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.stub_model import StubModel
from slotrelay.pen.model_client import ModelSettings

# The sandbox tests' HTTP server on 127.0.0.1, for the pen's network allow-list test.
from tests.sandbox.conftest import local_host  # noqa: F401
from tests.support.services import require_service


@pytest.fixture(scope="session")
def stub_server() -> Iterator[StubModel]:
    with StubModel() as stub:
        yield stub


@pytest.fixture
def stub(stub_server: StubModel) -> Iterator[StubModel]:
    stub_server.reset()
    yield stub_server
    stub_server.reset()


@pytest.fixture
def model(stub: StubModel) -> ModelSettings:
    return ModelSettings(
        base_url=stub.base_url, model="stub-coder", api_key="sk-test", timeout_s=5, max_retries=2
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


@pytest.fixture(scope="session")
def sandbox_backend() -> str:
    """The sandbox backend the pen's end-to-end tests run on: the real Docker one.

    `SLOTRELAY_PEN_TEST_BACKEND=bwrap` runs them on bwrap instead on a machine without Docker.
    """
    from slotrelay.sandbox import SandboxUnavailable, get_backend

    name = os.environ.get("SLOTRELAY_PEN_TEST_BACKEND", "docker")
    try:
        get_backend(name, lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the {name} sandbox cannot run python here: {missing.message}")
    return name
