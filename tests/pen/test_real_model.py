"""Opt-in: the pen against a real code model (e.g. Ollama or llama.cpp's server with a small coder model).

Set SLOTRELAY_PEN_REAL_MODEL_URL (…/v1) and SLOTRELAY_PEN_REAL_MODEL_NAME to run it; no CI machine
has a model, so it is skipped there and everywhere else without them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slotrelay.pen import ModelSettings, write

pytestmark = pytest.mark.docker


def test_a_real_model_writes_a_program_that_runs(root: Path, sandbox_backend: str) -> None:
    url, name = (
        os.environ.get("SLOTRELAY_PEN_REAL_MODEL_URL"),
        os.environ.get("SLOTRELAY_PEN_REAL_MODEL_NAME"),
    )
    if not (url and name):
        pytest.skip("opt-in: set SLOTRELAY_PEN_REAL_MODEL_URL and SLOTRELAY_PEN_REAL_MODEL_NAME")
    settings = ModelSettings(
        base_url=url, model=name, api_key=os.environ.get("SLOTRELAY_PEN_REAL_MODEL_KEY"), timeout_s=300
    )
    request = {
        "intent": "return the sum of the numbers in inputs['numbers']",
        "context": {"persona_id": "real", "upstream_inputs": {"numbers": [3, 4, 5]}},
        "options": {"persist_hint": "keep"},
    }
    outcome = write(request, root=root, model=settings, backend=sandbox_backend)
    assert outcome.output.execution.status == "success", outcome.output.execution.stderr
    result = outcome.output.execution.result
    assert result == 12 or (isinstance(result, dict) and 12 in result.values()), result
    assert outcome.output.suggestion in ("erase", "keep", "share")
