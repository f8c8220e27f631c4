"""Issue 36 end to end: an agent plays the phase-2 example's review node over MCP while `watch` routes.

On the session's real Prefect server, `slotrelay watch` serves a copy of the phase-2 chain; the agent is
the MCP SDK's client talking over stdio to `slotrelay mcp serve --chain ... --agent exec-review`. The
agent waits for its inbox (the test writes exec-review's input slot as exec-enrich's route does), reads
it, submits a wrong field (refused with its JSON path, no slot written), then the right output, which
the answer says is routed to exec-publish, and exec-publish runs in a flow run `watch` started. Then a
second input: the agent reports a failure of a declared type (`write_denied`, handling fail), the engine
writes an alert and suspends the run, the agent decides it (`alert_decide` continue, with data, on a
server started with --allow-decide), and the chain runs to its end: `run_status` of that run says
COMPLETED with the summary `slotrelay run --json` prints.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client, StdioServerParameters

from harness.commands import SLOTRELAY
from slotrelay.chain.slots import content_hash, read_slot
from tests.support.chain_specs import ROOT
from tests.support.phase2_chain import AGENT, phase2_copy, right_answer, route_to_review
from tests.support.waiting import API_POLL_SECONDS, wait_until

pytestmark = pytest.mark.prefect_server


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    answer = result.structured_content
    assert answer["schema"] == "psmr-tool-result-0.1" and result.is_error is (answer["status"] == "error")
    return answer


def test_an_agent_node_over_mcp_with_watch_routing(prefect_server: str, tmp_path: Path) -> None:
    chain_path = phase2_copy(tmp_path / "phase2")
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "COLUMNS": "200"}
    log = tmp_path / "watch.log"
    with log.open("w") as handle:
        watch = subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "watch", str(chain_path)],
            cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=60,
                   what="watch to start")
        assert watch.poll() is None, log.read_text()
        anyio.run(_agent_session, chain_path, env)
    finally:
        watch.send_signal(signal.SIGINT)
        code = watch.wait(timeout=90)
    assert code == 0, log.read_text()


def _server(chain_path: Path, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=SLOTRELAY, cwd=str(chain_path.parent), env=env, args=[
        "mcp", "serve", "--chain", str(chain_path), "--agent", AGENT, "--allow-decide"])


async def _agent_session(chain_path: Path, env: dict[str, str]) -> None:
    """One MCP session (one server process) for both of the agent's inputs, as an agent would keep it."""
    slots = chain_path.parent / "slots"
    async with Client(_server(chain_path, env)) as client:
        await _agent_plays_review(client, chain_path)
        publish_out = slots / "exec-publish_output.json"
        await anyio.to_thread.run_sync(partial(
            wait_until, lambda: (read_slot(publish_out) or {}).get("status") == "completed", timeout=180,
            what="exec-publish to run on the agent's output"))
        published = read_slot(publish_out)
        assert published["data"]["published"] == 1
        # exec-publish ran on the input the agent's output was routed into.
        assert published["produced_from"] == content_hash((slots / "exec-publish_input.json").read_bytes())
        await _agent_fails_and_decides(client, chain_path)


async def _agent_plays_review(client: Client, chain_path: Path) -> None:
    slots = chain_path.parent / "slots"
    [listed] = (await _call(client, "chain_list", {}))["data"]["chains"]
    assert listed["agent_nodes"] == [AGENT]
    contract = (await _call(client, "chain_describe", {"node_id": AGENT}))["data"]
    assert contract["output_schema"]["properties"]["node_id"]["const"] == AGENT
    inbox: dict[str, Any] = {}

    async def wait() -> None:
        inbox.update((await _call(client, "node_inbox", {"node_id": AGENT, "wait_s": 120}))["data"])

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        await anyio.to_thread.run_sync(route_to_review, chain_path, ["Atomic writes"])
    assert inbox["state"] == "pending", inbox
    titles = inbox["input"]["data"]["items"]

    wrong = await _call(client, "node_submit", {
        **right_answer(titles), "data": {"aproved": True, "titles": titles},
        "input_digest": inbox["input_digest"]})
    assert wrong["error"]["code"] == "VALIDATION_FAILED", wrong
    assert [v["path"] for v in wrong["data"]["violations"]] == ["$.data.approved"]
    assert not (slots / f"{AGENT}_output.json").exists()

    answer = {**right_answer(titles), "input_digest": inbox["input_digest"]}
    right = await _call(client, "node_submit", answer)
    assert right["status"] == "ok", right
    assert right["data"]["engine"]["starts"] == [{"node_id": "exec-publish", "runs": "engine"}]
    after = (await _call(client, "node_inbox", {"node_id": AGENT}))["data"]
    assert after["state"] == "answered" and after["output_status"] == "completed"


async def _agent_fails_and_decides(client: Client, chain_path: Path) -> None:
    alerts = chain_path.parent / "alerts"
    await anyio.to_thread.run_sync(route_to_review, chain_path, ["Watchdog tips"])
    inbox = (await _call(client, "node_inbox", {"node_id": AGENT, "wait_s": 60}))["data"]
    assert inbox["state"] == "pending" and inbox["input"]["data"]["items"] == ["Watchdog tips"]
    failed = await _call(client, "node_submit", {
        "node_id": AGENT, "status": "failed", "capabilities_used": ["Read"],
        "error": {"error_type": "write_denied", "message": "the review store refused the write"},
        "input_digest": inbox["input_digest"]})
    assert failed["status"] == "ok", failed
    assert (failed["data"]["engine"]["error_type"], failed["data"]["engine"]["handling"]) == (
        "write_denied", "fail")

    def paused() -> bool:
        return any(read_slot(p).get("status") == "paused" for p in alerts.glob("alert-*.json"))

    await anyio.to_thread.run_sync(partial(wait_until, paused, timeout=180,
                                           what="the alert of the failed submit"))
    [alert] = (await _call(client, "alerts_list", {"status": "paused"}))["data"]["alerts"]
    assert (alert["node_id"], alert["error_type"], alert["handling"]) == (AGENT, "write_denied", "fail")
    suspended = await anyio.to_thread.run_sync(_suspended_within, alert["flow_run_id"])
    assert suspended, alert
    decided = await _call(client, "alert_decide", {
        "alert": alert["alert"], "decision": "continue", "comment": "reviewed by hand",
        "data": {"approved": True, "titles": ["Watchdog tips"]}})
    assert decided["status"] == "ok", decided
    summary = chain_path.parent / "logs" / "runs" / f"{alert['flow_run_id']}.json"
    await anyio.to_thread.run_sync(partial(wait_until, summary.exists, timeout=240,
                                           what="the decided run to end"))
    status = (await _call(client, "run_status", {"flow_run_id": alert["flow_run_id"]}))["data"]
    assert status["state"] == "COMPLETED" and status["summary"]["state"] == "COMPLETED", status
    assert status["ui_url"].endswith(f"/runs/flow-run/{alert['flow_run_id']}")
    recorded = read_slot(alerts / alert["alert"])["decision"]
    assert (recorded["via"], recorded["decision"]) == ("mcp", "continue")
    assert "via MCP client" in recorded["decided_by"]
    assert read_slot(chain_path.parent / "slots" / "exec-publish_output.json")["data"]["published"] == 1


def _suspended_within(flow_run_id: str) -> bool:
    from uuid import UUID

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        def suspended() -> bool:
            state = client.read_flow_run(UUID(flow_run_id)).state
            return state is not None and state.name == "Suspended"

        wait_until(suspended, timeout=120, what="the alert's run to be suspended", interval=API_POLL_SECONDS)
    return True
