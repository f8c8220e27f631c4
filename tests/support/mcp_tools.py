"""The MCP server's tools as its tests call them: `call` checks the envelope a tool answers with (as
structured content and as JSON text), `ok` expects a result and `refused` a tool error with its code;
`EXPECTED_TOOLS` names every tool the server lists."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client

EXPECTED_TOOLS = {
    "psmr_workspace_describe",
    "psmr_operator_list",
    "psmr_operator_describe",
    "psmr_query_search",
    "psmr_query_subgraph",
    "psmr_query_evidence",
    "psmr_query_unknowns",
    "psmr_query_conflicts",
    "psmr_impact",
    "psmr_semantic_diff",
    "psmr_findings",
    "psmr_find_motif",
    "psmr_get_contracts",
    "psmr_delta_propose",
    "psmr_delta_list",
    "psmr_delta_describe",
    "psmr_delta_validate",
    "psmr_projection_preview",
    "psmr_projection_apply",
    "psmr_run_tests",
    "psmr_verify_rebuild",
    "psmr_verify_roundtrip",
    "psmr_verify_review",
    "psmr_workspace_build",
    # The engine's tool family (psmr_mcp/engine_tools.py, docs/agents.md).
    "chain_list",
    "chain_describe",
    "node_inbox",
    "node_submit",
    "run_status",
    "alerts_list",
    "alert_decide",
    "pen_write",
}


async def call(
    client: Client, name: str, arguments: dict[str, Any], **kwargs: Any
) -> tuple[Any, dict[str, Any]]:
    """Call a tool; check the result carries the envelope both as structured content and as JSON text."""
    result = await client.call_tool(name, arguments, **kwargs)
    answer = result.structured_content
    assert answer["schema"] == "psmr-tool-result-0.1"
    assert json.loads(result.content[-1].text) == answer
    assert result.is_error is (answer["status"] == "error")
    return result, answer


async def ok(client: Client, name: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result, answer = await call(client, name, arguments, **kwargs)
    assert not result.is_error, result.content[0].text
    return answer


async def refused(client: Client, name: str, arguments: dict[str, Any], code: str) -> str:
    """Call a tool expecting a tool error with `code`; returns the message (after `CODE: `)."""
    result, answer = await call(client, name, arguments)
    assert result.is_error, answer
    headline = result.content[0].text
    assert headline.startswith(f"{code}: "), headline
    assert answer["error"]["code"] == code
    return headline.removeprefix(f"{code}: ")
