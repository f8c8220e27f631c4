"""Routing one chain's output slots (CONTRACTS.md#routing-a-slot), exactly once, with the ledger as memory.

The sensor routes the output slots of a chain's external nodes: those are written by agents outside
the engine. Every other node runs inside a flow run, which routes its output itself; a run started
here goes on until the chain ends or reaches the next external node, whose output comes back here.

One set of rules for both paths (CONTRACTS.md#routing-a-slot, #the-exception-flow): a completed slot that
passes the identity check and the node's post checks is routed here, at once; every other finished slot
(failed, of another node, failing a check, or refused as `slot_invalid`), and an external node whose input
slot has been pending longer than its `timeout_seconds`, is HANDED OVER to the engine: a run of the chain
starts at that node, whose task reads the agent's slot and applies the chain's error types exactly as `run`
does (retry asks the agent again, skip leads on, fail writes an alert, anything else writes an alert and
suspends the run for a decision in the UI or `slotrelay decide`). A hand-over is a ledger entry
`engine:<node_id>` keyed by the slot's hash, so it happens once per content.

Routing one output slot:
1. read it: a `.tmp` or half-written file is "not there yet" (a later event brings it, or the
   sensor's half-written clock refuses it); anything at the path that can never be a slot (a
   symlink, FIFO or folder, JSON that is not an object or nests too deep, a field of the wrong type, a
   write stopped half way) is refused as `slot_invalid`, logged with file and field;
2. check it: the node's identity (node_id, capabilities) must match, else nothing is routed;
3. evaluate the node's routes on it (priority order), skipping routes the ledger has for this content;
4. write each holding route's input slot (`status: pending`, atomic), then append the routes to the
   ledger; targets that run inside the engine are handed to the coalescer to start a run.

Key contracts:
- One lock per chain: an event and the start-up reconcile never route the same slot at once.
- The content hash is of the bytes read and parsed in this call, so the hash in the ledger always
  belongs to the content that was routed.
- No slot content stops the sensor: `route_safely` is the one entry of the event path and of the
  start-up reconcile, and logs what escapes routing one slot instead of raising it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from slotrelay.chain.errors import TIMEOUT, NodeError
from slotrelay.chain.executors import fresh_output
from slotrelay.chain.models import Chain
from slotrelay.chain.routing import (
    RouteDecision,
    evaluate_routes,
    evaluate_routes_from_skip,
    input_slot_path,
    output_slot_path,
    write_route_input,
)
from slotrelay.chain.runner import append_agent_babel, post_check_problems, read_input
from slotrelay.chain.schema import load_chain
from slotrelay.enginelog import engine_logger
from slotrelay.ledger import (
    LEDGER_FILE_NAME,
    PendingRun,
    RoutedEntry,
    RoutingLedger,
    content_hash,
    new_routed_entry,
)
from slotrelay.slots import SlotInvalid, half_written_until, read_output_slot, read_slot, read_slot_bytes

logger = logging.getLogger("slotrelay.sensor")

FINISHED = {"completed", "failed", "skipped"}
HANDOVER = "engine:"


class ChainRouter:
    """Routes the external nodes' output slots of one chain.

    Parameters:
        chain_path: the chain file.
        slots_root: where relative slot paths resolve (default: the chain file's folder).
        chain: an already loaded chain (skips loading `chain_path` again).
    """

    def __init__(self, chain_path: Path, *, slots_root: Path | None = None,
                 chain: Chain | None = None) -> None:
        self.chain_path = Path(chain_path).resolve()
        self.chain = chain if chain is not None else load_chain(self.chain_path, slots_root=slots_root)
        self.chain_id = self.chain.chain_id
        self.ledger = RoutingLedger(self.chain.work_dir / LEDGER_FILE_NAME)
        self.lock = threading.Lock()
        self._engine_log = engine_logger(self.chain.logs_dir)
        self._external = {n.node_id for n in self.chain.nodes if n.executor.kind == "external"}
        self._timed = [n.node_id for n in self.chain.nodes
                       if n.node_id in self._external and n.timeout_seconds is not None]

    def watched_slots(self) -> dict[Path, str]:
        """Output slot path (resolved) -> node_id, for every external node of the chain."""
        slots: dict[Path, str] = {}
        for node in self.chain.nodes:
            if node.node_id in self._external:
                path = output_slot_path(self.chain, node.node_id)
                path.parent.mkdir(parents=True, exist_ok=True)
                slots[path.parent.resolve() / path.name] = node.node_id
        return slots

    def _note(self, level: int, message: str, *args: object) -> None:
        """Log to the console logger and to the chain's engine log (logs/engine.log, rotating)."""
        logger.log(level, message, *args)
        self._engine_log.log(level, "sensor: " + message, *args)

    def timed_external_nodes(self) -> list[str]:
        """The chain's external nodes that have a `timeout_seconds`, in file order."""
        return self._timed

    def runs_inside(self, node_id: str) -> bool:
        """Whether a node runs inside a flow run (anything but an external node)."""
        return node_id not in self._external

    def _read_output(self, node_id: str) -> tuple[dict[str, Any], str] | None:
        """The output slot's document and the hash of the very bytes it was parsed from.

        Read once, so the hash always belongs to the content routed; a missing or half-written file
        is "not there yet" (None).

        Raises:
            SlotInvalid: something at the slot path that can never be taken (`slots.read_output_slot`).
        """
        found = read_output_slot(output_slot_path(self.chain, node_id))
        return (found.document, content_hash(found.raw)) if found is not None else None

    def route_safely(self, node_id: str) -> list[RoutedEntry]:
        """`route_output`, with any failure logged (chain, node, slot file) instead of raised.

        The one entry of both the event path and the start-up reconcile: one bad slot must not stop
        the sensor for every other slot and chain.
        """
        try:
            return self.route_output(node_id)
        except Exception:  # whatever routing one slot raises, the sensor goes on
            logger.exception("chain %s: routing the output slot of %s (%s) failed", self.chain_id, node_id,
                             output_slot_path(self.chain, node_id))
            return []

    def _refusal_digest(self, node_id: str, bad: SlotInvalid) -> str:
        """What identifies a refused slot: the refusal and the file's write time (its bytes may be
        unreadable).

        A second refusal of the same kind, of a slot written again, is a new content: handed over again.
        """
        try:
            written = os.lstat(output_slot_path(self.chain, node_id)).st_mtime_ns
        except OSError:
            written = 0
        return content_hash(f"{bad.message}\0{written}".encode())

    def _hand_over(self, node_id: str, digest: str, reason: str) -> list[RoutedEntry]:
        """Give a node to the engine's rules: a run of the chain starting at it (once per content)."""
        route_id = HANDOVER + node_id
        if self.ledger.has_routed(self.chain_id, route_id, digest):
            return []
        in_path = input_slot_path(self.chain, node_id)
        entry = new_routed_entry(chain_id=self.chain_id, route_id=route_id, source_hash=digest,
                                 from_node=node_id,
                                 to_node=node_id,
                                 input_slot=str(in_path or output_slot_path(self.chain, node_id)))
        self.ledger.record_routed([entry])
        self._note(logging.WARNING, "chain %s: %s handed to the engine's rules (%s)", self.chain_id, node_id,
                   reason)
        return [entry]

    def _asked_again(self, node_id: str) -> bool:
        """Whether a run asked this node's agent again (a retry): that run waits for the answer and takes
        it."""
        in_path = input_slot_path(self.chain, node_id)
        document = read_slot(in_path) if in_path is not None else None
        attempt = document.get("attempt") if document else None
        return isinstance(attempt, int) and not isinstance(attempt, bool) and attempt > 1

    def needs_run(self, entry: RoutedEntry) -> bool:
        """Whether a ledger entry asks for a run: its target runs inside the engine, or it is a hand-over."""
        return entry.route_id.startswith(HANDOVER) or self.runs_inside(entry.to_node)

    def overdue_at(self, node_id: str) -> float | None:
        """When an external node waiting for its agent runs out of `timeout_seconds` (epoch seconds).

        The clock is the input slot's own write time, so it survives a restart of the sensor. None
        when the node has no timeout, no pending input, or an answer newer than its input.
        """
        node = self.chain.node(node_id)
        in_path = input_slot_path(self.chain, node_id)
        if node.timeout_seconds is None or in_path is None:
            return None
        try:
            since = in_path.stat().st_mtime
            if fresh_output(output_slot_path(self.chain, node_id), since=since) is not None:
                return None
        except FileNotFoundError:
            return None
        except SlotInvalid:
            return None  # refused, and handed over, when its event is routed
        return since + node.timeout_seconds

    def half_written_until(self, node_id: str) -> float | None:
        """When the node's half-written output slot is to be refused (`slots.half_written_until`).

        None once that time has passed: reading the slot refuses it then, so there is nothing to wait for.
        """
        due = half_written_until(output_slot_path(self.chain, node_id))
        return due if due is not None and due > time.time() else None

    def time_out(self, node_id: str) -> list[RoutedEntry]:
        """Hand an external node over to the engine when its agent has not answered in time (`timeout`)."""
        with self.lock:
            due = self.overdue_at(node_id)
            if due is None or due > time.time():
                return []
            in_path = input_slot_path(self.chain, node_id)
            found = read_slot_bytes(in_path) if in_path is not None else None
            if found is None:
                return []
            return self._hand_over(node_id, content_hash(found[0]),
                                   f"{TIMEOUT}: its input slot is pending longer than timeout_seconds")

    def route_output(self, node_id: str) -> list[RoutedEntry]:
        """Route the current content of a node's output slot, unless the ledger has it.

        Parameters:
            node_id: an external node of the chain.

        Returns:
            The newly fired routes whose target runs inside the engine (to start a run for).
        """
        with self.lock:
            try:
                found = self._read_output(node_id)
            except SlotInvalid as bad:
                self._note(logging.ERROR, "chain %s: output slot of %s refused (%s): %s", self.chain_id,
                           node_id,
                           bad.code, bad.message)
                return self._hand_over(node_id, self._refusal_digest(node_id, bad),
                                       f"{bad.code}: {bad.message}")
            if found is None or self._asked_again(node_id):
                return []
            document, digest = found
            if document.get("status") not in FINISHED:
                return []
            problems = post_check_problems(self.chain, node_id, document)
            if document.get("status") == "failed" or problems:
                why = "; ".join(problems) or f"the agent reported failure: {document.get('error')}"
                self._note(logging.ERROR, "chain %s: output of %s not routed: %s", self.chain_id, node_id,
                           why)
                return self._hand_over(node_id, digest, why)
            if not self.ledger.has_babel(self.chain_id, node_id, digest):
                append_agent_babel(self.chain, node_id, document)
                self.ledger.record_babel(self.chain_id, node_id, digest)
            decisions, data = self._decide(node_id, document)
            fired: list[RoutedEntry] = []
            for decision in decisions:
                if not decision.fired or self.ledger.has_routed(self.chain_id, decision.route_id, digest):
                    continue
                input_path = write_route_input(self.chain, from_node=node_id, route_id=decision.route_id,
                                               to_node=decision.to_node, data=data)
                if input_path is None:
                    continue
                fired.append(new_routed_entry(
                    chain_id=self.chain_id, route_id=decision.route_id, source_hash=digest,
                    from_node=node_id, to_node=decision.to_node, input_slot=str(input_path),
                ))
            self.ledger.record_routed(fired)
            for entry in fired:
                self._note(logging.INFO, "chain %s: %s fired, %s written", self.chain_id, entry.route_id,
                           entry.input_slot)
            return [e for e in fired if self.needs_run(e)]

    def _decide(self, node_id: str, document: dict[str, Any]) -> tuple[list[RouteDecision], dict[str, Any]]:
        """The routes of a finished slot, and the data its targets get: the same rules as inside a run.

        A skipped slot leads on as in a run (`routing.evaluate_routes_from_skip`): its targets get the
        data the node received.
        """
        if document.get("status") != "skipped":
            return evaluate_routes(self.chain, node_id, document), document.get("data") or {}
        try:
            received = read_input(self.chain, node_id)[1]
        except NodeError:
            received = {}
        return evaluate_routes_from_skip(self.chain, node_id, document, received), received

    def reconcile(self) -> tuple[list[RoutedEntry], list[PendingRun]]:
        """Bring the slots and the ledger back in step after a stop or a crash.

        Routes every finished output slot the ledger does not have, writes again every input slot of
        a ledger entry that is missing (while its source still holds the routed content), and returns
        what still needs a run: routed targets no run was requested for, and runs requested but not
        confirmed.

        Returns:
            (routes whose target needs a run, runs to request again).
        """
        for node_id in sorted(self._external):
            self.route_safely(node_id)
        with self.lock:
            for entry in self.ledger.routed_entries(self.chain_id):
                if entry.route_id.startswith(HANDOVER) or Path(entry.input_slot).exists():
                    continue
                try:
                    found = self._read_output(entry.from_node)
                except SlotInvalid:
                    continue
                if found is None or found[1] != entry.source_hash:
                    continue
                write_route_input(self.chain, from_node=entry.from_node, route_id=entry.route_id,
                                  to_node=entry.to_node, data=self._decide(entry.from_node, found[0])[1])
                self._note(logging.INFO, "chain %s: %s written again (it was missing)", self.chain_id,
                           entry.input_slot)
            pending = [e for e in self.ledger.unbatched(self.chain_id) if self.needs_run(e)]
            return pending, self.ledger.unstarted_runs(self.chain_id)
