"""The pen's public functions and types: the names `slotrelay.pen` hands out on first use."""

from __future__ import annotations

from pathlib import Path

from slotrelay.audit_log import AuditLog, AuditReport
from slotrelay.pen.errors import PenError
from slotrelay.pen.model_client import ModelSettings
from slotrelay.pen.models import PenOutput, PenRequest, parse_request
from slotrelay.pen.registry import ReviewOutcome, review
from slotrelay.pen.run import PenOutcome
from slotrelay.pen.states import check_index
from slotrelay.pen.terms import PenAction, Verdict
from slotrelay.pen.writer import apply_decision, write


def decide(root: str | Path, pen_id: str, action: PenAction, *, decided_by: str = "person") -> PenOutcome:
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
    "AuditReport",
    "ModelSettings",
    "PenAction",
    "PenError",
    "PenOutcome",
    "PenOutput",
    "PenRequest",
    "ReviewOutcome",
    "Verdict",
    "decide",
    "parse_request",
    "review",
    "verify_audit",
    "write",
]
