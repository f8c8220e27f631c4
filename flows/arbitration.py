"""L4 alerts and L5 arbitration inside a chain's flow run.

`raise_alert` writes the Alert file (atomic), logs it to the engine log and the run log, and attaches
a Markdown artifact to the flow run so the UI shows it. `wait_for_decision` waits for a person's
`ArbitrationDecision`: the UI shows a form, `slotrelay decide` sends the same input through the API.
Every alert waits for a person, a `fail` included ("L5: wait for a person's decision; never guess"):
continue, retry, terminate and reload work on any of them.

How long: as long as it takes, unless the chain sets `pause_timeout_seconds`. The run's state says
which, in the UI: its message names the node and the alert, and either "no time limit" or the UTC time
at which, with no decision, the run fails. When that time comes, a run paused in place fails here (its
alert `timed_out`); a suspended one is failed by the server's pause-expiration service ("The flow was
paused and never resumed.") and its alert stays `paused`, which `slotrelay decide` then refuses.

How the run waits depends on who runs it:
- A run of a deployment (served by `watch`/`up` or a worker) is SUSPENDED: its process exits and gives
  its slot back to the runner (5 by default), so runs waiting for people never starve runs that can
  work. A decision puts it back to Scheduled ("Resuming"); the runner starts it again from the top, the
  flow takes what is done from the slots and the alerts it wrote (flows/chain.py), and the pause under
  the same key (made from the alert file's name) returns the decision.
- A run with no deployment (`slotrelay run`, in the user's own process, which holds no runner slot)
  PAUSES in place, polling the API every `POLL_SECONDS` (Prefect's default is 10 s) so a decision acts
  within about a second; a suspended run could not be started again, as nothing serves it.

Both go through `_pause`, which does what Prefect's `suspend_flow_run` and `pause_flow_run` do (a
Suspended or Paused state with a run-input keyset, proposed to the API; the saved form; `Pause` to end a
suspended run's process; polling for the resume) with two differences those functions do not allow: the
state carries the message above, and a run paused in place can wait with no time limit (Prefect 3.9's
`pause_flow_run` computes its first sleep from the timeout, so it cannot take none).

The form is generated from ArbitrationDecision's JSON schema, and both Prefect UIs render it (v1, Vue,
at `/`; v2, React, at `/v2`). `data` is a JSON object to the flow, the CLI and the alert file, but the
form offers it as a string of format `json-string`: both UIs render that as a JSON editor and send the
text (v2 has no input at all for a free-form object). `slotrelay decide --data` sends text too. The
server checks only that it is a string; the text is parsed here, and an answer whose `data` is not a
JSON object is refused by asking again, the refusal at the top of the new form. `via` is not in the
form: only `slotrelay decide` (`cli`) and the MCP tool `alert_decide` (`mcp`) send it, both through
`send_decision`, the one path a decision made outside the UI takes.
"""

from __future__ import annotations

import getpass
import itertools
import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast
from uuid import UUID

from prefect.artifacts import create_markdown_artifact
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import State
from prefect.context import FlowRunContext
from prefect.exceptions import Abort, FlowPauseTimeout, Pause
from prefect.input import Keyset, RunInput, keyset_from_paused_state
from prefect.settings import PREFECT_API_URL
from prefect.states import Paused, Suspended
from prefect.utilities.engine import propose_state_sync
from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema, create_model
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from slotrelay.chain import Chain
from slotrelay.chain.alerts import (
    DECISION_HELP,
    SAFE_DECISION,
    Alert,
    Decision,
    DecisionName,
    alert_path,
    read_alert,
    utc_stamp,
    write_alert,
)
from slotrelay.timestamps import now_iso
from slotrelay.validation_text import model_problems
from tasks.notes import RunNotes

POLL_SECONDS = 0.5
# How much of a failure's message the form shows (the alert file and the run's artifact keep it all).
MESSAGE_SHOWN = 300
JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
              float: "a number", type(None): "null"}


def _json_object(value: Any) -> Any:
    """`data` as the form sends it, JSON text, parsed to the object the node's output slot takes."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as bad:
        raise PydanticCustomError("json_invalid", "not JSON ({msg} at line {line} column {column})",
                                  {"msg": bad.msg, "line": bad.lineno, "column": bad.colno}) from None
    if not isinstance(parsed, dict):
        raise PydanticCustomError("json_object", "must be a JSON object such as {example}, not {kind}",
                                  {"example": '{"key": "value"}', "kind": JSON_TYPES[type(parsed)]})
    return parsed


def _no_default(schema: dict[str, Any]) -> None:
    # Given `"default": null`, the v2 form sends `data: null` when the editor is left empty, and the
    # server refuses it (null is no string) with the dialog still open. With no default, the server
    # lets an optional field be null or absent, which the model takes as no data.
    del schema["default"]


def _via_outside_the_form(schema: dict[str, Any]) -> None:
    # The UIs render `properties` only. The server validates the whole schema, which forbids other
    # names (extra="forbid"): a pattern lets `via` through, checked, without a field in the form.
    schema["patternProperties"] = {"^via$": {"enum": ["ui", "cli", "mcp"]}}


def _decision_help() -> str:
    """What each decision does, the safe one first."""
    order = [SAFE_DECISION, *(name for name in DecisionName if name is not SAFE_DECISION)]
    said = [f"{name.value}: {DECISION_HELP[name]}." for name in order]
    said[0] = (f"{SAFE_DECISION.value} (preselected, the safe choice: nothing runs on a guess): "
               f"{DECISION_HELP[SAFE_DECISION]}.")
    return " ".join(said)


def _decision_schema(description: str) -> dict[str, Any]:
    # The schema Prefect's forms render: a plain list of choices (an enum's $ref is not one they all follow),
    # the safe one preselected (a `default` of the schema only: the model has none, so an answer that
    # names no decision is refused).
    return {"enum": [name.value for name in DecisionName], "title": "Decision", "type": "string",
            "default": SAFE_DECISION.value, "description": description}


class ArbitrationDecision(RunInput):
    """What a person decides for a paused node; `decision_form` makes the form of one alert."""

    model_config = ConfigDict(json_schema_extra=_via_outside_the_form)

    decision: Annotated[DecisionName, WithJsonSchema(_decision_schema(_decision_help()))]
    comment: str | None = None
    data: Annotated[
        dict[str, Any] | None,
        BeforeValidator(_json_object),
        WithJsonSchema({"type": "string", "format": "json-string"}),
    ] = Field(default=None,
              description='with continue: the node\'s output data, a JSON object such as {"key": "value"}',
              json_schema_extra=_no_default)
    decided_by: str | None = None
    via: SkipJsonSchema[Literal["ui", "cli", "mcp"]] = "ui"


def send_decision(alert_file: Path, decision: DecisionName, *, comment: str | None,
                  data: dict[str, Any] | None, decided_by: str, via: Literal["cli", "mcp"],
                  server_hint: str = "") -> Alert:
    """Resume the run paused on an alert with a decision, as the UI form does (the Prefect API must answer).

    Parameters:
        alert_file: the alert JSON in the chain's alerts/.
        decision: continue, retry, terminate or reload.
        comment: why; kept in the alert file.
        data: with continue, the node's output data.
        decided_by: who decided (recorded in the alert file by the run that takes the decision).
        via: `cli` (`slotrelay decide`) or `mcp` (the tool `alert_decide`).
        server_hint: said after the server's address when the run does not exist there (where the
            address came from, and how to give another).

    Returns:
        The alert as it was when the decision was sent.

    Raises:
        AlertError: not an alert, already decided or timed out, written outside a flow run, or its run is
            no longer paused or does not exist.
    """
    from prefect.exceptions import NotPausedError, ObjectNotFound
    from prefect.flow_runs import resume_flow_run
    from prefect.settings import PREFECT_API_URL

    from slotrelay.chain.alerts import AlertError, decidable_alert

    alert = decidable_alert(alert_file)
    assert alert.flow_run_id is not None  # decidable_alert refuses an alert outside a flow run
    run_input: dict[str, Any] = {"decision": decision.value, "comment": comment, "decided_by": decided_by,
                                 "via": via}
    if data is not None:
        # As JSON text, the form's way: the run input's `data` is a string the flow parses (_json_object).
        run_input["data"] = json.dumps(data)
    try:
        resume_flow_run(UUID(alert.flow_run_id), run_input=run_input)
    except (NotPausedError, FlowPauseTimeout):
        raise AlertError(f"flow run {alert.flow_run_id} is no longer paused: refused") from None
    except ObjectNotFound:
        where = PREFECT_API_URL.value()
        raise AlertError(f"flow run {alert.flow_run_id} does not exist on {where}{server_hint}") from None
    return alert


def decision_form(alert: Alert, path: Path, *, refused: str | None = None) -> type[ArbitrationDecision]:
    """The form of one alert: the alert and what each decision does right under the Decision field.

    Under a field, not in the form's description: Prefect's v1 UI gives the description box what the
    fields leave (three lines on a laptop screen, fewer than that once the decisions are explained), and
    v2 shows it above the fields; a field's description is shown whole. The description keeps the
    details (attempts, slots, alert file).

    Parameters:
        alert: the alert the run waits on.
        path: its file.
        refused: why the last answer could not be taken, said first.
    """
    again = f"Your last answer was refused, decide again. {refused} " if refused else ""
    said = alert.message if len(alert.message) <= MESSAGE_SHOWN else f"{alert.message[:MESSAGE_SHOWN]}…"
    essence = (f"{again}{alert.node_id} failed with {alert.error_type}: {said.rstrip('.')}. Why you decide: "
               f"{alert.reason}. {_decision_help()}")
    form = create_model(
        ArbitrationDecision.__name__, __base__=ArbitrationDecision,
        decision=(Annotated[DecisionName, WithJsonSchema(_decision_schema(essence))], ...),
    )
    details = (f"Alert file `{path}` (attempts {alert.attempts}; input slot `{alert.input_slot or '-'}`; "
               f"the run's Artifacts tab shows it whole). From a shell: `slotrelay decide <alert file> "
               "<decision>`.")
    return form.with_initial_data(description=details)


def _refusal(bad: ValidationError) -> str:
    return "; ".join(model_problems(bad))


def _markdown(alert: Alert, path: Path) -> str:
    """The alert as the run's artifact shows it: every field, and what each decision does."""
    rows = [
        ("node", alert.node_id), ("error type", alert.error_type), ("message", alert.message),
        ("attempts", str(alert.attempts)), ("handling", alert.handling), ("reason", alert.reason),
        ("input slot", alert.input_slot or "-"), ("output slot", alert.output_slot or "-"),
        ("alert file", str(path)),
    ]
    table = "\n".join(f"| {k} | {str(v).replace('|', '/')} |" for k, v in rows)
    decide = ""
    if alert.decisions:
        options = "\n".join(f"- **{name}**: {what}" for name, what in alert.decisions.items())
        decide = (f"\n\nDecide in the form of this paused run, or: `slotrelay decide {path} <decision>`"
                  f"\n\n{options}")
    return (f"## Alert: {alert.node_id} ({alert.error_type})\n\n"
            f"| field | value |\n|---|---|\n{table}{decide}\n")


def raise_alert(chain: Chain, *, flow_run_id: str | None, outcome: dict[str, Any], input_slot: str | None,
                reason: str) -> Path:
    """Write an alert for a failed node, log it and attach it to the flow run as an artifact.

    Every alert offers a person the decisions (`DECISION_HELP`); the schedule says when the run waits for
    one (at once for `arbitrate`, before the run ends for `fail` and `escalate`).

    Parameters:
        chain: the chain.
        flow_run_id: the current flow run.
        outcome: the node task's outcome (see tasks/node.py).
        input_slot: the node's input slot path, if any.
        reason: why this alert exists, in one line.

    Returns:
        The alert file's path.
    """
    alert = Alert(
        alert_id=f"{utc_stamp()}-{outcome['node_id']}",
        created_at=now_iso(),
        chain_id=chain.chain_id,
        chain_path=str(chain.source) if chain.source else None,
        flow_run_id=flow_run_id,
        api_url=PREFECT_API_URL.value(),
        node_id=outcome["node_id"],
        error_type=outcome["error_type"] or "unknown",
        message=outcome["message"] or "",
        attempts=outcome["attempts"],
        input_slot=input_slot,
        output_slot=outcome["output_slot"],
        handling=outcome["handling"] if outcome["handling"] in ("fail", "escalate", "arbitrate") else "fail",
        reason=reason,
        decisions=dict(DECISION_HELP),
        pause_timeout_seconds=chain.pause_timeout_seconds,
    )
    path = write_alert(alert_path(chain.alerts_dir, alert.node_id), alert)
    RunNotes(chain).warning("ALERT %s %s %s: %s (%s)", alert.handling, alert.node_id, alert.error_type,
                            alert.message, path)
    create_markdown_artifact(markdown=_markdown(alert, path),
                             description=f"alert: {alert.node_id} {alert.error_type}")
    return path


def _set_status(path: Path, **changes: Any) -> Alert:
    alert = read_alert(path).model_copy(update=changes)
    write_alert(path, alert)
    return alert


def pause_key(path: Path, asked_before: int) -> str:
    """The pause key of an alert: from its file name and how many of its decisions could not be applied.

    Both are in the alert file, so a run started again after a suspend finds the same key, and a
    node asked again after a refused reload gets a new one (a key that has fired returns its input).
    """
    # Pause keys (and the run-input keys made from them) allow only lowercase letters, digits and dashes.
    return re.sub(r"[^a-z0-9-]+", "-", f"arbitrate-{path.stem}-{asked_before}".lower())


def pause_message(alert: Alert, path: Path, timeout: int | None) -> str:
    """The message of the Paused (or Suspended) state a run waits in: what for, and until when."""
    waiting = f"Waiting for a person's decision on {alert.node_id} ({alert.error_type}), alert {path.name}"
    if timeout is None:
        return f"{waiting}: no time limit (the chain sets no pause_timeout_seconds)"
    until = datetime.now(UTC) + timedelta(seconds=timeout)
    return (f"{waiting}: until {until:%Y-%m-%d %H:%M:%S} UTC (pause_timeout_seconds {timeout}); with no "
            "decision by then the run fails")


Form = TypeVar("Form", bound=RunInput)


def _answer(form: type[Form], keyset: Keyset) -> Form:
    # From sync code `load` returns the input; its annotation also allows an async caller's coroutine.
    return cast(Form, form.load(keyset))


def _pause(form: type[Form], *, flow_run_id: UUID, key: str, timeout: int | None, suspend: bool,
           message: str, began: Callable[[], None]) -> Form:
    """Wait in a Paused (or Suspended) state carrying `message` until `form` is answered (module docstring).

    `began` is called once the run waits: not when the key has been answered already (a suspended run
    started again after the decision, which takes the answer at once).

    Raises:
        Pause: (Prefect's signal) a suspended run's process ends here; it starts again on a decision.
        FlowPauseTimeout: a run paused in place got no answer within `timeout` seconds.
    """
    make = Suspended if suspend else Paused
    proposed: State[Any] = make(timeout_seconds=timeout, pause_key=key, message=message)
    keyset = keyset_from_paused_state(proposed)
    # The keyset's keys are typed as literals, the state's as str: the same dict, copied.
    proposed.state_details.run_input_keyset = {name: value for name, value in keyset.items()}
    with get_client(sync_client=True) as client:
        try:
            state = propose_state_sync(client, proposed, flow_run_id=flow_run_id)
        except Abort as refused:
            raise RuntimeError(f"the flow run cannot wait for a decision: {refused}") from None
        if state.is_running():
            # The server refused the pause: this key has been answered (a suspended run started again).
            return _answer(form, keyset)
        if not state.is_paused():
            raise RuntimeError(f"the flow run cannot wait for a decision: the API says {state.type.value}")
        form.save(keyset)
        began()
        if suspend:
            # The schedule asks for a decision only with no node in flight: nothing else runs in this
            # process, and Prefect's engine ends it on this signal as it does for suspend_flow_run.
            raise Pause(state=state)
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is None or time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            current = client.read_flow_run(flow_run_id).state
            if current is not None and current.is_running():
                return _answer(form, keyset)
    raise FlowPauseTimeout(f"no decision within pause_timeout_seconds ({timeout} s)")


def wait_for_decision(chain: Chain, path: Path) -> Decision:
    """Wait until a person decides on the alert at `path` (suspended or paused, see the module docstring).

    Parameters:
        chain: the chain (its `pause_timeout_seconds`, if any, bounds the wait).
        path: the alert file.

    An answer the flow cannot take (its `data` is not a JSON object) is refused: the run waits again,
    under the alert's pause key with a counter, and the new form says why.

    Returns:
        The decision, also written into the alert file (status `decided`).

    Raises:
        Pause: (Prefect's signal) a suspended run's process ends here; it starts again on a decision.
        FlowPauseTimeout: no decision in time for a run paused in place; the alert is marked `timed_out`.
    """
    context = FlowRunContext.get()
    assert context is not None and context.flow_run is not None  # the chain flow calls this, in its run
    suspend = context.flow_run.deployment_id is not None
    alert = read_alert(path)
    # Asked again (a reload was refused): keep the decision that could not be applied.
    history = [*alert.previous_decisions, alert.decision] if alert.decision else alert.previous_decisions
    alert = _set_status(path, status="paused", decision=None, previous_decisions=history)
    key = pause_key(path, len(history))
    timeout = chain.pause_timeout_seconds
    notes = RunNotes(chain)
    limit = "no time limit" if timeout is None else f"the run fails with no decision in {timeout} s"

    def began() -> None:
        notes.warning("paused for a decision on %s (%s); alert %s; %s", alert.node_id, alert.error_type, path,
                      limit)

    refused: str | None = None
    for asked in itertools.count():
        form = decision_form(alert, path, refused=refused)
        try:
            answer = _pause(form, flow_run_id=context.flow_run.id, key=f"{key}-{asked}" if asked else key,
                            timeout=timeout, suspend=suspend, message=pause_message(alert, path, timeout),
                            began=began)
        except FlowPauseTimeout:
            _set_status(path, status="timed_out")
            notes.error("no decision on %s within pause_timeout_seconds (%d s): the run fails",
                        alert.node_id, timeout)
            raise
        except ValidationError as bad:
            # The server took the answer (its schema sees only a string) and the run is Running again.
            refused = _refusal(bad)
            notes.error("answer on %s refused, asking again: %s", alert.node_id, refused)
        else:
            break
    decision = Decision(
        decision=answer.decision,
        comment=answer.comment,
        data=answer.data,
        decided_by=answer.decided_by or (getpass.getuser() if answer.via != "ui" else "prefect-ui"),
        decided_at=now_iso(),
        via=answer.via,
    )
    _set_status(path, status="decided", decision=decision)
    notes.info("decision on %s: %s by %s via %s (%s)", alert.node_id, decision.decision.value,
               decision.decided_by,
               decision.via, decision.comment or "no comment")
    return decision
