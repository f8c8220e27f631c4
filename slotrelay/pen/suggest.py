"""The pen's suggestion (erase | keep | share): asked of the model, with a rule when it cannot answer.

The rule: a run that failed is erased; one that produced nothing is erased; one that turned upstream
inputs into a result is a reusable tool with a test example, so it is shared; anything else is kept.
"""

from __future__ import annotations

import json
import re

from slotrelay.pen.errors import CodeGenerationFailed
from slotrelay.pen.json_shape import infer_schema
from slotrelay.pen.model_client import ChatClient
from slotrelay.pen.models import Execution, PenRequest
from slotrelay.pen.terms import PenAction

_ACTION = re.compile(rf"\b({'|'.join(PenAction)})\b", re.IGNORECASE)


def rule_suggestion(request: PenRequest, execution: Execution) -> PenAction:
    """The suggestion the rules give.

    Parameters:
        request: the pen's request.
        execution: what the run did.

    Returns:
        erase, keep or share.
    """
    if execution.status != "success":
        return PenAction.erase
    if execution.result is None and not execution.stdout.strip():
        return PenAction.erase
    if request.context.upstream_inputs is not None and execution.result is not None:
        return PenAction.share
    return PenAction.keep


def suggestion_messages(request: PenRequest, execution: Execution) -> list[dict[str, str]]:
    """The chat messages asking the model for a suggestion (shapes only, no values)."""
    facts = {
        "intent": request.intent.strip(),
        "task_category": request.context.task_category,
        "execution_status": execution.status,
        "result_shape": infer_schema(execution.result),
        "has_upstream_inputs": request.context.upstream_inputs is not None,
    }
    return [
        {
            "role": "system",
            "content": "You decide what happens to a small program that was just run: 'erase' (one-off or "
            "failed), 'keep' (useful to its owner) or 'share' (a reusable tool others could use). "
            "Answer with exactly one word: erase, keep or share.",
        },
        {"role": "user", "content": json.dumps(facts, ensure_ascii=False)},
    ]


def suggest(client: ChatClient | None, request: PenRequest, execution: Execution) -> tuple[PenAction, str]:
    """Ask the model for a suggestion, falling back to the rule.

    Parameters:
        client: the code model client, or None to use the rule only.
        request: the pen's request.
        execution: what the run did.

    Returns:
        The suggestion and where it came from ("model" or "rule").
    """
    if client is not None:
        try:
            reply = client.complete(suggestion_messages(request, execution), max_tokens=8)
        except CodeGenerationFailed:
            reply = None
        if reply is not None:
            match = _ACTION.search(reply.content)
            if match:
                return PenAction(match.group(1).lower()), "model"
    return rule_suggestion(request, execution), "rule"
