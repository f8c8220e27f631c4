"""The pen's contract as the MCP tool `pen_write` (`slotrelay mcp serve --allow-pen ROOT`), through the SDK's
in-memory client, against the stub code model and the real sandbox: the answer's data is MPP-001's output."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from harness.stub_model import SUM_CODE
from psmr_mcp import WorkspaceRegistry, build_server
from psmr_mcp.engine_tools import EngineTools
from tests.support.mcp_tools import ok, refused
from tests.support.pen_output_contract import assert_output_shape, decision_of

pytestmark = [pytest.mark.anyio, pytest.mark.docker]
INTENT = "sum the numbers in the input list"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_pen_write_answers_the_contracts_output(
    root: Path, stub, sandbox_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    monkeypatch.setenv("SLOTRELAY_MODEL_TIMEOUT_S", "5")
    monkeypatch.setenv("SLOTRELAY_SANDBOX_BACKEND", sandbox_backend)
    request = {"intent": INTENT, "context": {"persona_id": "p1", "upstream_inputs": {"numbers": [1, 2, 3]}}}
    async with Client(build_server(WorkspaceRegistry([]))) as client:
        assert "--allow-pen" in await refused(client, "pen_write", request, "CAPABILITY_DENIED")
    async with Client(build_server(WorkspaceRegistry([]), engine=EngineTools(pen_root=root))) as client:
        body = (await ok(client, "pen_write", request))["data"]
        assert_output_shape(body)
        assert body["code"].strip() == SUM_CODE.strip()
        assert body["execution"]["status"] == "success" and body["execution"]["result"] == {"total": 6}
        assert decision_of(body)["final_action"] == "keep"
        empty = await refused(client, "pen_write", {**request, "intent": ""}, "INVALID_QUERY")
        assert empty.startswith("MPP-E001")
