"""The state machine of MPP-001 (CONTRACTS.md#pen-states), enforced.

    draft -> executing -> completed -> erased
                                    -> kept      (private)
                                    -> shared    (registry inbox) -> reviewed -> accepted
                                                                               -> rejected
                                                                               -> observation
    draft, executing -> erased      a run that failed before its output (the pen erases it itself)

The seed names no state for a pen that failed; `erased` is the terminal state whose meaning is what is
left of it (nothing but the audit records). Only `writer.fail` takes those two edges: a person's
decision needs a completed pen (`writer.apply_decision` refuses the others).

A pen's state is the target of the last `transition` record about it in the audit log, so an
erased pen still has one and every change is recorded. So that a long log is not read on every
change, `pen-states/{pen_id}.json` beside the log (in the root's state folder) indexes that record
(state, seq, hash); the log stays
the truth: `check_index` reports an index entry that disagrees with it. A change the diagram does
not allow raises `IllegalTransition` and records nothing. Check and append happen under the log's
lock, so two deciders cannot both move the same pen.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from slotrelay import fsio
from slotrelay.audit_log import HEAD_LIMIT, AuditLog
from slotrelay.pen.errors import IllegalTransition, PenNotFound
from slotrelay.pen.terms import PenAction

State = Literal[
    "draft",
    "executing",
    "completed",
    "erased",
    "kept",
    "shared",
    "reviewed",
    "accepted",
    "rejected",
    "observation",
]

TRANSITIONS: dict[str | None, frozenset[str]] = {
    None: frozenset({"draft"}),
    "draft": frozenset({"executing", "erased"}),
    "executing": frozenset({"completed", "erased"}),
    "completed": frozenset({"erased", "kept", "shared"}),
    "shared": frozenset({"reviewed"}),
    "reviewed": frozenset({"accepted", "rejected", "observation"}),
}
FINAL_ACTION_STATE: dict[PenAction, State] = {
    PenAction.erase: "erased",
    PenAction.keep: "kept",
    PenAction.share: "shared",
}


INDEX = "pen-states"


def _read_index(log: AuditLog, name: str) -> Any:
    return json.loads(fsio.read_file(log.folder, f"{INDEX}/{name}", limit=HEAD_LIMIT))


def _state_from_log(log: AuditLog, pen_id: str) -> dict[str, Any] | None:
    last: dict[str, Any] | None = None
    for record in log.records():
        if record.get("pen_id") == pen_id and record.get("event") == "transition":
            last = record
    return last


def current_state(log: AuditLog, pen_id: str) -> str | None:
    """The state of a pen according to the audit log (through its index entry when there is one).

    Parameters:
        log: the audit log under the pen's root.
        pen_id: the pen.

    Returns:
        The last state it moved to, or None when the log has no transition for it.
    """
    try:
        return str(_read_index(log, f"{pen_id}.json")["state"])
    except (OSError, ValueError, KeyError, TypeError):
        record = _state_from_log(log, pen_id)
        return record.get("to") if record else None


def check_index(log: AuditLog) -> list[dict[str, Any]]:
    """Index entries that disagree with the audit log's last transition of their pen.

    Returns:
        One problem per entry whose state, seq or hash is not the log's.
    """
    last: dict[str, dict[str, Any]] = {}
    for record in log.records():
        if record.get("event") == "transition":
            last[str(record.get("pen_id"))] = record
    problems = []
    try:
        with fsio.open_dir(log.folder, INDEX) as folder:
            names = [name for name in folder.names() if name.endswith(".json")]
    except FileNotFoundError:
        names = []
    for name in names:
        pen_id = name.removesuffix(".json")
        entry: dict[str, Any] | None
        try:
            entry = _read_index(log, name)
        except (OSError, ValueError):
            entry = None
        transition = last.get(pen_id)
        expected: dict[str, Any] | None = (
            {"state": transition.get("to"), "seq": transition.get("seq"), "hash": transition.get("hash")}
            if transition
            else None
        )
        if entry != expected:
            problems.append(
                {"line": None, "problem": f"state index of {pen_id} disagrees with the audit log"}
            )
    return problems


def require_state(log: AuditLog, pen_id: str) -> str:
    """The state of a pen that must exist.

    Raises:
        PenNotFound: when the log has no record of the pen.
    """
    state = current_state(log, pen_id)
    if state is None:
        raise PenNotFound(f"no pen {pen_id!r} in the audit log {log.path}")
    return state


def transition(log: AuditLog, pen_id: str, target: State, **fields: Any) -> dict[str, Any]:
    """Move a pen to `target` if the state machine allows it from its current state, and record it.

    Parameters:
        log: the audit log under the pen's root.
        pen_id: the pen.
        target: the state to move to.
        **fields: more content for the transition record (persona_id, final_action, by, ...).

    Returns:
        The transition record.

    Raises:
        IllegalTransition: when the current state does not lead to `target`; nothing is recorded.
    """
    with log.locked():
        state = current_state(log, pen_id)
        allowed = TRANSITIONS.get(state, frozenset())
        if target not in allowed:
            where = f"is {state}" if state else "does not exist yet"
            raise IllegalTransition(
                f"pen {pen_id} {where}: it cannot become {target} "
                f"(allowed next: {', '.join(sorted(allowed)) or 'none, it is final'})",
                details={"pen_id": pen_id, "from": state, "to": target},
            )
        record = log.append("transition", pen_id=pen_id, **{"from": state, "to": target}, **fields)
        entry = json.dumps({"state": target, "seq": record["seq"], "hash": record["hash"]})
        fsio.write_file(log.folder, f"{INDEX}/{pen_id}.json", entry.encode("utf-8"))
        return record
