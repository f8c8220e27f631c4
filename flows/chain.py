"""The chain compiled to one Prefect flow run: nodes as tasks, routes as conditional dependencies.

How a run proceeds: the start nodes (or `start_nodes`) are submitted; whenever a node's task ends,
its routes are evaluated from its output slot (priority order) and every route that holds writes
its target's input slot; a target is submitted with `wait_for` on its sources once every source has
settled. A route that does not hold leaves its target unrun, and the summary says why.

Failures (L4/L5): `skip` goes on; `fail` writes an alert and stops that branch; an error of no
declared type (or an escalation whose type says `pause`) writes an alert and, once the branches that
do not depend on that node have finished, pauses the run for a decision (flows/arbitration.py):
continue, retry, terminate or reload. An escalation whose type says `alert` writes the alert and
fails the node, and the run goes on with everything that does not need it (a join whose other
source fired runs); when nothing else can run and that alert is still undecided, it is "an alert
left unhandled" (issue 3, seed 八.1 "don't guess: escalate"): the run pauses on it the same way
before it ends.

Key contract: `run_chain(...)` returns the `slotrelay run --json` summary dict (a failed run returns
`Failed` carrying the same dict, so `state.result(raise_on_failure=False)` gives it). The summary is
also written to `summary_path(chain, flow_run_id)`; `read_summary` finds it from a final state.
"""

from __future__ import annotations

import json
import queue
from pathlib import Path
from typing import Any

from prefect import allow_failure, flow, get_run_logger
from prefect.context import FlowRunContext
from prefect.exceptions import FlowPauseTimeout
from prefect.runtime import flow_run
from prefect.states import Failed
from prefect.utilities.annotations import quote

from flows.arbitration import raise_alert, wait_for_decision
from slotrelay.alerts import alerts_of_run
from slotrelay.chain import (
    Chain,
    ChainValidationError,
    NodeError,
    evaluate_routes,
    load_chain,
    write_route_inputs,
)
from slotrelay.chain.errors import UNKNOWN
from slotrelay.chain.executors import fresh_output
from slotrelay.chain.preflight import preflight
from slotrelay.chain.routing import input_slot_path, output_slot_path
from slotrelay.chain.runner import completed_from_slots, decide_handling, publish_output, write_ended
from slotrelay.enginelog import engine_logger
from slotrelay.slots import SlotInvalid, output_slot_document, read_slot, write_json_atomic
from tasks.node import node_task, outcome

FINAL = ("Completed", "Skipped", "Failed", "NotRun")


def summary_path(chain: Chain, flow_run_id: str | None) -> Path:
    """Where a run's summary is kept: `<work_dir>/logs/runs/<flow_run_id>.json`."""
    return chain.work_dir / "logs" / "runs" / f"{flow_run_id or 'no-flow-run'}.json"


def _run_name() -> str:
    """`<chain_id>` (plus `@<start nodes>` when the run begins mid-chain), from the run's parameters."""
    params = flow_run.parameters
    path = Path(params.get("chain_path", "chain"))
    try:
        chain_id = json.loads(path.read_text(encoding="utf-8"))["chain_id"]
    except (OSError, ValueError, KeyError, TypeError):
        chain_id = path.stem
    starts = params.get("start_nodes")
    return f"{chain_id}@{','.join(starts)}" if starts else str(chain_id)


class ChainRun:
    """The state of one run of a chain inside its flow run (driven from the flow's thread)."""

    def __init__(self, chain: Chain, *, flow_run_id: str | None, stop_at_external: bool, resume: bool = False) -> None:
        self.chain = chain
        self.flow_run_id = flow_run_id
        self.stop_at_external = stop_at_external
        self.resume = resume
        self.status: dict[str, str | None] = {n.node_id: None for n in chain.nodes}
        self.attempts: dict[str, int] = {n.node_id: 0 for n in chain.nodes}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.fired_into: dict[str, list[str]] = {n.node_id: [] for n in chain.nodes}
        self.routes: dict[str, dict[str, Any]] = {}
        self.alerts: list[str] = []
        self.futures: dict[str, Any] = {}
        self.tasks: dict[str, Any] = {}
        self.sources = self.sources_of(chain)
        self.in_flight: set[str] = set()
        self.done: queue.Queue[str] = queue.Queue()
        self.arbitrations: list[tuple[str, Path]] = []
        # Escalations (`on_escalation: alert`) not decided yet: asked before the run ends.
        self.unhandled: list[tuple[str, Path]] = []
        self.terminated: str | None = None
        self.log = get_run_logger()
        self.engine = engine_logger(chain.work_dir)

    @staticmethod
    def sources_of(chain: Chain) -> dict[str, list[str]]:
        """Each node's upstream nodes (the sources of the routes into it)."""
        sources: dict[str, list[str]] = {n.node_id: [] for n in chain.nodes}
        for route in chain.routes:
            sources[route.to_node].append(route.from_node)
        return sources

    def note(self, message: str, *args: Any) -> None:
        self.log.info(message, *args)
        self.engine.info(message, *args)

    # Submitting and settling nodes.

    def take_back_alerts(self) -> None:
        """A run started again after a suspend: its nodes that failed or wait for a person stay so.

        A run suspended for a person starts again from the top once decided (flows/arbitration.py).
        The alerts this very flow run wrote say so, and where each of their nodes stands; the run
        then resumes from its slots, and a node waiting for a decision receives it instead of
        running again.
        """
        taken = alerts_of_run(self.chain.work_dir / "alerts", str(self.flow_run_id))
        if taken:
            self.resume = True
        for path, alert in taken:
            if alert.node_id not in self.status or alert.status in ("decided", "timed_out"):
                continue
            self.attempts[alert.node_id] = alert.attempts
            self.alerts.append(str(path))
            self.outcomes[alert.node_id] = {"error_type": alert.error_type, "output_slot": alert.output_slot}
            if alert.handling == "fail":
                self.status[alert.node_id] = "Failed"
            elif alert.handling == "escalate" and alert.status == "open":
                self.status[alert.node_id] = "Failed"
                self.unhandled.append((alert.node_id, path))
            else:
                self.status[alert.node_id] = "Paused"
                self.arbitrations.append((alert.node_id, path))
            self.note("%s: taken back from alert %s (%s, %s)", alert.node_id, path.name, alert.handling, alert.status)

    def submit(self, node_id: str) -> None:
        node = self.chain.node(node_id)
        if self.resume:
            document = completed_from_slots(self.chain, node_id)
            if document is not None:
                state = "Completed" if document["status"] == "completed" else "Skipped"
                self.status[node_id] = state
                self.outcomes[node_id] = outcome(node_id, state, attempts=0, document=document,
                                                 output_slot=str(output_slot_path(self.chain, node_id)))
                self.note("%s: its output slot says %s (not older than its input): not run again",
                          node_id, document["status"])
                self.route(node_id, document, resumed=True)
                return
        out_path = output_slot_path(self.chain, node_id)
        if self.stop_at_external and node.executor.kind == "external":
            in_path = input_slot_path(self.chain, node_id)
            since = in_path.stat().st_mtime if in_path and in_path.exists() else 0.0
            try:
                waiting = fresh_output(out_path, node_id, since=since) is None
            except SlotInvalid:
                waiting = True  # the sensor refuses it, with the file and field, when it routes it
            if waiting:
                self.status[node_id] = "NotRun"
                self.note("%s waits for its external agent: left for the sensor to route", node_id)
                return
        sources = self.sources[node_id]
        # The edges are for the UI: readiness is decided here, and a source settled by a person's
        # `continue` after a failure still feeds its target, so a failed source must not block it.
        wait_for = [allow_failure(self.futures[s]) for s in sources if s in self.futures]
        if node_id not in self.tasks:
            # Building a Prefect task costs a few ms: once per node per run (a reload clears them).
            self.tasks[node_id] = node_task(self.chain, node)
        # quote(): Prefect would otherwise walk the whole chain model looking for futures on every
        # submit (measured ~100 ms for a 100-node chain), making a run quadratic in its size.
        future = self.tasks[node_id].submit(quote(self.chain), node_id, wait_for=wait_for)
        self.futures[node_id] = future
        self.in_flight.add(node_id)
        self.status[node_id] = "Running"
        future.add_done_callback(lambda _, node_id=node_id: self.done.put(node_id))

    def settle(self, node_id: str) -> None:
        """Take in a finished task: record it, route its output, or escalate its failure."""
        self.in_flight.discard(node_id)
        result = self.futures[node_id].result(raise_on_failure=False)
        if not isinstance(result, dict):
            # Not our outcome: a crash of the task machinery (node tasks have no Prefect timeout).
            error = NodeError(UNKNOWN, f"{type(result).__name__}: {result}")
            handling = decide_handling(self.chain, error, type_failures=10**9)
            result = outcome(node_id, "Failed", attempts=1, error=error, handling=handling)
        self.outcomes[node_id] = result
        self.attempts[node_id] += result["attempts"]
        self.status[node_id] = result["state"]
        if result["state"] in ("Completed", "Skipped"):
            self.route(node_id, result["document"])
            return
        in_path = input_slot_path(self.chain, node_id)
        reason = {
            "fail": f"error type {result['error_type']!r} is handled by failing the node",
            "escalate": (f"retries of {result['error_type']!r} ran out (escalate_after: max_retries_exceeded);"
                         " the run goes on without this node, and a person decides before it ends"),
            "arbitrate": (f"error type {result['error_type']!r} is not declared by the chain: a person decides"
                          if self.chain.error_type(result["error_type"] or UNKNOWN) is None
                          else f"retries of {result['error_type']!r} ran out and its type says: pause for a person"),
        }[result["handling"]]
        path = raise_alert(self.chain, flow_run_id=self.flow_run_id, outcome=result,
                           input_slot=str(in_path) if in_path else None, reason=reason)
        self.alerts.append(str(path))
        if result["handling"] == "arbitrate":
            self.status[node_id] = "Paused"
            self.arbitrations.append((node_id, path))
        elif result["handling"] == "escalate":
            self.unhandled.append((node_id, path))

    def route(self, node_id: str, document: dict[str, Any], *, resumed: bool = False) -> None:
        decisions = evaluate_routes(self.chain, node_id, document)
        if resumed:
            # Written when the node completed; writing it again would make its target's finished
            # output older than its input, and the target would run again.
            missing = [d for d in decisions if (p := input_slot_path(self.chain, d.to_node)) is None or not p.exists()]
            write_route_inputs(self.chain, missing, document)
        else:
            write_route_inputs(self.chain, decisions, document)
        for decision in decisions:
            self.routes[decision.route_id] = {"fired": decision.fired, "reason": decision.reason}
            if decision.fired:
                self.fired_into[decision.to_node].append(decision.route_id)
            self.note("route %s %s: %s", decision.route_id, "fired" if decision.fired else "did not fire",
                      decision.reason)

    def ready(self) -> list[str]:
        """Unstarted nodes some route fired into, whose every source has settled."""
        return [
            node_id for node_id, routes in self.fired_into.items()
            if routes and self.status[node_id] is None
            and all(self.status[source] in FINAL for source in self.sources[node_id])
        ]

    def submit_ready(self) -> None:
        """Submit every ready node; a node resumed from its slots settles at once and may ready more."""
        while ready := self.ready():
            for node_id in ready:
                self.submit(node_id)

    def close_unreachable(self) -> bool:
        """With nothing running or waiting, unstarted nodes no route fired into will not run."""
        closed = False
        for node_id, state in self.status.items():
            if state is None and not self.fired_into[node_id]:
                self.status[node_id] = "NotRun"
                closed = True
        return closed

    # Arbitration.

    def arbitrate(self, node_id: str, path: Path) -> None:
        decision = wait_for_decision(self.chain, path)
        if decision.decision == "terminate":
            self.status[node_id] = "Failed"
            self.terminated = f"terminated by a decision on {node_id}"
        elif decision.decision == "continue":
            attempt = self.attempts[node_id]
            if decision.data is not None:
                document = output_slot_document(node_id, status="completed", data=decision.data, attempt=attempt)
                publish_output(self.chain, node_id, document)
                self.status[node_id] = "Completed"
            else:
                document = write_ended(self.chain, node_id, status="skipped", error=None, attempt=attempt)
                self.status[node_id] = "Skipped"
            if document is not None:
                self.route(node_id, document)
        else:
            if decision.decision == "reload":
                try:
                    reloaded = load_chain(self.chain.source, slots_root=self.chain.slots_root)
                except ChainValidationError as invalid:
                    self.log.error("reload refused, the chain is invalid: %s", invalid.message)
                    self.arbitrations.insert(0, (node_id, path))
                    return
                if {n.node_id for n in reloaded.nodes} != set(self.status):
                    # A run's bookkeeping is per node: new rules yes, a different set of nodes no.
                    self.log.error("reload refused: the chain file now has other nodes than this run")
                    self.arbitrations.insert(0, (node_id, path))
                    return
                self.chain = reloaded
                self.tasks.clear()
                self.sources = self.sources_of(reloaded)
                self.note("reloaded %s", self.chain.source)
            self.status[node_id] = None
            self.submit(node_id)

    # The run.

    def drive(self, start: list[str]) -> None:
        if self.flow_run_id:
            self.take_back_alerts()
        for node_id in start:
            if self.status[node_id] is None:
                self.submit(node_id)
        self.submit_ready()
        while not self.terminated:
            if self.in_flight:
                self.settle(self.done.get())
            elif self.arbitrations:
                self.arbitrate(*self.arbitrations.pop(0))
            elif self.unhandled:
                # Before unstarted nodes are closed: a `continue` must still be able to feed them.
                for node_id, path in self.unhandled:
                    self.status[node_id] = "Paused"
                    self.arbitrations.append((node_id, path))
                self.unhandled.clear()
            elif not self.close_unreachable():
                break
            self.submit_ready()
        for node_id, state in self.status.items():
            if state not in FINAL:
                self.status[node_id] = "NotRun"

    def summary(self) -> dict[str, Any]:
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
            "flow_run_id": self.flow_run_id,
            "state": "FAILED" if failed else "COMPLETED",
            "nodes": nodes,
            "routes": {r.route_id: self.routes[r.route_id] for r in self.chain.routes},
            "alerts": self.alerts,
        }


@flow(name="chain", flow_run_name=_run_name, log_prints=False, persist_result=False)
def run_chain(
    chain_path: str,
    start_nodes: list[str] | None = None,
    slots_root: str | None = None,
    stop_at_external: bool = False,
    resume: bool = False,
) -> Any:
    """Run a chain file as one flow run.

    Parameters:
        chain_path: the `node_chain.json`.
        start_nodes: begin at these nodes (their input slots already written `pending` by a route)
            and go on downstream; default: the chain's start nodes.
        slots_root: folder relative slot paths resolve against (default: the chain file's folder).
        stop_at_external: leave an external node whose output slot is not there yet NotRun (the
            watchdog sensor routes it later) instead of waiting for it.
        resume: go on from what the slots say: a node whose output slot is completed, passes its
            identity check and is not older than its input slot is not run again, and its routes
            are evaluated from that slot. Always so for a run started again after a suspend (it
            finds the alerts it wrote).

    Returns:
        The run summary (`slotrelay run --json`); a failed run returns `Failed` carrying it.
    """
    chain = load_chain(chain_path, slots_root=slots_root)
    preflight(chain)
    context = FlowRunContext.get()
    run = ChainRun(chain, flow_run_id=str(context.flow_run.id) if context else None,
                   stop_at_external=stop_at_external, resume=resume)
    starts = list(start_nodes) if start_nodes else chain.start_nodes()
    unknown = [s for s in starts if s not in run.status]
    if unknown:
        raise ValueError(f"start_nodes names nodes the chain does not have: {', '.join(unknown)}")
    try:
        run.drive(starts)
    except FlowPauseTimeout:
        run.terminated = "no decision before the pause timed out"
        for node_id, state in run.status.items():
            if state not in FINAL:
                run.status[node_id] = "Failed" if state == "Paused" else "NotRun"
    summary = run.summary()
    run.note("chain %s ended %s", chain.chain_id, summary["state"])
    # After a pause times out the server keeps its own Failed state and drops the data returned
    # here, so the summary is also kept on disk for the caller.
    write_json_atomic(summary_path(run.chain, summary["flow_run_id"]), summary)
    if summary["state"] == "FAILED":
        return Failed(message=run.terminated or "a node of the chain failed", data=summary)
    return summary


def read_summary(chain: Chain, state: Any) -> dict[str, Any] | None:
    """The summary of a finished `run_chain` state: its data, else the copy kept on disk, else None."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, dict):
        return result
    return read_slot(summary_path(chain, str(state.state_details.flow_run_id)))
