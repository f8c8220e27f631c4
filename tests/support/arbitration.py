"""A chain whose node fails with an error it does not declare, so its run pauses for a person (L5
arbitration), waiting for that pause (the alert file, and the API agreeing), and `slotrelay decide`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.commands import SLOTRELAY
from slotrelay.chain.alerts import read_alert
from tests.support.chain_specs import node, route
from tests.support.waiting import wait_until

STEPS = '''
from pathlib import Path
HERE = Path(__file__).parent

def flaky(data):
    if not (HERE / "fixed").exists():
        raise RuntimeError("disk on fire")
    return {"fixed": True}

def fine(data):
    return {"fine": True, **data}
'''


def arbitration_chain(*, pause_timeout: int = 300, callable_: str = "steps:flaky") -> dict:
    python = {"kind": "python"}
    return {
        "chain_id": "arbitration",
        "pause_timeout_seconds": pause_timeout,
        "nodes": [
            node("flaky", start=True, executor={**python, "callable": callable_}),
            node("after", executor={**python, "callable": "steps:fine"}),
            node("side", start=True, executor={**python, "callable": "steps:fine"}),
            node("side-2", executor={**python, "callable": "steps:fine"}),
        ],
        "routes": [route("flaky", "after"), route("side", "side-2")],
    }


def make_chain(folder: Path, **options: object) -> Path:
    folder.mkdir()
    (folder / "steps.py").write_text(STEPS)
    path = folder / "node_chain.json"
    path.write_text(json.dumps(arbitration_chain(**options)))
    return path


def wait_paused(folder: Path, run: subprocess.Popen, timeout: float = 120) -> Path:
    """The alert file once the run is Paused on the server (alert says so, and the API agrees); fail,
    with the run's stderr when it is a pipe, once the run has exited first or `timeout` s pass."""
    def paused_alert() -> Path | None:
        if run.poll() is not None:
            said = run.stderr.read()[-3000:] if run.stderr is not None else ""
            pytest.fail(f"the run exited with {run.returncode} before an alert in {folder} paused it:\n"
                        f"{said}")
        for path in sorted((folder / "alerts").glob("alert-*.json")):
            alert = read_alert(path)
            if alert.status == "paused":
                from prefect.client.orchestration import get_client

                with get_client(sync_client=True) as client:
                    if client.read_flow_run(alert.flow_run_id).state.is_paused():
                        return path
        return None

    return wait_until(paused_alert, timeout=timeout, interval=0.2, what=f"a paused alert in {folder}")


def decide(alert: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SLOTRELAY, "decide", str(alert), *args], check=False, capture_output=True,
                          text=True,
                          timeout=120, env={**os.environ})
