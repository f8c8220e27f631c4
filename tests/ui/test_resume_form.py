"""L5 in the Prefect UI: a person decides a paused run in the form the UI renders, in a real browser.

Two chain runs pause on an undeclared error (the chain of tests/chain/test_arbitration.py). Each is
resumed through one of the two UIs the Prefect server serves: v1 (Vue, at `/`), where the run link
`slotrelay run` prints leads, and v2 (React, at `/v2`), where the UI's root sends a browser that has
no saved preference. tests/ui/resume_form.js drives Debian's headless Chromium with playwright-core:
it presses Resume, fills the form Prefect generates from ArbitrationDecision's JSON schema, submits,
and follows the run's state on the page. The runs then end as the decisions say, and the alert files
record the decision, who made it and when.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from slotrelay.alerts import read_alert
from tests.chain.test_arbitration import SLOTRELAY, make_chain, wait_paused
from tests.conftest import require_service

pytestmark = [pytest.mark.prefect_server, pytest.mark.browser]

HERE = Path(__file__).parent
SCRIPT = HERE / "resume_form.js"
# playwright-core 1.65 needs Node >= 20 and Debian 12's nodejs is 18: use the Node 22 that
# tests/mcp pins (scripts/bootstrap.sh installs both folders).
NODE = HERE.parent / "mcp" / "node_modules" / ".bin" / "node"
CHROMIUM = "/usr/bin/chromium"
# Every wait in the browser; far above what a loaded 2-core machine needs (a few seconds).
BROWSER_TIMEOUT_MS = 120_000
FORMS = {
    # v1: continue with the data the person types as JSON; `after` runs on it.
    "v1": {"decision": "continue", "comment": "looked fine", "decided_by": "ada", "data": {"by": "hand"}},
    # v2: retry once the cause is fixed (its form has no input for the free-form `data`).
    "v2": {"decision": "retry", "comment": "disk replaced", "decided_by": "grace"},
}


def resume_in_browser(ui_url: str, flow_run_id: str, *, ui: str, form: dict, tmp_path: Path) -> dict:
    """Run resume_form.js on one paused run; returns what it did, with a screenshot of the page it left."""
    screenshot = tmp_path / f"{ui}-page.png"
    job = {
        "ui_url": ui_url,
        "flow_run_id": flow_run_id,
        "ui": ui,
        "form": form,
        "profile": str(tmp_path / f"{ui}-chromium-profile"),
        "screenshot": str(screenshot),
        "timeout_ms": BROWSER_TIMEOUT_MS,
    }
    done = subprocess.run([str(NODE), str(SCRIPT), json.dumps(job)], cwd=HERE, capture_output=True, text=True,
                          timeout=600, check=False)
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"ok": False}
    assert done.returncode == 0 and result["ok"], (
        f"the {ui} UI did not take the decision: {result.get('error')}; screenshot: {screenshot}; "
        f"stderr: {done.stderr[-2000:]}"
    )
    return result


@pytest.fixture
def browser_tools() -> None:
    """Chromium, Node and playwright-core, or a skip (a failure in CI) before any run starts."""
    require_service(
        shutil.which(CHROMIUM) is not None and NODE.exists() and (HERE / "node_modules" / "playwright-core").is_dir(),
        "the browser test needs /usr/bin/chromium (apt chromium), tests/mcp's Node and tests/ui/node_modules "
        "(run scripts/bootstrap.sh)",
    )


@pytest.fixture
def chain_runs(prefect_server: str, tmp_path: Path) -> Iterator[dict[str, tuple[Path, subprocess.Popen]]]:
    """`slotrelay run` of the arbitration chain, one per UI, started together; a run still going at the
    end (a failed test leaves it paused, and a paused `slotrelay run` ignores SIGTERM) is killed."""
    runs = {}
    for ui in FORMS:
        path = make_chain(tmp_path / ui)
        runs[ui] = (path, subprocess.Popen([SLOTRELAY, "run", str(path), "--json"], stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True, env={**os.environ}))
    yield runs
    for _, run in runs.values():
        if run.poll() is None:
            run.kill()
        run.communicate()


def test_a_person_decides_in_the_ui_form_and_the_run_goes_on(
    browser_tools: None, prefect_server: str, chain_runs: dict[str, tuple[Path, subprocess.Popen]], tmp_path: Path
) -> None:
    alerts = {ui: wait_paused(path.parent, run) for ui, (path, run) in chain_runs.items()}
    (chain_runs["v2"][0].parent / "fixed").write_text("")

    for ui, form in FORMS.items():
        did = resume_in_browser(prefect_server.removesuffix("/api"), read_alert(alerts[ui]).flow_run_id, ui=ui,
                                form=form, tmp_path=tmp_path)
        shown = f"the {ui} UI did {did}; screenshot: {did['screenshot']}"
        assert did["decision_shown"] == form["decision"], shown
        # `data` leaves the page as the UI's own {"__prefect_kind": "json", ...} value, which the server
        # hydrates: what the run got is checked below, in the alert and the slots.
        sent, typed = ({key: value for key, value in d.items() if key != "data"} for d in (did["run_input"], form))
        assert did["resume_status"] == 201 and sent == {**typed, "via": "ui"}, shown
        assert did["state_after"] != "Paused" and did["final_state"] == "Completed", shown

    summaries = {}
    for ui, (_, run) in chain_runs.items():
        out, err = run.communicate(timeout=120)
        page = f"the {ui} page as the browser left it: {tmp_path / f'{ui}-page.png'}"
        assert run.returncode == 0, f"{err[-3000:]}\n{page}"
        summaries[ui] = json.loads(out)
        assert summaries[ui]["state"] == "COMPLETED", f"{summaries[ui]}\n{page}"
    assert summaries["v1"]["nodes"]["after"]["state"] == "Completed"
    after = json.loads((chain_runs["v1"][0].parent / "slots" / "after_output.json").read_text())
    assert after["data"] == {"fine": True, "by": "hand"}
    assert (summaries["v2"]["nodes"]["flaky"]["state"], summaries["v2"]["nodes"]["flaky"]["attempts"]) == ("Completed", 2)
    flaky = json.loads((chain_runs["v2"][0].parent / "slots" / "flaky_output.json").read_text())
    assert flaky["status"] == "completed" and flaky["data"] == {"fixed": True}

    for ui, form in FORMS.items():
        recorded = read_alert(alerts[ui])
        decision = recorded.decision
        assert recorded.status == "decided"
        assert (decision.decision, decision.comment, decision.decided_by, decision.via, decision.data) == (
            form["decision"], form["comment"], form["decided_by"], "ui", form.get("data"))
        assert datetime.fromisoformat(decision.decided_at) > datetime.fromisoformat(recorded.created_at)
