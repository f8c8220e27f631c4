"""docs/tutorial.md, followed step by step as a new user does, in a real browser.

The example is copied into a folder that stands for a fresh clone. `slotrelay run` runs it as `make run`
does and leaves its server running (on a free port: PREFECT_API_URL names it, as 4200 is never bound
here); `slotrelay up` from the same folder reuses that server. A run is started from the UI (v2: the
deployment's Run > Quick run) and one by an agent writing the review node's output slot; the
`store-busy` switch makes a run pause, which is decided in the UI form and, for a second run, with
`slotrelay decide` from a shell with no PREFECT_API_URL; an agent's failed slot with `error` fields is
retried and answered. The UI steps are a person's, in one browser from the first to the last. Each step
waits on its signal (a file, the alert, the run's state badge) and saves a screenshot in
build/artifacts/tutorial/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.commands import SLOTRELAY
from harness.ports import free_port
from slotrelay.chain.alerts import read_alert
from slotrelay.chain.slots import read_slot
from tests.support.arbitration import wait_paused
from tests.support.browser_session import BrowserSession
from tests.support.prefect_api import http_status
from tests.support.slotrelay_up import interrupt_up, migrated_home, start_up, wait_for_up

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

pytestmark = [pytest.mark.prefect_server, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
SCRIPT = HERE / "tutorial.js"
SHOTS = ROOT / "build" / "artifacts" / "tutorial"
CHAIN = "examples/phase2/node_chain.json"
DEPLOYMENT = "phase2-content"
FINAL = ["Completed", "Failed", "Crashed", "Cancelled"]


InBrowser = Callable[..., dict]


@pytest.fixture
def in_browser(browser_tools: None, tmp_path: Path) -> Iterator[InBrowser]:
    """tutorial.js, one node and one Chromium for every UI step of the tutorial; yields `in_browser(step,
    shot, ui_url, **job)`, which runs one step and returns what it did, its screenshot in
    build/artifacts/tutorial/<shot>.png."""
    with BrowserSession(SCRIPT, tmp_path) as browser:

        def step(step: str, shot: str, ui_url: str, **job: object) -> dict:
            result = browser.step(step=step, ui_url=ui_url, deployment=DEPLOYMENT,
                                  screenshot=str(SHOTS / f"{shot}.png"), **job)
            assert result["ok"], f"{step}: {result}; stderr: {browser.log.read_text()[-2000:]}"
            return result

        yield step


def agent_answers(example: Path, document: dict) -> None:
    """The review node's answer, written as the tutorial's shell lines do: a temporary file renamed."""
    slot = example / "slots" / "exec-review_output.json"
    temporary = slot.with_name(f"{slot.name}.{uuid.uuid4().hex[:6]}.tmp")
    temporary.write_text(json.dumps(document))
    os.replace(temporary, slot)


def started_at(client: SyncPrefectClient, node_id: str, after: datetime) -> str | None:
    """The newest flow run of the example's deployment created after `after` that started at `node_id` (a
    run the sensor started), once it has ended; None until then."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    runs = client.read_flow_runs(deployment_filter=DeploymentFilter(
        name=DeploymentFilterName(any_=[DEPLOYMENT])))
    new = sorted((run for run in runs if run.created is not None and run.created > after
                  and node_id in (run.parameters.get("start_nodes") or [])), key=lambda run: run.created)
    return str(new[-1].id) if new and new[-1].state is not None and new[-1].state.is_final() else None


def wait_started_at(node_id: str, after: datetime, api_url: str, up: subprocess.Popen, log: Path) -> str:
    """`started_at`, waited for, through one client for the whole wait (a client per look built Prefect's
    settings and a new HTTP connection four times a second)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    found: dict[str, str | None] = {}
    with temporary_settings(updates={PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:

        def ended() -> bool:
            found["run"] = started_at(client, node_id, after)
            return found["run"] is not None

        wait_for_up(ended, 300, f"a run from {node_id}, ended", up, log)
    return str(found["run"])


def test_the_tutorial_from_a_fresh_clone(in_browser: InBrowser, prefect_server: str, tmp_path: Path) -> None:
    if SHOTS.exists():
        shutil.rmtree(SHOTS)
    SHOTS.mkdir(parents=True)
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "examples" / "phase2", clone / "examples" / "phase2",
                    ignore=shutil.ignore_patterns("slots", "work", "alerts", "logs", "store-busy",
                                                  "__pycache__"))
    example = clone / "examples" / "phase2"
    home = migrated_home(clone / ".slotrelay" / "prefect")
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    ui_url = api_url.removesuffix("/api")
    no_api = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    from deployments.server import home_holder

    # 1. `make run`: the example once, its server left running in the background.
    made = subprocess.run([SLOTRELAY, "run", CHAIN, "--json"], cwd=clone,
                          env={**no_api, "PREFECT_API_URL": api_url}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert made.returncode == 0, made.stderr[-3000:]
    assert json.loads(made.stdout)["state"] == "COMPLETED"
    left = home_holder(home)
    assert left is not None and (left.started_by, left.api_url) == ("run", api_url), left
    log = tmp_path / "up.log"
    up = start_up(["--port", str(port), CHAIN], cwd=clone, log=log)
    try:
        # 2. `slotrelay up` from the same folder reuses it, and says how other shells reach it.
        wait_for_up(lambda: "Ctrl-C stops" in log.read_text(), 300, "the panel", up, log)
        panel = log.read_text()
        assert f"reused: the one `slotrelay run` left running (pid {left.pid})" in panel, panel
        assert f"export PREFECT_API_URL={api_url}" in panel and f"watching    {clone / CHAIN}" in panel, panel
        wait_for_up(lambda: http_status(f"{api_url}/deployments/name/chain/{DEPLOYMENT}") == 200, 300,
                    "the example's deployment", up, log)

        # 3. Started from the UI: Run > Quick run, on the deployment's page (its screenshot is step 2's). The
        # run stops at the review node (an agent outside the engine: pipeline.py's reviewer answers it), and
        # the sensor runs the rest from exec-publish.
        asked = datetime.now(UTC)
        started = in_browser("quick-run", "02-quick-run", ui_url,
                             deployment_screenshot=str(SHOTS / "01-up-deployment.png"))["flow_run_id"]
        ended = in_browser("run", "03-run-from-the-ui", ui_url, flow_run_id=started, states=FINAL)
        assert ended["state"] == "Completed", ended
        rest = wait_started_at("exec-publish", asked, api_url, up, log)
        ended = in_browser("run", "04-the-rest-after-the-review", ui_url, flow_run_id=rest,
                           states=FINAL)
        assert ended["state"] == "Completed", ended

        # 4. Started by an agent writing the review node's output slot: a run from exec-publish.
        assert read_slot(example / "slots" / "exec-review_input.json")["status"] == "pending"
        index = example / "work" / "published" / "index.md"
        asked = datetime.now(UTC)
        agent_answers(example, {
            "node_id": "exec-review", "status": "completed", "error": None,
            "data": {"approved": True, "titles": ["Hello from the tutorial"]},
            "capabilities_used": ["Read"], "checks": {"a person read every article": True}})
        by_slot = wait_started_at("exec-publish", asked, api_url, up, log)
        assert "Hello from the tutorial" in index.read_text()
        ended = in_browser("run", "05-run-from-a-slot", ui_url, flow_run_id=by_slot, states=FINAL)
        assert ended["state"] == "Completed", ended

        # 5. The switch: with store-busy, enrich's retries run out and the run pauses for a person.
        switch = example / "store-busy"
        switch.touch()
        paused = in_browser("quick-run", "06-quick-run-store-busy", ui_url)["flow_run_id"]
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            alert = wait_paused(example, up, timeout=300)
        assert re.fullmatch(r"alert-.*-exec-enrich\.json", alert.name), alert
        assert read_alert(alert).flow_run_id == paused
        assert read_alert(alert).api_url == api_url
        in_browser("run", "07-paused", ui_url, flow_run_id=paused, states=["Paused", "Suspended"])

        # 6. Decided in the UI: the cause fixed, retry.
        switch.unlink()
        decided_at = datetime.now(UTC)
        did = in_browser("resume", "09-decided-in-the-ui", ui_url, flow_run_id=paused, ui="v2", refused=False,
                         alert=True, form={"decision": "retry", "comment": "store is back",
                                           "decided_by": "tutorial"},
                         form_screenshot=str(SHOTS / "08-decision-form.png"))
        assert did["preselected"] == "terminate" and did["alert_unclipped"], did
        assert "exec-enrich failed with source_busy" in did["alert_text"], did
        assert did["final_state"] == "Completed", did
        wait_started_at("exec-publish", decided_at, api_url, up, log)
        decided = read_alert(alert).decision
        assert decided is not None and (decided.decision, decided.via) == ("retry", "ui")

        # 7. Decided with `slotrelay decide`, from a shell with no PREFECT_API_URL.
        switch.touch()
        second = in_browser("quick-run", "10-quick-run-store-busy-again", ui_url)["flow_run_id"]
        wait_for_up(lambda: any(read_alert(a).flow_run_id == second and read_alert(a).status == "paused"
                                for a in (example / "alerts").glob("alert-*-exec-enrich.json")),
                    300, "the second pause", up, log)
        waiting = next(a for a in (example / "alerts").glob("alert-*-exec-enrich.json")
                       if read_alert(a).flow_run_id == second)
        switch.unlink()
        decided_at = datetime.now(UTC)
        decide = subprocess.run([SLOTRELAY, "decide", str(waiting.relative_to(clone)), "retry", "--comment",
                                 "store is back"], cwd=clone, env=no_api, capture_output=True, text=True,
                                timeout=180, check=False)
        assert decide.returncode == 0, decide.stderr
        ended = in_browser("run", "11-decided-with-decide", ui_url, flow_run_id=second,
                           states=FINAL)
        assert ended["state"] == "Completed", ended
        wait_started_at("exec-publish", decided_at, api_url, up, log)

        # 8. An agent's failed slot: `error` with error_type and message; source_busy asks the agent again.
        review_in = example / "slots" / "exec-review_input.json"
        asked = datetime.now(UTC)
        agent_answers(example, {
            "node_id": "exec-review", "status": "failed", "data": {}, "capabilities_used": ["Read"],
            "checks": {}, "error": {"error_type": "source_busy", "message": "the review queue is full"}})
        wait_for_up(lambda: (read_slot(review_in) or {}).get("attempt") == 2, 300, "the agent asked again",
                    up, log)
        said = (example / "logs" / "engine.log").read_text()
        handed = "exec-review handed to the engine's rules (source_busy: the review queue is full)"
        assert handed in said, said
        agent_answers(example, {
            "node_id": "exec-review", "status": "completed", "error": None,
            "data": {"approved": True, "titles": ["After a retry"]},
            "capabilities_used": ["Read"], "checks": {"a person read every article": True}})
        retried = wait_started_at("exec-review", asked, api_url, up, log)
        assert "After a retry" in index.read_text()
        ended = in_browser("run", "12-agent-failed-then-answered", ui_url, flow_run_id=retried,
                           states=FINAL)
        assert ended["state"] == "Completed", ended
    finally:
        code = interrupt_up(up)
        # The server `run` started outlives `up` (Ctrl-C leaves it running): stopped as the tutorial says.
        os.killpg(left.pid, signal.SIGTERM)
        deadline = time.monotonic() + 120
        while home_holder(home) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
    assert code == 0, log.read_text()
    assert "still running" in log.read_text()
