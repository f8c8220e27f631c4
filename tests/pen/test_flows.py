"""The `pen-write` and `registry-review` flows on the real Prefect server: artifacts for the code and
the execution, a pause for a person's decision resumed through the API, the code-model Block."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.flow_runs import resume_flow_run

from blocks.code_model import CodeModel
from flows.pen import pen_write
from flows.registry_review import registry_review
from slotrelay import fsio, pen
from slotrelay.audit_log import AuditLog
from slotrelay.pen.errors import DecisionTimedOut, PermissionViolation
from slotrelay.psmr.analysis.effects import effects
from tasks.pen import artifact_key
from tests.support.pen_output_contract import assert_output_shape, decision_of
from tests.support.prefect_api import latest_artifact
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.prefect_server]


async def _paused_runs() -> list:
    async with get_client() as client:
        return await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED]))
            )
        )


def _start_until_paused(flow_call, parameter: str, value: str) -> tuple[threading.Thread, FlowRun]:
    """Run a flow call in a thread until its run (found by one parameter) pauses; return both."""
    # Prefect's settings (the test server's URL) live in a context variable: carry them into the thread.
    worker = threading.Thread(target=contextvars.copy_context().run, args=(flow_call,))
    worker.start()

    def paused_run() -> FlowRun | None:
        paused = [r for r in asyncio.run(_paused_runs()) if r.parameters.get(parameter) == value]
        return paused[0] if paused else None

    run = wait_until(paused_run, timeout=60, interval=0.5, what=f"the run with {parameter}={value} to pause")
    return worker, run


def test_pen_write_flow_with_block_artifacts_and_a_paused_decision(
    prefect_server, stub, root: Path, sandbox_backend: str
) -> None:
    CodeModel(base_url=stub.base_url, model="stub-coder", api_key="sk-flow", timeout_s=5,
              max_tokens=700).save(
        "pen-test-model", overwrite=True
    )
    outcome = pen_write(
        intent="sum the numbers in the input list",
        persona_id="p1",
        upstream_inputs={"numbers": [1, 2, 3]},
        root=str(root),
        model_block="pen-test-model",
        backend=sandbox_backend,
    )
    assert outcome["execution"]["result"] == {"total": 6} and decision_of(outcome)["state"] == "kept"
    assert_output_shape(outcome)
    assert stub.requests[0]["auth"] == "Bearer sk-flow" and stub.requests[0]["body"]["max_tokens"] == 700
    pen_id = outcome["pen_id"]
    code_md = latest_artifact(artifact_key("pen-code", pen_id))
    exec_md = latest_artifact(artifact_key("pen-execution", pen_id))
    assert code_md and "sum(inputs['numbers'])" in code_md
    assert exec_md and "| status | success |" in exec_md and '{"total": 6}' in exec_md
    assert "| exit code | 0 |" in exec_md
    assert "| limits | python, 30000 ms, 512 MB, network none, fs tmp |" in exec_md

    # A persona whose policy asks a person: the run pauses until it is resumed with an action.
    brain = root / ".github/persona-brain/p2"
    brain.mkdir(parents=True)
    (brain / "pen-policy.json").write_text(json.dumps({"mode": "person"}))
    stub.suggestion = "share"
    results: dict = {}

    def run_flow() -> None:
        results["outcome"] = pen_write(
            intent="sum the numbers in the input list",
            persona_id="p2",
            upstream_inputs={"numbers": [5, 5]},
            root=str(root),
            model_block="pen-test-model",
            backend=sandbox_backend,
            decision_timeout_s=120,
        )

    worker, paused = _start_until_paused(run_flow, "persona_id", "p2")
    staged = list((fsio.tree_state(root) / "pen-staging").iterdir())
    assert len(staged) == 1 and (staged[0] / "code.py").is_file()
    resume_flow_run(paused.id, run_input={"decision": "share", "decided_by": "alice"})
    worker.join(timeout=60)
    shared = results["outcome"]
    assert decision_of(shared) == {
        "final_action": "share",
        "state": "shared",
        "decided_by": "person:alice",
        "location": str(root / "factory/module-registry/inbox" / shared["pen_id"]),
    }

    review = registry_review(
        pen_id=shared["pen_id"], root=str(root), verdict="accept", backend=sandbox_backend
    )
    assert review["state"] == "accepted" and review["review"]["passed"]
    assert latest_artifact(artifact_key("pen-review", shared["pen_id"]))
    assert AuditLog(root).verify().ok


def test_pen_write_flow_fails_with_the_pen_error(
    prefect_server, stub, root: Path, sandbox_backend: str, monkeypatch
) -> None:
    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    stub.default_code = "import subprocess\ndef main(inputs):\n    return subprocess.run(['id']).returncode\n"
    state = pen_write(
        intent="print the user id of the process",
        persona_id="p1",
        root=str(root),
        backend=sandbox_backend,
        return_state=True,
    )
    assert state.is_failed()
    with pytest.raises(PermissionViolation):
        state.result()
    calls = [r for r in AuditLog(root).records() if r["event"] == "call"]
    assert [call["status"] for call in calls] == ["MPP-E005"]
    error_md = latest_artifact(artifact_key("pen-error", calls[0]["pen_id"]))
    assert error_md and "MPP-E005" in error_md and "subprocess" in error_md


def test_a_decision_nobody_gives_fails_the_run_and_leaves_the_pen_waiting(
    prefect_server, stub, root: Path, sandbox_backend: str, monkeypatch
) -> None:
    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    brain = root / ".github/persona-brain/p6"
    brain.mkdir(parents=True)
    (brain / "pen-policy.json").write_text(json.dumps({"mode": "person"}))
    state = pen_write(
        intent="sum the numbers in the input list",
        persona_id="p6",
        upstream_inputs={"numbers": [1]},
        root=str(root),
        backend=sandbox_backend,
        decision_timeout_s=1,
        return_state=True,
    )
    # The server may fail the paused run first ("never resumed"): the run's error artifact names why.
    assert state.is_failed()
    pen_id = next(r["pen_id"] for r in AuditLog(root).records() if r["event"] == "call")
    error_md = latest_artifact(artifact_key("pen-error", pen_id))
    assert error_md and DecisionTimedOut.code in error_md and f"nobody decided on pen {pen_id}" in error_md
    # Still completed and staged: a person decides later with `slotrelay pen decide`.
    states = [r["to"] for r in AuditLog(root).records_of(pen_id) if r["event"] == "transition"]
    assert states == ["draft", "executing", "completed"]
    assert pen.decide(root, pen_id, pen.PenAction.keep).state == "kept"


def test_registry_review_flow_pauses_for_the_reviewer(
    prefect_server, stub, model, root: Path, sandbox_backend: str
) -> None:
    shared = pen.write(
        {
            "intent": "sum the numbers in the input list",
            "context": {"persona_id": "p5", "upstream_inputs": {"numbers": [2, 3]}},
            "options": {"persist_hint": "share"},
        },
        root=root,
        model=model,
        effect_screen=effects,
        backend=sandbox_backend,
    )
    pen_id = shared.output.pen_id
    assert shared.state == "shared"
    results: dict = {}

    def run_flow() -> None:
        results["outcome"] = registry_review(
            pen_id=pen_id, root=str(root), backend=sandbox_backend, review_timeout_s=120
        )

    worker, paused = _start_until_paused(run_flow, "pen_id", pen_id)
    # While it waits, the checks are done and shown, and nothing has moved yet.
    report_md = latest_artifact(artifact_key("pen-review", pen_id))
    assert report_md and "all checks passed" in report_md and "| 0 | success |" in report_md
    inbox = root / "factory/module-registry/inbox" / pen_id
    assert json.loads((inbox / "review.json").read_text())["passed"] is True
    assert AuditLog(root).records_of(pen_id)[-1]["to"] == "reviewed"

    resume_flow_run(paused.id, run_input={"verdict": "reject", "reviewer": "bob"})
    worker.join(timeout=60)
    outcome = results["outcome"]
    assert (outcome["state"], outcome["error"]["code"]) == ("rejected", "MPP-E006")
    assert not inbox.exists()
    assert (root / "factory/module-registry/rejected" / pen_id / "manifest.json").is_file()
    notice = json.loads((root / ".github/persona-brain/p5/pen-notices" / f"{pen_id}.json").read_text())
    assert notice["error"]["code"] == "MPP-E006" and notice["error"]["details"]["reviewer"] == "bob"
    last = AuditLog(root).records_of(pen_id)[-1]
    assert (last["to"], last["reviewer"], last["error_code"]) == ("rejected", "bob", "MPP-E006")
