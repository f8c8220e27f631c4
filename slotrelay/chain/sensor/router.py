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
2. take it only if it answers the node's current input (slotrelay.chain.provenance): an answer to an
   earlier input is not the agent's answer yet; dual-write it to the node's babel log, once per content
   (whatever its status);
3. check it: the node's identity (node_id, capabilities) and post checks must hold, else it is handed over;
4. ask the one routing step (`slotrelay.chain.routing.route_finished`, the same a run asks) what it leads
   to, and write each input slot it says (`status: pending`, or `waiting` for a join still waiting for a
   source), then append the routes to the ledger; a target it says to start that runs inside the engine
   is handed to the coalescer to start a run. A route whose target already holds what this answer handed
   on (`slotrelay run`, or this sensor before a crash, wrote it) is not written again: its target starts
   only if it has not answered that input yet. What the routing step leaves to a person or to the chain's
   error types (a rework loop past its bound, an external target refused by its pre_execution checks,
   an input slot that cannot be written) is handed over to the engine: a run at this node, resuming
   from the slots, comes to the same step and applies the chain's rules, alerts included;
5. release the joins no source can fire into any more (`routing.release_held_joins`).

Key contracts:
- One lock per chain: an event and the start-up reconcile never route the same slot at once.
- Join readiness and loop counts are read from the slots on each decision, never kept here.
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

from slotrelay.chain.enginelog import engine_logger
from slotrelay.chain.errors import SLOT_UNWRITABLE, TIMEOUT
from slotrelay.chain.executors import fresh_output
from slotrelay.chain.ledger import (
    LEDGER_FILE_NAME,
    PendingRun,
    RoutedEntry,
    RoutingLedger,
    new_routed_entry,
)
from slotrelay.chain.models import Chain
from slotrelay.chain.provenance import (
    answer_key,
    answers_input,
    input_digest,
    input_slot_path,
    output_slot_path,
)
from slotrelay.chain.routing import (
    JOIN_RELEASE,
    LoopBoundExceeded,
    RefuseInput,
    ReleaseJoin,
    SlotState,
    StartNode,
    WriteInput,
    release_held_joins,
    route_finished,
    write_input,
)
from slotrelay.chain.runner import dual_write, output_problems
from slotrelay.chain.schema import load_chain
from slotrelay.chain.slots import (
    OutputSlotRead,
    SlotInvalid,
    content_hash,
    half_written_until,
    make_folder,
    read_output_slot,
    read_slot,
    read_slot_bytes,
)

logger = logging.getLogger(__name__)

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
        self.state = SlotState(self.chain)
        self._external = {n.node_id for n in self.chain.nodes if n.executor.kind == "external"}
        self._timed = [n.node_id for n in self.chain.nodes
                       if n.node_id in self._external and n.timeout_seconds is not None]

    def watched_slots(self) -> dict[Path, str]:
        """Output slot path (resolved) -> node_id, for every external node of the chain."""
        slots: dict[Path, str] = {}
        for node in self.chain.nodes:
            if node.node_id in self._external:
                path = output_slot_path(self.chain, node.node_id)
                try:
                    make_folder(path.parent)
                except OSError as refused:
                    self._note(logging.ERROR, "output slot of %s not watched: %s", node.node_id, refused)
                    continue
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

    def _read_output(self, node_id: str) -> OutputSlotRead | None:
        """The output slot as read: the document, the very bytes it was parsed from, their write time.

        Read once, so the hash always belongs to the content routed; a missing or half-written file
        is "not there yet" (None).

        Raises:
            SlotInvalid: something at the slot path that can never be taken (`slots.read_output_slot`).
        """
        return read_output_slot(output_slot_path(self.chain, node_id))

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

    def _handed(self, node_id: str, digest: str) -> bool:
        """Whether this content of the node was given to the engine already (before a restart, too): its
        refusal was said then."""
        return self.ledger.has_routed(self.chain_id, HANDOVER + node_id, digest)

    def _hand_over(self, node_id: str, digest: str, reason: str) -> list[RoutedEntry]:
        """Give a node to the engine's rules: a run of the chain starting at it (once per content)."""
        route_id = HANDOVER + node_id
        if self._handed(node_id, digest):
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
        """Whether a ledger entry asks for a run: a hand-over, or a target that starts and runs inside the
        engine (a join still waiting does not start)."""
        return entry.route_id.startswith(HANDOVER) or (entry.starts and self.runs_inside(entry.to_node))

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
            The newly recorded entries that ask for a run (targets inside the engine, hand-overs).
        """
        with self.lock:
            try:
                found = self._read_output(node_id)
            except SlotInvalid as bad:
                refusal = self._refusal_digest(node_id, bad)
                if not self._handed(node_id, refusal):
                    self._note(logging.ERROR, "chain %s: output slot of %s refused (%s): %s", self.chain_id,
                               node_id, bad.code, bad.message)
                return self._hand_over(node_id, refusal, f"{bad.code}: {bad.message}")
            if found is None or self._asked_again(node_id):
                return []
            document, digest = found.document, content_hash(found.raw)
            if document.get("status") not in FINISHED or not answers_input(self.chain, node_id, found):
                # Not finished, or an answer to an earlier input: the agent has not answered this one yet.
                return []
            answer = answer_key(digest, input_digest(self.chain, node_id))
            dual_write(self.chain, node_id, document, agent_answer=answer, ledger=self.ledger)
            problems = output_problems(self.chain, node_id, document)
            if problems:
                why = "; ".join(problems)
                if not self._handed(node_id, answer):
                    self._note(logging.ERROR, "chain %s: output of %s not routed: %s", self.chain_id,
                               node_id, why)
                return self._hand_over(node_id, answer, why)
            return self._route(node_id, document, digest, answer) + self._release()

    def _route(self, node_id: str, document: dict[str, Any], digest: str, answer: str) -> list[RoutedEntry]:
        """Carry out what the routing step says a finished agent's output leads to (module docstring).

        The ledger keys each firing by the answer (`provenance.answer_key`): the output's bytes and the
        input they answer.
        """
        routed = route_finished(self.chain, node_id, document, digest, state=self.state)
        new = [d for d in routed.decisions
               if d.fired and not self.ledger.has_routed(self.chain_id, d.route_id, answer)]
        if not new and not any(isinstance(s, LoopBoundExceeded) for s in routed.steps):
            return []
        for step in routed.steps:
            if isinstance(step, LoopBoundExceeded | RefuseInput):
                why = (step.message if isinstance(step, LoopBoundExceeded)
                       else f"{step.to_node}: {step.error.error_type}: {step.error.message}")
                return self._hand_over(node_id, answer, why)
        started = {s.node_id for s in routed.steps if isinstance(s, StartNode)}
        writes = {s.route_id: s for s in routed.steps if isinstance(s, WriteInput)}
        fired: list[RoutedEntry] = []
        handed: list[RoutedEntry] = []
        for decision in new:
            write = writes.get(decision.route_id)
            path = write.path if write is not None else input_slot_path(self.chain, decision.to_node)
            if path is None:
                continue
            if write is None:
                # Its input slot already holds what this answer handed on (`run` or an earlier `watch`
                # wrote it): a target done for that input has nothing left, one that is not yet is started.
                if not (decision.to_node in started and self.runs_inside(decision.to_node)
                        and self.state.pending(decision.to_node)):
                    continue
            else:
                try:
                    write_input(write)
                except OSError as denied:
                    self._note(logging.ERROR, "chain %s: input slot %s of %s cannot be written (%s): %s",
                               self.chain_id, write.path, write.to_node, SLOT_UNWRITABLE, denied)
                    handed = self._hand_over(node_id, answer, f"{SLOT_UNWRITABLE}: {write.path}: {denied}")
                    break
            fired.append(new_routed_entry(
                chain_id=self.chain_id, route_id=decision.route_id, source_hash=answer, from_node=node_id,
                to_node=decision.to_node, input_slot=str(path), starts=decision.to_node in started,
            ))
        self.ledger.record_routed(fired)
        for entry in fired:
            done = "written" if entry.route_id in writes else "already written from this answer"
            self._note(logging.INFO, "chain %s: %s fired, %s %s%s", self.chain_id, entry.route_id,
                       entry.input_slot, done, "" if entry.starts else " (a join waiting for other sources)")
        return [e for e in fired if self.needs_run(e)] + handed

    def _release(self) -> list[RoutedEntry]:
        """Start the joins no source can fire into any more (`routing.release_held_joins`)."""
        entries: list[RoutedEntry] = []
        for step in release_held_joins(self.chain, state=self.state):
            if isinstance(step, RefuseInput):
                found = self._read_output(step.from_node) if step.from_node in self._external else None
                if found is not None:
                    why = f"{step.to_node}: {step.error.error_type}: {step.error.message}"
                    answer = answer_key(content_hash(found.raw), input_digest(self.chain, step.from_node))
                    entries += self._hand_over(step.from_node, answer, why)
                else:
                    self._note(logging.ERROR, "chain %s: %s not started: %s", self.chain_id, step.to_node,
                               step.error.message)
            elif isinstance(step, ReleaseJoin):
                try:
                    digest = write_input(step)
                except OSError as denied:
                    self._note(logging.ERROR, "chain %s: input slot %s of %s cannot be written (%s): %s",
                               self.chain_id, step.path, step.node_id, SLOT_UNWRITABLE, denied)
                    continue
                entry = new_routed_entry(chain_id=self.chain_id, route_id=JOIN_RELEASE + step.node_id,
                                         source_hash=digest, from_node=step.node_id, to_node=step.node_id,
                                         input_slot=str(step.path))
                self.ledger.record_routed([entry])
                self._note(logging.INFO, "chain %s: %s has every source that can fire: %s written",
                           self.chain_id, step.node_id, step.path)
                entries += [entry] if self.needs_run(entry) else []
        return entries

    def reconcile(self) -> tuple[list[RoutedEntry], list[PendingRun]]:
        """Bring the slots and the ledger back in step after a stop or a crash.

        Routes every finished output slot the ledger does not have, writes again every input slot of
        a ledger entry that is missing (while its source still holds the routed content), releases the
        joins no source can fire into any more, and returns what still needs a run: routed targets no
        run was requested for, and runs requested but not confirmed.

        Returns:
            (routes whose target needs a run, runs to request again).
        """
        for node_id in sorted(self._external):
            self.route_safely(node_id)
        with self.lock:
            for entry in self.ledger.routed_entries(self.chain_id):
                if entry.route_id.startswith((HANDOVER, JOIN_RELEASE)) or Path(entry.input_slot).exists():
                    continue
                try:
                    found = self._read_output(entry.from_node)
                except SlotInvalid:
                    continue
                if found is None:
                    continue
                digest = content_hash(found.raw)
                if answer_key(digest, input_digest(self.chain, entry.from_node)) != entry.source_hash:
                    continue
                routed = route_finished(self.chain, entry.from_node, found.document, digest, state=self.state)
                for step in routed.steps:
                    if isinstance(step, WriteInput) and step.route_id == entry.route_id:
                        write_input(step)
                        self._note(logging.INFO, "chain %s: %s written again (it was missing)", self.chain_id,
                                   entry.input_slot)
            self._release()
            pending = [e for e in self.ledger.unbatched(self.chain_id) if self.needs_run(e)]
            return pending, self.ledger.unstarted_runs(self.chain_id)
