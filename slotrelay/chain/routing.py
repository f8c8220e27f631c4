"""The one routing step: what a finished node leads to, for a run and for the sensor alike.

`route_finished(chain, node_id, document, digest, state=...)` takes a node's finished output slot
(completed or skipped) and says, without writing anything, what follows from it:

    decisions            every route leaving the node, fired or not, and why
    WriteInput           write this target's input slot (the document is complete: a join's is merged)
    StartNode            the target may run now (after its input slot is written)
    HoldJoin             the target is a join still waiting for sources that can fire
    LoopBoundExceeded    a rework loop fired past its max_iterations: a person decides
    RefuseInput          an external target's pre_execution checks do not hold on what it would get:
                         its input slot is not written (writing it would ask its agent)

`release_held_joins(chain, state)` re-examines the joins left waiting, once anything has settled.
`ChainSchedule` (in a run) and the sensor's `ChainRouter` call these two, write what they say, and keep
no rule of their own. What must outlive one process lives in the slots: a join's fired sources in its
input slot (`sources`, `status: waiting` until it is complete), a rework loop's firings in the `loops`
of the input slots inside it, and what each slot was made from (slotrelay.chain.provenance).

The rules are CONTRACTS.md#one-routing-step, #skip-never-blocks and #provenance; here is how they are
kept:
- A route's condition is evaluated on the node's output slot, in priority order; a slot failing the
  identity check fires nothing. A skipped node's routes on `status` alone (or with no condition) fire,
  others are evaluated on the data it received, which is what its targets get.
- A join's sources are the nodes its routes come from, rework loops aside; a source can fire while
  `RoutingState.pending` says it, or a node upstream of it, may still write an output. Sources recorded
  for an input the join has since answered were consumed and are not carried over.
- A rework loop's count travels in `loops` along the input slots inside the loop and is dropped where
  the data leaves it.
- A fired route whose target's input slot already holds what this very answer handed on
  (`provenance.routed_from`) is not written again, whoever wrote it (a run, `watch`, either cut short
  by a crash): its target starts, and a target done for that input settles from its slots.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from slotrelay.chain.checks import failed_checks, identity_problems
from slotrelay.chain.conditions import evaluate_condition
from slotrelay.chain.errors import CHECK_FAILED, NodeError
from slotrelay.chain.models import Chain, Route
from slotrelay.chain.provenance import (
    FROM_OUTPUT,
    WAITING,
    answers_input,
    input_slot_path,
    output_slot_path,
    routed_from,
    slot_pending,
)
from slotrelay.chain.slots import (
    OutputSlotRead,
    SlotInvalid,
    input_slot_document,
    read_output_slot,
    read_slot,
    write_slot,
)
from slotrelay.timestamps import now_iso

# Test-only fault hook: the name of a node whose routes' writes kill this process (kill -9) before the
# first of them, as a crash between the node's output write and its routes' writes would.
CRASH_BEFORE_ROUTE_ENV = "SLOTRELAY_TEST_CRASH_BEFORE_ROUTE"
JOIN_RELEASE = "join:"


@dataclass(frozen=True)
class RouteDecision:
    """Whether one route fired, and why (or why not)."""

    route_id: str
    from_node: str
    to_node: str
    fired: bool
    reason: str


@dataclass(frozen=True)
class WriteInput:
    """Write a fired route's target input slot (the whole document)."""

    route_id: str
    from_node: str
    to_node: str
    path: Path
    document: dict[str, Any]


@dataclass(frozen=True)
class ReleaseJoin:
    """A waiting join is complete: write its input slot `pending` (the whole document), then start it."""

    node_id: str
    path: Path
    document: dict[str, Any]


@dataclass(frozen=True)
class StartNode:
    """The node may run now (once the writes before it are done)."""

    node_id: str


@dataclass(frozen=True)
class HoldJoin:
    """The join waits for these sources, which can still fire."""

    node_id: str
    waiting_for: tuple[str, ...]


@dataclass(frozen=True)
class LoopBoundExceeded:
    """A rework loop's route fired past its max_iterations: it does not loop, a person decides."""

    route_id: str
    from_node: str
    to_node: str
    message: str


@dataclass(frozen=True)
class RefuseInput:
    """An external target's pre_execution checks fail on the input it would get: nothing is written."""

    route_id: str
    from_node: str
    to_node: str
    error: NodeError
    data: dict[str, Any]


RoutingStep = WriteInput | ReleaseJoin | StartNode | HoldJoin | LoopBoundExceeded | RefuseInput


@dataclass(frozen=True)
class Routed:
    """What a finished node leads to: every route's decision, and the steps, in order."""

    decisions: list[RouteDecision]
    steps: list[RoutingStep]


class RoutingState(Protocol):
    """Where the nodes stand, as the routing step needs it: a run's own view, or the slots'."""

    def pending(self, node_id: str) -> bool:
        """Whether the node itself may still write an output (running, waiting for its agent or a person,
        or with an input it has not answered)."""
        ...


class SlotState:
    """The slots' view (`provenance.slot_pending`): the sensor's, which keeps nothing in memory."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain

    def pending(self, node_id: str) -> bool:
        return slot_pending(self.chain, node_id)


def evaluate_routes(chain: Chain, node_id: str, output_doc: dict[str, Any]) -> list[RouteDecision]:
    """Decide every route leaving `node_id`, in priority order, from its output slot document.

    Parameters:
        chain: the chain.
        node_id: the source node.
        output_doc: the source's output slot document.

    Returns:
        One decision per route leaving the node. When the slot fails the identity check, none fires; a
        skipped slot leads on (see the module docstring).

    Raises:
        KeyError: `node_id` is not a node of the chain.
    """
    return _decide(chain, node_id, output_doc, received={})


def _decide(chain: Chain, node_id: str, document: dict[str, Any],
            received: dict[str, Any]) -> list[RouteDecision]:
    identity = identity_problems(chain.node(node_id), document)
    skipped = document.get("status") == "skipped"
    view = {**document, "data": received} if skipped else document
    decisions = []
    for route in chain.routes_from(node_id):
        condition = route.condition
        if identity:
            fired, reason = False, "identity check failed: " + "; ".join(identity)
        elif not skipped:
            result = evaluate_condition(condition, document, chain=chain)
            fired, reason = result.ok, result.reason
        elif condition is None:
            fired, reason = True, f"fired from a skip of {node_id}: no condition"
        elif condition.field == "status":
            as_skipped = condition.model_copy(update={"operator": "equals", "value": "skipped"})
            extra = evaluate_condition(as_skipped, view, chain=chain)
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


def route_finished(chain: Chain, node_id: str, document: dict[str, Any], digest: str | None, *,
                   state: RoutingState, received: dict[str, Any] | None = None,
                   fresh_since: float | None = None) -> Routed:
    """What a finished node (completed or skipped) leads to: the one routing step (module docstring).

    Parameters:
        chain: the chain.
        node_id: the finished node.
        document: its output slot document (for a skipped external node, the engine's view of it).
        digest: the `content_hash` of its output slot's bytes (recorded as `from_output`).
        state: where the other nodes stand (a run's schedule, or `SlotState`).
        received: the data the node received, when it is not in its input slot (a refused input).
        fresh_since: join sources recorded before this time are not carried over (a run that is a whole
            round of the chain on its own; None: carry every source not yet consumed).

    Returns:
        The decisions and the steps, in the order to carry them out.
    """
    skipped = document.get("status") == "skipped"
    loop_routes = _loop_routes(chain)
    # The input slot is read only when something needs it: what a skip hands on, a loop's count.
    received_doc = _received(chain, node_id) if (skipped and received is None) or loop_routes else None
    data_received = received if received is not None else _data(received_doc)
    decisions = _decide(chain, node_id, document, data_received)
    handed_on = data_received if skipped else _data(document)
    inherited = {r: n for r, n in _loops(received_doc).items() if r in loop_routes}
    final: list[RouteDecision] = []
    steps: list[RoutingStep] = []
    for decision in decisions:
        if not decision.fired:
            final.append(decision)
            continue
        route = chain.route(decision.route_id)
        loops = {r: n for r, n in inherited.items() if decision.to_node in loop_body(chain, loop_routes[r])}
        if route.max_iterations is not None:
            count = inherited.get(route.route_id, 0) + 1
            if count > route.max_iterations:
                message = (f"rework loop {route.route_id} reached its max_iterations ({route.max_iterations})"
                           " and fired again: a person decides")
                steps.append(LoopBoundExceeded(route.route_id, node_id, route.to_node, message))
                final.append(replace(decision, fired=False, reason=f"not looped: {message}"))
                continue
            loops[route.route_id] = count
            decision = replace(decision, reason=f"{decision.reason} (rework loop, iteration {count} of "
                                                f"{route.max_iterations})")
        final.append(decision)
        if digest is not None and routed_from(chain, route.to_node, node_id, digest):
            # Handed on already (by this run before a crash, by `run`, or by `watch`): not written again, as
            # its target may have answered it; the target starts, and settles from its slots if it has.
            if (read_slot(input_slot_path(chain, route.to_node) or Path()) or {}).get("status") != WAITING:
                steps.append(StartNode(route.to_node))
            continue
        steps.extend(_deliver(chain, route, handed_on, digest, loops, state, fresh_since))
    return Routed(final, steps)


def release_held_joins(chain: Chain, *, state: RoutingState,
                       fresh_since: float | None = None) -> list[RoutingStep]:
    """The waiting joins that no source can fire into any more: write each `pending`, and start it.

    Call once anything has settled (a node finished, was refused, or a person decided): a source that
    ends without firing into a join must not leave it waiting.
    """
    steps: list[RoutingStep] = []
    for target in _joins(chain):
        path = input_slot_path(chain, target)
        document = read_slot(path) if path is not None else None
        if path is None or document is None or document.get("status") != WAITING:
            continue
        sources = _sources_of(document, chain, target, fresh_since)
        if not sources or join_waiting_for(chain, target, sources, state):
            continue
        complete = _join_document(chain, target, sources, _loops(document), waiting=[],
                                  from_node=str(document.get("from_node")),
                                  route_id=str(document.get("route_id")),
                                  from_output=document.get(FROM_OUTPUT))
        refusal = _refusal(chain, target, complete, route_id=str(document.get("route_id")),
                           from_node=str(document.get("from_node")))
        steps.extend([refusal] if refusal else [ReleaseJoin(target, path, complete), StartNode(target)])
    return steps


def join_waiting_for(chain: Chain, target: str, fired: Collection[str], state: RoutingState) -> list[str]:
    """The join rule: the sources of `target` that have not fired into it and can still fire.

    A source can fire while it, or any node upstream of it (rework loops aside), may still write an
    output. The join runs once this is empty.
    """
    memo: dict[str, bool] = {}

    def can_fire(node_id: str) -> bool:
        if node_id not in memo:
            memo[node_id] = False  # the graph without loop routes is acyclic; this only guards the walk
            memo[node_id] = state.pending(node_id) or any(can_fire(s) for s in upstream(chain, node_id))
        return memo[node_id]

    return [source for source in upstream(chain, target) if source not in fired and can_fire(source)]


def loop_body(chain: Chain, route: Route) -> set[str]:
    """The nodes a rework loop runs again: from its target, forward, to its source (loop routes aside)."""
    forward: dict[str, set[str]] = {}
    for r in chain.routes:
        if r.max_iterations is None:
            forward.setdefault(r.from_node, set()).add(r.to_node)
    reached, stack = {route.to_node}, [route.to_node]
    while stack:
        for nxt in forward.get(stack.pop(), ()):
            if nxt not in reached:
                reached.add(nxt)
                stack.append(nxt)
    back, stack = {route.from_node}, [route.from_node]
    while stack:
        for source in upstream(chain, stack.pop()):
            if source not in back:
                back.add(source)
                stack.append(source)
    return reached & back


def write_input(step: WriteInput | ReleaseJoin, *, sync: bool = True) -> str:
    """Write a target's input slot; returns the hash of what was written.

    Parameters:
        sync: fsync it (`slots.write_slot`); a run turns it off where `rebuilt_on_resume` allows.

    Raises:
        OSError: the slot cannot be written (L2: the target fails with `slot_unwritable`, an L4 alert).
    """
    if isinstance(step, WriteInput) and os.environ.get(CRASH_BEFORE_ROUTE_ENV) == step.from_node:
        os.kill(os.getpid(), signal.SIGKILL)
    return write_slot(step.path, step.document, sync=sync)


# Executors whose input slot nothing but the engine reads: an external node's agent reads its own.
ENGINE_READ_INPUTS = frozenset({"python", "command", "deploy", "pen"})


def rebuilt_on_resume(chain: Chain, step: WriteInput) -> bool:
    """Whether a run's write of this input slot may go without fsync
    (CONTRACTS.md#files-the-product-writes): it holds nothing but what its source's output slot
    (fsynced) holds, and `run --resume` writes it again when it does not hold that output
    (`provenance.routed_from`), be it missing, empty, cut short or older after a power cut.

    Not so for a join's (`sources`: what each source sent lives nowhere else), one inside a rework
    loop (`loops`: the count), or an external node's (its agent reads it, perhaps before a resume).
    """
    return (chain.node(step.to_node).executor.kind in ENGINE_READ_INPUTS
            and "sources" not in step.document and "loops" not in step.document)


def _deliver(chain: Chain, route: Route, data: dict[str, Any], digest: str | None, loops: dict[str, int],
             state: RoutingState, fresh_since: float | None) -> list[RoutingStep]:
    """The steps of one fired route: its target's input slot, and whether the target starts."""
    target = route.to_node
    path = input_slot_path(chain, target)
    if path is None:
        return [StartNode(target)]
    if route.max_iterations is not None or target not in _joins(chain):
        document = input_slot_document(from_node=route.from_node, route_id=route.route_id, data=data,
                                       from_output=digest, loops=loops)
        refusal = _refusal(chain, target, document, route_id=route.route_id, from_node=route.from_node)
        return [refusal] if refusal else [WriteInput(route.route_id, route.from_node, target, path, document),
                                          StartNode(target)]
    existing = read_slot(path)
    sources = _sources_of(existing, chain, target, fresh_since) if existing is not None else {}
    sources[route.from_node] = {"route_id": route.route_id, "data": data, "updated_at": now_iso(),
                                FROM_OUTPUT: digest}
    waiting = join_waiting_for(chain, target, sources, state)
    kept = _loops(existing) if existing is not None and len(sources) > 1 else {}
    document = _join_document(chain, target, sources, {**kept, **loops}, waiting=waiting,
                              from_node=route.from_node, route_id=route.route_id, from_output=digest)
    if waiting:
        return [WriteInput(route.route_id, route.from_node, target, path, document),
                HoldJoin(target, tuple(waiting))]
    refusal = _refusal(chain, target, document, route_id=route.route_id, from_node=route.from_node)
    return [refusal] if refusal else [WriteInput(route.route_id, route.from_node, target, path, document),
                                      StartNode(target)]


def _join_document(chain: Chain, target: str, sources: dict[str, dict[str, Any]], loops: dict[str, int], *,
                   waiting: list[str], from_node: str, route_id: str, from_output: Any) -> dict[str, Any]:
    """A join's input slot: every fired source (`sources`), and `data`, their data merged in the order of
    the chain's routes (a key two sources both have takes the later route's value); `waiting` (and
    `waiting_for`) while a source can still fire, else `pending`."""
    order = upstream(chain, target)
    merged: dict[str, Any] = {}
    for source in order:
        if source in sources and isinstance(sources[source].get("data"), dict):
            merged.update(sources[source]["data"])
    document = input_slot_document(from_node=from_node, route_id=route_id, data=merged,
                                   from_output=from_output if isinstance(from_output, str) else None,
                                   loops=loops, status=WAITING if waiting else "pending")
    document["sources"] = {source: sources[source] for source in order if source in sources}
    if waiting:
        document["waiting_for"] = waiting
    return document


def _refusal(chain: Chain, target: str, document: dict[str, Any], *, route_id: str,
             from_node: str) -> RefuseInput | None:
    """An external target's pre_execution checks, on the input slot it would get, before it is written."""
    node = chain.node(target)
    if node.executor.kind != "external" or not node.check_rules.pre_execution:
        return None
    failures = failed_checks(node.check_rules.pre_execution, document, chain=chain)
    if not failures:
        return None
    error = NodeError(CHECK_FAILED, "pre_execution: " + "; ".join(failures))
    return RefuseInput(route_id, from_node, target, error, _data(document))


def _sources_of(document: dict[str, Any], chain: Chain, target: str,
                fresh_since: float | None) -> dict[str, dict[str, Any]]:
    """The join's fired sources its input slot carries: none once the join has answered that input."""
    sources = document.get("sources")
    if not isinstance(sources, dict) or _consumed(chain, target):
        return {}
    order = upstream(chain, target)
    kept = {k: v for k, v in sources.items() if k in order and isinstance(v, dict)}
    if fresh_since is not None:
        kept = {k: v for k, v in kept.items() if _stamp(v.get("updated_at")) >= fresh_since}
    return kept


def _consumed(chain: Chain, target: str) -> bool:
    """Whether the target has answered its current input slot (it ran on it)."""
    try:
        found: OutputSlotRead | None = read_output_slot(output_slot_path(chain, target))
    except SlotInvalid:
        return False
    return found is not None and answers_input(chain, target, found)


def _stamp(value: Any) -> float:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return 0.0


def _received(chain: Chain, node_id: str) -> dict[str, Any] | None:
    path = input_slot_path(chain, node_id)
    return read_slot(path) if path is not None else None


def _data(document: dict[str, Any] | None) -> dict[str, Any]:
    data = (document or {}).get("data")
    return data if isinstance(data, dict) else {}


def _loops(document: dict[str, Any] | None) -> dict[str, int]:
    loops = (document or {}).get("loops")
    if not isinstance(loops, dict):
        return {}
    return {k: v for k, v in loops.items() if isinstance(v, int) and not isinstance(v, bool)}


def upstream(chain: Chain, node_id: str) -> list[str]:
    """A node's upstream nodes in the order of the chain's routes; a rework loop's route is not one."""
    return list(chain.derived("routing.upstream", _upstream).get(node_id, ()))


def _upstream(chain: Chain) -> dict[str, tuple[str, ...]]:
    sources: dict[str, dict[str, None]] = {}
    for r in chain.routes:
        if r.max_iterations is None:
            sources.setdefault(r.to_node, {})[r.from_node] = None
    return {target: tuple(found) for target, found in sources.items()}


def _joins(chain: Chain) -> tuple[str, ...]:
    """Nodes two or more nodes route into (rework loops aside)."""
    return chain.derived("routing.joins", lambda c: tuple(
        target for target, sources in c.derived("routing.upstream", _upstream).items() if len(sources) > 1))


def _loop_routes(chain: Chain) -> dict[str, Route]:
    """The chain's rework loops' routes, by route_id."""
    return chain.derived("routing.loop_routes",
                         lambda c: {r.route_id: r for r in c.routes if r.max_iterations is not None})
