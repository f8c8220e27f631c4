"""The engine's tools through the SDK's in-memory client, on a copy of the phase-2 example.

The server is the real one (`build_server` with `EngineTools`) over real slot files; only the transport
is in memory. The sensor is not running here: these tests check what the tools read, refuse and write
(tests/sensor/test_agent_mcp.py drives the same tools with `slotrelay watch` on a Prefect server).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from psmr_mcp import WorkspaceRegistry, build_server
from psmr_mcp.engine_tools import EngineTools
from slotrelay.chain.agent_view import AgentGrants, ServedChains
from slotrelay.chain.slots import content_hash, read_slot
from tests.support.mcp_tools import call, ok, refused
from tests.support.phase2_chain import AGENT, ATTESTED, phase2_copy, right_answer, route_to_review
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.anyio


@pytest.fixture
def chain_path(tmp_path: Path) -> Path:
    return phase2_copy(tmp_path / "phase2")


def server(chain_path: Path, *, agents: tuple[str, ...] = (AGENT,)) -> Any:
    engine = EngineTools(ServedChains([chain_path]), grants=AgentGrants(nodes=frozenset(agents)))
    return build_server(WorkspaceRegistry([]), engine=engine)


async def test_chain_list_and_describe_give_the_nodes_contract(chain_path: Path) -> None:
    async with Client(server(chain_path)) as client:
        listed = (await ok(client, "chain_list", {}))["data"]
        [chain] = listed["chains"]
        assert chain["chain_id"] == "phase2-content" and chain["agent_nodes"] == [AGENT]
        assert listed["agent_grants"] == [AGENT]
        whole = (await ok(client, "chain_describe", {}))["data"]
        assert {"route_id": "route-review-to-publish"}.items() <= whole["routes"][5].items()
        assert any(e["error_type"] == "check_failed" for e in whole["error_types"])
        node = (await ok(client, "chain_describe", {"node_id": AGENT}))["data"]
        assert node["capabilities"] == ["Read"] and node["forbidden_capabilities"] == ["Write", "scp"]
        assert node["timeout_seconds"] == 120 and node["granted"] is True
        schema = node["output_schema"]
        assert schema["properties"]["node_id"] == {"const": AGENT, "type": "string"}
        assert schema["properties"]["capabilities_used"]["items"]["enum"] == ["Read"]
        # The schema an agent reads states what the checks hold it to: a right output passes, a wrong one not.
        right = {**right_answer(["a"]), "error": None}
        assert not list(Draft202012Validator(schema).iter_errors(right))
        [error] = Draft202012Validator(schema).iter_errors({**right, "data": {"approve": True}})
        assert error.json_path == "$.data"
        await refused(client, "chain_describe", {"node_id": "nobody"}, "OBJECT_NOT_FOUND")
        await refused(client, "chain_describe", {"chain_id": "other"}, "OBJECT_NOT_FOUND")


async def test_the_inbox_follows_the_slots(chain_path: Path) -> None:
    async with Client(server(chain_path)) as client:
        empty = (await ok(client, "node_inbox", {"node_id": AGENT}))["data"]
        assert (empty["state"], empty["pending"], empty["since"]) == ("empty", False, None)
        route_to_review(chain_path)
        pending = (await ok(client, "node_inbox", {"node_id": AGENT}))["data"]
        assert (pending["state"], pending["pending"], pending["attempt"]) == ("pending", True, 1)
        assert pending["input"]["data"]["items"] == ["Atomic writes", "Watchdog tips"]
        assert pending["input_digest"].startswith("sha256:") and pending["deadline"] > pending["since"]


async def test_an_inbox_wait_is_answered_by_the_file_event(chain_path: Path) -> None:
    written = threading.Event()

    def engine_routes_later() -> None:
        # The write comes once the wait is in progress: the tool's answer must come from its file event.
        written.wait(30)
        route_to_review(chain_path)

    writer = threading.Thread(target=engine_routes_later)
    writer.start()
    try:
        async with Client(server(chain_path)) as client:
            async with anyio.create_task_group() as group:
                answers: list[dict[str, Any]] = []

                async def wait() -> None:
                    answers.append(
                        (await ok(client, "node_inbox", {"node_id": AGENT, "wait_s": 120}))["data"]
                    )

                group.start_soon(wait)
                await _until_watched(chain_path.parent / "slots")
                written.set()
            assert answers[0]["state"] == "pending"
            # A wait that nothing answers ends at wait_s with the state then.
            (chain_path.parent / "slots" / "exec-review_output.json").write_text(
                json.dumps({**right_answer(["x"]), "updated_at": None})
            )
            timed_out = (await ok(client, "node_inbox", {"node_id": AGENT, "wait_s": 0.2}))["data"]
            assert timed_out["state"] == "answered"
    finally:
        written.set()
        writer.join()


async def _until_watched(folder: Path) -> None:
    """Until an inotify watch is on `folder`: the waiter's observer has scheduled it."""
    await wait_until_async(lambda: _watched(folder), timeout=60, what=f"an inotify watch on {folder}",
                           interval=0.01)


def _watched(folder: Path) -> bool:
    import os

    if not folder.is_dir():
        return False
    target = os.stat(folder).st_ino
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue
        if any(line.startswith("inotify") and f"ino:{target:x} " in line for line in info.splitlines()):
            return True
    return False


async def test_submit_needs_the_grant_for_its_node(chain_path: Path) -> None:
    route_to_review(chain_path)
    async with Client(server(chain_path, agents=())) as client:
        message = await refused(client, "node_submit", right_answer(["a"]), "CAPABILITY_DENIED")
        assert "--agent exec-review" in message
    async with Client(server(chain_path)) as client:
        # Another node's identity: the session is bound to the nodes granted.
        other = {**right_answer(["a"]), "node_id": "exec-publish"}
        assert "--agent exec-publish" in await refused(client, "node_submit", other, "CAPABILITY_DENIED")
        # The document's node_id is the granted node's; it is not a field the agent sets.
        impostor = {
            **right_answer(["a"]),
            "data": {"approved": True},
            "node_id": AGENT,
            "capabilities_used": ["Read"],
            "checks": {ATTESTED: True},
        }
        _, answer = await call(client, "node_submit", {**impostor, "identity": "exec-publish"})
        assert answer["error"]["code"] == "INVALID_QUERY"
    assert not (chain_path.parent / "slots" / "exec-review_output.json").exists()


async def test_a_wrong_field_is_refused_with_its_json_path_and_nothing_written(chain_path: Path) -> None:
    route_to_review(chain_path)
    out = chain_path.parent / "slots" / "exec-review_output.json"
    async with Client(server(chain_path)) as client:
        wrong = {**right_answer(["a"]), "data": {"approve": True, "titles": ["a"]}}
        _, answer = await call(client, "node_submit", wrong)
        assert answer["error"]["code"] == "VALIDATION_FAILED"
        [violation] = answer["data"]["violations"]
        assert violation["path"] == "$.data.approved" and "missing" in violation["message"]
        assert answer["data"]["written"] is False and not out.exists()
        unattested = {**right_answer(["a"]), "checks": {}}
        [violation] = (await call(client, "node_submit", unattested))[1]["data"]["violations"]
        assert violation["path"] == f"$.checks['{ATTESTED}']"
        forbidden = {**right_answer(["a"]), "capabilities_used": ["Read", "Write", "Bash"]}
        paths = [v["path"] for v in (await call(client, "node_submit", forbidden))[1]["data"]["violations"]]
        assert paths == ["$.capabilities_used[1]", "$.capabilities_used[2]"]
        undeclared = {"node_id": AGENT, "status": "failed", "error": {"error_type": "gremlins"}}
        [violation] = (await call(client, "node_submit", undeclared))[1]["data"]["violations"]
        assert violation["path"] == "$.error.error_type" and "check_failed" in violation["message"]
        assert not out.exists()
        # Right: written, and the answer says what the engine does with it.
        done = (await ok(client, "node_submit", right_answer(["Atomic writes"])))["data"]
    assert done["written"] is True and read_slot(out)["data"]["titles"] == ["Atomic writes"]
    assert read_slot(out)["produced_from"] == done["answers_input"]
    engine = done["engine"]
    assert engine["action"] == "route" and engine["writes"] == ["exec-publish"]
    assert engine["starts"] == [{"node_id": "exec-publish", "runs": "engine"}]


async def test_a_failure_of_a_declared_type_says_how_the_chain_handles_it(chain_path: Path) -> None:
    route_to_review(chain_path)
    async with Client(server(chain_path)) as client:
        failed = {
            "node_id": AGENT,
            "status": "failed",
            "capabilities_used": ["Read"],
            "error": {"error_type": "source_busy", "message": "the store is re-indexing"},
        }
        engine = (await ok(client, "node_submit", failed))["data"]["engine"]
    assert (engine["action"], engine["error_type"], engine["handling"]) == (
        "error_type",
        "source_busy",
        "retry",
    )


async def test_a_submit_while_not_pending_is_refused(chain_path: Path) -> None:
    async with Client(server(chain_path)) as client:
        message = await refused(client, "node_submit", right_answer(["a"]), "UNRESOLVED_REQUIRED_INPUT")
        assert "not written yet" in message
        route_to_review(chain_path)
        inbox = (await ok(client, "node_inbox", {"node_id": AGENT}))["data"]
        await ok(client, "node_submit", {**right_answer(["a"]), "input_digest": inbox["input_digest"]})
        message = await refused(client, "node_submit", right_answer(["b"]), "UNRESOLVED_REQUIRED_INPUT")
        assert "already answered" in message
        # A new input makes the node pending again; an answer naming the old input is refused.
        route_to_review(chain_path, titles=["Prefect 3"])
        stale = {**right_answer(["b"]), "input_digest": inbox["input_digest"]}
        assert "changed since" in await refused(client, "node_submit", stale, "UNRESOLVED_REQUIRED_INPUT")
    assert read_slot(chain_path.parent / "slots" / "exec-review_output.json")["data"]["titles"] == ["a"]


async def test_concurrent_submits_for_one_node_one_wins(chain_path: Path) -> None:
    route_to_review(chain_path)
    answers: list[dict[str, Any]] = []
    async with Client(server(chain_path)) as client:

        async def submit(title: str) -> None:
            answers.append((await call(client, "node_submit", right_answer([title])))[1])

        async with anyio.create_task_group() as group:
            for title in ("first", "second", "third"):
                group.start_soon(submit, title)
    won = [a for a in answers if a["status"] == "ok"]
    lost = [a for a in answers if a["status"] == "error"]
    assert len(won) == 1 and len(lost) == 2
    assert all(
        a["error"]["code"] == "UNRESOLVED_REQUIRED_INPUT" and "already answered" in a["error"]["message"]
        for a in lost
    )
    raw = (chain_path.parent / "slots" / "exec-review_output.json").read_bytes()
    assert content_hash(raw) == won[0]["data"]["output_digest"]


async def test_ten_megabytes_of_data_are_refused_by_the_size_limit(chain_path: Path) -> None:
    route_to_review(chain_path)
    async with Client(server(chain_path)) as client:
        huge = {**right_answer(["a"]), "data": {"approved": True, "titles": ["a"], "blob": "x" * 10_000_000}}
        message = await refused(client, "node_submit", huge, "POLICY_BLOCKED")
        assert "above the limit of 1,000,000" in message
    assert not (chain_path.parent / "slots" / "exec-review_output.json").exists()


async def test_a_slot_the_sensor_would_refuse_is_never_written(chain_path: Path) -> None:
    route_to_review(chain_path)
    async with Client(server(chain_path)) as client:
        deep: Any = "bottom"
        for _ in range(120):
            deep = {"d": deep}
        answer = (
            await call(
                client,
                "node_submit",
                {**right_answer(["a"]), "data": {"approved": True, "titles": ["a"], "deep": deep}},
            )
        )[1]
        assert answer["error"]["code"] == "VALIDATION_FAILED", answer
        assert "nested deeper than 100" in answer["error"]["message"]
    assert not (chain_path.parent / "slots" / "exec-review_output.json").exists()


async def test_alerts_are_listed_and_deciding_needs_its_grant(chain_path: Path) -> None:
    from slotrelay.chain.alerts import Alert, alert_path, write_alert
    from slotrelay.chain.schema import load_chain

    chain = load_chain(chain_path)
    path = alert_path(chain.alerts_dir, AGENT)
    write_alert(
        path,
        Alert(
            alert_id="a1",
            created_at="2026-12-05T00:00:00+00:00",
            chain_id=chain.chain_id,
            chain_path=str(chain_path),
            flow_run_id=None,
            node_id=AGENT,
            error_type="write_denied",
            message="the agent says so",
            attempts=1,
            input_slot=None,
            output_slot=None,
            handling="fail",
            reason="fail",
            status="paused",
        ),
    )
    async with Client(server(chain_path)) as client:
        [listed] = (await ok(client, "alerts_list", {}))["data"]["alerts"]
        assert (listed["alert"], listed["node_id"], listed["status"]) == (path.name, AGENT, "paused")
        assert (await ok(client, "alerts_list", {"status": "decided"}))["data"]["alerts"] == []
        decision = {"alert": path.name, "decision": "continue", "comment": "looked at it"}
        assert "--allow-decide" in await refused(client, "alert_decide", decision, "CAPABILITY_DENIED")
    engine = EngineTools(ServedChains([chain_path]), grants=AgentGrants(decide=True))
    async with Client(build_server(WorkspaceRegistry([]), engine=engine)) as client:
        # A name that is not an alert of the served chains is never read, whatever it says.
        traversal = {**decision, "alert": "alert-../../etc.json"}
        await refused(client, "alert_decide", traversal, "INVALID_QUERY")
        nobody = {**decision, "alert": "alert-x-nobody.json"}
        await refused(client, "alert_decide", nobody, "OBJECT_NOT_FOUND")
        message = await refused(client, "alert_decide", decision, "INVALID_QUERY")
        assert "outside a flow run" in message


async def test_run_status_of_a_chain_reads_its_slots(
    chain_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No Prefect server answers here: the slots still say where the chain stands.
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    route_to_review(chain_path)
    async with Client(server(chain_path)) as client:
        status = (await ok(client, "run_status", {}))["data"]
        assert status["nodes"][AGENT] == {"state": "pending", "output_status": None}
        assert status["nodes"]["exec-publish"]["state"] == "empty" and status["runs"] == []
        flow = "00000000-0000-0000-0000-000000000000"
        assert "no Prefect server" in await refused(
            client, "run_status", {"flow_run_id": flow}, "EXECUTION_FAILED"
        )


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--agent", "exec-publish"], "BAD_INPUT: --agent exec-publish: that node runs inside the engine"),
        (["--agent", "nobody"], "BAD_INPUT: --agent nobody: no node of that id in the served chains"),
        (["--slots-root", "/nonexistent"], "BAD_INPUT: --slots-root /nonexistent: not a folder"),
    ],
)
def test_serve_refuses_grants_it_cannot_honour(chain_path: Path, extra: list[str], says: str) -> None:
    from typer.testing import CliRunner

    from slotrelay.cli import app

    done = CliRunner().invoke(app, ["mcp", "serve", "--chain", str(chain_path), *extra], input="")
    assert done.exit_code == 2 and done.stderr.startswith(says), done.stderr
    nothing = CliRunner().invoke(app, ["mcp", "serve"], input="")
    assert nothing.exit_code == 2 and "--workspace PATH" in nothing.stderr and "--chain" in nothing.stderr
