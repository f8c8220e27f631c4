"""One run of one node: the seed's mother loop, plus the L4 decision on a failure.

`execute_node` does the four steps (read the rules, take the input from its slot, run the executor,
write the output slot) with the L2/L3 guards around them: the input slot must be there and valid,
pre checks hold before the executor, post checks and the identity check after it. Every failure is
a `NodeError` with an error type. `decide_handling` then says what the chain's error types make of
it: retry, skip, fail, escalate (an alert), or arbitrate (a person decides, L5); `retry_interval`
how long a retry of that type waits.

Every output slot the engine writes records the input it was made from (`produced_from`,
slotrelay.chain.provenance), and every output, the engine's or an agent's, whatever its status, is
dual-written to its node's babel log by `dual_write`, the one place that appends there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slotrelay.chain.checks import failed_checks, identity_problems
from slotrelay.chain.errors import (
    CHECK_FAILED,
    IDENTITY_MISMATCH,
    INPUT_MISSING,
    SLOT_INVALID,
    SLOT_UNWRITABLE,
    UNKNOWN,
    NodeError,
)
from slotrelay.chain.executors import ExecutionContext, reported_failure, run_executor
from slotrelay.chain.ledger import LEDGER_FILE_NAME, RoutingLedger
from slotrelay.chain.models import Chain, Node
from slotrelay.chain.outcomes import Handling
from slotrelay.chain.provenance import (
    answer_key,
    answers_input,
    input_digest,
    input_slot_path,
    output_slot_path,
)
from slotrelay.chain.slots import (
    SlotInvalid,
    append_babel,
    content_hash,
    output_slot_document,
    parse_slot,
    read_output_slot,
    read_slot_bytes,
    slot_bytes,
    write_slot,
)


@dataclass(frozen=True)
class ReceivedInput:
    """A node's input slot as read: the document, its data, the hash of its bytes and their write time
    (None: a start node)."""

    document: dict[str, Any]
    data: dict[str, Any]
    digest: str | None
    mtime: float | None = None


def read_input(chain: Chain, node_id: str) -> ReceivedInput:
    """The input slot as the node receives it (empty for a start node).

    Raises:
        NodeError: `input_missing` when the slot file is absent, `slot_invalid` when it is not a JSON
            object with an object `data`.
    """
    path = input_slot_path(chain, node_id)
    if path is None:
        return ReceivedInput({}, {}, None)
    try:
        found = read_slot_bytes(path)
        document = parse_slot(path, found[0]) if found is not None else None
    except SlotInvalid as bad:
        raise NodeError(SLOT_INVALID, f"input slot {bad.message}") from None
    if found is None:
        raise NodeError(INPUT_MISSING, f"input slot {path} does not exist")
    if document is None:
        raise NodeError(SLOT_INVALID, f"input slot {path} is not a JSON object (half-written or malformed)")
    data = document.get("data", {})
    if not isinstance(data, dict):
        raise NodeError(SLOT_INVALID, f"input slot {path}: \"data\" is {type(data).__name__}, not an object")
    return ReceivedInput(document, data, content_hash(found[0]), found[1])


def publish_output(chain: Chain, node_id: str, document: dict[str, Any]) -> str:
    """Write an output slot atomically and dual-write it to the node's babel log, if it has one.

    An external node's output slot belongs to its agent and is never overwritten: a skip or a
    person's decision on it goes downstream through its routes, from the document, unwritten (the
    sensor would otherwise take the engine's document for a new answer and route it a second time).

    Returns:
        The hash of the document's bytes (what its routes record as `from_output`).

    Raises:
        OSError: the output slot cannot be written.
    """
    if chain.node(node_id).executor.kind == "external":
        return content_hash(slot_bytes(document))
    digest = write_slot(output_slot_path(chain, node_id), document)
    dual_write(chain, node_id, document)
    return digest


def dual_write(chain: Chain, node_id: str, document: dict[str, Any], *, agent_answer: str | None = None,
               ledger: RoutingLedger | None = None) -> None:
    """Append an output slot to its node's babel log (the seed's dual-write), whatever its status.

    The engine's own outputs are appended as they are written, once each. An agent's output may be
    seen by the sensor and by a run both: it is appended once per answer (`agent_answer`,
    `provenance.answer_key`), recorded as a `babel` line in the routing ledger beside the slots.

    Parameters:
        ledger: the sensor's ledger (default: the chain's, read afresh).
    """
    node = chain.node(node_id)
    if not node.output_slot.babel_path:
        return
    if agent_answer is not None:
        ledger = ledger or RoutingLedger(chain.work_dir / LEDGER_FILE_NAME)
        if ledger.has_babel(chain.chain_id, node_id, agent_answer):
            return
    append_babel(
        chain.resolve(node.output_slot.babel_path),
        sender=node_id,
        recipients=[route.to_node for route in chain.routes_from(node_id)],
        kind=f"slot.{document.get('status')}",
        payload=document,
    )
    if ledger is not None and agent_answer is not None:
        ledger.record_babel(chain.chain_id, node_id, agent_answer)


def execute_node(
    chain: Chain,
    node_id: str,
    *,
    attempt: int = 1,
    since: float | None = None,
    flow_run_id: str | None = None,
    logger: logging.Logger | None = None,
    executor_settings: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], str]:
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
        The output slot document (status completed, or skipped when an external agent wrote so) and the
        hash of its bytes.

    Raises:
        NodeError: any failure, with its error type (an unexpected exception becomes `unknown`).
    """
    node = chain.node(node_id)
    received = read_input(chain, node_id)
    failures = failed_checks(node.check_rules.pre_execution, received.document, chain=chain)
    if failures:
        raise NodeError(CHECK_FAILED, "pre_execution: " + "; ".join(failures))
    if since is None:
        # The input slot's write time, from the read above (a start node has none).
        since = received.mtime if received.mtime is not None else time.time()
    context = ExecutionContext(
        chain=chain,
        node=node,
        attempt=attempt,
        input_slot=input_slot_path(chain, node_id),
        output_slot=output_slot_path(chain, node_id),
        since=since,
        flow_run_id=flow_run_id,
        **({"logger": logger} if logger else {}),
        executor_settings=executor_settings or {},
    )
    try:
        output = run_executor(node, data=received.data, context=context)
    except NodeError:
        raise
    # Any other failure is, by definition, of no declared type.
    except Exception as unexpected:
        raise NodeError(UNKNOWN, f"{type(unexpected).__name__}: {unexpected}") from unexpected
    if output.document is not None:
        document, digest = output.document, output.digest or content_hash(slot_bytes(output.document))
    else:
        document = output_slot_document(
            node_id,
            status="completed",
            data=output.data,
            capabilities_used=output.capabilities_used,
            checks=output.checks,
            attempt=attempt,
            produced_from=received.digest,
        )
        try:
            digest = publish_output(chain, node_id, document)
        except OSError as denied:
            raise NodeError(SLOT_UNWRITABLE, f"output slot {context.output_slot}: {denied}") from None
    identity = identity_problems(node, document)
    if identity:
        raise NodeError(IDENTITY_MISMATCH, "; ".join(identity))
    failures = failed_checks(node.check_rules.post_execution, document, chain=chain)
    if failures:
        raise NodeError(CHECK_FAILED, "post_execution: " + "; ".join(failures))
    if output.document is not None:
        dual_write(chain, node_id, document, agent_answer=answer_key(digest, received.digest))
    return document, digest


def output_problems(chain: Chain, node_id: str, document: dict[str, Any]) -> list[str]:
    """What stops a finished output slot, as the engine names it (empty: it passes), in the engine's order:
    the identity check, then the agent's own failure, then the node's post checks (L2/L3)."""
    node = chain.node(node_id)
    identity = identity_problems(node, document)
    if identity:
        return [f"{IDENTITY_MISMATCH}: {'; '.join(identity)}"]
    if document.get("status") == "failed":
        failure = reported_failure(document)
        return [f"{failure.error_type}: {failure.message}"]
    failures = failed_checks(node.check_rules.post_execution, document, chain=chain)
    return [f"{CHECK_FAILED}: post_execution: {'; '.join(failures)}"] if failures else []


def ended_document(chain: Chain, node_id: str, *, status: str, error: NodeError | None, attempt: int,
                   data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The output slot of a node that ended without its executor's output: skipped or failed.

    A skipped node passes its input data on (downstream goes on with it) unless `data` is given; the
    document records the input it was made from.
    """
    try:
        received = read_input(chain, node_id)
    except NodeError:
        received = ReceivedInput({}, {}, None)
    return output_slot_document(
        node_id,
        status=status,
        data=received.data if data is None else data,
        error={"error_type": error.error_type, "message": error.message} if error else None,
        attempt=attempt,
        produced_from=received.digest,
    )


def write_ended(chain: Chain, node_id: str, *, status: str, error: NodeError | None, attempt: int,
                data: dict[str, Any] | None = None) -> tuple[dict[str, Any], str] | None:
    """Record a node that ended without its executor's output (`ended_document`), skipped or failed.

    An external node's slot belongs to its agent and is not overwritten (`publish_output`): what its
    agent wrote there, if it answers the node's input, is dual-written instead.

    Returns:
        The document and the hash of its bytes, or None for a failed external node.

    Raises:
        OSError: the output slot cannot be written.
    """
    if chain.node(node_id).executor.kind == "external":
        _dual_write_agent_slot(chain, chain.node(node_id))
        if status == "failed":
            return None
    document = ended_document(chain, node_id, status=status, error=error, attempt=attempt, data=data)
    return document, publish_output(chain, node_id, document)


def _dual_write_agent_slot(chain: Chain, node: Node) -> None:
    """An agent's finished slot (failed, or skipped by its error type) taken by a run: dual-written once."""
    try:
        found = read_output_slot(output_slot_path(chain, node.node_id))
    except SlotInvalid:
        return
    if found is not None and found.document.get("status") in ("completed", "failed", "skipped") \
            and answers_input(chain, node.node_id, found):
        answer = answer_key(content_hash(found.raw), input_digest(chain, node.node_id))
        dual_write(chain, node.node_id, found.document, agent_answer=answer)


def retry_interval(chain: Chain, node: Node, error: NodeError) -> float:
    """How long a retry of this failure waits (W): its error type's own `retry_interval_seconds`, or,
    for a type that does not set one, the node's."""
    declared = chain.error_type(error.error_type)
    if declared is not None and "retry_interval_seconds" in declared.model_fields_set:
        return declared.retry_interval_seconds
    if node.retry is not None:
        return node.retry.retry_interval_seconds
    return declared.retry_interval_seconds if declared is not None else 0.0


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
