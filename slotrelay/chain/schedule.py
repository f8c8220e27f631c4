"""The chain scheduler: given node outcomes, what runs next (CONTRACTS.md#chain-engine). Plain Python.

`ChainSchedule` is the engine's logic for one run of a chain; a driver (the Prefect flow in
flows/chain.py, or a test) runs what it says and feeds the outcomes back:

    step = schedule.next_step()
      Run(nodes)          submit these nodes (their input slots are written)
      Wait()              nodes are in flight: hand the next finished one to `settle(node_id, outcome)`
                          (which returns an `Escalation` when an alert must be written: `alerted()`)
      Arbitrate(node, alert)  a person decides: hand the decision to `decided(node, alert, decision)`
      RaiseAlert(escalation)  write this alert, then `alerted()` (a rework loop past its bound)
      Finished()          the run is over: `summary()`

Rules it keeps (each tested in tests/chain/test_schedule.py):
- A node runs once every source that can fire into it has settled, and only when some route fired
  into it; with nothing in flight, nodes no route fired into are closed NotRun.
- Completed: its routes are evaluated from its output slot, and each route that holds writes its
  target's input slot. Skipped (CONTRACTS.md#skip-never-blocks): a route whose condition is only
  on `status` fires, and conditions on `data` are evaluated on the data the node received.
- Failed: `fail` (at once) or `escalate` (a retry type ran out, on_escalation alert) -> an alert, the
  run goes on without the node (nothing downstream of it) and a person decides before it ends;
  `arbitrate` (no declared type, or on_escalation pause) -> an alert and a decision once nothing
  else can run.
- Rework loops: a route with `max_iterations` may close a cycle (it is left out of readiness). When
  it fires, the loop's nodes (from its target back to its source) run again; the firing past the
  bound does not loop but escalates: an alert (`loop_bound_exceeded`) and a person decides (continue
  without data keeps the node's output and goes on without the loop).
- Resume (CONTRACTS.md#stateless-engine): a node whose output slot is completed (or skipped), passes its
  identity check and is not older than its input slot settles from that slot without running, its routes
  evaluated from it; a run started again after a suspend takes back the alerts it wrote (`take_back`).

Per-type retry accounting (each error type within its own max_retries, across the attempts of one
node run) is `RetryBook`, used by the node task.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from slotrelay.alerts import Alert, Decision, DecisionName
from slotrelay.chain.errors import UNKNOWN, ChainValidationError, NodeError
from slotrelay.chain.executors import fresh_output
from slotrelay.chain.models import Chain, Route
from slotrelay.chain.routing import (
    RouteDecision,
    evaluate_routes,
    evaluate_routes_from_skip,
    input_slot_path,
    output_slot_path,
    write_route_inputs,
)
from slotrelay.chain.runner import (
    Handling,
    completed_from_slots,
    decide_handling,
    publish_output,
    read_input,
    write_ended,
)
from slotrelay.chain.schema import load_chain
from slotrelay.slots import SlotInvalid, ask_again, output_slot_document

FINAL = ("Completed", "Skipped", "Failed", "NotRun")


class Notes(Protocol):
    """Where the schedule says what it did (a logger, or the engine log and Prefect's run logger).

    `debug` is for what happens on every node of a healthy run (a route that fired): the engine log
    keeps it, the run log (sent to the API, read in the UI) does not, so a person reads there what
    went otherwise and each node does not pay an API log line for it.
    """

    def debug(self, msg: str, *args: Any) -> None: ...

    def info(self, msg: str, *args: Any) -> None: ...

    def error(self, msg: str, *args: Any) -> None: ...


def node_outcome(node_id: str, state: str, *, attempts: int, error: NodeError | None = None,
                 handling: str | None = None, output_slot: str | None = None,
                 document: dict[str, Any] | None = None) -> dict[str, Any]:
    """What one node run ended with, as the node task returns it and `settle` takes it.

    `{"node_id", "state": "Completed|Skipped|Failed", "attempts", "error_type", "message", "handling",
    "output_slot", "document"}`.
    """
    return {
        "node_id": node_id,
        "state": state,
        "attempts": attempts,
        "error_type": error.error_type if error else None,
        "message": error.message if error else None,
        "handling": handling,
        "output_slot": output_slot,
        "document": document,
    }


@dataclass(frozen=True)
class Run:
    """Submit these nodes now."""

    nodes: list[str]


@dataclass(frozen=True)
class Wait:
    """Nodes are in flight: settle the next one that finishes."""


@dataclass(frozen=True)
class Arbitrate:
    """A person decides on this node's alert."""

    node_id: str
    alert: Path


@dataclass(frozen=True)
class RaiseAlert:
    """Write the alert of this escalation, then hand its path to `alerted`."""

    escalation: Escalation


@dataclass(frozen=True)
class Finished:
    """Nothing more runs."""


Step = Run | Wait | Arbitrate | RaiseAlert | Finished
LOOP_BOUND_EXCEEDED = "loop_bound_exceeded"


@dataclass(frozen=True)
class Escalation:
    """An alert the driver writes for a failed node (then hands its path to `alerted`)."""

    node_id: str
    outcome: dict[str, Any]
    reason: str
    input_slot: str | None


class ChainSchedule:
    """The state of one run of a chain: which nodes ran, how they ended, what runs next.

    Parameters:
        chain: the chain, bound to its file.
        notes: where to say what happened (engine log, run log).
        stop_at_external: leave an external node whose output slot is not there yet NotRun (the
            watchdog sensor routes it when its agent writes it).
        resume: settle nodes the slots say are done without running them (CONTRACTS.md#stateless-engine).
    """

    def __init__(self, chain: Chain, *, notes: Notes, stop_at_external: bool = False,
                 resume: bool = False) -> None:
        self.chain = chain
        self.notes = notes
        self.stop_at_external = stop_at_external
        self.resume = resume
        self.status: dict[str, str | None] = {n.node_id: None for n in chain.nodes}
        self.attempts: dict[str, int] = {n.node_id: 0 for n in chain.nodes}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.fired_into: dict[str, list[str]] = {n.node_id: [] for n in chain.nodes}
        self.routes: dict[str, dict[str, Any]] = {}
        self.alerts: list[str] = []
        self.in_flight: set[str] = set()
        self.arbitrations: list[tuple[str, Path]] = []
        # Escalations (`on_escalation: alert`) not decided yet: asked before the run ends.
        self.unhandled: list[tuple[str, Path]] = []
        self.terminated: str | None = None
        self._to_run: list[str] = []
        self.iterations: dict[str, int] = {}
        self._due_alerts: list[Escalation] = []
        self._loop_paused: set[str] = set()
        # External nodes whose agent this run asked again (a retry decision): the run waits for the answer.
        self._asked_again: set[str] = set()
        self.sources = self._sources_of(chain)

    @staticmethod
    def _sources_of(chain: Chain) -> dict[str, list[str]]:
        """Each node's upstream nodes; a rework loop's route (max_iterations) is not a dependency."""
        sources: dict[str, list[str]] = {n.node_id: [] for n in chain.nodes}
        for route in chain.routes:
            if route.max_iterations is None:
                sources[route.to_node].append(route.from_node)
        return sources

    def _loop_body(self, route: Route) -> set[str]:
        """The nodes a rework loop runs again: from its target, forward, to its source (unbounded routes)."""
        forward: dict[str, set[str]] = {}
        for r in self.chain.routes:
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
            current = stack.pop()
            for source in self.sources[current]:
                if source not in back:
                    back.add(source)
                    stack.append(source)
        return reached & back

    # Starting.

    def start(self, start_nodes: list[str]) -> None:
        """Begin at these nodes (the chain's start nodes, or where a route left input slots).

        Raises:
            ValueError: a node the chain does not have.
        """
        unknown = [s for s in start_nodes if s not in self.status]
        if unknown:
            raise ValueError(f"start_nodes names nodes the chain does not have: {', '.join(unknown)}")
        self._to_run.extend(s for s in start_nodes if self.status[s] is None and s not in self._to_run)

    def take_back(self, alerts: list[tuple[Path, Alert]]) -> None:
        """A run started again after a suspend: the alerts it wrote say where their nodes stand.

        A failed node stays failed, a node waiting for a person is asked again (and receives the
        decision already given) instead of running again; the rest resumes from the slots.
        """
        if not alerts:
            return
        self.resume = True
        for path, alert in alerts:
            if alert.node_id not in self.status or alert.status in ("decided", "timed_out"):
                continue
            self.attempts[alert.node_id] = alert.attempts
            self.alerts.append(str(path))
            self.outcomes[alert.node_id] = {"error_type": alert.error_type, "output_slot": alert.output_slot}
            if alert.handling in ("fail", "escalate") and alert.status == "open":
                self.status[alert.node_id] = "Failed"
                self.unhandled.append((alert.node_id, path))
            else:
                self.status[alert.node_id] = "Paused"
                self.arbitrations.append((alert.node_id, path))
            self.notes.info("%s: taken back from alert %s (%s, %s)", alert.node_id, path.name, alert.handling,
                            alert.status)

    # What next.

    def next_step(self) -> Step:
        """What the driver does next (see the module docstring)."""
        while not self.terminated:
            if self._due_alerts:
                return RaiseAlert(self._due_alerts.pop(0))
            runnable = self._take_runnable()
            if runnable:
                return Run(runnable)
            if self.in_flight:
                return Wait()
            if self.arbitrations:
                node_id, path = self.arbitrations.pop(0)
                self.status[node_id] = "Paused"
                return Arbitrate(node_id, path)
            if self.unhandled:
                # Before unstarted nodes are closed: a `continue` must still be able to feed them.
                for node_id, path in self.unhandled:
                    self.status[node_id] = "Paused"
                    self.arbitrations.append((node_id, path))
                self.unhandled.clear()
                continue
            if not self._close_unreachable():
                break
        for node_id, state in self.status.items():
            if state not in FINAL:
                self.status[node_id] = "NotRun"
        return Finished()

    def ready(self) -> list[str]:
        """Unstarted nodes some route fired into, whose every source has settled."""
        return [
            node_id for node_id, routes in self.fired_into.items()
            if routes and self.status[node_id] is None
            and all(self.status[source] in FINAL for source in self.sources[node_id])
        ]

    def _take_runnable(self) -> list[str]:
        """Nodes to submit now; those the slots say are done (resume) settle here and may ready more."""
        runnable: list[str] = []
        while True:
            candidates = [n for n in self._to_run if self.status[n] is None] + [
                n for n in self.ready() if n not in self._to_run]
            self._to_run.clear()
            if not candidates:
                return runnable
            for node_id in candidates:
                if self.status[node_id] is not None:
                    continue
                if self._settled_from_slots(node_id) or self._left_for_sensor(node_id):
                    continue
                self.status[node_id] = "Running"
                self.in_flight.add(node_id)
                runnable.append(node_id)

    def _settled_from_slots(self, node_id: str) -> bool:
        if not self.resume:
            return False
        document = completed_from_slots(self.chain, node_id)
        if document is None:
            return False
        state = "Completed" if document["status"] == "completed" else "Skipped"
        self.status[node_id] = state
        self.outcomes[node_id] = node_outcome(node_id, state, attempts=0, document=document,
                                              output_slot=str(output_slot_path(self.chain, node_id)))
        self.notes.info("%s: its output slot says %s (not older than its input): not run again", node_id,
                        document["status"])
        self.route(node_id, document, resumed=True)
        return True

    def _left_for_sensor(self, node_id: str) -> bool:
        node = self.chain.node(node_id)
        if not self.stop_at_external or node.executor.kind != "external" or node_id in self._asked_again:
            return False
        in_path = input_slot_path(self.chain, node_id)
        since = in_path.stat().st_mtime if in_path and in_path.exists() else 0.0
        try:
            waiting = fresh_output(output_slot_path(self.chain, node_id), since=since) is None
        except SlotInvalid:
            # Refused, as a failed slot is finished: the node runs, and its task applies the chain's
            # rules to `slot_invalid` (the sensor hands such a slot to a run starting here).
            waiting = False
        if waiting and since and node.timeout_seconds is not None:
            # Pending longer than its timeout (the input slot's own clock): it runs, and times out by
            # the chain's rules.
            waiting = time.time() < since + node.timeout_seconds
        if waiting:
            self.status[node_id] = "NotRun"
            self.notes.info("%s waits for its external agent: left for the sensor to route", node_id)
        return waiting

    def _close_unreachable(self) -> bool:
        """With nothing running or waiting, unstarted nodes no route fired into will not run."""
        closed = False
        for node_id, state in self.status.items():
            if state is None and not self.fired_into[node_id]:
                self.status[node_id] = "NotRun"
                closed = True
        return closed

    # Outcomes.

    def settle(self, node_id: str, result: Any) -> Escalation | None:
        """Take in a finished node run: record it, route its output, or say which alert to write.

        Parameters:
            node_id: the node.
            result: its `node_outcome` dict (anything else is a crash of the machinery: `unknown`).

        Returns:
            The alert to write for a failed node, else None.
        """
        self.in_flight.discard(node_id)
        if not isinstance(result, dict):
            # Not our outcome: a crash of the task machinery (node tasks have no Prefect timeout).
            error = NodeError(UNKNOWN, f"{type(result).__name__}: {result}")
            handling = decide_handling(self.chain, error, type_failures=10**9)
            result = node_outcome(node_id, "Failed", attempts=1, error=error, handling=handling)
        self.outcomes[node_id] = result
        self.attempts[node_id] += result["attempts"]
        self.status[node_id] = result["state"]
        if result["state"] in ("Completed", "Skipped"):
            self.route(node_id, result["document"])
            return None
        declared = self.chain.error_type(result["error_type"] or UNKNOWN)
        reason = {
            "fail": f"error type {result['error_type']!r} is handled by failing the node",
            "escalate": (
                f"retries of {result['error_type']!r} ran out (escalate_after: max_retries_exceeded);"
                " the run goes on without this node, and a person decides before it ends"),
            "arbitrate": (
                f"error type {result['error_type']!r} is not declared by the chain: a person decides"
                if declared is None
                else f"retries of {result['error_type']!r} ran out and its type says: pause for a person"),
        }[result["handling"]]
        in_path = input_slot_path(self.chain, node_id)
        return Escalation(node_id, result, reason, str(in_path) if in_path else None)

    def alerted(self, node_id: str, path: Path) -> None:
        """The alert of an `Escalation` was written at `path`."""
        self.alerts.append(str(path))
        handling = self.outcomes[node_id]["handling"]
        if handling == "arbitrate":
            self.status[node_id] = "Paused"
            self.arbitrations.append((node_id, path))
        elif handling in ("fail", "escalate"):
            # L5 for every alert: the run goes on without the node, and a person decides before it ends.
            self.unhandled.append((node_id, path))

    def route(self, node_id: str, document: dict[str, Any], *, resumed: bool = False) -> list[RouteDecision]:
        """Evaluate a settled node's routes and write the input slot of each that fired.

        A skipped node leads on (CONTRACTS.md#skip-never-blocks): see `routing.evaluate_routes_from_skip`.
        A node settled from its slots (`resumed`) writes only input slots that are missing: one written
        again would be newer than its target's finished output, and the target would run again.
        """
        if document.get("status") == "skipped":
            try:
                received = read_input(self.chain, node_id)[1]
            except NodeError:
                received = {}
            decisions = evaluate_routes_from_skip(self.chain, node_id, document, received)
            handed_on = {**document, "data": received}
        else:
            decisions = evaluate_routes(self.chain, node_id, document)
            handed_on = document
        if resumed:
            decisions_to_write = [
                d for d in decisions if (
                    p := input_slot_path(self.chain, d.to_node)) is None or not p.exists()]
        else:
            decisions_to_write = decisions
        write_route_inputs(self.chain, decisions_to_write, handed_on)
        for decision in decisions:
            fired, reason = decision.fired, decision.reason
            bound = next(r for r in self.chain.routes if r.route_id == decision.route_id).max_iterations
            if fired and bound is not None:
                fired, reason = self._loop(decision, bound)
            self.routes[decision.route_id] = {"fired": fired, "reason": reason}
            if fired:
                self.fired_into[decision.to_node].append(decision.route_id)
            if fired:
                self.notes.debug("route %s fired: %s", decision.route_id, reason)
            else:
                self.notes.info("route %s did not fire: %s", decision.route_id, reason)
        return decisions

    def _loop(self, decision: RouteDecision, bound: int) -> tuple[bool, str]:
        """A rework loop's route fired: run its body again, or escalate past the bound."""
        count = self.iterations.get(decision.route_id, 0) + 1
        self.iterations[decision.route_id] = count
        if count > bound:
            node_id = decision.from_node
            message = (
                f"rework loop {decision.route_id} reached its max_iterations ({bound}) and fired again:"
                " a person decides")
            self.outcomes[node_id] = {**self.outcomes.get(node_id, {}), "error_type": LOOP_BOUND_EXCEEDED,
                                      "message": message, "handling": "arbitrate"}
            outcome = {**node_outcome(node_id, "Failed", attempts=self.attempts[node_id],
                                      error=NodeError(LOOP_BOUND_EXCEEDED, message), handling="arbitrate")}
            in_path = input_slot_path(self.chain, node_id)
            self._due_alerts.append(Escalation(node_id, outcome, message, str(in_path) if in_path else None))
            self._loop_paused.add(node_id)
            return False, f"not looped: {message}"
        route = next(r for r in self.chain.routes if r.route_id == decision.route_id)
        for node_id in self._loop_body(route):
            self.status[node_id] = None
            self.fired_into[node_id] = []
        return True, f"{decision.reason} (rework loop, iteration {count} of {bound})"

    def decided(self, node_id: str, alert: Path, decision: Decision) -> None:
        """Apply a person's decision on a paused node (continue, retry, terminate, reload)."""
        if decision.decision == DecisionName.terminate:
            self.status[node_id] = "Failed"
            self.terminated = f"terminated by a decision on {node_id}"
            return
        if decision.decision == DecisionName.continue_:
            attempt = self.attempts[node_id]
            if node_id in self._loop_paused and decision.data is None:
                # Past a rework loop's bound: its output stands, and the run goes on without the loop.
                self._loop_paused.discard(node_id)
                self.status[node_id] = "Completed"
                return
            document: dict[str, Any] | None
            if decision.data is not None:
                document = output_slot_document(node_id, status="completed", data=decision.data,
                                                attempt=attempt)
                publish_output(self.chain, node_id, document)
                self.status[node_id] = "Completed"
            else:
                document = write_ended(self.chain, node_id, status="skipped", error=None, attempt=attempt)
                self.status[node_id] = "Skipped"
            if document is not None:
                self.route(node_id, document)
            return
        if decision.decision == DecisionName.reload:
            if self.chain.source is None:
                # a chain built in memory has no file to read again
                self.notes.error("reload refused: this chain was not loaded from a file")
                self.arbitrations.insert(0, (node_id, alert))
                return
            try:
                reloaded = load_chain(
                    self.chain.source,
                    slots_root=self.chain.slots_root,
                    alerts_dir=self.chain.alerts_dir,
                    logs_dir=self.chain.logs_dir,
                )
            except ChainValidationError as invalid:
                self.notes.error("reload refused, the chain is invalid: %s", invalid.message)
                self.arbitrations.insert(0, (node_id, alert))
                return
            if {n.node_id for n in reloaded.nodes} != set(self.status):
                # A run's bookkeeping is per node: new rules yes, a different set of nodes no.
                self.notes.error("reload refused: the chain file now has other nodes than this run")
                self.arbitrations.insert(0, (node_id, alert))
                return
            self.chain = reloaded
            self.sources = self._sources_of(reloaded)
            self.notes.info("reloaded %s", self.chain.source)
        in_path = input_slot_path(self.chain, node_id)
        if self.chain.node(node_id).executor.kind == "external" and in_path is not None and in_path.exists():
            # Its agent is asked again: only an output newer than this input answers the retry.
            ask_again(in_path, attempt=self.attempts[node_id] + 1)
            self._asked_again.add(node_id)
        self.status[node_id] = None
        self._to_run.append(node_id)

    def fail_paused(self, message: str) -> None:
        """No decision came in time: paused nodes fail, the rest does not run."""
        self.terminated = message
        for node_id, state in self.status.items():
            if state not in FINAL:
                self.status[node_id] = "Failed" if state == "Paused" else "NotRun"

    # The result.

    def summary(self, flow_run_id: str | None) -> dict[str, Any]:
        """The `slotrelay run --json` summary: state, every node, every route, the alerts."""
        failed = self.terminated or any(s == "Failed" for s in self.status.values())
        for route in self.chain.routes:
            if route.route_id not in self.routes:
                source = self.status[route.from_node]
                why = "the source did not run" if source == "NotRun" else f"the source ended {source}"
                self.routes[route.route_id] = {"fired": False, "reason": why}
        nodes = {}
        for node_id, state in self.status.items():
            result = self.outcomes.get(node_id, {})
            written = state in ("Completed", "Skipped") or (state == "Failed" and result.get("output_slot"))
            nodes[node_id] = {
                "state": state,
                "attempts": self.attempts[node_id],
                "error_type": result.get("error_type") if state != "Completed" else None,
                "output_slot": str(output_slot_path(self.chain, node_id)) if written else None,
            }
        return {
            "flow_run_id": flow_run_id,
            "state": "FAILED" if failed else "COMPLETED",
            "nodes": nodes,
            "routes": {r.route_id: self.routes[r.route_id] for r in self.chain.routes},
            "alerts": self.alerts,
        }


class RetryBook:
    """Failures per error type of each node run, across its attempts (each type within its own max_retries).

    One node run is several attempts (Prefect retries of one task run); `key` names the node run.
    """

    def __init__(self) -> None:
        self._failures: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()

    def failed(self, key: str, chain: Chain, error: NodeError, *, attempt: int, retries: int) -> Handling:
        """Count a failed attempt and say what the chain's error types make of it.

        Parameters:
            key: the node run (the same across its attempts).
            chain: the chain.
            error: the attempt's failure.
            attempt: 1 for the first attempt.
            retries: how many retries the node run has in all (its R).

        Returns:
            `retry` when this attempt is retried; otherwise the final handling (skip, fail, escalate,
            arbitrate), and the node run is forgotten.
        """
        with self._lock:
            failures = self._failures.setdefault(key, Counter())
            failures[error.error_type] += 1
            handling = decide_handling(chain, error, type_failures=failures[error.error_type])
            if handling == "retry" and attempt <= retries:
                return "retry"
            self._failures.pop(key, None)
        if handling == "retry":
            # The node's own R ran out before the type's: the same as the type's retries running out.
            handling = decide_handling(chain, error, type_failures=10**9)
        return handling

    def forget(self, key: str) -> None:
        """The node run ended without a failure to count."""
        with self._lock:
            self._failures.pop(key, None)
