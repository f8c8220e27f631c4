"""The magic pen (MPP-001): an intent becomes code from a code model, runs in the sandbox, is
audited, and is erased, kept or shared to the module registry for review.

    write(request, root=..., model=...)   section 1 in, section 2 out, the persona's decision applied
    decide(root, pen_id, action)          a person's final action on a completed pen
    review(root, pen_id, verdict)         registry review of a shared pen
    verify_audit(root)                    check the hash-chained audit log

Module map: models (the contract), screening (intent), model_client + codegen (the code model),
static_screen, writer (the steps), policy + suggest (decisions), states (section 5), audit, ids,
store (folders), manifest (section 4), registry (review), node (the chain executor).
"""

from __future__ import annotations

from pathlib import Path

from slotrelay.pen.audit import AuditLog, AuditReport
from slotrelay.pen.errors import PenError
from slotrelay.pen.model_client import ModelSettings
from slotrelay.pen.models import Action, PenOutput, PenRequest, parse_request
from slotrelay.pen.registry import ReviewOutcome, review
from slotrelay.pen.states import check_index
from slotrelay.pen.writer import PenOutcome, apply_decision, write


def decide(root: str | Path, pen_id: str, action: Action, *, decided_by: str = "person") -> PenOutcome:
    """A person's final action on a completed pen (erase, keep or share).

    Raises:
        PenNotFound: no such pen under the root.
        IllegalTransition: the pen is not waiting for a decision.
    """
    return apply_decision(root, pen_id, action, decided_by=decided_by)


def verify_audit(root: str | Path) -> AuditReport:
    """Check the audit log under `root`: every record's hash, the chain, its head, and the state index."""
    log = AuditLog(root)
    report = log.verify()
    report.problems += check_index(log)
    return report


__all__ = [
    "Action",
    "AuditReport",
    "ModelSettings",
    "PenError",
    "PenOutcome",
    "PenOutput",
    "PenRequest",
    "ReviewOutcome",
    "decide",
    "parse_request",
    "review",
    "verify_audit",
    "write",
]
