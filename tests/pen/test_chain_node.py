"""A pen as a chain node: the chain's run writes the node's output slot from the pen's result, and a
pen error becomes the node's error type (the MPP code), handled as the chain declares it. The pen's
steps are task runs nested under the node's task run, the sandbox run shown with its limits and exit.
A persona whose policy asks a person pauses the chain's run with the pen's decision form; the answer,
given as Prefect's UI gives it, is carried out before the node's output slot is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from harness.stub_model import SUM_CODE
from slotrelay.audit_log import AuditLog
from slotrelay.pen.writer import steps as pen_steps
from slotrelay.psmr.analysis.effects import effects
from tasks.pen import artifact_key
from tests.support.pen_chains import pen_chain, person_chain, start_chain, wait_paused
from tests.support.pen_output_contract import assert_output_shape, decision_of
from tests.support.prefect_api import latest_artifact, recorded_task_runs
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.prefect_server]

HOSTNAME_CODE = "import socket\ndef main(inputs):\n    return socket.gethostname()\n"


def test_pen_nodes_in_a_chain(
    prefect_server, stub, tmp_path: Path, sandbox_backend: str, monkeypatch
) -> None:
    from flows.chain import read_summary, run_chain
    from slotrelay.chain import load_chain

    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    stub.code_by_keyword["hostname"] = HOSTNAME_CODE
    chain_path = pen_chain(tmp_path, sandbox_backend)
    state = run_chain(str(chain_path), return_state=True)
    # The run fails once the prober's alert pause runs out (pen_chain): its summary is kept on disk.
    summary = read_summary(load_chain(chain_path), state)
    nodes = summary["nodes"]
    assert nodes["numbers"]["state"] == "Completed"
    assert nodes["summer"]["state"] == "Completed", summary
    assert nodes["prober"]["state"] == "Failed" and nodes["prober"]["error_type"] == "MPP-E005", summary

    output = json.loads((tmp_path / "slots/summer_output.json").read_text())
    data = output["data"]
    assert data["execution"]["result"] == {"total": 15}
    assert decision_of(data)["state"] == "kept" and data["pen_id"].startswith("MPP-chain1-")
    assert (
        tmp_path / "pen-root/.github/persona-brain/chain1/pen-private" / data["pen_id"] / "code.py"
    ).is_file()
    failed = json.loads((tmp_path / "slots/prober_output.json").read_text())
    assert failed["status"] == "failed" and failed["error"]["error_type"] == "MPP-E005"
    assert "uses socket while network is none" in failed["error"]["message"]
    assert "(pen MPP-chain1-" in failed["error"]["message"]  # the error names the pen it erased
    log = AuditLog(tmp_path / "pen-root")
    assert sorted(r["status"] for r in log.records() if r["event"] == "call") == ["MPP-E005", "completed"]
    assert log.verify().ok

    # Each pen step is a task run under its node's task run; the one sandbox run (the prober's code
    # was refused before running) is named with its limits, and its artifact shows the image and exit.
    key = artifact_key("pen-execution", data["pen_id"])
    pen_step_list = pen_steps(None, effect_screen=effects, backend=None, settings=None)
    every_step = [f"pen-{step.name}" for step in pen_step_list]
    # numbers, summer and prober; summer's steps; prober's up to the static screen that refused it.
    count = 3 + len(every_step) + 3
    runs = recorded_task_runs([state.state_details.flow_run_id], count)
    execution_md = latest_artifact(key)
    by_id = {run.id: run for run in runs}
    summer = next(run for run in runs if run.name == "summer")
    summer_steps = [
        run.name.split()[0]
        for run in runs
        if {parent.id for parent in run.task_inputs.get("__parents__", [])} == {summer.id}
    ]
    assert sorted(summer_steps) == sorted(every_step), [run.name for run in runs]
    sandbox_runs = [run for run in runs if run.name.startswith("pen-sandbox-run")]
    assert [run.name for run in sandbox_runs] == [
        f"pen-sandbox-run {data['pen_id']} (python, 10000 ms, 512 MB, network none, fs tmp)"
    ]
    assert by_id[sandbox_runs[0].task_inputs["__parents__"][0].id].name == "summer"
    assert execution_md and "| exit code | 0 |" in execution_md
    assert f"| backend | {sandbox_backend} |" in execution_md
    assert "| limits | python, 10000 ms, 512 MB, network none, fs tmp |" in execution_md
    assert "| image | " in execution_md


def test_a_pen_node_takes_its_model_from_its_env_file_and_never_the_endpoint_from_its_roots(
    stub, tmp_path: Path, sandbox_backend: str, monkeypatch
) -> None:
    from types import SimpleNamespace

    from harness.ports import free_port
    from slotrelay.pen.node import PenNodeSettings, run_pen_node

    for name in ("BASE_URL", "NAME", "API_KEY", "TIMEOUT_S", "MAX_TOKENS"):
        monkeypatch.delenv(f"SLOTRELAY_MODEL_{name}", raising=False)

    root = tmp_path / "pen-root"
    root.mkdir()
    # The root's .env names a server nobody runs: taken, the node would fail with MPP-E003.
    (root / ".env").write_text(
        f"SLOTRELAY_MODEL_BASE_URL=http://127.0.0.1:{free_port()}/v1\nSLOTRELAY_MODEL_NAME=rogue\n"
        "SLOTRELAY_MODEL_TIMEOUT_S=7\n"
    )
    (tmp_path / "model.env").write_text(
        f"SLOTRELAY_MODEL_BASE_URL={stub.base_url}\nSLOTRELAY_MODEL_NAME=stub-coder\n"
    )
    spec = SimpleNamespace(
        intent="sum the numbers in the input list",
        persona_id="chain2",
        options={"root": "pen-root", "env_file": "model.env", "backend": sandbox_backend,
                 "persist_hint": "erase"},
    )
    context = SimpleNamespace(
        chain=SimpleNamespace(work_dir=str(tmp_path)),
        executor_settings={"pen": PenNodeSettings(effect_screen=effects)},
    )
    data = run_pen_node(spec, {"numbers": [1, 2]}, context)
    assert_output_shape(data)
    assert data["execution"]["result"] == {"total": 3} and decision_of(data)["state"] == "erased"
    assert stub.requests and {r["body"]["model"] for r in stub.requests} == {"stub-coder"}
    model = data["x-slotrelay"]["config"]["model"]
    assert model["from"] == {
        "base_url": f"env file {tmp_path / 'model.env'}",
        "model": f"env file {tmp_path / 'model.env'}",
        "api_key": "default",
        "timeout_s": f"root .env {root / '.env'}",
        "max_tokens": "default",
    }
    assert set(model["ignored"]) == {"SLOTRELAY_MODEL_BASE_URL", "SLOTRELAY_MODEL_NAME"}


def test_a_chains_pen_nodes_ask_the_model_its_model_block_names(
    prefect_server, stub, tmp_path: Path, sandbox_backend: str, monkeypatch
) -> None:
    from blocks.code_model import CodeModel
    from flows.chain import run_chain
    from harness.ports import free_port

    # The environment names a model nobody serves: only the block's endpoint can answer.
    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "env-coder")
    CodeModel(base_url=stub.base_url, model="block-coder", timeout_s=5).save("chain-test-model",
                                                                             overwrite=True)
    chain_path = pen_chain(tmp_path, sandbox_backend, prober=False)
    summary = run_chain(str(chain_path), model_block="chain-test-model")
    assert summary["state"] == "COMPLETED", summary
    data = json.loads((tmp_path / "slots/summer_output.json").read_text())["data"]
    assert data["execution"]["result"] == {"total": 15}
    assert stub.code_requests() and {r["body"]["model"] for r in stub.requests} == {"block-coder"}


def sent_until_not_busy(send: Callable[[], httpx.Response]) -> httpx.Response:
    """The response to a request sent as the UI sends it, sent again while Prefect answers 503: its SQLite
    database was busy (a loaded machine) and the request's transaction rolled back, which Prefect's own
    client retries too (seen in CI: the resume answered 503 once)."""

    def answered() -> list[httpx.Response] | None:
        response = send()
        return None if response.status_code == 503 else [response]

    return wait_until(answered, timeout=60, interval=0.2, what="an answer from a Prefect API not busy")[0]


def test_a_person_policy_pen_node_pauses_the_chain_and_the_form_decides(
    prefect_server: str, stub, tmp_path: Path, sandbox_backend: str, monkeypatch
) -> None:
    # Completed with final_action null, without asking anyone (seen failing on main).
    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    chain_path = person_chain(tmp_path, sandbox_backend)
    worker, results = start_chain(chain_path)
    flow_run = wait_paused(chain_path, worker)
    # Paused from inside the node: its pen is completed and staged, nothing downstream has run.
    assert not (tmp_path / "slots/summer_output.json").exists()
    assert not (tmp_path / "slots/after_input.json").exists()

    # The form as the UI reads it: its schema and its description, by the keys the paused state names.
    keys = flow_run.state.state_details.run_input_keyset
    with httpx.Client(base_url=prefect_server, timeout=60) as api:
        inputs = f"/flow_runs/{flow_run.id}/input"
        schema = json.loads(sent_until_not_busy(lambda: api.get(f"{inputs}/{keys['schema']}")).text)
        shown = json.loads(sent_until_not_busy(lambda: api.get(f"{inputs}/{keys['description']}")).text)
        assert schema["properties"]["decision"]["enum"] == ["erase", "keep", "share"]
        assert schema["properties"]["decision"]["default"] == "keep" and "decision" in schema["required"]
        assert set(schema["properties"]) == {"decision", "comment", "decided_by"}
        pen_id = next(line for line in shown.splitlines() if line.startswith("| pen |")).split("|")[2].strip()
        assert pen_id.startswith("MPP-chain1-")
        for fact in ("| asked by | node summer of chain pen-asks-a-person |", "| suggestion | keep (model) |",
                     "| execution | success in ", '| result | `{"total": 15}` |', SUM_CODE.strip()):
            assert fact in shown, shown
        # The answer as the UI sends it.
        answer = sent_until_not_busy(lambda: api.post(f"/flow_runs/{flow_run.id}/resume", json={
            "run_input": {"decision": "keep", "comment": "the sum checks out", "decided_by": "ada"}}))
        assert answer.status_code == 201 and answer.json()["status"] == "ACCEPT", answer.text
    worker.join(timeout=180)
    assert not worker.is_alive()
    summary = results["state"].result(raise_on_failure=False)
    assert summary["state"] == "COMPLETED", summary
    assert {node: summary["nodes"][node]["state"] for node in ("numbers", "summer", "after")} == {
        "numbers": "Completed", "summer": "Completed", "after": "Completed"}

    data = json.loads((tmp_path / "slots/summer_output.json").read_text())["data"]
    assert_output_shape(data)
    kept = tmp_path / "pen-root/.github/persona-brain/chain1/pen-private" / pen_id
    assert data["pen_id"] == pen_id and decision_of(data) == {
        "final_action": "keep", "state": "kept", "decided_by": "person:ada", "location": str(kept)}
    assert (kept / "code.py").read_text() == data["code"]
    after = json.loads((tmp_path / "slots/after_output.json").read_text())["data"]
    assert after == {"final_action": "keep", "total": 15}
    log = AuditLog(tmp_path / "pen-root")
    transitions = [r for r in log.records_of(pen_id) if r["event"] == "transition"]
    assert [r["to"] for r in transitions] == ["draft", "executing", "completed", "kept"]
    assert (transitions[-1]["decided_by"], transitions[-1]["comment"]) == ("person:ada", "the sum checks out")
    assert log.verify().ok
