"""The chain scheduler: what runs next in a run of a chain (CONTRACTS.md#chain-engine). Plain Python.

`ChainSchedule` is the engine's bookkeeping for one run of a chain; a driver (the Prefect flow in
flows/chain.py, or a test) does what it says and feeds the outcomes back:

    step = schedule.next_step()
      Write(writes)       write these slots in order (`apply_write`), then hand the failures to `written`
      Run(nodes)          submit these nodes
      Wait()              nodes are in flight: hand the next finished one's `NodeOutcome` to `settle`
      RaiseAlert(escalation)  write this alert, then hand its path to `alerted`
      Arbitrate(node, alert)  a person decides: hand the decision to `decided`
      Reload(node, alert)     load the chain file again: `reloaded(chain)` or `reload_refused(why)`
      Finished()          the run is over: `summary()`

What a finished node leads to is decided by the one routing step, `routing.route_finished` (conditions,
skip, joins, loop bounds, refused inputs), and waiting joins are released by
`routing.release_held_joins`: the schedule only records where its nodes stand and hands the routing step
that view (`pending`). What it adds is per run:
- Failed: `fail` (at once) or `escalate` (a retry type ran out, on_escalation alert) -> an alert, the
  run goes on without the node (nothing downstream of it) and a person decides before it ends;
  `arbitrate` (no declared type, or on_escalation pause) -> an alert and a decision once nothing
  else can run. An input slot that cannot be written fails its target with `slot_unwritable`, and an
  external target refused by its pre_execution checks fails with `check_failed`, by the same rules.
- A rework loop that fires runs its nodes (from its target back to its source) again; past its bound
  its source is asked about (`loop_bound_exceeded`): continue without data keeps the node's output and
  goes on without the loop.
- Resume (CONTRACTS.md#stateless-engine): a node whose output slot is done for its current input
  (`provenance.done_from_slots`) settles from that slot without running; a run started again after a
  suspend takes back the alerts it wrote (`take_back`).
- With `stop_at_external` the run is one part of what `watch` does: an external node not answered yet
  is left to the sensor, and a node this run has not touched may still fire by the slots' account.
  An agent's answer has one owner: the sensor routes it, and hands it to the engine (a run starting at
  that node) when the chain's rules must act on it. So a run takes an external node's answer, refusal or
  timeout only at a node it started at or whose agent it asked again itself; anywhere else the node is
  left to the sensor, answered or not. A successor of a run a stopped `watch` cancelled would otherwise
  meet an answer the sensor also routes, and raise its alerts (and ask a person) a second time.

Per-type retry accounting of one node run (each error type within its own max_retries, across its
attempts) is `RetryBook`: the flow run's driver keeps one and hands it to each node task.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from slotrelay.chain.alerts import Alert, Decision, DecisionName
from slotrelay.chain.errors import SLOT_UNWRITABLE, UNKNOWN, NodeError
from slotrelay.chain.executors import fresh_output
from slotrelay.chain.models import Chain, Route
from slotrelay.chain.outcomes import FINAL, Handling, NodeOutcome, NodeState
from slotrelay.chain.provenance import (
    done_from_slots,
    input_digest,
    input_slot_path,
    output_slot_path,
    slot_pending,
)
from slotrelay.chain.routing import (
    HoldJoin,
    LoopBoundExceeded,
    RefuseInput,
    ReleaseJoin,
    RoutingStep,
    StartNode,
    WriteInput,
    loop_body,
    rebuilt_on_resume,
    release_held_joins,
    route_finished,
    upstream,
    write_input,
)
from slotrelay.chain.runner import decide_handling, ended_document, publish_output
from slotrelay.chain.slots import SlotInvalid, ask_again, content_hash, output_slot_document, slot_bytes

LOOP_BOUND_EXCEEDED = "loop_bound_exceeded"


class Notes(Protocol):
    """Where the schedule says what it did (a logger, or the engine log and Prefect's run logger).

    `debug` is for what happens on every node of a healthy run (a route that fired): the engine log
    keeps it, the run log (sent to the API, read in the UI) does not, so a person reads there what
    went otherwise and each node does not pay an API log line for it.
    """

    def debug(self, msg: str, *args: Any) -> None: ...

    def info(self, msg: str, *args: Any) -> None: ...

    def error(self, msg: str, *args: Any) -> None: ...


@dataclass(frozen=True)
class WriteOutput:
    """Write a node's output slot (a person's decision), dual-written as every output is."""

    node_id: str
    document: dict[str, Any]


@dataclass(frozen=True)
class AskAgain:
    """Write an external node's input slot again, `pending` with this attempt: its agent is asked again."""

    node_id: str
    path: Path
    attempt: int


SlotWrite = WriteInput | ReleaseJoin | WriteOutput | AskAgain


def apply_write(chain: Chain, write: SlotWrite) -> None:
    """Carry out one write a `Write` step asks for.

    Raises:
        OSError: the slot cannot be written.
    """
    if isinstance(write, WriteOutput):
        publish_output(chain, write.node_id, write.document)
    elif isinstance(write, AskAgain):
        ask_again(write.path, attempt=write.attempt)
    elif isinstance(write, WriteInput):
        write_input(write, sync=not rebuilt_on_resume(chain, write))
    else:
        write_input(write)


def target_of(write: SlotWrite) -> str:
    """The node whose slot a write is."""
    return write.to_node if isinstance(write, WriteInput) else write.node_id


@dataclass(frozen=True)
class Write:
    """Write these slots, in order (`apply_write`), then hand the ones that failed to `written`."""

    writes: list[SlotWrite]


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
class Escalation:
    """An alert the driver writes for a failed node (then hands its path to `alerted`)."""

    node_id: str
    outcome: NodeOutcome
    reason: str
    input_slot: str | None


@dataclass(frozen=True)
class RaiseAlert:
    """Write the alert of this escalation, then hand its path to `alerted`."""

    escalation: Escalation


@dataclass(frozen=True)
class Reload:
    """A person decided `reload` on this node: load the chain file again and hand it to `reloaded`."""

    node_id: str
    alert: Path


@dataclass(frozen=True)
class Finished:
    """Nothing more runs."""


Step = Write | Run | Wait | Arbitrate | RaiseAlert | Reload | Finished


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
        self.status: dict[str, NodeState | None] = {n.node_id: None for n in chain.nodes}
        self.attempts: dict[str, int] = {n.node_id: 0 for n in chain.nodes}
        self.outcomes: dict[str, NodeOutcome] = {}
        self.routes: dict[str, dict[str, Any]] = {}
        self.alerts: list[str] = []
        self.in_flight: set[str] = set()
        self.arbitrations: list[tuple[str, Path]] = []
        # Escalations (`on_escalation: alert`) not decided yet: asked before the run ends.
        self.unhandled: list[tuple[str, Path]] = []
        self.terminated: str | None = None
        self.sources = self._sources_of(chain)
        self._to_run: list[str] = []
        self._writes: list[SlotWrite] = []
        # Nodes to start once the writes before them are done.
        self._after_writes: list[str] = []
        self._release_due = False
        self._due_alerts: list[Escalation] = []
        self._reload: Reload | None = None
        self._loop_paused: set[str] = set()
        # External nodes whose agent this run asked again (a retry decision): the run waits for the answer.
        self._asked_again: set[str] = set()
        # Where this run began: under `watch`, the one place an agent's answer can be handed to a run.
        self._started_at: set[str] = set()
        # External nodes left for the sensor: their agent may still answer, through `watch`.
        self._waiting_for_agent: set[str] = set()
        # A run that is a whole round of the chain on its own carries no join source from before it
        # (slot times have milliseconds).
        self._fresh_since = None if resume or stop_at_external else math.floor(time.time() * 1000) / 1000

    @staticmethod
    def _sources_of(chain: Chain) -> dict[str, list[str]]:
        """Each node's upstream nodes (the UI's graph of a run); a rework loop's route is not one."""
        return {n.node_id: upstream(chain, n.node_id) for n in chain.nodes}

    # The routing step's view of this run.

    def pending(self, node_id: str) -> bool:
        """Whether the node may still write an output: running, waiting (for a person, its agent, its
        start), or, when this run is a part of `watch`'s work, pending by the slots' account."""
        state = self.status[node_id]
        if state in (NodeState.RUNNING, NodeState.PAUSED) or node_id in self._waiting_for_agent:
            return True
        if node_id in self._to_run or node_id in self._after_writes:
            return True
        if state is not None:
            return False
        return self.stop_at_external and slot_pending(self.chain, node_id)

    # Starting.

    def start(self, start_nodes: list[str]) -> None:
        """Begin at these nodes (the chain's start nodes, or where a route left input slots).

        Raises:
            ValueError: a node the chain does not have.
        """
        unknown = [s for s in start_nodes if s not in self.status]
        if unknown:
            raise ValueError(f"start_nodes names nodes the chain does not have: {', '.join(unknown)}")
        self._started_at.update(start_nodes)
        self._to_run.extend(s for s in start_nodes if self.status[s] is None and s not in self._to_run)

    def take_back(self, alerts: list[tuple[Path, Alert]]) -> None:
        """A run started again after a suspend: the alerts it wrote say where their nodes stand.

        A failed node stays failed, a node waiting for a person is asked again (and receives the
        decision already given) instead of running again; the rest resumes from the slots.
        """
        if not alerts:
            return
        self.resume = True
        self._fresh_since = None
        for path, alert in alerts:
            if alert.node_id not in self.status or alert.status in ("decided", "timed_out"):
                continue
            self.attempts[alert.node_id] = alert.attempts
            self.alerts.append(str(path))
            self.outcomes[alert.node_id] = NodeOutcome(alert.node_id, NodeState.FAILED, alert.attempts,
                                                       alert.error_type, alert.message, alert.handling,
                                                       alert.output_slot)
            if alert.handling in ("fail", "escalate") and alert.status == "open":
                self.status[alert.node_id] = NodeState.FAILED
                self.unhandled.append((alert.node_id, path))
            else:
                self.status[alert.node_id] = NodeState.PAUSED
                self.arbitrations.append((alert.node_id, path))
            self.notes.info("%s: taken back from alert %s (%s, %s)", alert.node_id, path.name, alert.handling,
                            alert.status)

    # What next.

    def next_step(self) -> Step:
        """What the driver does next (see the module docstring)."""
        while not self.terminated:
            if self._writes:
                writes, self._writes = self._writes, []
                return Write(writes)
            if self._release_due:
                self._release_due = False
                self._take(release_held_joins(self.chain, state=self, fresh_since=self._fresh_since))
                continue
            if self._after_writes:
                for node_id in self._after_writes:
                    if self.status[node_id] is None and node_id not in self._to_run:
                        self._to_run.append(node_id)
                self._after_writes.clear()
            if self._due_alerts:
                return RaiseAlert(self._due_alerts.pop(0))
            if self._reload is not None:
                reload, self._reload = self._reload, None
                return reload
            runnable = self._take_runnable()
            if runnable:
                return Run(runnable)
            if self._writes or self._due_alerts or self._after_writes or self._release_due:
                continue
            if self.in_flight:
                return Wait()
            if self.arbitrations:
                node_id, path = self.arbitrations.pop(0)
                self.status[node_id] = NodeState.PAUSED
                return Arbitrate(node_id, path)
            if self.unhandled:
                # Before unstarted nodes are closed: a `continue` must still be able to feed them.
                for node_id, path in self.unhandled:
                    self.status[node_id] = NodeState.PAUSED
                    self.arbitrations.append((node_id, path))
                self.unhandled.clear()
                continue
            break
        for node_id, state in self.status.items():
            if state not in FINAL:
                self.status[node_id] = NodeState.NOT_RUN
        return Finished()

    def _take_runnable(self) -> list[str]:
        """Nodes to submit now; those the slots say are done (resume) settle here and may lead to more."""
        runnable: list[str] = []
        candidates, self._to_run = [n for n in self._to_run if self.status[n] is None], []
        for node_id in candidates:
            if self.status[node_id] is not None:
                continue
            if self._left_for_sensor(node_id) or self._settled_from_slots(node_id):
                continue
            self.status[node_id] = NodeState.RUNNING
            self.in_flight.add(node_id)
            runnable.append(node_id)
        return runnable

    def _settled_from_slots(self, node_id: str) -> bool:
        if not self.resume:
            return False
        found = done_from_slots(self.chain, node_id)
        if found is None:
            return False
        document, digest = found
        state = NodeState.COMPLETED if document["status"] == "completed" else NodeState.SKIPPED
        self.status[node_id] = state
        self.outcomes[node_id] = NodeOutcome(node_id, state, 0, output_slot=str(output_slot_path(self.chain,
                                                                                                node_id)),
                                             document=document, digest=digest)
        self.notes.info("%s: its output slot says %s, made from its current input: not run again", node_id,
                        document["status"])
        self._route(node_id, document, digest)
        return True

    def _left_for_sensor(self, node_id: str) -> bool:
        node = self.chain.node(node_id)
        if not self.stop_at_external or node.executor.kind != "external" or node_id in self._asked_again:
            return False
        # Where this run did not start, the node is the sensor's whatever its slot says (module docstring).
        if node_id in self._started_at and not self._agent_still_to_answer(node_id):
            return False
        self.status[node_id] = NodeState.NOT_RUN
        self._waiting_for_agent.add(node_id)
        self.notes.info("%s waits for its external agent: left for the sensor to route", node_id)
        return True

    def _agent_still_to_answer(self, node_id: str) -> bool:
        """Whether an external node this run started at has no answer to its current input yet, within
        its timeout."""
        in_path = input_slot_path(self.chain, node_id)
        since = in_path.stat().st_mtime if in_path and in_path.exists() else 0.0
        try:
            waiting = fresh_output(output_slot_path(self.chain, node_id), since=since) is None
        except SlotInvalid:
            # Refused, as a failed slot is finished: the node runs, and its task applies the chain's
            # rules to `slot_invalid` (the sensor hands such a slot to a run starting here).
            return False
        timeout = self.chain.node(node_id).timeout_seconds
        if waiting and since and timeout is not None:
            # Pending longer than its timeout (the input slot's own clock): it runs, and times out by
            # the chain's rules.
            return time.time() < since + timeout
        return waiting

    # Outcomes.

    def settle(self, node_id: str, result: Any) -> None:
        """Take in a finished node run: record it, route its output, or queue the alert to write.

        Parameters:
            node_id: the node.
            result: its `NodeOutcome` (anything else is a crash of the machinery: `unknown`).
        """
        self.in_flight.discard(node_id)
        if not isinstance(result, NodeOutcome):
            # Not our outcome: a crash of the task machinery (node tasks have no Prefect timeout).
            error = NodeError(UNKNOWN, f"{type(result).__name__}: {result}")
            result = NodeOutcome.failure(node_id, NodeState.FAILED, attempts=1, error=error,
                                         handling=decide_handling(self.chain, error, type_failures=10**9))
        self.outcomes[node_id] = result
        self.attempts[node_id] += result.attempts
        self.status[node_id] = result.state
        if result.state in (NodeState.COMPLETED, NodeState.SKIPPED) and result.document is not None:
            self._route(node_id, result.document, result.digest)
        else:
            self._escalate(result)
        self._release_due = True

    def _escalate(self, outcome: NodeOutcome) -> None:
        """Queue the alert of a failed node."""
        declared = self.chain.error_type(outcome.error_type or UNKNOWN)
        handling = outcome.handling or "arbitrate"
        reason = {
            "fail": f"error type {outcome.error_type!r} is handled by failing the node",
            "escalate": (
                f"retries of {outcome.error_type!r} ran out (escalate_after: max_retries_exceeded);"
                " the run goes on without this node, and a person decides before it ends"),
            "arbitrate": (
                f"error type {outcome.error_type!r} is not declared by the chain: a person decides"
                if declared is None
                else f"retries of {outcome.error_type!r} ran out and its type says: pause for a person"),
        }.get(handling, f"handling {handling}")
        in_path = input_slot_path(self.chain, outcome.node_id)
        self._due_alerts.append(Escalation(outcome.node_id, outcome, reason,
                                           str(in_path) if in_path else None))

    def alerted(self, node_id: str, path: Path) -> None:
        """The alert of an `Escalation` was written at `path`."""
        self.alerts.append(str(path))
        handling = self.outcomes[node_id].handling
        if handling == "arbitrate":
            self.status[node_id] = NodeState.PAUSED
            self.arbitrations.append((node_id, path))
        elif handling in ("fail", "escalate"):
            # L5 for every alert: the run goes on without the node, and a person decides before it ends.
            self.unhandled.append((node_id, path))

    def written(self, failed: list[tuple[SlotWrite, OSError]]) -> None:
        """The writes of a `Write` step are done; these could not be made (L2, then L4: `slot_unwritable`)."""
        for write, denied in failed:
            node_id = target_of(write)
            if node_id in self._after_writes:
                self._after_writes.remove(node_id)
            error = NodeError(SLOT_UNWRITABLE, f"{type(write).__name__} of {node_id}: {denied}")
            self.notes.error("%s: a slot cannot be written (%s): %s", node_id, SLOT_UNWRITABLE, denied)
            self._fail(node_id, error)

    def _fail(self, node_id: str, error: NodeError) -> None:
        """A node fails without running (its slot cannot be written, its input was refused): the chain's
        error types decide, as for a failure of its own, with no retry (the same input would fail again)."""
        handling: Handling = decide_handling(self.chain, error, type_failures=10**9)
        if handling == "skip":
            document = ended_document(self.chain, node_id, status="skipped", error=error, attempt=0)
            self._skip_refused(node_id, error, document)
            return
        outcome = NodeOutcome.failure(node_id, NodeState.FAILED, attempts=0, error=error, handling=handling)
        self.outcomes[node_id] = outcome
        self.status[node_id] = NodeState.FAILED
        self._escalate(outcome)
        self._release_due = True

    def _skip_refused(self, node_id: str, error: NodeError, document: dict[str, Any],
                      received: dict[str, Any] | None = None) -> None:
        digest = content_hash(slot_bytes(document))
        self.outcomes[node_id] = NodeOutcome.failure(node_id, NodeState.SKIPPED, attempts=0, error=error,
                                                     handling="skip", document=document, digest=digest)
        self.status[node_id] = NodeState.SKIPPED
        self.notes.info("%s skipped (%s): %s", node_id, error.error_type, error.message)
        self._writes.append(WriteOutput(node_id, document))
        self._route(node_id, document, digest, received=received)
        self._release_due = True

    def _route(self, node_id: str, document: dict[str, Any], digest: str | None, *,
               received: dict[str, Any] | None = None) -> None:
        """Hand a settled node to the routing step, and take what it says."""
        routed = route_finished(self.chain, node_id, document, digest, state=self,
                                received=received, fresh_since=self._fresh_since)
        for decision in routed.decisions:
            self.routes[decision.route_id] = {"fired": decision.fired, "reason": decision.reason}
            if decision.fired:
                self.notes.debug("route %s fired: %s", decision.route_id, decision.reason)
                route = self.chain.route(decision.route_id)
                if route.max_iterations is not None:
                    self._loop_again(route)
            else:
                self.notes.info("route %s did not fire: %s", decision.route_id, decision.reason)
        self._take(routed.steps)

    def _take(self, steps: list[RoutingStep]) -> None:
        for step in steps:
            if isinstance(step, WriteInput | ReleaseJoin):
                self._writes.append(step)
            elif isinstance(step, StartNode):
                self._after_writes.append(step.node_id)
            elif isinstance(step, HoldJoin):
                self.notes.info("%s waits for %s: a join runs once every source that can fire has settled",
                                step.node_id, ", ".join(step.waiting_for))
            elif isinstance(step, LoopBoundExceeded):
                self._loop_bound_exceeded(step)
            else:
                self._refused(step)

    def _loop_again(self, route: Route) -> None:
        """A rework loop fired within its bound: the nodes from its target back to its source run again."""
        for node_id in loop_body(self.chain, route):
            self.status[node_id] = None
            self._waiting_for_agent.discard(node_id)

    def _loop_bound_exceeded(self, step: LoopBoundExceeded) -> None:
        node_id = step.from_node
        outcome = self.outcomes.get(node_id) or NodeOutcome(node_id, NodeState.COMPLETED, 0)
        self.outcomes[node_id] = replace(outcome, error_type=LOOP_BOUND_EXCEEDED, message=step.message,
                                         handling="arbitrate")
        failure = NodeOutcome.failure(node_id, NodeState.FAILED, attempts=self.attempts[node_id],
                                      error=NodeError(LOOP_BOUND_EXCEEDED, step.message),
                                      handling="arbitrate")
        in_path = input_slot_path(self.chain, node_id)
        self._due_alerts.append(Escalation(node_id, failure, step.message, str(in_path) if in_path else None))
        self._loop_paused.add(node_id)

    def _refused(self, step: RefuseInput) -> None:
        """An external target's pre_execution checks refused its input: nothing was written for it."""
        self.notes.error("%s: its input slot is not written, its pre_execution checks do not hold: %s",
                         step.to_node, step.error.message)
        handling = decide_handling(self.chain, step.error, type_failures=10**9)
        if handling == "skip":
            document = ended_document(self.chain, step.to_node, status="skipped", error=step.error, attempt=0,
                                      data=step.data)
            self._skip_refused(step.to_node, step.error, document, received=step.data)
            return
        self._fail(step.to_node, step.error)

    def decided(self, node_id: str, alert: Path, decision: Decision) -> None:
        """Apply a person's decision on a paused node (continue, retry, terminate, reload)."""
        if decision.decision == DecisionName.terminate:
            self.status[node_id] = NodeState.FAILED
            self.terminated = f"terminated by a decision on {node_id}"
            return
        if decision.decision == DecisionName.continue_:
            self._continue(node_id, decision)
            return
        if decision.decision == DecisionName.reload:
            if self.chain.source is None:
                # a chain built in memory has no file to read again
                self.reload_refused(node_id, alert, "this chain was not loaded from a file")
                return
            self._reload = Reload(node_id, alert)
            return
        self._again(node_id)

    def _continue(self, node_id: str, decision: Decision) -> None:
        attempt = self.attempts[node_id]
        if node_id in self._loop_paused and decision.data is None:
            # Past a rework loop's bound: its output stands, and the run goes on without the loop.
            self._loop_paused.discard(node_id)
            self.status[node_id] = NodeState.COMPLETED
            return
        if decision.data is not None:
            document = output_slot_document(node_id, status="completed", data=decision.data, attempt=attempt,
                                            produced_from=input_digest(self.chain, node_id))
            self.status[node_id] = NodeState.COMPLETED
        else:
            document = ended_document(self.chain, node_id, status="skipped", error=None, attempt=attempt)
            self.status[node_id] = NodeState.SKIPPED
        self._writes.append(WriteOutput(node_id, document))
        self._route(node_id, document, content_hash(slot_bytes(document)))
        self._release_due = True

    def reloaded(self, node_id: str, alert: Path, chain: Chain) -> None:
        """The chain file was loaded again for a `reload` decision: new rules, the node runs again."""
        if {n.node_id for n in chain.nodes} != set(self.status):
            # A run's bookkeeping is per node: new rules yes, a different set of nodes no.
            self.reload_refused(node_id, alert, "the chain file now has other nodes than this run")
            return
        self.chain = chain
        self.sources = self._sources_of(chain)
        self.notes.info("reloaded %s", chain.source)
        self._again(node_id)

    def reload_refused(self, node_id: str, alert: Path, why: str) -> None:
        """The chain could not be reloaded: the person is asked again."""
        self.notes.error("reload refused: %s", why)
        self.arbitrations.insert(0, (node_id, alert))

    def _again(self, node_id: str) -> None:
        """The node runs again (retry, reload); an external one's agent is asked again."""
        in_path = input_slot_path(self.chain, node_id)
        if self.chain.node(node_id).executor.kind == "external" and in_path is not None and in_path.exists():
            # Only an output newer than this input answers the retry.
            self._writes.append(AskAgain(node_id, in_path, self.attempts[node_id] + 1))
            self._asked_again.add(node_id)
        self.status[node_id] = None
        self._after_writes.append(node_id)

    def fail_paused(self, message: str) -> None:
        """No decision came in time: paused nodes fail, the rest does not run."""
        self.terminated = message
        for node_id, state in self.status.items():
            if state not in FINAL:
                self.status[node_id] = NodeState.FAILED if state == NodeState.PAUSED else NodeState.NOT_RUN

    # The result.

    def summary(self, flow_run_id: str | None) -> dict[str, Any]:
        """The `slotrelay run --json` summary: state, every node, every route, the alerts."""
        failed = self.terminated or any(s == NodeState.FAILED for s in self.status.values())
        for route in self.chain.routes:
            if route.route_id not in self.routes:
                source = self.status[route.from_node]
                why = ("the source did not run" if source == NodeState.NOT_RUN
                       else f"the source ended {source}")
                self.routes[route.route_id] = {"fired": False, "reason": why}
        nodes = {}
        for node_id, state in self.status.items():
            outcome = self.outcomes.get(node_id)
            written = state in (NodeState.COMPLETED, NodeState.SKIPPED) or (
                state == NodeState.FAILED and outcome is not None and outcome.output_slot)
            nodes[node_id] = {
                "state": str(state),
                "attempts": self.attempts[node_id],
                "error_type": outcome.error_type if outcome is not None and state != NodeState.COMPLETED
                else None,
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

    One node run is several attempts (Prefect retries of one task run, in one process); `key` names the
    node run. The flow run's driver keeps one book for its node tasks.
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
