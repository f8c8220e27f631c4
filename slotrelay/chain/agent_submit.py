"""An agent's output, submitted through the checks the sensor applies, then written, with what follows.

`submit` is `node_submit` (docs/agents.md): the output slot an agent of an external node would write by
hand, built from its fields, refused before it is written when the sensor would not route it, and
answered with what the engine will do with it. It keeps no rule of its own; each verdict is the
sensor's function:

1. the node is to answer now: its input slot is pending and unanswered (`provenance.slot_pending`,
   what the sensor and a join read), and, if the agent says which input it answers (`input_digest`,
   from `node_inbox`), that input is still the one there (CONTRACTS.md#provenance);
2. the document's bytes pass the one reader of output slots (`slots.output_slot_from_bytes`);
3. a completed (or skipped) slot passes the identity check and the node's post checks
   (`runner.output_problems`,
   the sensor's gate); a failed one passes the identity check and names an
   error type the chain declares (`Chain.error_type`);
4. it is written atomically (`slots.write_slot`) under a lock per node, so of two submits for one
   input exactly one is written and the other is told the input is answered;
5. the answer says what follows: the routes that fire and the nodes they start (the one routing step,
   `routing.route_finished`, asked without writing), or what the chain's error types make of a failure
   (`runner.decide_handling`). The sensor (`slotrelay watch`) routes the slot from its file event.

A refusal names each rule that failed with the JSON path of the field (`$.data.approved`), and nothing
is written.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from slotrelay.chain.checks import identity_problems, run_check
from slotrelay.chain.errors import (
    CHECK_FAILED,
    IDENTITY_MISMATCH,
    SLOT_INVALID,
    AgentOutputRejected,
    AgentRequestInvalid,
    NodeError,
    NothingToAnswer,
)
from slotrelay.chain.models import Chain, FieldEqualsCheck, JsonSchemaCheck, Node, PathExistsCheck
from slotrelay.chain.provenance import WAITING, input_slot_path, output_slot_path, slot_pending
from slotrelay.chain.routing import (
    HoldJoin,
    LoopBoundExceeded,
    RefuseInput,
    SlotState,
    StartNode,
    WriteInput,
    route_finished,
)
from slotrelay.chain.runner import decide_handling, output_problems
from slotrelay.chain.slots import (
    SlotInvalid,
    content_hash,
    output_slot_document,
    output_slot_from_bytes,
    parse_slot,
    read_slot_bytes,
    slot_bytes,
    write_slot,
)
from slotrelay.fsio import tree_state

# What an agent's failure means, per handling, in the words of the answer.
_HANDLING_WORDS = {
    "retry": "the engine asks this node again: its input slot is written again, pending, with the next "
    "attempt",
    "skip": "the node is skipped and its routes lead on with the data it received",
    "fail": "the node fails: an alert is written and nothing downstream of it runs until a person decides",
    "escalate": "retries have run out: an alert is written and a person decides",
    "arbitrate": "an alert is written and the run waits for a person's decision",
}


def submit(
    chain: Chain,
    node: Node,
    *,
    status: str,
    data: dict[str, Any],
    error: dict[str, Any] | None,
    checks: dict[str, Any],
    capabilities_used: list[str],
    input_digest: str | None = None,
) -> dict[str, Any]:
    """Check an agent's output as the sensor would, write it, and say what follows (module docstring).

    Parameters:
        chain: the chain.
        node: an external node of it (the caller checked the session's grant for it).
        status: completed, failed or skipped.
        data: the output's data.
        error: `{"error_type", "message"}` of a failure.
        checks: free-text checks attested (`{"<the check's text>": true}`).
        capabilities_used: what the agent used; each must be one the node declares.
        input_digest: the `input_digest` node_inbox gave; when given, the submit answers that input only.

    Returns:
        What was written (slot, digest) and `engine`: what the engine will do with it.

    Raises:
        AgentRequestInvalid: the node is not an agent's (it runs inside the engine).
        NothingToAnswer: the node has nothing to answer now (no pending input, or its input is
            answered already, or changed since `input_digest`); nothing was written.
        AgentOutputRejected: the output breaks a rule the sensor applies; `details.violations` lists each
            with its JSON path; nothing was written.
    """
    if node.executor.kind != "external":
        raise AgentRequestInvalid(
            f"{node.node_id} runs inside the engine ({node.executor.kind} executor): only an "
            "agent's node (executor external) takes a submitted output"
        )
    out_path = output_slot_path(chain, node.node_id)
    with _node_lock(chain, node):
        received, current = _pending_input(chain, node, input_digest)
        document = output_slot_document(
            node.node_id,
            status=status,
            data=data,
            error=error,
            capabilities_used=capabilities_used,
            checks=checks,
            attempt=_attempt(received),
            produced_from=current,
        )
        raw = slot_bytes(document)
        violations = _violations(chain, node, document, raw)
        if violations:
            raise AgentOutputRejected(
                f"node_submit for {node.node_id} refused, nothing written: "
                + "; ".join(f"{v['path']}: {v['message']}" for v in violations),
                details={"violations": violations, "written": False, "node_id": node.node_id},
            )
        digest = write_slot(out_path, document)
    return {
        "chain_id": chain.chain_id,
        "node_id": node.node_id,
        "written": True,
        "output_slot": str(out_path),
        "output_digest": digest,
        "answers_input": current,
        "attempt": document["attempt"],
        "engine": _what_follows(chain, node, document, digest),
    }


@contextmanager
def _node_lock(chain: Chain, node: Node) -> Iterator[None]:
    """One submit per node at a time, across threads and processes (an flock in slotrelay's state folder,
    never in the slots tree)."""
    folder = tree_state(chain.work_dir) / "agent-submit"
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(
        folder / f"{chain.chain_id}.{node.node_id}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _pending_input(
    chain: Chain, node: Node, expected: str | None
) -> tuple[dict[str, Any] | None, str | None]:
    """The node's input slot and its hash, when the node is to answer it now (`submit` step 1)."""
    in_path = input_slot_path(chain, node.node_id)
    received: dict[str, Any] | None = None
    current: str | None = None
    if in_path is not None:
        try:
            found = read_slot_bytes(in_path)
            received = parse_slot(in_path, found[0]) if found is not None else None
        except SlotInvalid as bad:
            raise NothingToAnswer(
                f"{node.node_id} has no input to answer: {bad.message}", details={"state": "refused"}
            ) from None
        if found is None or received is None:
            raise NothingToAnswer(
                f"{node.node_id} has no input to answer: its input slot {in_path} is not written yet; "
                "node_inbox with wait_s waits for it",
                details={"state": "empty"},
            )
        current = content_hash(found[0])
        if received.get("status") == WAITING:
            raise NothingToAnswer(
                f"{node.node_id}'s input is a join still waiting for {received.get('waiting_for')}: not yet "
                "to be answered",
                details={"state": "waiting"},
            )
    if not slot_pending(chain, node.node_id):
        raise NothingToAnswer(
            f"{node.node_id} has already answered its current input (its output slot "
            f"{output_slot_path(chain, node.node_id)} answers it); nothing was written. A new input, or a "
            "retry asked by the engine, makes it pending again (node_inbox with wait_s waits for that)",
            details={"state": "answered", "input_digest": current},
        )
    if expected is not None and expected != current:
        raise NothingToAnswer(
            f"{node.node_id}'s input changed since node_inbox gave input_digest {expected}: it is now "
            f"{current}; read it again (node_inbox) and answer the new input",
            details={"state": "changed", "input_digest": current},
        )
    return received, current


def _attempt(received: dict[str, Any] | None) -> int:
    attempt = (received or {}).get("attempt", 1)
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt > 0 else 1


def _violations(chain: Chain, node: Node, document: dict[str, Any], raw: bytes) -> list[dict[str, Any]]:
    """Every rule the sensor applies that the document breaks, each with the JSON path of its field."""
    path = output_slot_path(chain, node.node_id)
    try:
        output_slot_from_bytes(path, raw, written_at=time.time())
    except SlotInvalid as bad:
        return [{"rule": SLOT_INVALID, "path": _problem_path(p), "message": p} for p in bad.problems]
    identity = _identity_violations(node, document)
    if document["status"] == "failed":
        return _error_type_violations(chain, document) + identity
    problems = output_problems(chain, node.node_id, document)
    if not problems or identity:
        return identity
    violations = []
    for check in node.check_rules.post_execution:
        result = run_check(check, document, chain=chain)
        if not result.ok:
            violations.append(
                {
                    "rule": f"{CHECK_FAILED}: post_execution",
                    "path": _check_path(check, result.reason),
                    "message": result.reason,
                    "check": check if isinstance(check, str) else check.model_dump(mode="json"),
                }
            )
    return violations or [{"rule": CHECK_FAILED, "path": "$", "message": "; ".join(problems)}]


def _identity_violations(node: Node, document: dict[str, Any]) -> list[dict[str, Any]]:
    """The identity check (`checks.identity_problems`), asked of each capability used to name its index."""
    violations = []
    for index, used in enumerate(document["capabilities_used"]):
        for problem in identity_problems(node, {"node_id": node.node_id, "capabilities_used": [used]}):
            violations.append(
                {"rule": IDENTITY_MISMATCH, "path": f"$.capabilities_used[{index}]", "message": problem}
            )
    return violations


def _error_type_violations(chain: Chain, document: dict[str, Any]) -> list[dict[str, Any]]:
    error = document.get("error") or {}
    error_type = error.get("error_type")
    declared = sorted({e.error_type for e in chain.error_types} | {"external_unreachable"})
    if not isinstance(error_type, str) or chain.error_type(error_type) is None:
        return [
            {
                "rule": "declared error type",
                "path": "$.error.error_type",
                "message": f"a failed output names one of the chain's error types ({', '.join(declared)}), "
                f"not {error_type!r}",
            }
        ]
    return []


def _check_path(check: Any, reason: str) -> str:
    """The JSON path a post check looks at (a JSON Schema check: the first failing field it reports)."""
    if isinstance(check, str):
        return f"$.checks[{_quoted(check)}]"
    if isinstance(check, FieldEqualsCheck):
        return _json_path(check.field_equals[0])
    if isinstance(check, PathExistsCheck):
        return _json_path(check.path_exists)
    if isinstance(check, JsonSchemaCheck) and reason.startswith("$"):
        return reason.split(": ", 1)[0]
    return "$"


def _problem_path(problem: str) -> str:
    """The JSON path of a reader's problem: `capabilities_used.0: ...` names its field; others the whole."""
    field, _, rest = problem.partition(": ")
    return _json_path(field) if rest and " " not in field else "$"


def _json_path(dotted: str) -> str:
    """`data.items.0` as a JSON path: `$.data.items[0]`."""
    if dotted in ("", "$"):
        return "$"
    out = "$"
    for step in dotted.split("."):
        out += f"[{step}]" if step.isdigit() else f".{step}"
    return out


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _what_follows(chain: Chain, node: Node, document: dict[str, Any], digest: str) -> dict[str, Any]:
    """What the engine will do with the written slot (`submit` step 5)."""
    status = document["status"]
    if status == "failed":
        error = document["error"]
        handling = decide_handling(
            chain,
            NodeError(error["error_type"], str(error.get("message"))),
            type_failures=document["attempt"],
        )
        return {
            "action": "error_type",
            "error_type": error["error_type"],
            "handling": handling,
            "meaning": _HANDLING_WORDS[handling],
        }
    routed = route_finished(chain, node.node_id, document, digest, state=SlotState(chain))
    starts = [s.node_id for s in routed.steps if isinstance(s, StartNode)]
    answer: dict[str, Any] = {
        "action": "route",
        "routes": [
            {"route_id": d.route_id, "to_node": d.to_node, "fired": d.fired, "reason": d.reason}
            for d in routed.decisions
        ],
        "writes": [s.to_node for s in routed.steps if isinstance(s, WriteInput)],
        "starts": [
            {"node_id": n, "runs": "agent" if chain.node(n).executor.kind == "external" else "engine"}
            for n in starts
        ],
        "joins_waiting": [
            {"node_id": s.node_id, "waiting_for": list(s.waiting_for)}
            for s in routed.steps
            if isinstance(s, HoldJoin)
        ],
    }
    handed = [s for s in routed.steps if isinstance(s, LoopBoundExceeded | RefuseInput)]
    if handed:
        first = handed[0]
        why = (
            first.message
            if isinstance(first, LoopBoundExceeded)
            else f"{first.to_node}: {first.error.error_type}: {first.error.message}"
        )
        answer["handed_to_engine"] = f"{why} (the chain's error types apply; a person may decide)"
    if not starts and not answer["joins_waiting"] and not handed:
        answer["ends"] = "no route from this node fires: this branch of the chain ends here"
    return answer
