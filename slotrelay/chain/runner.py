"""One run of one node: the seed's mother loop, plus the L4 decision on a failure.

`execute_node` does the four steps (read the rules, take the input from its slot, run the executor,
write the output slot) with the L2/L3 guards around them: the input slot must be there and valid,
pre checks hold before the executor, post checks and the identity check after it. Every failure is
a `NodeError` with an error type. `decide_handling` then says what the chain's error types make of
it: retry, skip, fail, escalate (an alert), or arbitrate (a person decides, L5).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Literal

from slotrelay.chain.checks import failed_checks, identity_problems
from slotrelay.chain.errors import (
    CHECK_FAILED,
    IDENTITY_MISMATCH,
    INPUT_MISSING,
    SLOT_INVALID,
    UNKNOWN,
    NodeError,
)
from slotrelay.chain.executors import ExecutionContext, run_executor
from slotrelay.chain.models import Chain
from slotrelay.chain.routing import input_slot_path, output_slot_path
from slotrelay.slots import (
    SlotInvalid,
    append_babel,
    output_slot_document,
    read_output_slot,
    read_slot,
    write_json_atomic,
)

Handling = Literal["retry", "skip", "fail", "escalate", "arbitrate"]


def read_input(chain: Chain, node_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The input slot document and its data (`{}` and `{}` for a start node).

    Raises:
        NodeError: `input_missing` when the slot file is absent, `slot_invalid` when it is not a JSON
            object with an object `data`.
    """
    path = input_slot_path(chain, node_id)
    if path is None:
        return {}, {}
    document = read_slot(path)
    if document is None:
        if not path.exists():
            raise NodeError(INPUT_MISSING, f"input slot {path} does not exist")
        raise NodeError(SLOT_INVALID, f"input slot {path} is not a JSON object (half-written or malformed)")
    data = document.get("data", {})
    if not isinstance(data, dict):
        raise NodeError(SLOT_INVALID, f"input slot {path}: \"data\" is {type(data).__name__}, not an object")
    return document, data


def publish_output(chain: Chain, node_id: str, document: dict[str, Any]) -> None:
    """Write an output slot atomically and append it to the node's babel log, if it has one.

    An external node's output slot belongs to its agent and is never overwritten: a skip or a
    person's decision on it goes downstream through its routes, from the document, unwritten (the
    sensor would otherwise take the engine's document for a new answer and route it a second time).
    """
    node = chain.node(node_id)
    if node.executor.kind == "external":
        return
    write_json_atomic(output_slot_path(chain, node_id), document)
    if node.output_slot.babel_path:
        append_babel(
            chain.resolve(node.output_slot.babel_path),
            sender=node_id,
            recipients=[route.to_node for route in chain.routes_from(node_id)],
            kind=f"slot.{document['status']}",
            payload=document,
        )


def execute_node(
    chain: Chain,
    node_id: str,
    *,
    attempt: int = 1,
    since: float | None = None,
    flow_run_id: str | None = None,
    logger: logging.Logger | None = None,
    executor_settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one attempt of a node and write its output slot.

    Parameters:
        chain: the chain (bound to its file).
        node_id: the node to run.
        attempt: 1 for the first try; written into the slot.
        since: an external node accepts only an output slot written after this (default: now, or the
            input slot's write time when that is earlier).
        flow_run_id: for the executor's context.
        logger: for the executor's context.
        executor_settings: for the executor's context (settings by executor kind).

    Returns:
        The output slot document (status completed, or skipped when an external agent wrote so).

    Raises:
        NodeError: any failure, with its error type (an unexpected exception becomes `unknown`).
    """
    node = chain.node(node_id)
    input_doc, data = read_input(chain, node_id)
    failures = failed_checks(node.check_rules.pre_execution, input_doc, chain=chain)
    if failures:
        raise NodeError(CHECK_FAILED, "pre_execution: " + "; ".join(failures))
    in_path = input_slot_path(chain, node_id)
    if since is None:
        since = in_path.stat().st_mtime if in_path is not None and in_path.exists() else time.time()
    context = ExecutionContext(
        chain=chain,
        node=node,
        attempt=attempt,
        input_slot=in_path,
        output_slot=output_slot_path(chain, node_id),
        since=since,
        flow_run_id=flow_run_id,
        **({"logger": logger} if logger else {}),
        executor_settings=executor_settings or {},
    )
    try:
        output = run_executor(node, data, context)
    except NodeError:
        raise
    # Any other failure is, by definition, of no declared type.
    except Exception as unexpected:
        raise NodeError(UNKNOWN, f"{type(unexpected).__name__}: {unexpected}") from unexpected
    if output.document is not None:
        document = output.document
    else:
        document = output_slot_document(
            node_id,
            status="completed",
            data=output.data,
            capabilities_used=output.capabilities_used,
            checks=output.checks,
            attempt=attempt,
        )
        publish_output(chain, node_id, document)
    identity = identity_problems(node, document)
    if identity:
        raise NodeError(IDENTITY_MISMATCH, "; ".join(identity))
    failures = failed_checks(node.check_rules.post_execution, document, chain=chain)
    if failures:
        raise NodeError(CHECK_FAILED, "post_execution: " + "; ".join(failures))
    if output.document is not None:
        append_agent_babel(chain, node_id, document)
    return document


def post_check_problems(chain: Chain, node_id: str, document: dict[str, Any]) -> list[str]:
    """L2/L3 on a finished output slot: the identity check, then the node's post checks (empty: it passes)."""
    node = chain.node(node_id)
    identity = identity_problems(node, document)
    if identity:
        return [f"{IDENTITY_MISMATCH}: {'; '.join(identity)}"]
    failures = failed_checks(node.check_rules.post_execution, document, chain=chain)
    return [f"{CHECK_FAILED}: post_execution: {'; '.join(failures)}"] if failures else []


def append_agent_babel(chain: Chain, node_id: str, document: dict[str, Any]) -> None:
    """Dual-write an agent's completed output slot to its node's babel log, as the engine's own outputs
    are."""
    node = chain.node(node_id)
    if node.output_slot.babel_path and document.get("status") == "completed":
        append_babel(
            chain.resolve(node.output_slot.babel_path),
            sender=node_id,
            recipients=[route.to_node for route in chain.routes_from(node_id)],
            kind="slot.completed",
            payload=document,
        )


def write_ended(chain: Chain, node_id: str, *, status: str, error: NodeError | None, attempt: int,
                data: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Record a node that ended without its executor's output: skipped or failed.

    A skipped node passes its input data on (downstream goes on with it) unless `data` is given. An
    external node's slot belongs to its agent and is not overwritten (`publish_output`).

    Returns:
        The document (written, unless the node is external), or None for a failed external node.
    """
    node = chain.node(node_id)
    if node.executor.kind == "external" and status == "failed":
        return None
    if data is None:
        try:
            data = read_input(chain, node_id)[1]
        except NodeError:
            data = {}
    document = output_slot_document(
        node_id,
        status=status,
        data=data,
        error={"error_type": error.error_type, "message": error.message} if error else None,
        attempt=attempt,
    )
    publish_output(chain, node_id, document)
    return document


def completed_from_slots(chain: Chain, node_id: str) -> dict[str, Any] | None:
    """A node's output slot when the slots say the node is done (CONTRACTS.md#stateless-engine).

    Done means: the output slot is `completed` or `skipped`, passes the node's identity check, and
    was written no earlier than the node's input slot (an input written after it is new work).

    Returns:
        The output slot document, or None when the node still has work.
    """
    try:
        found = read_output_slot(output_slot_path(chain, node_id))
    except SlotInvalid:
        return None
    if found is None or found.document.get("status") not in ("completed", "skipped"):
        return None
    if identity_problems(chain.node(node_id), found.document):
        return None
    in_path = input_slot_path(chain, node_id)
    try:
        if in_path is not None and in_path.stat().st_mtime > found.mtime:
            return None
    except FileNotFoundError:
        pass
    return found.document


def decide_handling(chain: Chain, error: NodeError, *, type_failures: int) -> Handling:
    """What the chain's error types make of a failure (L4).

    Parameters:
        chain: the chain.
        error: the failure.
        type_failures: how many times this node has failed with this error type so far, this one included.

    Returns:
        retry (within the type's max_retries), skip, fail, escalate (retries ran out and the type
        says `escalate_after: max_retries_exceeded`), or arbitrate (no declared type, or an
        escalation whose type says `on_escalation: pause`).
    """
    declared = chain.error_type(error.error_type)
    if declared is None:
        return "arbitrate"
    if declared.handling in ("skip", "fail"):
        return declared.handling
    if type_failures <= declared.max_retries:
        return "retry"
    if declared.escalate_after == "max_retries_exceeded":
        return "arbitrate" if declared.on_escalation == "pause" else "escalate"
    return "fail"
