"""What an agent outside the engine reads about its chains: the chains, a node's contract, its inbox.

The engine's MCP tools (`psmr_mcp.engine_tools`) answer `chain_list`, `chain_describe` and `node_inbox`
from here; nothing here writes. A node's contract is the chain file's own (capabilities, forbidden ones,
checks, timeout) plus the JSON Schema its output slot must satisfy: the shape every reader of an output
slot checks (`slots.OutputSlotShape`), narrowed to the node (its node_id, its capabilities) and to the
JSON Schemas its post checks name. The inbox is the node's input slot as the sensor sees it: pending
while the slots say the node may still answer it (`provenance.slot_pending`).

`ServedChains` holds the chains a server was started with, loaded once; which node ids an agent may act
as is the server's grant (`AgentGrants`), never a request field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slotrelay.chain.errors import AgentNotGranted, AgentRequestInvalid, AgentTargetNotFound
from slotrelay.chain.models import Chain, FieldEqualsCheck, JsonSchemaCheck, Node, PathExistsCheck
from slotrelay.chain.outcomes import OUTPUT_STATUSES
from slotrelay.chain.provenance import WAITING, input_slot_path, output_slot_path, slot_pending
from slotrelay.chain.schema import load_chain
from slotrelay.chain.slots import (
    OutputSlotShape,
    SlotInvalid,
    content_hash,
    parse_slot,
    read_output_slot,
    read_slot_bytes,
)


@dataclass(frozen=True)
class AgentGrants:
    """What a server's sessions may do beyond reading the chains.

    Parameters:
        nodes: the node ids its sessions may submit output for (`--agent NODE_ID`, repeatable).
        decide: whether they may decide alerts (`--allow-decide`).
    """

    nodes: frozenset[str] = field(default_factory=frozenset)
    decide: bool = False

    def require_decide(self) -> None:
        """Refuse unless the server was started with `--allow-decide`.

        Raises:
            AgentNotGranted: it was not.
        """
        if not self.decide:
            raise AgentNotGranted("alert_decide needs the grant --allow-decide, which this server was not "
                                   "started with; a person can decide with `slotrelay decide` or the "
                                   "Prefect UI")

    def require_node(self, node_id: str) -> None:
        """Refuse unless the session may act as this node.

        Raises:
            AgentNotGranted: the server was not started with `--agent node_id`.
        """
        if node_id not in self.nodes:
            granted = ", ".join(sorted(self.nodes)) or "none"
            raise AgentNotGranted(
                f"node_submit as {node_id} needs the grant --agent {node_id}, which this server was not "
                f"started with (granted nodes: {granted}); nothing was written"
            )


def iso(epoch: float) -> str:
    """An epoch time as ISO-8601 UTC with milliseconds (as slots write `updated_at`)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


class ServedChains:
    """The chains a server serves, by chain_id, loaded once at start.

    Parameters:
        paths: the chain files (`--chain`, repeatable).
        slots_root: where relative slot paths resolve (default: each chain file's folder).

    Raises:
        ChainError: a chain file that cannot be used (named, with each problem).
        BadInput: two chain files with the same chain_id.
    """

    def __init__(self, paths: Iterable[Path], *, slots_root: Path | None = None) -> None:
        self.chains: dict[str, Chain] = {}
        for path in paths:
            chain = load_chain(Path(path).resolve(), slots_root=slots_root)
            if chain.chain_id in self.chains:
                from slotrelay.errors import BadInput

                raise BadInput(f"--chain {path}: chain_id {chain.chain_id!r} is served already")
            self.chains[chain.chain_id] = chain

    def chain(self, chain_id: str | None) -> Chain:
        """The chain of this id; without one, the only chain served.

        Raises:
            AgentRequestInvalid: no id while several chains are served.
            AgentTargetNotFound: no served chain of that id.
        """
        if chain_id is None:
            if len(self.chains) == 1:
                return next(iter(self.chains.values()))
            raise AgentRequestInvalid(
                f"chain_id is required: this server serves {len(self.chains)} chains "
                f"({', '.join(sorted(self.chains)) or 'none'}); chain_list names them"
            )
        if chain_id not in self.chains:
            raise AgentTargetNotFound(
                f"chain_id {chain_id!r} is not served here; served: "
                f"{', '.join(sorted(self.chains)) or 'none'} (chain_list)"
            )
        return self.chains[chain_id]

    def node(self, chain_id: str | None, node_id: str) -> tuple[Chain, Node]:
        """The chain and node an agent names; without a chain_id, the one served chain holding the node.

        Raises:
            AgentRequestInvalid: the node is in several served chains and no chain_id says which.
            AgentTargetNotFound: no served chain (or not the one named) holds the node.
        """
        if chain_id is None:
            holders = [c for c in self.chains.values() if any(n.node_id == node_id for n in c.nodes)]
            if len(holders) > 1:
                raise AgentRequestInvalid(
                    f"node {node_id!r} is in chains {', '.join(c.chain_id for c in holders)}: give chain_id"
                )
            if not holders:
                raise AgentTargetNotFound(
                    f"no served chain has a node {node_id!r} (chain_describe lists each chain's nodes)"
                )
            chain = holders[0]
        else:
            chain = self.chain(chain_id)
        try:
            return chain, chain.node(node_id)
        except KeyError:
            raise AgentTargetNotFound(
                f"chain {chain.chain_id} has no node {node_id!r}; its nodes: "
                f"{', '.join(n.node_id for n in chain.nodes)}"
            ) from None

    def summaries(self) -> list[dict[str, Any]]:
        """`chain_list`: each served chain, its file, slots folder and nodes (external ones: agents')."""
        return [
            {
                "chain_id": chain.chain_id,
                "description": chain.description,
                "chain_file": str(chain.source),
                "slots_root": str(chain.work_dir),
                "nodes": [n.node_id for n in chain.nodes],
                "agent_nodes": [n.node_id for n in chain.nodes if n.executor.kind == "external"],
                "start_nodes": chain.start_nodes(),
            }
            for chain in self.chains.values()
        ]


def describe_chain(chain: Chain) -> dict[str, Any]:
    """`chain_describe` of a whole chain: its nodes (in brief), routes and error types, as the file says."""
    return {
        "chain_id": chain.chain_id,
        "description": chain.description,
        "chain_file": str(chain.source),
        "nodes": [
            {
                "node_id": n.node_id,
                "role": n.role,
                "executor": n.executor.kind,
                "agent_node": n.executor.kind == "external",
                "input_slot": str(input_slot_path(chain, n.node_id)) if n.input_slot else None,
                "output_slot": str(output_slot_path(chain, n.node_id)),
            }
            for n in chain.nodes
        ],
        "routes": [r.model_dump(mode="json", exclude_none=True) for r in chain.routes],
        "error_types": [e.model_dump(mode="json", exclude_none=True) for e in chain.error_types],
        "pause_timeout_seconds": chain.pause_timeout_seconds,
    }


def describe_node(chain: Chain, node: Node) -> dict[str, Any]:
    """`chain_describe` of one node: its contract and the JSON Schema its output slot must satisfy."""
    return {
        "chain_id": chain.chain_id,
        "node_id": node.node_id,
        "role": node.role,
        "description": node.description,
        "executor": node.executor.kind,
        "agent_node": node.executor.kind == "external",
        "capabilities": node.capabilities,
        "forbidden_capabilities": node.forbidden_capabilities,
        "timeout_seconds": node.timeout_seconds,
        "retry": node.retry.model_dump(mode="json") if node.retry else None,
        "check_rules": node.check_rules.model_dump(mode="json"),
        "input_slot": str(input_slot_path(chain, node.node_id)) if node.input_slot else None,
        "output_slot": str(output_slot_path(chain, node.node_id)),
        "routes_out": [r.model_dump(mode="json", exclude_none=True) for r in chain.routes_from(node.node_id)],
        "output_schema": output_schema(chain, node),
    }


def output_schema(chain: Chain, node: Node) -> dict[str, Any]:
    """The JSON Schema a node's output slot must satisfy (module docstring).

    The structured post checks that a JSON Schema cannot state (a path that must exist, a free-text
    check that must be attested) are in `check_rules`; a `field_equals` post check is stated as a
    `const` that applies to a `completed` slot.
    """
    schema = OutputSlotShape.model_json_schema()
    properties = schema["properties"]
    properties["node_id"] = {"const": node.node_id, "type": "string"}
    properties["status"] = {"enum": list(OUTPUT_STATUSES), "type": "string"}
    allowed = sorted(set(node.capabilities) - set(node.forbidden_capabilities))
    properties["capabilities_used"] = {"type": "array", "items": {"enum": allowed, "type": "string"}}
    when_completed: list[dict[str, Any]] = []
    for check in node.check_rules.post_execution:
        if isinstance(check, JsonSchemaCheck):
            schema_path = Path(check.json_schema)
            schema_path = schema_path if schema_path.is_absolute() else chain.base_dir / schema_path
            try:
                when_completed.append(json.loads(schema_path.read_text(encoding="utf-8")))
            except (OSError, json.JSONDecodeError) as unusable:
                schema.setdefault("x-unusable-checks", []).append(f"{check.json_schema}: {unusable}")
        elif isinstance(check, FieldEqualsCheck):
            when_completed.append(_const_at(check.field_equals[0], check.field_equals[1]))
        elif isinstance(check, PathExistsCheck):
            when_completed.append(_const_at(check.path_exists, None, present_only=True))
    if when_completed:
        schema["allOf"] = [
            {"if": {"properties": {"status": {"const": "completed"}}}, "then": {"allOf": when_completed}}
        ]
    schema["title"] = f"output slot of {node.node_id}"
    return schema


def _const_at(dotted: str, value: Any, *, present_only: bool = False) -> dict[str, Any]:
    """A schema requiring the value at a dotted path (`data.approved`) to be `value` (or only present)."""
    leaf: dict[str, Any] = {"type": "string"} if present_only else {"const": value}
    for step in reversed(dotted.split(".")):
        leaf = {"type": "object", "properties": {step: leaf}, "required": [step]}
    return leaf


def inbox(chain: Chain, node: Node) -> dict[str, Any]:
    """`node_inbox`: the node's input slot as the sensor sees it, and whether the node is to answer it now.

    `state` is `pending` (the node is to answer: its input is there and unanswered, or it is an agent's
    start node with no output yet), `waiting` (a join still waiting for sources), `answered` (its output
    answers this input), or `empty` (no input slot written yet).
    """
    in_path = input_slot_path(chain, node.node_id)
    out_path = output_slot_path(chain, node.node_id)
    answer: dict[str, Any] = {
        "chain_id": chain.chain_id,
        "node_id": node.node_id,
        "agent_node": node.executor.kind == "external",
        "input_slot": str(in_path) if in_path else None,
        "output_slot": str(out_path),
        "timeout_seconds": node.timeout_seconds,
    }
    received: dict[str, Any] | None = None
    since: float | None = None
    try:
        found = read_slot_bytes(in_path) if in_path is not None else None
        received = parse_slot(in_path, found[0]) if found is not None and in_path is not None else None
    except SlotInvalid as bad:
        answer.update(state="refused", pending=False, problem=bad.message)
        return answer
    if found is not None and received is not None:
        since = found[1]
        answer["input_digest"] = content_hash(found[0])
        answer["input"] = received
        answer["attempt"] = received.get("attempt", 1)
    pending = slot_pending(chain, node.node_id)
    if received is not None and received.get("status") == WAITING:
        state = "waiting"
    elif pending:
        state = "pending"
    elif in_path is not None and received is None:
        state = "empty"
    else:
        state = "answered"
    answer.update(state=state, pending=state == "pending")
    answer["since"] = iso(since) if since is not None else None
    answer["deadline"] = (
        iso(since + node.timeout_seconds)
        if since is not None and node.timeout_seconds is not None and state == "pending"
        else None
    )
    if state == "answered":
        try:
            output = read_output_slot(out_path)
        except SlotInvalid as bad:
            answer["output_problem"] = bad.message
        else:
            answer["output_status"] = output.document.get("status") if output else None
    return answer
