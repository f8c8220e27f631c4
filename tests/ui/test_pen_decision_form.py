"""A chain's pen node whose persona asks a person, decided in the Prefect UI's form in a real browser.

The chain of tests/support/pen_chains.py (numbers -> summer, a pen -> after) runs against the stub code
model and the Docker sandbox; its run pauses from inside the pen node. tests/ui/resume_form.js, the script
that drives the engine's arbitration form, opens the run in the v2 UI (where the UI's root sends a browser
with no saved preference), reads the form (the pen shown first), chooses share, fills who and why, and
follows the run to its end. The pen is then in the registry's inbox, and the node after it got the decision.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotrelay.audit_log import AuditLog
from tests.support.browser_session import BrowserSession
from tests.support.pen_chains import person_chain, start_chain, wait_paused
from tests.support.pen_output_contract import assert_output_shape, decision_of
from tests.support.resume_form import SCRIPT, resume_in_browser

pytestmark = [pytest.mark.prefect_server, pytest.mark.browser, pytest.mark.docker]

FORM = {"decision": "share", "comment": "a tool others can use", "decided_by": "grace"}


def test_a_person_decides_a_pen_node_in_the_ui_form(
    browser_tools: None, prefect_server: str, stub, tmp_path: Path, sandbox_backend: str,
    monkeypatch,
) -> None:
    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    chain_path = person_chain(tmp_path, sandbox_backend)
    # The browser starts while the chain runs to its pause (its first step waits for a job).
    with BrowserSession(SCRIPT, tmp_path / "pen-v2") as browser:
        worker, results = start_chain(chain_path)
        flow_run = wait_paused(chain_path, worker)
        did = resume_in_browser(prefect_server.removesuffix("/api"), str(flow_run.id), ui="v2", form=FORM,
                                refused=False, name="pen-v2", tmp_path=tmp_path, browser=browser, alert=False)
    shown = f"the v2 UI did {did}; screenshot: {did['screenshot']}"
    assert did["fields"] == ["Decision", "Comment (Optional)", "Decided By (Optional)"], shown
    assert did["decision_shown"] == "share", shown
    # The form opens on what to decide: the pen that waits, and its result.
    assert "waits for a decision" in did["form_text"] and "MPP-chain1-" in did["form_text"], shown
    assert (did["resume_status"], did["resume_answer"]["status"], did["run_input"]) == (201, "ACCEPT", FORM)
    assert did["final_state"] == "Completed", shown
    worker.join(timeout=180)
    assert not worker.is_alive()
    summary = results["state"].result(raise_on_failure=False)
    assert summary["state"] == "COMPLETED", summary

    data = json.loads((tmp_path / "slots/summer_output.json").read_text())["data"]
    assert_output_shape(data)
    inbox = tmp_path / "pen-root/factory/module-registry/inbox" / data["pen_id"]
    assert decision_of(data) == {
        "final_action": "share", "state": "shared", "decided_by": "person:grace", "location": str(inbox)}
    assert json.loads((inbox / "manifest.json").read_text())["test_examples"] == [
        {"input": {"numbers": [4, 5, 6]}, "expected": {"total": 15}}]
    assert json.loads((tmp_path / "slots/after_output.json").read_text())["data"] == {
        "final_action": "share", "total": 15}
    records = AuditLog(tmp_path / "pen-root").records_of(data["pen_id"])
    assert [r["comment"] for r in records if r.get("to") == "shared"] == ["a tool others can use"]
