"""Provenance: an output is done only for the input it was made from (CONTRACTS.md#provenance).

What the slots record, and who writes it:
- an output slot the engine writes holds `produced_from`: the `content_hash` of the input slot's bytes
  the node read (None for a start node, which has no input);
- an input slot a route writes holds `from_output`: the `content_hash` of the source's output slot
  bytes it was routed from (a join keeps one per source, in `sources`).

An agent's output slot is the agent's: the engine never writes it, so it carries no record of the
engine's. It answers the input that was there when it was written (its write time is not older than
the input slot's): the same rule an external node's wait applies (`executors.fresh_output`).

Resume, the sensor, and a join deciding whether a source may still fire read these records and nothing
else: a slot from an earlier run, or an output written before a crash cut its routes short, does not
match the input now there and is not taken for done.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slotrelay.chain.checks import identity_problems
from slotrelay.chain.models import Chain
from slotrelay.chain.outcomes import OUTPUT_STATUSES
from slotrelay.chain.slots import (
    OutputSlotRead,
    SlotInvalid,
    content_hash,
    parse_slot,
    read_output_slot,
    read_slot,
    read_slot_bytes,
)

PRODUCED_FROM = "produced_from"
FROM_OUTPUT = "from_output"
# An input slot of a join still waiting for a source that can fire (slotrelay.chain.routing).
WAITING = "waiting"


def input_slot_path(chain: Chain, node_id: str) -> Path | None:
    """The resolved input slot path of a node (None for a start node)."""
    return _slot_paths(chain, node_id)[0]


def output_slot_path(chain: Chain, node_id: str) -> Path:
    """The resolved output slot path of a node."""
    return _slot_paths(chain, node_id)[1]


def _slot_paths(chain: Chain, node_id: str) -> tuple[Path | None, Path]:
    """A node's input and output slot paths, resolved once per chain (a node's run asks for them about
    eight times: its own, and its routes' targets').

    Raises:
        KeyError: `node_id` is not a node of the chain.
    """
    return chain.derived("provenance.slot_paths", _resolved_slots)[node_id]


def _resolved_slots(chain: Chain) -> dict[str, tuple[Path | None, Path]]:
    paths: dict[str, tuple[Path | None, Path]] = {}
    for node in chain.nodes:
        paths.setdefault(node.node_id, (chain.resolve(node.input_slot.path) if node.input_slot else None,
                                        chain.resolve(node.output_slot.path)))
    return paths


def input_digest(chain: Chain, node_id: str) -> str | None:
    """The hash of the node's input slot's bytes now (None: a start node, or no input slot to read)."""
    in_path = input_slot_path(chain, node_id)
    try:
        found = read_slot_bytes(in_path) if in_path is not None else None
    except SlotInvalid:
        return None
    return content_hash(found[0]) if found is not None else None


def answer_key(output_digest: str, input_digest: str | None) -> str:
    """What identifies one answer of an agent: its output's bytes, and the input they answer.

    The same answer to a new input (a reviewer sending work back twice in the same words) is a new
    answer: it is routed, and dual-written, again. A start node's answers are their bytes alone.
    """
    if input_digest is None:
        return output_digest
    return content_hash(f"{output_digest}|{input_digest}".encode())


def answers_input(chain: Chain, node_id: str, found: OutputSlotRead) -> bool:
    """Whether an output slot was produced from the node's current input slot.

    A start node's output answers (it has no input), and so does any output of a node whose input slot
    is gone (there is nothing newer to do). An engine node's output answers when its `produced_from` is
    the hash of the input slot's bytes; an agent's when it was written no earlier than the input slot.
    """
    in_path = input_slot_path(chain, node_id)
    if in_path is None:
        return True
    try:
        current = read_slot_bytes(in_path)
    except SlotInvalid:
        return False
    if current is None:
        return True
    if chain.node(node_id).executor.kind == "external":
        return found.mtime >= current[1]
    return found.document.get(PRODUCED_FROM) == content_hash(current[0])


def done_from_slots(chain: Chain, node_id: str) -> tuple[dict[str, Any], str] | None:
    """A node's output slot and its hash when the slots say the node is done (CONTRACTS.md#stateless-engine).

    Done means: the output slot is `completed` or `skipped`, passes the node's identity check, and
    answers the node's current input (`answers_input`).

    Returns:
        (the output slot document, the hash of its bytes), or None when the node still has work.
    """
    try:
        found = read_output_slot(output_slot_path(chain, node_id))
    except SlotInvalid:
        return None
    if found is None or found.document.get("status") not in ("completed", "skipped"):
        return None
    if identity_problems(chain.node(node_id), found.document) or not answers_input(chain, node_id, found):
        return None
    return found.document, content_hash(found.raw)


def routed_from(chain: Chain, target: str, source: str, digest: str) -> bool:
    """Whether the target's input slot already holds what this answer of the source handed on.

    This answer: the source's output of hash `digest`, made from the input the source holds now. The
    target's input slot must record `digest` as the source's `from_output`. An engine node's output
    records its input (`produced_from`), so its hash names the answer; an agent's records nothing of
    it, and answers the input written before it (`answers_input`): the target's input slot must then be
    no older than the agent's input slot, as the same words written again to a newer input (a reviewer
    sending work back twice) are another answer, not handed on yet.
    """
    in_path = input_slot_path(chain, target)
    agent_input = input_slot_path(chain, source) if chain.node(source).executor.kind == "external" else None
    try:
        found = read_slot_bytes(in_path) if in_path is not None else None
        document = parse_slot(in_path, found[0]) if in_path is not None and found is not None else None
        answered = read_slot_bytes(agent_input) if agent_input is not None else None
    except SlotInvalid:
        return False
    if found is None or document is None or (answered is not None and found[1] < answered[1]):
        return False
    sources = document.get("sources")
    if isinstance(sources, dict):
        entry = sources.get(source)
        return isinstance(entry, dict) and entry.get(FROM_OUTPUT) == digest
    return document.get("from_node") == source and document.get(FROM_OUTPUT) == digest


def slot_pending(chain: Chain, node_id: str) -> bool:
    """Whether the slots say the node may still write an output, by itself (its sources aside).

    Pending: a node with an input slot it has not answered (or a join's input still `waiting`), and an
    agent's start node that has not written its output yet. A slot refused as `slot_invalid` is
    finished: it is handed to the engine's rules, which end the node.
    """
    node = chain.node(node_id)
    try:
        found = read_output_slot(output_slot_path(chain, node_id))
    except SlotInvalid:
        return False
    finished = found is not None and found.document.get("status") in OUTPUT_STATUSES
    in_path = input_slot_path(chain, node_id)
    if in_path is None:
        return node.executor.kind == "external" and not finished
    received = read_slot(in_path)
    if received is None:
        return False
    if received.get("status") == WAITING:
        return True
    return not (finished and found is not None and answers_input(chain, node_id, found))
