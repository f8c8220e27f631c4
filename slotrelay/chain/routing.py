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
from slotrelay.slots import input_slot_document, now_iso, read_slot, write_json_atomic


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


def evaluate_routes_from_skip(
    chain: Chain, node_id: str, skipped_doc: dict[str, Any], received: dict[str, Any]
) -> list[RouteDecision]:
    """Decide the routes leaving a skipped node: a skip does not block downstream.

    The rule: CONTRACTS.md#skip-never-blocks.

    A route with no condition, or a condition on `status` alone, fires (its additional checks, if
    any, must hold); a condition on any other field is evaluated on the data the node received (its
    input slot's data). The slot must still pass the identity check. Every reason says it came from
    a skip.

    Parameters:
        chain: the chain.
        node_id: the skipped node.
        skipped_doc: its output slot (status `skipped`).
        received: the data of its input slot (`{}` for a start node).
    """
    identity = identity_problems(chain.node(node_id), skipped_doc)
    view = {**skipped_doc, "data": received}
    decisions = []
    for route in chain.routes_from(node_id):
        condition = route.condition
        if identity:
            fired, reason = False, "identity check failed: " + "; ".join(identity)
        elif condition is None:
            fired, reason = True, f"fired from a skip of {node_id}: no condition"
        elif condition.field == "status":
            extra = evaluate_condition(
                condition.model_copy(update={"operator": "equals", "value": "skipped"}),
                view, chain=chain)
            fired = extra.ok
            reason = (f"fired from a skip of {node_id}: the condition is only on status" if fired
                      else f"from a skip of {node_id}: {extra.reason}")
        else:
            result = evaluate_condition(condition, view, chain=chain)
            fired = result.ok
            reason = (f"{'fired ' if fired else ''}from a skip of {node_id}, "
                      f"on the data it received: {result.reason}")
        decisions.append(RouteDecision(route.route_id, route.from_node, route.to_node, fired, reason))
    return decisions


def input_slot_path(chain: Chain, node_id: str) -> Path | None:
    """The resolved input slot path of a node (None for a start node)."""
    slot = chain.node(node_id).input_slot
    return chain.resolve(slot.path) if slot else None


def output_slot_path(chain: Chain, node_id: str) -> Path:
    """The resolved output slot path of a node."""
    return chain.resolve(chain.node(node_id).output_slot.path)


def write_route_input(chain: Chain, *, from_node: str, route_id: str, to_node: str,
                      data: dict[str, Any]) -> Path | None:
    """Write the input slot of one fired route's target (`status: pending`, the upstream data).

    A join (a node that routes from several sources lead into) keeps every source: its input slot
    holds `sources`, `{source node_id: {"route_id", "data", "updated_at"}}` for each source that fired
    since the node last ran, and `data`, their data merged in the order of the chain's routes (a key
    two sources both have takes the later route's value): what a python callable receives. Sources
    recorded before the node's last output are not carried over: that input was consumed.

    Returns:
        The input slot written, or None for a start node.
    """
    path = input_slot_path(chain, to_node)
    if path is None:
        return None
    order = list(dict.fromkeys(r.from_node for r in chain.routes_to(to_node)))
    if len(order) < 2:
        return write_json_atomic(path, input_slot_document(from_node=from_node, route_id=route_id, data=data))
    sources: dict[str, Any] = {}
    existing = read_slot(path)
    if existing is not None and isinstance(existing.get("sources"), dict) and not _consumed(chain, to_node,
                                                                                            path):
        sources = {k: v for k, v in existing["sources"].items() if k in order and isinstance(v, dict)}
    sources[from_node] = {"route_id": route_id, "data": data, "updated_at": now_iso()}
    merged: dict[str, Any] = {}
    for source in order:
        if source in sources and isinstance(sources[source].get("data"), dict):
            merged.update(sources[source]["data"])
    document = input_slot_document(from_node=from_node, route_id=route_id, data=merged)
    document["sources"] = {source: sources[source] for source in order if source in sources}
    return write_json_atomic(path, document)


def _consumed(chain: Chain, node_id: str, input_path: Path) -> bool:
    """Whether the node has written its output since this input slot was written (it ran on it)."""
    try:
        return output_slot_path(chain, node_id).stat().st_mtime >= input_path.stat().st_mtime
    except FileNotFoundError:
        return False


def write_route_inputs(chain: Chain, decisions: list[RouteDecision],
                       output_doc: dict[str, Any]) -> list[Path]:
    """Write the input slot of every fired route's target (`write_route_input`).

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
        path = write_route_input(chain, from_node=decision.from_node, route_id=decision.route_id,
                                 to_node=decision.to_node, data=output_doc.get("data") or {})
        if path is not None:
            written.append(path)
    return written
