"""Executors and one node's run without Prefect: input guards, named errors, the external wait."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from slotrelay.chain import NodeError, load_chain
from slotrelay.chain import executors as executors_module
from slotrelay.chain.runner import decide_handling, execute_node
from slotrelay.chain.slots import output_slot_document, write_json_atomic
from tests.support.chain_specs import node, route
from tests.support.waiting import wait_until

STEPS = "def double(data):\n    return {'n': data.get('n', 1) * 2}\n"


def build(write_chain, nodes: list, routes: list | None = None, **extra) -> object:
    path = write_chain({"chain_id": "x", "nodes": nodes, "routes": routes or [], **extra},
                       {"steps.py": STEPS})
    return load_chain(path)


def test_input_slot_missing_and_malformed(write_chain) -> None:
    python = {"kind": "python", "callable": "steps:double"}
    chain = build(write_chain, [node("a", start=True, executor=python), node("b", executor=python)],
                  [route("a", "b")])
    with pytest.raises(NodeError) as missing:
        execute_node(chain, "b")
    assert missing.value.error_type == "input_missing"
    slot = chain.resolve("slots/b_input.json")
    slot.parent.mkdir(parents=True, exist_ok=True)
    slot.write_text('{"status": "pending", "data": ')
    with pytest.raises(NodeError) as half:
        execute_node(chain, "b")
    assert half.value.error_type == "slot_invalid"
    slot.write_text('{"status": "pending", "data": [1]}')
    with pytest.raises(NodeError, match='"data" is list'):
        execute_node(chain, "b")
    write_json_atomic(slot, {"status": "pending", "data": {"n": 4}})
    document, _digest = execute_node(chain, "b")
    assert document["data"] == {"n": 8}


def test_an_executor_kind_whose_module_is_missing_is_named(write_chain, monkeypatch) -> None:
    monkeypatch.setitem(executors_module.EXECUTORS, "pen", "slotrelay.not_there.node:run_pen_node")
    chain = build(write_chain,
                  [node("p", start=True, executor={"kind": "pen", "intent": "x", "persona_id": "y"})])
    with pytest.raises(NodeError) as missing:
        execute_node(chain, "p")
    assert missing.value.error_type == "executor_missing"
    assert "executor kind 'pen' needs slotrelay.not_there.node:run_pen_node" in missing.value.message


def test_external_node_waits_for_a_fresh_output_slot_on_file_events(write_chain) -> None:
    chain = build(write_chain, [node("ext", start=True, timeout_seconds=10, capabilities=["Read"])])
    out = chain.resolve("slots/ext_output.json")
    write_json_atomic(out, output_slot_document("ext", status="completed", data={"stale": True}))
    os.utime(out, (time.time() - 60, time.time() - 60))

    def agent() -> None:
        time.sleep(0.3)
        out.with_name("ext_output.json.x.tmp").write_text("{half")
        write_json_atomic(out, output_slot_document("ext", status="completed", data={"fresh": True},
                                                    capabilities_used=["Read"]))

    threading.Thread(target=agent).start()
    document, _digest = execute_node(chain, "ext", since=time.time())
    # Before its timeout_seconds (10): the fresh slot is the answer, the stale one and the half-written
    # temporary file are not.
    assert document["data"] == {"fresh": True}

    # A fresh slot naming another node is the agent's answer, refused by the identity check (L2).
    write_json_atomic(out, {"node_id": "other", "status": "completed", "data": {}})
    with pytest.raises(NodeError) as other:
        execute_node(chain, "ext", since=time.time() - 5)
    assert other.value.error_type == "identity_mismatch" and "'other'" in other.value.message


def test_external_timeout_and_reported_failure(write_chain) -> None:
    chain = build(write_chain, [node("ext", start=True, timeout_seconds=0.5)])
    with pytest.raises(NodeError) as waited:
        execute_node(chain, "ext")
    assert waited.value.error_type == "timeout"
    write_json_atomic(chain.resolve("slots/ext_output.json"), output_slot_document(
        "ext", status="failed", data={},
        error={"error_type": "external_unreachable", "message": "no network"}))
    with pytest.raises(NodeError) as reported:
        execute_node(chain, "ext", since=0)
    assert (reported.value.error_type, reported.value.message) == ("external_unreachable", "no network")


SLOW = """
import pathlib, time

def spin(data):
    marker = pathlib.Path(data["marker"])
    n = 0
    while True:
        n += 1
        marker.write_text(str(n))

def nap(data):
    time.sleep(3)
    pathlib.Path(data["marker"]).write_text("woke and went on")
    return {}

def quick(data):
    return {"ok": True}
"""


def callable_running(name: str) -> bool:
    """Whether the thread the engine runs callable `name` in (under its timeout) is still alive."""
    return any(thread.name == f"slotrelay-callable {name}" for thread in threading.enumerate())


def test_python_callable_past_timeout_seconds_fails_with_timeout_and_is_stopped(write_chain,
                                                                                tmp_path) -> None:
    nodes = [
        node(name, start=True, timeout_seconds=0.5, executor={"kind": "python", "callable": f"slow:{name}"})
        for name in ("spin", "nap", "quick")]
    path = write_chain({"chain_id": "x", "nodes": nodes, "routes": []}, {"slow.py": SLOW})
    chain = load_chain(path)
    spin_marker, nap_marker = tmp_path / "spin.txt", tmp_path / "nap.txt"
    run = executors_module.run_python

    def call(name: str, marker: Path) -> object:
        context = executors_module.ExecutionContext(chain=chain, node=chain.node(name), attempt=1,
                                                    input_slot=None,
                                                    output_slot=tmp_path / f"{name}.json")
        return run(chain.node(name).executor, {"marker": str(marker)}, context)

    with pytest.raises(NodeError) as busy:
        call("spin", spin_marker)
    assert busy.value.error_type == "timeout" and "timeout_seconds (0.5 s)" in busy.value.message
    # A busy loop is stopped at its next bytecode: its thread ends (and with it the counter it writes).
    wait_until(lambda: not callable_running("slow:spin"), timeout=30, what="the busy loop's thread to end")
    assert spin_marker.exists(), "the loop ran before it was stopped"

    with pytest.raises(NodeError) as sleeping:
        call("nap", nap_marker)
    assert sleeping.value.error_type == "timeout"
    assert not nap_marker.exists(), "the node must fail at its deadline, not when the 3 s sleep ends"
    # A sleep cannot be interrupted; once it returns, the callable does no more work: its thread ends
    # without writing the marker.
    wait_until(lambda: not callable_running("slow:nap"), timeout=30,
               what="the sleeping callable's thread to end")
    assert not nap_marker.exists()
    assert call("quick", tmp_path / "unused") == {"ok": True}


def test_command_executor(write_chain) -> None:
    echo = {"kind": "command",
            "argv": ["{python}", "-c",
                     "import json,sys; d=json.load(sys.stdin); print(json.dumps({'got': d}))"]}
    chain = build(write_chain, [node("cmd", start=True, executor=echo),
                                node("gone", start=True,
                                     executor={"kind": "command", "argv": ["/no/such/program"]})])
    assert execute_node(chain, "cmd")[0]["data"] == {"got": {}}
    with pytest.raises(NodeError) as gone:
        execute_node(chain, "gone")
    assert gone.value.error_type == "executor_missing"


def test_handling_decisions(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True)], error_types=[
        {"error_type": "flaky", "handling": "retry", "max_retries": 2,
         "escalate_after": "max_retries_exceeded"},
        {"error_type": "quiet", "handling": "retry", "max_retries": 1},
        {"error_type": "loud", "handling": "retry", "max_retries": 0,
         "escalate_after": "max_retries_exceeded",
         "on_escalation": "pause"},
        {"error_type": "gone", "handling": "skip"},
        {"error_type": "bad", "handling": "fail"},
    ])
    def handling(error_type: str, n: int) -> str:
        return decide_handling(chain, NodeError(error_type, "m"), type_failures=n)

    assert [handling("flaky", n) for n in (1, 2, 3)] == ["retry", "retry", "escalate"]
    assert [handling("quiet", n) for n in (1, 2)] == ["retry", "fail"]
    assert handling("loud", 1) == "arbitrate"
    assert (handling("gone", 1), handling("bad", 1), handling("never-declared", 1)) == ("skip", "fail",
                                                                                        "arbitrate")
    assert json.loads(json.dumps(chain.model_dump(mode="json")))["chain_id"] == "x"


def test_node_error_survives_pickling() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(NodeError("timeout", "slow")))
    assert (error.error_type, error.message, error.code) == ("timeout", "slow", "timeout")
