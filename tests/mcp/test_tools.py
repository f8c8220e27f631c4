"""Every tool and every error through the SDK's in-memory client, on the sample package.

The server is the real one (`build_server`) over a real workspace; only the transport is in memory.
Three of the twelve codes cannot reach a model through these tools, by design: POLICY_BLOCKED (the
tool schemas bound depth and budgets below the core's dump ceiling, so INVALID_QUERY answers first),
UNSUPPORTED_PROJECTION (`projection` is an enum) and OPERATOR_UNAVAILABLE (every tool maps to an
offered operator; an unknown tool name is a protocol error, tested below).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from psmr_mcp import WorkspaceRegistry, build_server
from tests.support.mcp_tools import call, ok, refused
from tests.support.shop_package import make_shop

pytestmark = pytest.mark.anyio


def _ids(items: list[dict[str, Any]]) -> set[str]:
    return {item["id"] for item in items}


async def test_the_seed_loop_over_every_read_tool(registry: WorkspaceRegistry) -> None:
    """describe, search, slice, evidence, unknowns, conflicts, impact, diff, findings, motifs, contracts."""
    async with Client(build_server(registry)) as client:
        described = await ok(client, "psmr_workspace_describe", {})
        workspace_id = registry.default_id
        assert described["data"]["workspace_id"] == workspace_id
        assert [w["workspace_id"] for w in described["data"]["served_workspaces"]] == [workspace_id]
        assert described["data"]["conflict_count"] >= 1 and described["data"]["unknown_count"] >= 1

        operators = await ok(client, "psmr_operator_list", {"filter": {"input_type": "graph:cisg"}})
        assert "query.subgraph" in {op["operator"] for op in operators["data"]["operators"]}

        found = await ok(client, "psmr_query_search", {"text": "login"})
        login = found["data"]["matches"][0]["id"]
        assert login == "semantic:shop.auth.login"

        sliced = await ok(
            client,
            "psmr_query_subgraph",
            {"anchor": {"kind": "symbol", "value": login}, "depth": 1, "include_evidence": True},
        )
        nodes = _ids(sliced["data"]["nodes"])
        assert {
            "semantic:shop.auth.check",
            "semantic:shop.cart.Cart.checkout",
            "semantic:shop.auth.ATTEMPTS",
        } <= nodes
        edge = next(e for e in sliced["data"]["edges"] if e["target"] == "semantic:shop.auth.check")
        assert edge["relation"] == "calls" and edge["evidence_refs"]

        evidence = await ok(client, "psmr_query_evidence", {"evidence_ids": edge["evidence_refs"]})
        record = evidence["data"]["evidence"][0]
        assert record["artifact"] == "shop/auth.py" and record["span"]["line"] > 0

        unknowns = await ok(client, "psmr_query_unknowns", {"scope": "shop.cart"})
        assert any(u["scope"] == "semantic:shop.cart.Cart.checkout" for u in unknowns["data"]["unknowns"])

        conflicts = await ok(client, "psmr_query_conflicts", {})
        assert any(c["subject"] == "semantic:shop.auth.logout" for c in conflicts["data"]["conflicts"])

        impact = await ok(client, "psmr_impact", {"target": "shop.auth.check"})
        assert login in _ids(impact["data"]["direct"])
        assert "semantic:shop.cart.Cart.checkout" in _ids(impact["data"]["derived"])
        assert impact["data"]["depth"] == 3  # the advertised default

        diff = await ok(client, "psmr_semantic_diff", {"rev_a": "HEAD~1", "rev_b": "HEAD"})
        assert "semantic:shop.audit.who" in _ids(diff["data"]["symbols_added"])
        assert _ids(diff["data"]["symbols_changed"]) == {"semantic:shop.auth.check"}
        # The revisions were built into the workspace's store: the model can query them by id.
        old = await ok(
            client, "psmr_query_search", {"workspace_id": diff["data"]["workspace_a"], "text": "who"}
        )
        assert old["data"]["matches"] == []

        findings = await ok(client, "psmr_findings", {})
        assert any("PRICE" in f["message"] for f in findings["data"]["confirmed_defect"])
        assert any("json" in f["message"] for f in findings["data"]["anomaly"])
        defects = await ok(client, "psmr_findings", {"kind": "confirmed_defect"})
        assert "anomaly" not in defects["data"] or not defects["data"]["anomaly"]

        motifs = await ok(client, "psmr_find_motif", {"motif": "read_modify_write"})
        assert [m["subject"] for m in motifs["data"]["motifs"]] == [login]

        contracts = await ok(client, "psmr_get_contracts", {"target": login})
        assert contracts["data"]["contracts"][0]["raises"] == ["ValueError"]
        assert [t["id"] for t in contracts["data"]["test_contract"]] == [
            "semantic:tests.test_auth.test_login"
        ]


async def test_a_truncated_answer_continues_exactly(registry: WorkspaceRegistry) -> None:
    args = {"anchor": {"kind": "symbol", "value": "shop.auth.login"}, "depth": 2}
    async with Client(build_server(registry)) as client:
        whole = await ok(client, "psmr_query_subgraph", args)
        assert whole["continuation"] is None
        pages = []
        page = await ok(client, "psmr_query_subgraph", {**args, "budget": {"max_nodes": 2, "max_edges": 2}})
        while True:
            pages.append(page)
            if page["continuation"] is None:
                break
            assert page["continuation"]["truncated"] is True
            token = page["continuation"]["continuation_token"]
            page = await ok(
                client,
                "psmr_query_subgraph",
                {**args, "budget": {"max_nodes": 2, "max_edges": 2}, "continuation_token": token},
            )
    assert len(pages) > 2
    for section in ("nodes", "edges", "unknowns"):
        joined = [item for p in pages for item in p["data"][section]]
        assert joined == whole["data"][section], section


@pytest.mark.parametrize(
    ("tool", "arguments", "code", "says"),
    [
        (
            "psmr_impact",
            {"target": "shop.auth.check", "depth": 99},
            "INVALID_QUERY",
            "depth: 99 is greater than",
        ),
        (
            "psmr_impact",
            {"target": "shop.auth.check", "colour": "red"},
            "INVALID_QUERY",
            "'colour' was unexpected",
        ),
        (
            "psmr_impact",
            {"target": "shop.auth.check", "depth": "three"},
            "TYPE_MISMATCH",
            "is not of type 'integer'",
        ),
        (
            "psmr_query_search",
            {"text": "x", "kind": "everything"},
            "INVALID_QUERY",
            "kind: 'everything' is not one of",
        ),
        ("psmr_query_subgraph", {}, "INVALID_QUERY", "'anchor' is a required property"),
        ("psmr_impact", {"target": "shop.auth.chek"}, "OBJECT_NOT_FOUND", "did you mean shop.auth.check"),
        ("psmr_impact", {"target": "shop.auth.logout"}, "CONFLICT_REQUIRES_REVIEW", "accept_conflicts"),
        ("psmr_impact", {"target": "os.environ.get"}, "UNRESOLVED_REQUIRED_INPUT", "not analysed"),
        ("psmr_get_contracts", {"target": "shop.auth.SESSIONS"}, "TYPE_MISMATCH", "is a state"),
        (
            "psmr_query_unknowns",
            {"workspace_id": "ws_0000000000ff"},
            "WORKSPACE_NOT_FOUND",
            "not served here",
        ),
        ("psmr_query_evidence", {"evidence_ids": ["ev_nothere"]}, "OBJECT_NOT_FOUND", "ev_nothere"),
        (
            "psmr_query_unknowns",
            {"continuation_token": "bogus"},
            "INVALID_QUERY",
            "repeat the query without it",
        ),
        ("psmr_semantic_diff", {"rev_a": "no-such-rev", "rev_b": "HEAD"}, "EXECUTION_FAILED", "no-such-rev"),
        ("psmr_workspace_build", {"path": "/"}, "CAPABILITY_DENIED", "outside the roots"),
        ("psmr_workspace_build", {"path": "a\x00b"}, "INVALID_QUERY", "not a usable path"),
        ("psmr_workspace_build", {"path": "{root}/shop/auth.py"}, "INVALID_QUERY", "not a folder"),
    ],
)
async def test_errors_are_tool_errors_with_the_code_first(
    registry: WorkspaceRegistry, tool: str, arguments: dict[str, Any], code: str, says: str
) -> None:
    # "{root}" stands for the served root, which the parameters cannot know.
    arguments = json.loads(json.dumps(arguments).replace("{root}", str(registry.roots[0])))
    async with Client(build_server(registry)) as client:
        message = await refused(client, tool, arguments, code)
        assert says in message
        # The server goes on answering after any refusal.
        await ok(client, "psmr_workspace_describe", {})


@pytest.mark.parametrize(
    "arguments",
    [
        {"workspace_id": 5, "budget": "lots"},
        {"anchor": None, "target": [], "text": {"a": 1}, "evidence_ids": "ev_1"},
        {"budget": {"max_nodes": 0, "max_text_bytes": 10**12}, "continuation_token": "x" * 10_000},
        {"path": "\x00", "rev": ""},
    ],
)
async def test_bad_arguments_never_crash_any_tool(
    registry: WorkspaceRegistry, arguments: dict[str, Any]
) -> None:
    async with Client(build_server(registry)) as client:
        for tool in (await client.list_tools()).tools:
            result, answer = await call(client, tool.name, arguments)
            assert result.is_error, (tool.name, answer)
            # A field past its size limit (the 10,000-character token) is POLICY_BLOCKED.
            codes = ("INVALID_QUERY", "TYPE_MISMATCH", "POLICY_BLOCKED")
            assert answer["error"]["code"] in codes, (tool.name, answer)
        await ok(client, "psmr_workspace_describe", {})


async def test_an_unknown_tool_is_a_protocol_error(registry: WorkspaceRegistry) -> None:
    async with Client(build_server(registry)) as client:
        with pytest.raises(MCPError, match="Unknown tool: psmr_dump_entire_graph"):
            await client.call_tool("psmr_dump_entire_graph", {})


async def test_an_unexpected_exception_is_logged_and_masked(
    registry: WorkspaceRegistry, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from slotrelay.psmr import api

    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("secret internal detail")

    async with Client(build_server(registry)) as client:
        monkeypatch.setattr(api, "call", broken)
        with caplog.at_level(logging.ERROR, logger="psmr_mcp"):
            message = await refused(client, "psmr_query_conflicts", {}, "EXECUTION_FAILED")
        monkeypatch.undo()
        assert "secret" not in message and "incident req_" in message
        incident = message.split("incident ")[1].split(",")[0]
        logged = [r for r in caplog.records if incident in r.getMessage()]
        assert logged and logged[0].exc_info and "secret internal detail" in str(logged[0].exc_info[1])
        await ok(client, "psmr_query_conflicts", {})


async def test_a_fault_inside_the_core_reaches_the_client_masked(
    registry: WorkspaceRegistry, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from slotrelay.psmr.ops import queries

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internal detail")

    async with Client(build_server(registry)) as client:
        monkeypatch.setattr(queries, "unknowns", broken)
        with caplog.at_level(logging.ERROR, logger="slotrelay.psmr"):
            message = await refused(client, "psmr_query_unknowns", {}, "EXECUTION_FAILED")
        monkeypatch.undo()
        assert "secret" not in message and "incident req_" in message
        incident = message.split("incident ")[1].split(",")[0]
        logged = [r for r in caplog.records if incident in r.getMessage()]
        assert logged and "secret internal detail" in str(logged[0].exc_info[1])
        await ok(client, "psmr_query_unknowns", {})


@pytest.mark.parametrize("shared_store", [False, True])
async def test_several_workspaces_need_an_id_and_describe_lists_them(
    tmp_path: Path, shared_store: bool
) -> None:
    first, second = make_shop(tmp_path / "first"), make_shop(tmp_path / "second")
    registry = WorkspaceRegistry([first, second], store=tmp_path / "store" if shared_store else None)
    ids = [registry.build(root, at_startup=True)["workspace_id"] for root in (first, second)]
    assert registry.default_id is None and len(set(ids)) == 2
    async with Client(build_server(registry)) as client:
        listed = await ok(client, "psmr_workspace_describe", {})
        assert [w["workspace_id"] for w in listed["data"]["served_workspaces"]] == ids
        assert [w["root"] for w in listed["data"]["served_workspaces"]] == [str(first), str(second)]
        message = await refused(client, "psmr_query_conflicts", {}, "INVALID_QUERY")
        assert all(i in message for i in ids)
        for workspace_id in ids:
            described = await ok(client, "psmr_workspace_describe", {"workspace_id": workspace_id})
            assert described["data"]["workspace_id"] == workspace_id
        await ok(client, "psmr_query_conflicts", {"workspace_id": ids[1]})
        # Every workspace lives in the one store (the default or --store): any two can be compared.
        diff = await ok(client, "psmr_semantic_diff", {"workspace_a": ids[0], "workspace_b": ids[1]})
        assert diff["data"]["counts"]["symbols_added"] == 0


async def test_build_writes_only_inside_the_roots_and_reports_progress(tmp_path: Path) -> None:
    root = make_shop(tmp_path / "root")
    outside = make_shop(tmp_path / "outside")
    os.symlink(outside, root / "escape")
    registry = WorkspaceRegistry([root])
    registry.build(root, at_startup=True)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with Client(build_server(registry)) as client:
        built = await ok(
            client, "psmr_workspace_build", {"path": str(root / "shop")}, progress_callback=on_progress
        )
        new_id = built["data"]["workspace_id"]
        assert built["data"]["root"] == str(root / "shop")
        assert progress and progress[-1][0] == progress[-1][1]
        listed = await ok(client, "psmr_workspace_describe", {})
        assert new_id in [w["workspace_id"] for w in listed["data"]["served_workspaces"]]
        await ok(client, "psmr_query_search", {"workspace_id": new_id, "text": "login"})
        for path in (str(outside), str(root / "escape"), str(root / ".." / "outside")):
            await refused(client, "psmr_workspace_build", {"path": path}, "CAPABILITY_DENIED")
    assert not (outside / ".psmr").exists()


async def test_a_damaged_store_is_validation_failed_until_rebuilt(tmp_path: Path) -> None:
    root = make_shop(tmp_path / "shop")
    registry = WorkspaceRegistry([root])
    workspace_id = registry.build(root, at_startup=True)["workspace_id"]
    async with Client(build_server(registry)) as client:
        await ok(client, "psmr_query_conflicts", {})
        (registry.store_for(workspace_id) / "workspaces" / workspace_id / "manifest.json").write_text("{")
        assert "rebuild" in await refused(client, "psmr_query_conflicts", {}, "VALIDATION_FAILED")
        rebuilt = await ok(client, "psmr_workspace_build", {"path": str(root)})
        assert rebuilt["data"]["workspace_id"] == workspace_id
        await ok(client, "psmr_query_conflicts", {})


async def test_operator_describe_is_a_tool(registry: WorkspaceRegistry) -> None:
    """An agent reads an operator's request schema over MCP, e.g. the delta operations it may send."""
    async with Client(build_server(registry)) as client:
        described = await ok(client, "psmr_operator_describe", {"operator": "delta.propose"})
        operations = described["data"]["input_schema"]["properties"]["operations"]["items"]
        assert "edit_reference" in operations["properties"]["op"]["enum"]
        assert described["data"]["required_capabilities"] == ["workspace:read"]
        missing = await refused(
            client, "psmr_operator_describe", {"operator": "delta.dump"}, "OPERATOR_UNAVAILABLE"
        )
        assert "delta.dump" in missing


async def test_the_server_replays_its_own_kept_resolution_when_it_rebuilds(tmp_path: Path) -> None:
    # The registry keeps the resolution of what it built (no process-wide setting): after an edit,
    # psmr_verify_rebuild and psmr_workspace_build replay it where the edit reaches instead of
    # resolving every call site again; a build given nothing to keep (a one-shot command) resolves all.
    from slotrelay.psmr import api

    root = make_shop(tmp_path / "shop")
    # Enough call sites that a new function reaches a small share of them (a replay's limit,
    # `slotrelay.psmr.analysis.relink.MAX_AGAIN_SHARE`, past which it resolves in full).
    for i in range(30):
        (root / "shop" / f"util{i}.py").write_text(f"def h{i}(x):\n    return len(str(x))\n")
    registry = WorkspaceRegistry([root], store=tmp_path / "store")
    everything = registry.build(root, at_startup=True)["resolved_sites"]
    assert everything > 2 and len(registry.kept) == 1
    auth = root / "shop" / "auth.py"
    async with Client(build_server(registry)) as client:
        auth.write_text(auth.read_text() + "\n\ndef _leaf():\n    return sorted([3, 1, 2])\n")
        rebuilt = await ok(client, "psmr_verify_rebuild", {})
        assert rebuilt["data"]["analysed"] == 1 and rebuilt["data"]["resolved_sites"] <= 2, rebuilt["data"]
        auth.write_text(auth.read_text() + "\n\ndef _other():\n    return sorted([2, 1])\n")
        built = await ok(client, "psmr_workspace_build", {"path": str(root)})
        assert built["data"]["analysed"] == 1 and built["data"]["resolved_sites"] <= 2, built["data"]
    auth.write_text(auth.read_text() + "\n\ndef _third():\n    return 3\n")
    assert api.build_workspace(root, store=tmp_path / "store")["resolved_sites"] >= everything
