"""L5 on a real Prefect server: an unknown error pauses the run; a second process decides.

Each decision gets its own run (started together, decided together, to keep the suite short); a reload
of an invalid chain, refused, is followed by the valid reload on the same run. A side branch that does
not depend on the paused node finishes before the pause.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.commands import SLOTRELAY
from harness.ports import free_port
from slotrelay.chain.alerts import read_alert, write_alert
from tests.support.arbitration import STEPS, arbitration_chain, decide, make_chain, wait_paused

pytestmark = pytest.mark.prefect_server
def test_each_decision_from_a_second_process(prefect_server: str, tmp_path: Path) -> None:
    decisions = {
        "continue": ["--data", '{"by": "hand"}', "--comment", "looked fine"],
        "retry": [],
        "terminate": ["--comment", "stop"],
        "reload": [],
    }
    runs = {}
    for name in decisions:
        path = make_chain(tmp_path / name)
        runs[name] = (path, subprocess.Popen([SLOTRELAY, "run", str(path), "--json"], stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True, env={**os.environ}))
    alerts = {name: wait_paused(path.parent, run) for name, (path, run) in runs.items()}
    for name, alert_path in alerts.items():
        alert = read_alert(alert_path)
        assert (alert.error_type, alert.handling, alert.message) == ("unknown", "arbitrate",
                                                                     "RuntimeError: disk on fire")
        assert set(alert.decisions) == {"continue", "retry", "terminate", "reload"}
        # The side branch did not wait for the paused node.
        assert json.loads(
            (runs[name][0].parent / "slots" / "side-2_output.json").read_text())["status"] == "completed"

    (runs["retry"][0].parent / "fixed").write_text("")
    runs["reload"][0].write_text('{"chain_id": "arbitration", "nodes": []}')
    for name, args in decisions.items():
        done = decide(alerts[name], name, *args)
        assert done.returncode == 0, done.stderr
    # A reload of an invalid chain is refused: the run asks again, keeping the refused decision.
    again = wait_paused(runs["reload"][0].parent, runs["reload"][1])
    assert again == alerts["reload"]
    assert [d.decision for d in read_alert(again).previous_decisions] == ["reload"]
    runs["reload"][0].write_text(json.dumps(arbitration_chain(callable_="steps:fine")))
    assert decide(again, "reload").returncode == 0
    summaries = {}
    for name, (_path, run) in runs.items():
        out, _ = run.communicate(timeout=120)
        summaries[name] = (run.returncode, json.loads(out))

    code, summary = summaries["continue"]
    assert code == 0 and summary["nodes"]["after"]["state"] == "Completed"
    after = json.loads((runs["continue"][0].parent / "slots" / "after_output.json").read_text())
    assert after["data"] == {"fine": True, "by": "hand"}
    code, summary = summaries["retry"]
    assert code == 0 and summary["nodes"]["flaky"] == {
        "state": "Completed", "attempts": 2, "error_type": None,
        "output_slot": str(runs["retry"][0].parent / "slots" / "flaky_output.json")}
    code, summary = summaries["terminate"]
    assert code == 1 and summary["state"] == "FAILED"
    assert summary["nodes"]["flaky"]["state"] == "Failed" and summary["nodes"]["after"]["state"] == "NotRun"
    assert summary["nodes"]["side-2"]["state"] == "Completed"
    code, summary = summaries["reload"]
    assert code == 0 and summary["nodes"]["after"]["state"] == "Completed"

    recorded = read_alert(alerts["continue"])
    assert recorded.status == "decided" and recorded.decision.decision == "continue"
    assert recorded.decision.data == {"by": "hand"}
    assert recorded.decision.comment == "looked fine" and recorded.decision.via == "cli"
    assert recorded.decision.decided_by

    again = decide(alerts["retry"], "retry")
    assert again.returncode == 2 and "already decided" in again.stderr
    # An alert that still says paused, for a run that has ended: refused by the server's answer.
    stale = read_alert(alerts["terminate"]).model_copy(update={"status": "paused", "decision": None})
    stale_path = write_alert(tmp_path / "stale-alert.json", stale)
    refused = decide(stale_path, "continue")
    assert refused.returncode == 2 and "no longer paused" in refused.stderr


def test_decide_finds_the_server_the_run_lives_on_with_no_environment(prefect_server: str,
                                                                      tmp_path: Path) -> None:
    """The session's server listens on a free port, never 4200: `decide` in a shell without
    PREFECT_API_URL resumes the run on the server its alert records; `--api-url` overrides it."""
    path = make_chain(tmp_path / "elsewhere")
    run = subprocess.Popen([SLOTRELAY, "run", str(path), "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={**os.environ})
    alert = wait_paused(path.parent, run)
    bare = {key: value for key, value in os.environ.items() if key != "PREFECT_API_URL"}

    def decide_bare(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([SLOTRELAY, "decide", str(alert), *args], check=False, capture_output=True,
                              text=True, timeout=120, env=bare, cwd=tmp_path)

    nobody = f"http://127.0.0.1:{free_port()}/api"
    wrong = decide_bare("terminate", "--api-url", nobody)
    assert wrong.returncode == 3 and f"no Prefect server answers at {nobody} (--api-url)" in wrong.stderr
    done = decide_bare("terminate", "--comment", "from another shell")
    assert done.returncode == 0, done.stderr
    out, _ = run.communicate(timeout=120)
    assert run.returncode == 1 and json.loads(out)["nodes"]["flaky"]["state"] == "Failed"
    recorded = read_alert(alert)
    assert (recorded.api_url, recorded.status, recorded.decision.comment) == (
        prefect_server, "decided", "from another shell")


def test_the_form_offers_data_as_json_text_and_the_flow_gets_an_object() -> None:
    """Both Prefect UIs render a `json-string` property as a JSON editor (a free-form object gets no input
    in v2); the flow parses it, and refuses what is not a JSON object, naming the field."""
    from prefect._internal.pydantic.v2_schema import create_v2_schema
    from prefect.utilities.schema_tools import ValidationError as SchemaError
    from prefect.utilities.schema_tools import validate
    from pydantic import ValidationError

    from flows.arbitration import ArbitrationDecision

    form = ArbitrationDecision.with_initial_data(description="the alert")
    # The schema the server keeps for the pause, from which both UIs draw the form.
    schema = create_v2_schema(form.__name__, model_base=form)
    assert list(schema["properties"]) == ["decision", "comment", "data", "decided_by"]
    assert {k: v for k, v in schema["properties"]["data"].items() if k != "description"} == {
        "type": "string", "format": "json-string", "title": "Data"}
    assert schema["required"] == ["decision"]

    assert form(decision="continue", data='{"by": "hand"}').data == {"by": "hand"}
    assert form(decision="retry").data is None
    for text, why in [("[1]", "must be a JSON object such as {\"key\": \"value\"}, not an array"),
                      ('{"by": "hand"', "not JSON (Expecting ',' delimiter at line 1 column 14)")]:
        with pytest.raises(ValidationError) as refused:
            form(decision="continue", data=text)
        assert [(e["loc"], e["msg"]) for e in refused.value.errors()] == [(("data",), why)]

    # The server checks the input against the schema: `via` only as the CLI sends it, data only as text
    # (or null: the server lets an optional field with no default be null, and that is no data).
    for taken in [{"decision": "retry", "via": "cli", "data": "{}"}, {"decision": "retry", "data": None}]:
        validate(taken, schema, raise_on_error=True)
    assert form(decision="retry", data=None).data is None
    assert form(decision="retry", via="cli").via == "cli" and form(decision="retry").via == "ui"
    for refused_input in [{"decision": "retry", "via": "browser"},
                          {"decision": "retry", "data": {"by": "hand"}},
                          {"decision": "retry", "who": "ada"}]:
        with pytest.raises(SchemaError):
            validate(refused_input, schema, raise_on_error=True)


def test_a_pause_with_no_decision_fails_the_run_and_keeps_the_alert(prefect_server: str,
                                                                    tmp_path: Path) -> None:
    from flows.chain import read_summary, run_chain
    from slotrelay.chain import load_chain

    path = make_chain(tmp_path / "timeout", pause_timeout=2)
    state = run_chain(str(path), return_state=True)
    summary = read_summary(load_chain(path), state)
    assert state.is_failed()
    assert summary["state"] == "FAILED" and summary["nodes"]["flaky"]["state"] == "Failed"
    assert summary["nodes"]["side-2"]["state"] == "Completed"
    alert = read_alert(summary["alerts"][0])
    assert alert.status == "timed_out" and alert.decision is None


def test_an_escalation_left_undecided_pauses_the_run_before_it_ends(prefect_server: str,
                                                                    tmp_path: Path) -> None:
    """`on_escalation: alert`: the run goes on without the node, then asks a person before it ends."""
    folder = tmp_path / "escalation"
    folder.mkdir()
    (folder / "steps.py").write_text(STEPS)
    document = arbitration_chain()
    document["error_types"] = [{"error_type": "unknown", "handling": "retry", "max_retries": 1,
                                "escalate_after": "max_retries_exceeded", "on_escalation": "alert"}]
    path = folder / "node_chain.json"
    path.write_text(json.dumps(document))
    run = subprocess.Popen([SLOTRELAY, "run", str(path), "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE,
                           text=True, env={**os.environ})
    alert_path = wait_paused(folder, run)
    alert = read_alert(alert_path)
    assert (alert.node_id, alert.handling, alert.attempts) == ("flaky", "escalate", 2)
    assert json.loads((folder / "slots" / "side-2_output.json").read_text())["status"] == "completed"
    done = decide(alert_path, "continue", "--data", '{"by": "hand"}')
    assert done.returncode == 0, done.stderr
    out, _ = run.communicate(timeout=120)
    summary = json.loads(out)
    assert run.returncode == 0 and summary["state"] == "COMPLETED"
    assert summary["nodes"]["flaky"]["state"] == "Completed"
    assert summary["nodes"]["after"]["state"] == "Completed"
    assert read_alert(alert_path).decision.decision == "continue"
