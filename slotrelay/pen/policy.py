"""Persona decision policies: `final_action = persona.decide(suggestion, execution)`.

The rule: CONTRACTS.md#persona-decision.

A persona's policy is `<root>/.github/persona-brain/{persona_id}/pen-policy.json`:

    {"mode": "suggestion"}                     take the caller's persist_hint, else the suggestion (default)
    {"mode": "fixed", "action": "keep"}        always the same action
    {"mode": "person"}                         a person decides (the CLI leaves the pen completed for
                                               `pen decide`; the pen-write flow pauses for input)
    "share_requires_success": true            (any mode, default true) a failed run is kept, not shared
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from slotrelay.pen.errors import InvalidPenRequest, PenNotFound
from slotrelay.pen.models import Execution, PersistHint
from slotrelay.pen.store import read_text
from slotrelay.pen.terms import PenAction
from slotrelay.validation_text import first_problem

POLICY_FILE = "pen-policy.json"


class PersonaPolicy(BaseModel):
    """How a persona turns a suggestion into its final action."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["suggestion", "fixed", "person"] = "suggestion"
    action: PenAction | None = None
    share_requires_success: bool = True

    @model_validator(mode="after")
    def _fixed_has_action(self) -> PersonaPolicy:
        if self.mode == "fixed" and self.action is None:
            raise ValueError("mode 'fixed' needs an 'action' (erase, keep or share)")
        return self


@dataclass(frozen=True)
class Decision:
    """A persona's answer: an action, or None when a person must decide."""

    action: PenAction | None
    decided_by: str


def policy_path(root: str | Path, persona_id: str) -> Path:
    """Where a persona's policy file is."""
    return Path(root) / ".github" / "persona-brain" / persona_id / POLICY_FILE


def load_policy(root: str | Path, persona_id: str) -> PersonaPolicy:
    """A persona's policy (the default one when it has no file).

    Raises:
        InvalidPenRequest: when the file is not valid JSON or not a valid policy, naming the file.
    """
    path = policy_path(root, persona_id)
    try:
        text = read_text(root, path)
    except PenNotFound:
        return PersonaPolicy()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidPenRequest(f"{path}: not JSON ({exc})") from exc
    try:
        return PersonaPolicy.model_validate(data)
    except ValidationError as exc:
        raise InvalidPenRequest(f"{path}: not a valid persona policy: {first_problem(exc)}") from exc


def decide(policy: PersonaPolicy, suggestion: PenAction, execution: Execution, hint: PersistHint) -> Decision:
    """Apply a persona's policy.

    Parameters:
        policy: the persona's policy.
        suggestion: the pen's suggestion.
        execution: what the run did.
        hint: the request's persist_hint ("auto" leaves it to the persona).

    Returns:
        The decision; `action` is None when the policy asks a person.
    """
    if policy.mode == "person":
        return Decision(None, "person")
    action: PenAction
    if policy.mode == "fixed" and policy.action is not None:
        action, by = policy.action, "policy:fixed"
    elif hint != "auto":
        action, by = PenAction(hint), "persist_hint"
    else:
        action, by = suggestion, "policy:suggestion"
    if action == PenAction.share and policy.share_requires_success and execution.status != "success":
        return Decision(PenAction.keep, f"{by} (share of a failed run kept instead)")
    return Decision(action, by)
