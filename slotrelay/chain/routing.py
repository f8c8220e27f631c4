"""Routing: from a node's output slot to the input slots of the nodes its routes feed.

The seed's normal flow (4.2), steps 4-6: check the slot's identity, evaluate each route leaving
the node in priority order, and for every route that holds write the target's input slot
(`status: pending`, the upstream data). Used by the compiled flow and by the watchdog sensor alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotrelay.chain.checks import identity_problems
from slotrelay.chain.conditions import evaluate_condition
from slotrelay.chain.models import Chain
from slotrelay.slots import input_slot_document, write_json_atomic


@dataclass(frozen=True)
class RouteDecision:
    """Whether one route fired, and why (or why not)."""

    route_id: str
    from_node: str
    to_node: str
    fired: bool
    reason: str


def evaluate_routes(chain: Chain, node_id: str, output_doc: dict[str, Any]) -> list[RouteDecision]:
    """Decide every route leaving `node_id`, in priority order, from its output slot document.

    Parameters:
        chain: the chain.
        node_id: the source node.
        output_doc: the source's output slot document.

    Returns:
        One decision per route leaving the node. When the slot fails the identity check, none fires.

    Raises:
        KeyError: `node_id` is not a node of the chain.
    """
    node = chain.node(node_id)
    identity = identity_problems(node, output_doc)
    decisions = []
    for route in chain.routes_from(node_id):
        if identity:
            fired, reason = False, "identity check failed: " + "; ".join(identity)
        else:
            result = evaluate_condition(route.condition, output_doc, chain=chain)
            fired, reason = result.ok, result.reason
        decisions.append(RouteDecision(route.route_id, route.from_node, route.to_node, fired, reason))
    return decisions


def input_slot_path(chain: Chain, node_id: str) -> Path | None:
    """The resolved input slot path of a node (None for a start node)."""
    slot = chain.node(node_id).input_slot
    return chain.resolve(slot.path) if slot else None


def output_slot_path(chain: Chain, node_id: str) -> Path:
    """The resolved output slot path of a node."""
    return chain.resolve(chain.node(node_id).output_slot.path)


def write_route_inputs(chain: Chain, decisions: list[RouteDecision], output_doc: dict[str, Any]) -> list[Path]:
    """Write the input slot of every fired route's target (`status: pending`, the upstream data).

    Parameters:
        chain: the chain.
        decisions: from `evaluate_routes`.
        output_doc: the source's output slot document (its `data` is handed on).

    Returns:
        The input slot paths written, in decision order.
    """
    written = []
    for decision in decisions:
        if not decision.fired:
            continue
        path = input_slot_path(chain, decision.to_node)
        if path is None:
            continue
        document = input_slot_document(
            from_node=decision.from_node, route_id=decision.route_id, data=output_doc.get("data") or {}
        )
        written.append(write_json_atomic(path, document))
    return written
