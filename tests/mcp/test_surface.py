"""The tool surface as a client sees it in `tools/list`: names, descriptions, schemas, annotations,
and the committed snapshot that makes any change to it a reviewed change.

To accept an intended change, regenerate the snapshot and review the diff:

    PSMR_MCP_UPDATE_SNAPSHOT=1 .venv/bin/python -m pytest tests/mcp/test_surface.py -k snapshot
    git diff tests/mcp/tools_list.json
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from psmr_mcp import WorkspaceRegistry, build_server
from slotrelay.psmr.operators import OPERATIONS
from tests.support.mcp_tools import EXPECTED_TOOLS

SNAPSHOT = Path(__file__).with_name("tools_list.json")
# Tools that change their environment, and of those the ones that write source files or run code.
# Every tool that writes anything, a record in the store included, is not read-only.
CHANGING_TOOLS = {
    "psmr_workspace_build",
    "psmr_delta_propose",
    "psmr_delta_validate",
    "psmr_projection_preview",
    "psmr_verify_rebuild",
    "psmr_verify_roundtrip",
    "psmr_verify_review",
    "psmr_projection_apply",
    "psmr_run_tests",
    "node_submit",
    "alert_decide",
    "pen_write",
}
DESTRUCTIVE_TOOLS = {"psmr_projection_apply", "psmr_run_tests", "alert_decide", "pen_write"}
pytestmark = pytest.mark.anyio


async def _listed_tools(tmp_path: Path) -> list[dict[str, Any]]:
    # tools/list does not depend on the workspaces served, so an empty registry lists the same surface.
    async with Client(build_server(WorkspaceRegistry([tmp_path]))) as client:
        result = await client.list_tools()
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in result.tools]


def _parameters(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every parameter schema, nested ones included, with its dotted path."""
    found = []
    for name, prop in schema.get("properties", {}).items():
        found.append((f"{path}{name}", prop))
        found.extend(_parameters(prop, f"{path}{name}."))
        if isinstance(prop.get("items"), dict):
            found.extend(_parameters(prop["items"], f"{path}{name}[]."))
    return found


async def test_tools_list_is_the_psmr_and_engine_surface_and_nothing_dumps(tmp_path: Path) -> None:
    tools = await _listed_tools(tmp_path)
    names = [tool["name"] for tool in tools]
    assert set(names) == EXPECTED_TOOLS and len(names) == len(EXPECTED_TOOLS)
    assert not [name for name in names if "dump" in name or "export" in name]


async def test_every_tool_is_described_annotated_and_has_an_output_schema(tmp_path: Path) -> None:
    for tool in await _listed_tools(tmp_path):
        name = tool["name"]
        assert len(tool["description"]) > 150, name
        assert tool["annotations"]["readOnlyHint"] is (name not in CHANGING_TOOLS), name
        assert tool["annotations"]["openWorldHint"] is False, name
        assert tool["annotations"]["destructiveHint"] is (name in DESTRUCTIVE_TOOLS), name
        Draft202012Validator.check_schema(tool["inputSchema"])
        Draft202012Validator.check_schema(tool["outputSchema"])
        assert tool["outputSchema"]["properties"]["schema"] == {"const": "psmr-tool-result-0.1"}
        if "continuation_token" in tool["inputSchema"]["properties"]:
            assert "continuation_token" in tool["description"], f"{name} must say how to continue"


async def test_every_parameter_is_described_and_every_number_bounded(tmp_path: Path) -> None:
    for tool in await _listed_tools(tmp_path):
        for path, prop in _parameters(tool["inputSchema"]):
            where = f"{tool['name']}.{path}"
            assert prop.get("description"), f"{where} has no description"
            if prop.get("type") == "integer":
                assert "minimum" in prop and "maximum" in prop, f"{where} is not bounded"
            if prop.get("type") == "string":
                assert "enum" in prop or "maxLength" in prop or "pattern" in prop, f"{where} is unbounded"
            if prop.get("type") == "array":
                assert "maxItems" in prop or "enum" in prop.get("items", {}), f"{where} has no item limit"


async def test_tool_schemas_never_accept_what_the_core_refuses(tmp_path: Path) -> None:
    """Each operation's documented example passes both schemas; the tool schema only narrows the core's
    (bounds added), except that workspace_id may be omitted (the server fills in its default)."""
    from psmr_mcp.catalog import CHANGE_TOOLS, TOOLS

    listed = {tool["name"]: tool for tool in await _listed_tools(tmp_path)}
    for spec in (*TOOLS, *CHANGE_TOOLS):
        operation = OPERATIONS[spec.operation]
        tool_schema = listed[spec.name]["inputSchema"]
        Draft202012Validator(tool_schema).validate(operation["example"])
        Draft202012Validator(operation["input_schema"]).validate(operation["example"])
        assert set(tool_schema["properties"]) == set(operation["input_schema"]["properties"]), spec.name
        assert set(tool_schema["required"]) == set(operation["input_schema"]["required"]) - {"workspace_id"}
        for name, prop in tool_schema["properties"].items():
            core = operation["input_schema"]["properties"][name]
            for key in ("type", "enum", "pattern", "minimum", "minLength", "minItems"):
                if key in core and key != "enum":
                    assert prop[key] == core[key], f"{spec.name}.{name}.{key} differs from the core"
            if "enum" in core:
                assert set(prop["enum"]) <= set(core["enum"])


async def test_tools_list_matches_the_committed_snapshot(tmp_path: Path) -> None:
    tools = await _listed_tools(tmp_path)
    text = json.dumps(tools, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    if os.environ.get("PSMR_MCP_UPDATE_SNAPSHOT") == "1":
        SNAPSHOT.write_text(text)
    assert SNAPSHOT.exists(), f"no snapshot yet: regenerate it as this module's docstring says ({SNAPSHOT})"
    assert text == SNAPSHOT.read_text(), (
        "tools/list changed: if intended, regenerate tests/mcp/tools_list.json with "
        "PSMR_MCP_UPDATE_SNAPSHOT=1 (see this module's docstring) and commit the reviewed diff"
    )
