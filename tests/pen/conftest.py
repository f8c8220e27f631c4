"""Fixtures of the pen's tests: the stub code model, a root folder, model settings, Docker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from slotrelay.pen.model_client import ModelSettings
from .stub_model import StubModel


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


def docker_available() -> bool:
    """Whether the Docker sandbox can run code here (daemon up, sandbox module present)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except Exception:
        return False
    try:
        from slotrelay.sandbox import run  # noqa: F401
    except ImportError:
        return False
    return True
