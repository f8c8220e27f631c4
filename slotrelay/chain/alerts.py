"""Alerts (L4/L5): a structured record of a failure a person should see or decide on.

An alert is one JSON file `alerts/alert-<UTC timestamp>-<node_id>.json`, written atomically as a slot is
(slotrelay.chain.slots: no link followed). The engine writes it when a node fails for good (handling `fail`),
escalates (retries ran out), or needs arbitration (an error of no declared type, or an escalation whose
type says `on_escalation: pause`). Every alert waits for a person (the seed's L5: "wait for a person's
decision; never guess"): arbitration pauses the flow run until a decision arrives; a `fail` and an
escalation (`on_escalation: alert`) let the run go on without the node and pause it the same way before
the run ends, if nobody has decided by then (an alert left unhandled). The pause has no time limit
unless the chain sets `pause_timeout_seconds`. The decision (who, when, what) is written back into the
same file by the run that receives it; `status` tells where it stands:

    open       written; the pause has not begun yet
    paused     the run waits for a decision (continue | retry | terminate | reload)
    decided    a decision arrived; `decision` holds it
    timed_out  the chain's pause_timeout_seconds ran out with no decision; the run failed
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slotrelay.chain.slots import read_slot, write_json_atomic
from slotrelay.errors import ExitCode, SlotrelayError
from slotrelay.validation_text import first_problem


class DecisionName(StrEnum):
    """What a person can decide on a paused run, defined once: the alert file, `slotrelay decide`'s
    choices, the Prefect form (flows/arbitration.py) and the schedule all take these."""

    continue_ = "continue"
    retry = "retry"
    terminate = "terminate"
    reload = "reload"


DECISION_HELP: dict[DecisionName, str] = {
    DecisionName.continue_: (
        "treat the node as done with the data you give (--data JSON), or as skipped without data"
    ),
    DecisionName.retry: "run the node again",
    DecisionName.terminate: "fail the run; nothing downstream runs",
    DecisionName.reload: "re-read node_chain.json, validate it, and run the node again under the new rules",
}


# The decision a form offers first. Terminating acts on no guess (CONTRACTS.md#dont-guess): nothing
# downstream runs on data nobody checked (continue), nothing the node did is done again unasked (retry:
# a deploy twice), no rule changes (reload); the alert file keeps the case, and the run can be started
# again once a person knows more. `slotrelay decide` has no default: it names the decision.
SAFE_DECISION = DecisionName.terminate


class AlertError(SlotrelayError):
    """An alert file that cannot be read, or a decision it cannot take (input to fix: exit 2)."""

    code = "ALERT_INVALID"
    exit_code = ExitCode.BAD_INPUT


class Decision(BaseModel):
    """A person's decision on a paused run."""

    model_config = ConfigDict(extra="forbid")

    decision: DecisionName
    comment: str | None = None
    data: dict[str, Any] | None = None
    decided_by: str | None = None
    decided_at: str
    via: str = Field(description="cli or ui")


class Alert(BaseModel):
    """One alert file."""

    model_config = ConfigDict(extra="forbid")

    alert_id: str
    created_at: str
    chain_id: str
    chain_path: str | None
    flow_run_id: str | None
    api_url: str | None = Field(default=None, description="the Prefect API of the run (`slotrelay decide` "
                                                          "resumes it there)")
    node_id: str
    error_type: str
    message: str
    attempts: int
    input_slot: str | None
    output_slot: str | None
    handling: Literal["fail", "escalate", "arbitrate"]
    reason: str
    decisions: dict[str, str] = Field(default_factory=dict,
                                      description="what a person can decide, and what each does")
    pause_timeout_seconds: int | None = None
    status: Literal["open", "paused", "decided", "timed_out"] = "open"
    decision: Decision | None = None
    previous_decisions: list[Decision] = Field(
        default_factory=list,
        description="decisions that could not be applied (a refused reload), oldest first"
    )


def utc_stamp(moment: datetime | None = None) -> str:
    """A file-name-safe UTC timestamp with milliseconds: `20261130T081502.123Z`."""
    moment = moment or datetime.now(UTC)
    return moment.strftime("%Y%m%dT%H%M%S.") + f"{moment.microsecond // 1000:03d}Z"


def alert_path(alerts_dir: Path, node_id: str, *, moment: datetime | None = None) -> Path:
    """A fresh alert file path in `alerts_dir` (a counter is added if the name is taken)."""
    base = f"alert-{utc_stamp(moment)}-{re.sub(r'[^A-Za-z0-9_.-]', '_', node_id)}"
    path = alerts_dir / f"{base}.json"
    counter = 1
    while os.path.lexists(path):
        counter += 1
        path = alerts_dir / f"{base}-{counter}.json"
    return path


def write_alert(path: Path, alert: Alert) -> Path:
    """Write (or rewrite) an alert file atomically, as a slot is written (no link followed); returns its path.

    Raises:
        OSError: the file cannot be written; `fsio.RefusedPath` when it, or the alerts folder, is a
            link or not what it should be.
    """
    return write_json_atomic(path, alert.model_dump(mode="json"))


def read_alert(path: str | Path) -> Alert:
    """Read an alert file.

    Raises:
        AlertError: missing, not JSON, or not an alert.
    """
    document = read_slot(path)
    if document is None:
        raise AlertError(f"{path}: no such alert file, or not a JSON object")
    try:
        return Alert.model_validate(document)
    except ValidationError as invalid:
        raise AlertError(f"{path}: not an alert ({first_problem(invalid)})") from None


def decidable_alert(path: str | Path) -> Alert:
    """The alert at `path`, if a decision can still be sent to its run (`flows.arbitration.send_decision`).

    Raises:
        AlertError: not an alert, already decided or timed out, or written outside a flow run.
    """
    alert = read_alert(path)
    if alert.decision is not None or alert.status in ("decided", "timed_out"):
        raise AlertError(f"{path}: already {alert.status}, nothing to decide")
    if not alert.flow_run_id:
        raise AlertError(f"{path}: this alert was written outside a flow run: no run waits for it")
    return alert


def chain_alerts(alerts_dir: Path) -> list[tuple[Path, Alert]]:
    """Every alert file in a chain's alerts folder, oldest first; files that are not alerts are left out."""
    found = []
    for path in sorted(alerts_dir.glob("alert-*.json")):
        try:
            found.append((path, read_alert(path)))
        except AlertError:
            continue
    return sorted(found, key=lambda item: item[1].created_at)


def alerts_of_run(alerts_dir: Path, flow_run_id: str) -> list[tuple[Path, Alert]]:
    """The alerts one flow run wrote, oldest first (a run resumed after a suspend takes them back).

    Files that are not alerts are left out: the folder is shared with people and other runs.
    """
    return [(path, alert) for path, alert in chain_alerts(alerts_dir) if alert.flow_run_id == flow_run_id]
