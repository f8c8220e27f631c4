"""The modification half through MCP: propose -> validate -> preview -> apply -> run tests -> rebuild ->
roundtrip -> review, on a real package with its own tests (`tests/mcp/textkit.py`).

The whole loop runs through the SDK's client over stdio against `slotrelay mcp serve` subprocesses:
one started without grants (apply is refused), one with `--allow-write ROOT --allow-exec` (apply
writes, the package's tests run in the docker sandbox). The rename across modules, the conflict
between preview and apply and the bad inputs use the real server over the in-memory transport.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from psmr_mcp import WorkspaceRegistry, build_server
from slotrelay.pen.audit import AuditLog
from slotrelay.psmr.grants import Grants
from slotrelay.sandbox import SandboxUnavailable, get_backend
from tests.conftest import require_service
from tests.mcp.processes import SLOTRELAY
from tests.mcp.test_tools import ok, refused
from tests.mcp.textkit import make_textkit, snapshot

pytestmark = pytest.mark.anyio

NEW_BODY = '''"""Cut text into lines of at most columns characters, each starting with indent."""
words = text.split()
lines, current = [], ""
for word in words:
    if current and len(indent) + len(current) + 1 + len(word) > columns:
        lines.append(indent + current)
        current = word
    else:
        current = f"{current} {word}".strip()
if current:
    lines.append(indent + current)
return lines
'''
SIGNATURE = {
    "op": "change_signature",
    "target": "textkit.wrap.wrap_line",
    "parameters": "text, columns, *, indent=''",
}
BODY = {"op": "replace_body", "target": "textkit.wrap.wrap_line", "body": NEW_BODY}
INTENT = "wrap_line takes the width as a required `columns` and an optional keyword-only indent"


def _propose(operations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"intent": INTENT, "scope_refs": ["textkit.wrap.wrap_line"], "operations": operations}


def _pytest_site() -> str:
    import pytest as installed

    return str(Path(installed.__file__).resolve().parent.parent)


def _docker() -> None:
    try:
        get_backend("docker", lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the docker sandbox cannot run python here: {missing.message}")


def _stdio(root: Path, *flags: str) -> StdioServerParameters:
    env = {**os.environ, "SLOTRELAY_SANDBOX_ROOTS": os.pathsep.join([str(root), _pytest_site()])}
    return StdioServerParameters(
        command=SLOTRELAY, args=["mcp", "serve", "--workspace", str(root), *flags], cwd=root, env=env
    )


@pytest.mark.docker
async def test_a_signature_change_at_many_call_sites_through_the_whole_loop(tmp_path: Path) -> None:
    _docker()
    root = make_textkit(tmp_path / "proj")
    original = snapshot(root)
    async with Client(_stdio(root)) as client:
        # A delta that changes the signature but leaves the call sites to fend for themselves.
        partial = await ok(client, "psmr_delta_propose", _propose([SIGNATURE, BODY]))
        assert partial["data"]["authority"] == "ai_proposal"
        assert len([e for e in partial["data"]["edits"] if e["kind"] == "call_site"]) == 10
        message = await refused(
            client, "psmr_delta_validate", {"delta_id": partial["data"]["delta_id"]}, "VALIDATION_FAILED"
        )
        assert "type_compatibility" in message
        result = await client.call_tool("psmr_delta_validate", {"delta_id": partial["data"]["delta_id"]})
        checks = {c["check"]: c for c in result.structured_content["data"]["checks"]}
        assert checks["type_compatibility"]["problem_count"] >= 9
        assert "missing required argument columns" in json.dumps(checks["type_compatibility"]["problems"])
        assert checks["known_defects"]["ok"] and checks["graph_invariants"]["ok"]

        # The complete one: every call site fills `columns` from what it gave `width` (or its default).
        mapped = {**SIGNATURE, "parameter_map": {"columns": {"from": "width"}}}
        proposed = await ok(client, "psmr_delta_propose", _propose([mapped, BODY]))
        delta_id = proposed["data"]["delta_id"]
        assert proposed["data"]["suggested_validation"] == [
            "tests/test_textkit.py::test_report",
            "tests/test_textkit.py::test_styles",
            "tests/test_textkit.py::test_wrap_line",
        ]
        validated = await ok(client, "psmr_delta_validate", {"delta_id": delta_id})
        assert all(c["ok"] for c in validated["data"]["checks"])

        preview = await ok(client, "psmr_projection_preview", {"delta_id": delta_id})
        patch = "".join(item["diff"] for item in preview["data"]["patch"])
        assert "-def wrap_line(text, width=20):\n" in patch
        assert "+def wrap_line(text, columns, *, indent=''):\n" in patch
        assert '+    return "\\n".join(wrap_line(text, 20))' in patch
        assert "+    return wrap_line(text, columns=8)" in patch
        assert '+HEADER = wrap_line("monthly report", columns=40)' in patch
        tests_diff = "".join(item["diff"] for item in preview["data"]["test"])
        assert '+    assert wrap_line("one two", columns=3) == ["one", "two"]' in tests_diff
        assert snapshot(root) == original

        denied = await refused(client, "psmr_projection_apply", {"delta_id": delta_id}, "CAPABILITY_DENIED")
        assert "--allow-write" in denied
        assert snapshot(root) == original

    async with Client(_stdio(root, "--allow-write", str(root), "--allow-exec")) as client:
        applied = await ok(client, "psmr_projection_apply", {"delta_id": delta_id})
        written = {f["file"] for f in applied["data"]["files"]}
        assert written == {
            "textkit/wrap.py",
            "textkit/report.py",
            "textkit/style.py",
            "tests/test_textkit.py",
        }
        assert "def wrap_line(text, columns, *, indent=''):" in (root / "textkit/wrap.py").read_text()
        assert "# A framed title, ten characters wide." in (root / "textkit/wrap.py").read_text()
        assert AuditLog(root, name="psmr-apply").verify().ok

        ran = await ok(client, "psmr_run_tests", {"delta_id": delta_id})
        assert ran["data"]["passed"] and ran["data"]["counts"]["passed"] == 3, ran["data"]
        assert {r["authority"] for r in ran["data"]["results"]} == {"runtime:pytest"}

        rebuilt = await ok(client, "psmr_verify_rebuild", {"delta_id": delta_id})
        assert rebuilt["data"]["version"] != rebuilt["data"]["previous_version"]
        roundtrip = await ok(client, "psmr_verify_roundtrip", {"delta_id": delta_id})
        assert roundtrip["data"]["all_matched"], roundtrip["data"]
        matched = {(m["kind"], m.get("id"), m.get("change")) for m in roundtrip["data"]["matched"]}
        assert ("symbol_changed", "semantic:textkit.wrap.wrap_line", "signature_changed") in matched
        assert ("symbol_changed", "semantic:textkit.style.shout", "body_changed") in matched

        review = await ok(client, "psmr_verify_review", {"delta_id": delta_id})
        assert review["data"]["new_defects"] == [] and review["data"]["unexpected_changes"] == []
        assert review["data"]["new_conflicts"] == []
        # The new body appends `indent + current`; the resolver no longer loses the callers'
        # `line.upper()` / `line.lower()` receivers over it, so nothing new is unknown.
        assert review["data"]["new_unknowns"] == []
        kinds = {e["kind"] for e in review["data"]["semantic_events"] if e["event"] == "api_breakage"}
        assert "parameter_removed" in kinds  # `width` is gone from the public wrap_line: reported

        # The tests' run is now runtime certainty of the impact of wrap_line, on the files as they are.
        impact = await ok(client, "psmr_impact", {"target": "textkit.wrap.wrap_line"})
        observed = {o["test"] for o in impact["data"]["runtime_certainty"]["observed"]}
        assert "tests/test_textkit.py::test_wrap_line" in observed


@pytest.fixture
def textkit(tmp_path: Path) -> tuple[Path, WorkspaceRegistry]:
    root = make_textkit(tmp_path / "proj")
    registry = WorkspaceRegistry([root])
    registry.build(root, at_startup=True)
    return root, registry


async def test_a_rename_across_modules(textkit: tuple[Path, WorkspaceRegistry]) -> None:
    root, registry = textkit
    grants = Grants.of(write_roots=[root])
    async with Client(build_server(registry, grants=grants)) as client:
        proposed = await ok(
            client,
            "psmr_delta_propose",
            {
                "intent": "shout is called yell everywhere",
                "operations": [{"op": "rename_symbol", "target": "textkit.style.shout", "new_name": "yell"}],
            },
        )
        delta_id = proposed["data"]["delta_id"]
        assert set(proposed["data"]["files"]) == {
            "textkit/__init__.py",
            "textkit/style.py",
            "textkit/report.py",
            "tests/test_textkit.py",
        }
        await ok(client, "psmr_delta_validate", {"delta_id": delta_id})
        await ok(client, "psmr_projection_preview", {"delta_id": delta_id})
        await ok(client, "psmr_projection_apply", {"delta_id": delta_id})
        await ok(client, "psmr_verify_rebuild", {"delta_id": delta_id})
        roundtrip = await ok(client, "psmr_verify_roundtrip", {"delta_id": delta_id})
        assert roundtrip["data"]["all_matched"], roundtrip["data"]
        assert {
            "kind": "symbol_renamed",
            "old": "semantic:textkit.style.shout",
            "new": "semantic:textkit.style.yell",
        } in (roundtrip["data"]["matched"])
        search = await ok(client, "psmr_query_search", {"text": "shout", "kind": "symbol"})
        assert search["data"]["matches"] == []
        callers = await ok(
            client,
            "psmr_query_subgraph",
            {
                "anchor": {"kind": "symbol", "value": "textkit.style.yell"},
                "relations": ["called_by"],
                "depth": 1,
            },
        )
        assert {n["id"] for n in callers["data"]["nodes"]} >= {
            "semantic:textkit.report.loud",
            "semantic:tests.test_textkit.test_styles",
        }
    assert '__all__ = ["yell", "wrap_line"]' in (root / "textkit/__init__.py").read_text()
    assert "from textkit.style import yell" in (root / "textkit/report.py").read_text()
    assert "shout" not in (root / "tests/test_textkit.py").read_text()


async def test_a_file_edited_between_preview_and_apply_is_a_conflict(
    textkit: tuple[Path, WorkspaceRegistry],
) -> None:
    root, registry = textkit
    async with Client(build_server(registry, grants=Grants.of(write_roots=[root]))) as client:
        mapped = {**SIGNATURE, "parameter_map": {"columns": {"from": "width"}}}
        delta_id = (await ok(client, "psmr_delta_propose", _propose([mapped, BODY])))["data"]["delta_id"]
        await ok(client, "psmr_delta_validate", {"delta_id": delta_id})
        await ok(client, "psmr_projection_preview", {"delta_id": delta_id})
        edited = root / "textkit/style.py"
        edited.write_text(edited.read_text() + "\n\ndef hum(text):\n    return text\n")
        before = snapshot(root)
        message = await refused(
            client, "psmr_projection_apply", {"delta_id": delta_id}, "CONFLICT_REQUIRES_REVIEW"
        )
        assert "textkit/style.py" in message and "nothing was written" in message
        assert snapshot(root) == before
        assert not (root / ".slotrelay" / "psmr-apply.jsonl").exists()


async def test_bad_input_gets_its_code_and_touches_no_file(textkit: tuple[Path, WorkspaceRegistry]) -> None:
    root, registry = textkit
    original = snapshot(root)
    async with Client(build_server(registry, grants=Grants.of(write_roots=[root]))) as client:
        for tool in ("psmr_delta_validate", "psmr_projection_preview", "psmr_projection_apply"):
            assert "delta.propose" in await refused(
                client, tool, {"delta_id": "dl_00000000"}, "OBJECT_NOT_FOUND"
            )
        stale = await refused(
            client,
            "psmr_delta_propose",
            {**_propose([BODY]), "workspace_version": "0123456789abcdef"},
            "CONFLICT_REQUIRES_REVIEW",
        )
        assert "stale" in stale
        missing = await refused(
            client,
            "psmr_delta_propose",
            _propose([{**SIGNATURE, "target": "textkit.wrap.wrap_lines"}]),
            "OBJECT_NOT_FOUND",
        )
        assert "operations[0].target" in missing and "textkit.wrap.wrap_line" in missing
        unparsable = await refused(
            client,
            "psmr_delta_propose",
            _propose([{**BODY, "body": "return (text\n"}]),
            "INVALID_QUERY",
        )
        assert "operations[0].body does not parse" in unparsable
        wrong = await refused(
            client,
            "psmr_delta_propose",
            _propose([{"op": "rename_symbol", "target": "textkit.wrap.wrap_line"}]),
            "INVALID_QUERY",
        )
        assert "new_name" in wrong
        # Steps out of order, a projection not derived from a delta, tests without the capability.
        early = (await ok(client, "psmr_delta_propose", _propose([BODY])))["data"]["delta_id"]
        for tool in ("psmr_verify_roundtrip", "psmr_verify_review"):
            assert "projection.apply first" in await refused(
                client, tool, {"delta_id": early}, "INVALID_QUERY"
            )
        assert "delta.validate" in await refused(
            client, "psmr_projection_apply", {"delta_id": early}, "VALIDATION_FAILED"
        )
        await refused(
            client, "psmr_projection_preview", {"delta_id": early, "projections": ["schema"]}, "INVALID_QUERY"
        )
        assert "--allow-exec" in await refused(
            client, "psmr_run_tests", {"delta_id": early}, "CAPABILITY_DENIED"
        )
        # A delta proposed before the workspace moved on is refused at every later step.
        delta_id = (await ok(client, "psmr_delta_propose", _propose([BODY])))["data"]["delta_id"]
        (root / "textkit/extra.py").write_text("def extra():\n    return 1\n")
        registry.build(root)
        for tool in ("psmr_delta_validate", "psmr_projection_preview", "psmr_projection_apply"):
            await refused(client, tool, {"delta_id": delta_id}, "CONFLICT_REQUIRES_REVIEW")
    (root / "textkit/extra.py").unlink()
    assert snapshot(root) == original
