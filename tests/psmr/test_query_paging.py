"""Paging: pages fill nearest-first across sections, carry per-section totals, concatenate to the whole
answer, and `max_text_bytes` holds for the text actually printed (CLI) or sent (MCP)."""

from __future__ import annotations

import json
import os
import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from harness.commands import SLOTRELAY
from psmr_mcp import WorkspaceRegistry, build_server
from slotrelay.psmr.api import build_workspace, call
from slotrelay.psmr.envelope import render
from tests.support.psmr_trees import write_tree

REPO = Path(__file__).resolve().parents[2]
STEPS, LEAVES = 4, 6


def hub_tree() -> dict[str, str]:
    """`run` calls four steps; each step calls six leaves and an untyped receiver (an unknown)."""
    lines = ["def run(job):", *[f"    step{i}(job)" for i in range(STEPS)], "", ""]
    for i in range(STEPS):
        lines += [f"def step{i}(job):", f"    job.unknown{i}()"]
        lines += [f"    leaf{i}_{j}(job)" for j in range(LEAVES)] + ["", ""]
        for j in range(LEAVES):
            lines += [f"def leaf{i}_{j}(job):", f"    job.deep{i}_{j}()", f"    return {j}", "", ""]
    lines += ["def entry():", "    run(None)", ""]
    return {"hub/__init__.py": "", "hub/core.py": "\n".join(lines)}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    root = write_tree(tmp_path_factory.mktemp("hub"), hub_tree())
    store = root.parent / f"{root.name}-store"
    return build_workspace(root, store=store)["workspace_id"], store, root


SLICE = {"anchor": {"kind": "symbol", "value": "hub.core.run"}, "depth": 2, "include_evidence": True}
IMPACT = {"target": "hub.core.leaf0_0", "depth": 3}


def every_page(operation: str, request: dict[str, Any], store: Path) -> list[dict[str, Any]]:
    pages, token = [], None
    while True:
        result = call(operation, {**request, **({"continuation_token": token} if token else {})}, store=store)
        assert result["status"] == "ok", result.get("error")
        pages.append(result)
        if result["continuation"] is None:
            return pages
        token = result["continuation"]["continuation_token"]


def sections_of(result: dict[str, Any]) -> dict[str, list[Any]]:
    return {name: result["data"][name] for name in result["data"]["paging"]}


@pytest.mark.parametrize(
    ("operation", "body", "budget"),
    [
        ("query.subgraph", SLICE, {"max_nodes": 3}),
        ("query.subgraph", SLICE, {"max_edges": 2}),
        ("query.subgraph", SLICE, {"max_evidence_items": 1}),
        ("query.subgraph", SLICE, {"max_text_bytes": 1500}),
        ("analysis.impact", IMPACT, {"max_nodes": 1}),
        ("analysis.impact", IMPACT, {"max_text_bytes": 2000}),
    ],
    ids=["slice-nodes", "slice-edges", "slice-evidence", "slice-text", "impact-nodes", "impact-text"],
)
def test_pages_concatenate_to_the_whole_answer_and_count_every_section(
    hub: tuple[str, Path, Path], operation: str, body: dict[str, Any], budget: dict[str, int]
) -> None:
    ws, store, _ = hub
    request = {"workspace_id": ws, **body}
    whole = call(operation, request, store=store)
    assert whole["continuation"] is None
    expected = sections_of(whole)
    pages = every_page(operation, {**request, "budget": budget}, store)
    assert len(pages) > 1
    seen = dict.fromkeys(expected, 0)
    for page in pages:
        for name, items in sections_of(page).items():
            paging = page["data"]["paging"][name]
            assert paging == {
                "total": len(expected[name]),
                "offset": seen[name],
                "remaining": len(expected[name]) - seen[name] - len(items),
            }
            seen[name] += len(items)
        assert len(render(page).encode()) <= budget.get("max_text_bytes", 100_000)
        assert not page["warnings"]
    joined = {name: [item for page in pages for item in page["data"][name]] for name in expected}
    assert joined == expected


def slice_rank(whole: dict[str, Any]) -> dict[str, Any]:
    """Each item's distance from the anchor, as the whole answer states it."""
    distance = {n["id"]: n["distance"] for n in whole["data"]["nodes"]}
    edge_rank = {
        ev: max(distance[e["source"]], distance[e["target"]])
        for e in whole["data"]["edges"]
        for ev in e["evidence_refs"]
    }
    return {
        "nodes": lambda n: n["distance"],
        "edges": lambda e: max(distance[e["source"]], distance[e["target"]]),
        "unknowns": lambda u: distance[u["scope"]],
        "contracts": lambda c: distance[c["subject"]],
        "conflicts": lambda c: distance[c["subject"]],
        "evidence": lambda r: edge_rank[r["id"]],
    }


def test_each_page_fills_nearest_first_across_sections(hub: tuple[str, Path, Path]) -> None:
    ws, store, _ = hub
    request = {"workspace_id": ws, **SLICE}
    rank = slice_rank(call("query.subgraph", request, store=store))
    pages = every_page("query.subgraph", {**request, "budget": {"max_text_bytes": 6000}}, store)
    rings = [
        [rank[name](item) for name, items in sections_of(page).items() for item in items] for page in pages
    ]
    # Nothing on a page is nearer than something on an earlier page.
    for earlier, later in pairwise(rings):
        assert max(earlier) <= min(later)
    first = sections_of(pages[0])
    # Page 1: the anchor's direct edges, their nodes and the unknowns about them, before ring 2.
    direct = {e["target"] for e in first["edges"] if e["source"] == "semantic:hub.core.run"}
    assert direct == {f"semantic:hub.core.step{i}" for i in range(STEPS)}
    assert "semantic:hub.core.entry" in {e["source"] for e in first["edges"]}
    assert {n["id"] for n in first["nodes"]} >= direct
    assert {u["scope"] for u in first["unknowns"]} >= direct


def test_impact_page_one_names_the_files_and_callers_first(hub: tuple[str, Path, Path]) -> None:
    ws, store, _ = hub
    first = call("analysis.impact", {"workspace_id": ws, **IMPACT, "budget": {"max_nodes": 3}}, store=store)[
        "data"
    ]
    assert [d["id"] for d in first["direct"]] == ["semantic:hub.core.step0"]
    assert first["review_files"] == ["hub/core.py"]
    assert first["paging"]["derived"]["remaining"] == 2  # run, then entry


def test_the_cli_prints_within_max_text_bytes(hub: tuple[str, Path, Path]) -> None:
    ws, store, _ = hub
    limit = 2000
    request = {"workspace_id": ws, **SLICE, "budget": {"max_text_bytes": limit}}
    done = subprocess.run(
        [SLOTRELAY, "psmr", "call", "query.subgraph"]
        + [json.dumps(request), "--store", str(store)],
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    printed = done.stdout.removesuffix(b"\n")
    answer = json.loads(printed)
    assert answer["continuation"]["truncated"] is True and not answer["warnings"]
    assert len(printed) <= limit < len(printed) + 400
    assert printed.decode() == render(answer)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_mcp_text_content_is_within_max_text_bytes(hub: tuple[str, Path, Path]) -> None:
    _, _, root = hub
    registry = WorkspaceRegistry([root])
    registry.build(root, at_startup=True)
    limit = 2000
    async with Client(build_server(registry)) as client:
        result = await client.call_tool(
            "psmr_query_subgraph",
            {"anchor": SLICE["anchor"], "depth": 2, "budget": {"max_text_bytes": limit}},
        )
    text = result.content[-1].text.encode()
    assert result.structured_content["continuation"]["truncated"] is True
    assert len(text) <= limit < len(text) + 400
