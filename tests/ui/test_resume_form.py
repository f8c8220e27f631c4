"""L5 in the Prefect UI: a person decides a paused run in the form the UI renders, in a real browser.

Four chain runs pause on an undeclared error (the chain of tests/support/arbitration.py). Each is
resumed through one of the two UIs the Prefect server serves: v1 (Vue, at `/`), where the run link
`slotrelay run` prints leads, and v2 (React, at `/v2`), where the UI's root sends a browser that has
no saved preference. tests/ui/resume_form.js drives Debian's headless Chromium with playwright-core:
it presses Resume, fills the form Prefect generates from ArbitrationDecision's JSON schema, submits,
and follows the run's state on the page. In both UIs a person continues with data typed into the
form's JSON editor; in v2 a first answer whose data is not JSON is refused and the run asks again,
saying why. Each form opens on the alert: the node, its error and message, why a person decides and what
each decision does, under the Decision field, wholly on screen without scrolling, with the safe decision
(terminate) preselected. The runs then end as the decisions say, the data reaches the output slot, and
the alert files record the decision (its data an object), who made it and when.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import queue
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from harness.commands import SLOTRELAY
from slotrelay.chain.alerts import DECISION_HELP, SAFE_DECISION, read_alert
from tests.support.arbitration import make_chain, wait_paused
from tests.support.browser_session import BrowserSession
from tests.support.resume_form import SCRIPT, resume_in_browser
from tests.support.waiting import API_POLL_SECONDS, wait_until

pytestmark = [pytest.mark.prefect_server, pytest.mark.browser]

# Browsers open at once: one per core of CI's 2-core machine (rendering the UI keeps a core busy).
BROWSERS = 2
# Per run: the UI and the answers given in turn; `data` is the text typed into the JSON editor.
RUNS = {
    # Continue with the data the person types as JSON; `after` runs on it.
    "v1-continue": ("v1", [{"decision": "continue", "comment": "looked fine", "decided_by": "ada",
                            "data": '{"by": "hand"}'}]),
    # The same in v2, after an answer whose data is not JSON (a brace missing): refused, asked again.
    "v2-continue": ("v2", [{"decision": "continue", "data": '{"by": "hand"'},
                           {"decision": "continue", "comment": "typo fixed", "decided_by": "grace",
                            "data": '{"by": "hand"}'}]),
    # Retry once the cause is fixed, the JSON editor left empty: no `data` sent.
    "v1-retry": ("v1", [{"decision": "retry", "comment": "disk replaced", "decided_by": "ada"}]),
    "v2-retry": ("v2", [{"decision": "retry", "comment": "disk replaced", "decided_by": "grace"}]),
}
RETRIES = ("v1-retry", "v2-retry")
# The form has no `via`: only `slotrelay decide` sends it.
FIELDS = ["Decision", "Comment (Optional)", "Data (Optional)", "Decided By (Optional)"]


def pause_key(flow_run_id: str) -> str | None:
    """The key of the pause the run waits in, or None when it is not paused."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(flow_run_id).state
    return state.state_details.pause_key if state.is_paused() else None


def wait_asked_again(flow_run_id: str, refused_key: str, timeout: float = 120) -> str:
    """The key of the run's next pause, once it has refused the answer to the pause `refused_key`."""

    def next_key() -> str | None:
        key = pause_key(flow_run_id)
        return None if key == refused_key else key

    return wait_until(next_key, timeout=timeout, interval=API_POLL_SECONDS,
                      what=f"flow run {flow_run_id} to ask again after its pause {refused_key}")


def decide_in_ui(ui_url: str, name: str, alert: Path, tmp_path: Path, browser: BrowserSession) -> None:
    """Give the answers of RUNS[name] in turn through its UI in `browser`, checking what each form sent and
    did."""
    ui, answers = RUNS[name]
    waiting = read_alert(alert)
    flow_run_id = waiting.flow_run_id
    for turn, form in enumerate(answers):
        refused = turn < len(answers) - 1
        key = pause_key(flow_run_id)
        did = resume_in_browser(ui_url, flow_run_id, ui=ui, form=form, refused=refused, name=f"{name}-{turn}",
                                tmp_path=tmp_path, browser=browser)
        shown = f"the {ui} UI did {did}; screenshot: {did['screenshot']}"
        # The alert first, readable as the form opens; the safe decision chosen unless a person changes it.
        said = " ".join(did["alert_text"].split())
        assert did["preselected"] == SAFE_DECISION.value and did["alert_unclipped"], shown
        assert said.startswith(("flaky failed with", "Your last answer was refused")), shown
        assert f"flaky failed with {waiting.error_type}: {waiting.message.rstrip('.')}" in said, shown
        assert f"Why you decide: {waiting.reason}" in said, shown
        for choice, what in DECISION_HELP.items():
            assert f"{choice.value}" in said and what in said, shown
        assert did["fields"] == FIELDS and did["decision_shown"] == form["decision"], shown
        # What the form sent: the fields filled, `data` as the text typed, no `via`.
        sent = {field: value for field, value in did["run_input"].items() if value is not None}
        assert (did["resume_status"], did["resume_answer"]["status"], sent) == (201, "ACCEPT", form), shown
        # Asked again, the form says why at its top.
        refusal = "Your last answer was refused, decide again. data: not JSON (Expecting ',' delimiter"
        assert (refusal in did["form_text"]) == (turn > 0), shown
        if refused:
            wait_asked_again(flow_run_id, key)
            recorded = read_alert(alert)
            assert (recorded.status, recorded.decision) == ("paused", None)
        else:
            assert did["state_after"] != "Paused" and did["final_state"] == "Completed", shown


@pytest.fixture
def chain_runs(prefect_server: str, tmp_path: Path) -> Iterator[dict[str, tuple[Path, subprocess.Popen]]]:
    """`slotrelay run` of the arbitration chain, one per entry of RUNS, started together; a run still going
    at the end (a failed test leaves it paused, and a paused `slotrelay run` ignores SIGTERM) is killed."""
    runs = {}
    for name in RUNS:
        path = make_chain(tmp_path / name)
        runs[name] = (path, subprocess.Popen([SLOTRELAY, "run", str(path), "--json"], stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True, env={**os.environ}))
    yield runs
    for _, run in runs.values():
        if run.poll() is None:
            run.kill()
        run.communicate()


def test_a_person_decides_in_the_ui_form_and_the_run_goes_on(
    browser_tools: None, prefect_server: str, chain_runs: dict[str, tuple[Path, subprocess.Popen]],
    tmp_path: Path
) -> None:
    ui_url = prefect_server.removesuffix("/api")
    # The runs are independent: BROWSERS of them are decided at a time, each run's answers in turn. A
    # session waits mostly on the page's polling of the run, so a second browser overlaps those waits. A
    # run is decided in whichever browser is free, as one person with two windows would: each step opens
    # its run's page afresh and leaves the page blank.
    # Each lane runs in a copy of this context, which holds the settings naming the session's server.
    free: queue.Queue[BrowserSession] = queue.Queue()

    def decide(name: str) -> None:
        browser = free.get()
        try:
            decide_in_ui(ui_url, name, alerts[name], tmp_path, browser)
        finally:
            free.put(browser)

    with contextlib.ExitStack() as browsers:
        # The browsers start while the runs start (their first step waits for a job), not after the pauses.
        for lane in range(BROWSERS):
            free.put(browsers.enter_context(BrowserSession(SCRIPT, tmp_path / f"browser-{lane}")))
        alerts = {name: wait_paused(path.parent, run) for name, (path, run) in chain_runs.items()}
        for name in RETRIES:
            (chain_runs[name][0].parent / "fixed").write_text("")
        with ThreadPoolExecutor(max_workers=BROWSERS) as lanes:
            decided = [lanes.submit(contextvars.copy_context().run, decide, name) for name in RUNS]
        for done in decided:
            done.result()

    summaries = {}
    for name, (_, run) in chain_runs.items():
        out, err = run.communicate(timeout=120)
        shot = tmp_path / f"{name}-{len(RUNS[name][1]) - 1}-page.png"
        page = f"the {name} page as the browser left it: {shot}"
        assert run.returncode == 0, f"{err[-3000:]}\n{page}"
        summaries[name] = json.loads(out)
        assert summaries[name]["state"] == "COMPLETED", f"{summaries[name]}\n{page}"
    for name in ("v1-continue", "v2-continue"):
        slots = chain_runs[name][0].parent / "slots"
        flaky = json.loads((slots / "flaky_output.json").read_text())
        assert (flaky["status"], flaky["data"]) == ("completed", {"by": "hand"}), name
        assert summaries[name]["nodes"]["after"]["state"] == "Completed", name
        assert json.loads((slots / "after_output.json").read_text())["data"] == {"fine": True,
                                                                                 "by": "hand"}, name
    for name in RETRIES:
        retried = summaries[name]["nodes"]["flaky"]
        assert (retried["state"], retried["attempts"]) == ("Completed", 2), name
        flaky = json.loads((chain_runs[name][0].parent / "slots" / "flaky_output.json").read_text())
        assert (flaky["status"], flaky["data"]) == ("completed", {"fixed": True}), name

    for name, (_, answers) in RUNS.items():
        recorded = read_alert(alerts[name])
        decision, form = recorded.decision, answers[-1]
        assert recorded.status == "decided"
        data = json.loads(form["data"]) if "data" in form else None
        assert (decision.decision, decision.comment, decision.decided_by, decision.via, decision.data) == (
            form["decision"], form["comment"], form["decided_by"], "ui", data)
        assert datetime.fromisoformat(decision.decided_at) > datetime.fromisoformat(recorded.created_at)
