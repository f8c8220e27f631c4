"""Issue 12 on the session's real Prefect server: in `watch`, agents' slots get the same rules as in `run`.

One `slotrelay watch` serves ten chains; a separate process writes the agents' slots. Each chain is
`seed -> ext (external, the agent) -> work (python)`; the test writes ext's input slot as seed's route
would, then the agent answers (or does not). Every slot that is not a plain completed one is handed
to a run of the chain at `ext`, where the chain's error types apply as in `slotrelay run`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from uuid import UUID

import pytest
from typer.testing import CliRunner

from harness.chains import WORK_CALLABLE, WORK_MODULE
from slotrelay.chain.alerts import read_alert
from slotrelay.chain.slots import input_slot_document, read_slot, write_json_atomic
from slotrelay.cli import app
from tests.support.chain_specs import ROOT
from tests.support.waiting import API_POLL_SECONDS, wait_until

pytestmark = pytest.mark.prefect_server
HERE = Path(__file__).parent
CLI = CliRunner()
ERROR_TYPES = [
    {"error_type": "gone", "handling": "skip"},
    {"error_type": "bad", "handling": "fail"},
    {"error_type": "flaky", "handling": "retry", "max_retries": 1, "retry_interval_seconds": 0,
     "escalate_after": "max_retries_exceeded"},
]


def write_chain(folder: Path, chain_id: str, *, timeout: float | None = None,
                error_types: list | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "sensor_work.py").write_text(WORK_MODULE)
    always = {"field": "status", "operator": "equals", "value": "completed"}
    ext = {"node_id": "ext", "input_slot": {"slot_id": "ext-in", "path": "slots/ext_input.json"},
           "output_slot": {"slot_id": "ext", "path": "slots/ext_output.json",
                           "babel_path": "slots/ext_babel.jsonl"},
           "capabilities": ["Write"], "executor": {"kind": "external"}}
    if timeout is not None:
        ext["timeout_seconds"] = timeout
    chain = {
        "chain_id": chain_id,
        "nodes": [{"node_id": "seed", "output_slot": {"slot_id": "seed", "path": "slots/seed_output.json"},
                   "executor": {"kind": "python", "callable": WORK_CALLABLE}}, ext,
                  {"node_id": "work", "input_slot": {"slot_id": "work-in", "path": "slots/work_input.json"},
                   "output_slot": {"slot_id": "work", "path": "slots/work_output.json"},
                   "executor": {"kind": "python", "callable": WORK_CALLABLE}}],
        "routes": [{"route_id": "seed-to-ext", "from_node": "seed", "to_node": "ext", "condition": always},
                   {"route_id": "ext-to-work", "from_node": "ext", "to_node": "work", "condition": always}],
        "error_types": error_types if error_types is not None else ERROR_TYPES,
    }
    (folder / "node_chain.json").write_text(json.dumps(chain))
    return folder / "node_chain.json"


def ask(folder: Path) -> None:
    """ext's input slot, as seed's route writes it."""
    write_json_atomic(folder / "slots" / "ext_input.json",
                      input_slot_document(from_node="seed", route_id="seed-to-ext",
                                          data={"question": folder.name}))


def agent(folder: Path, *, status: str = "completed", node_id: str = "ext", data: dict | None = None,
          error_type: str | None = None) -> None:
    document = {"node_id": node_id, "status": status, "data": data or {"answer": folder.name},
                "error": {"error_type": error_type, "message": "the agent says so"} if error_type else None,
                "capabilities_used": ["Write"]}
    subprocess.run([sys.executable, str(HERE / "agent_proc.py"), str(folder / "slots" / "ext_output.json"),
                    json.dumps(document)], check=True, timeout=60)


def write_raw(folder: Path, raw: bytes) -> None:
    """An agent writing bytes that are no slot, atomically (a temporary file renamed onto the slot)."""
    staged = folder / "slots" / "ext_output.json.agent.tmp"
    staged.write_bytes(raw)
    os.replace(staged, folder / "slots" / "ext_output.json")


def alerts(folder: Path) -> list:
    return [read_alert(p) for p in sorted((folder / "alerts").glob("alert-*.json"))]


def completed(path: Path) -> bool:
    document = read_slot(path)
    return bool(document) and document.get("status") == "completed"


def test_agents_slots_get_the_engines_rules_in_watch(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run

    cases = {
        name: tmp_path / name for name in ("identity", "skip", "fail", "retry", "timeout", "babel", "unknown",
                                                "notjson", "nostatus", "half")}
    chains = [write_chain(cases[name], f"wr-{name}", timeout=3 if name == "timeout" else None,
                          error_types=[*ERROR_TYPES, {"error_type": "timeout", "handling": "fail"}]
                          if name == "timeout" else None)
              for name in cases]
    for folder in cases.values():
        ask(folder)
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "COLUMNS": "200"}
    log = tmp_path / "watch.log"
    # No warm process: the runs take the runner's path (a new `python -m prefect.engine` each), whose end
    # of a failed run is checked below; a warm process says it otherwise ("Finished in state Failed").
    with log.open("w") as handle:
        watch = subprocess.Popen([sys.executable, "-m", "slotrelay.cli", "watch", "--warm", "0",
                                  *map(str, chains)],
                                 cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=240,
                   what="watch to start")
        assert watch.poll() is None, log.read_text()

        # Every agent answers at once: the runs they lead to go on side by side.
        began = time.monotonic()
        agent(cases["fail"], status="failed", error_type="bad")
        agent(cases["identity"], node_id="impostor")
        agent(cases["skip"], status="failed", error_type="gone")
        agent(cases["retry"], status="failed", error_type="flaky")
        agent(cases["babel"], data={"answer": "once"})
        agent(cases["unknown"], status="failed", error_type="weird")
        # Malformed slots: not JSON, a field missing, and a write that stops half way (no rename).
        write_raw(cases["notjson"], b"status: completed\n")
        write_raw(cases["nostatus"], json.dumps({"node_id": "ext", "data": {}}).encode())
        (cases["half"] / "slots" / "ext_output.json").write_bytes(b'{"node_id": "ext", "status": "compl')

        # fail: an alert, nothing downstream.
        wait_until(lambda: alerts(cases["fail"]), timeout=120, what="the alert of a failed slot")
        print(f"\nfailed slot -> alert file: {time.monotonic() - began:.2f} s (one sample, nine more slots "
              "written after it)")
        [failed] = alerts(cases["fail"])
        assert (failed.node_id, failed.error_type, failed.handling) == ("ext", "bad", "fail")
        # skip: goes on, with the data ext received.
        wait_until(lambda: completed(cases["skip"] / "slots" / "work_output.json"), timeout=120,
                   what="skip to lead on")
        assert read_slot(cases["skip"] / "slots" / "work_output.json")["data"]["seen"] == {"question": "skip"}
        # babel: the agent's completed output is dual-written once, and routed.
        wait_until(lambda: completed(cases["babel"] / "slots" / "work_output.json"), timeout=120,
                   what="babel's work")
        babel = (cases["babel"] / "slots" / "ext_babel.jsonl").read_text().splitlines()
        assert len(babel) == 1 and json.loads(babel[0])["payload"]["data"] == {"answer": "once"}
        # retry: the engine asks the agent again (input slot pending, attempt 2); the answer goes on.
        wait_until(lambda: (read_slot(cases["retry"] / "slots" / "ext_input.json") or {}).get("attempt") == 2,
                   timeout=120,
                   what="the agent to be asked again")
        agent(cases["retry"], data={"answer": "second try"})
        # Three runs wait for a person; each gets its decision as soon as all three are suspended, and what
        # each decision leads to is checked after.
        # identity mismatch: an alert and a suspended run; `slotrelay decide` continues with data.
        wait_until(lambda: any(a.status == "paused" for a in alerts(cases["identity"])), timeout=120,
                   what="identity's alert")
        [mismatch] = alerts(cases["identity"])
        assert mismatch.error_type == "identity_mismatch" and "impostor" in mismatch.message
        [alert_file] = sorted((cases["identity"] / "alerts").glob("alert-*.json"))
        # an undeclared error type: an alert, decided through the API as the UI form does (retry).
        wait_until(lambda: any(a.status == "paused" for a in alerts(cases["unknown"])), timeout=120,
                   what="unknown's alert")
        [unknown] = alerts(cases["unknown"])
        assert (unknown.error_type, unknown.handling) == ("weird", "arbitrate")
        # fail: its run waits for a person (L5) like any alert's; a decision to terminate ends it.
        wait_until(lambda: any(a.status == "paused" for a in alerts(cases["fail"])), timeout=120,
                   what="fail's alert")
        [fail_alert] = sorted((cases["fail"] / "alerts").glob("alert-*.json"))
        wait_until(lambda: _suspended(mismatch.flow_run_id), timeout=120,
                   what="identity's run to be suspended",
                   interval=API_POLL_SECONDS)
        wait_until(lambda: _suspended(unknown.flow_run_id), timeout=120, what="unknown's run to be suspended",
                   interval=API_POLL_SECONDS)
        wait_until(lambda: _suspended(failed.flow_run_id), timeout=120, what="fail's run to be suspended",
                   interval=API_POLL_SECONDS)
        # `slotrelay decide` runs in this process: the command's own code against the server, without a
        # second interpreter importing Prefect for it (tests/chain/test_arbitration.py runs it as a process).
        decided = CLI.invoke(app, ["decide", str(alert_file), "continue", "--data", '{"answer": "by hand"}'])
        assert decided.exit_code == 0, (decided.output, decided.exception)
        resume_flow_run(UUID(unknown.flow_run_id), run_input={"decision": "retry"})
        terminated = CLI.invoke(app, ["decide", str(fail_alert), "terminate"])
        assert terminated.exit_code == 0, (terminated.output, terminated.exception)

        wait_until(lambda: completed(cases["retry"] / "slots" / "work_output.json"), timeout=120,
                   what="retry's work")
        assert read_slot(cases["retry"] / "slots" / "work_output.json")["data"]["seen"] == {
            "answer": "second try"}
        wait_until(lambda: completed(cases["identity"] / "slots" / "work_output.json"), timeout=180,
                   what="identity's work")
        assert read_slot(cases["identity"] / "slots" / "work_output.json")["data"]["seen"] == {
            "answer": "by hand"}
        wait_until(
            lambda: (read_slot(cases["unknown"] / "slots" / "ext_input.json") or {}).get("attempt", 1) > 1,
            timeout=120,
            what="the agent to be asked again after the decision")
        agent(cases["unknown"], data={"answer": "fixed"})
        wait_until(lambda: completed(cases["unknown"] / "slots" / "work_output.json"), timeout=180,
                   what="unknown's work")
        # timeout: no answer within 3 s of the input slot's own timestamp: the declared `timeout` type.
        wait_until(lambda: alerts(cases["timeout"]), timeout=120, what="the timeout's alert")
        [timed_out] = alerts(cases["timeout"])
        assert (timed_out.error_type, timed_out.handling) == ("timeout", "fail")
        # Each malformed slot: an alert naming the file and what was wrong; the sensor went on with the
        # others.
        for name, problem in (("notjson", "is not JSON"), ("nostatus", "status: Field required"),
                              ("half", "is half written")):
            wait_until(lambda name=name: alerts(cases[name]), timeout=120,
                       what=f"the alert of the {name} slot")
            [refused] = alerts(cases[name])
            assert refused.error_type == "slot_invalid", refused
            assert "ext_output.json" in refused.message and problem in refused.message, refused.message
        with get_client(sync_client=True) as client:
            wait_until(
                lambda: all(
                    r.state.is_final() for r in client.read_flow_runs() if r.name.startswith("wr-fail")),
                timeout=120, what="the fail run to end", interval=API_POLL_SECONDS)
        # babel: an agent's failed slot is dual-written too, once, though the sensor and a run both took it.
        for name in ("fail", "skip"):
            lines = (cases[name] / "slots" / "ext_babel.jsonl").read_text().splitlines()
            assert [json.loads(line)["type"] for line in lines] == ["slot.failed"], name
    finally:
        watch.send_signal(signal.SIGINT)
        code = watch.wait(timeout=180)
    assert code == 0, log.read_text()
    assert not (cases["fail"] / "slots" / "work_output.json").exists()
    assert not (cases["timeout"] / "slots" / "work_output.json").exists()
    # The terminated run's process (the runner's child) names why the chain failed, as Prefect names a
    # failed flow's error; it said `TypeError: Unexpected result for failed state` before.
    said = log.read_text()
    assert "ChainRunFailed: chain wr-fail: terminated by a decision on ext" in said, said
    assert "Unexpected result for failed state" not in said, said


def _suspended(flow_run_id: str) -> bool:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(flow_run_id).state
    return state is not None and state.is_paused()
