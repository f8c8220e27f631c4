"""Fixtures of the pen's tests: model settings on the stub code model, and a root folder. The stub model
(`stub`), the sandbox backend (`sandbox_backend`) and the local HTTP host (`local_host`), which other
folders' tests use too, are tests/conftest.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.stub_model import StubModel
from slotrelay.pen.model_client import ModelSettings


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
