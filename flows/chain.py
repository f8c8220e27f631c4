"""The chain compiled to one Prefect flow run: nodes as tasks, routes as conditional dependencies.

The engine's decisions live in the core scheduler (`slotrelay.chain.schedule.ChainSchedule`) and
its routing step (`slotrelay.chain.routing`, the same the `watch` sensor asks); this flow only drives
it: it submits the node tasks the schedule says to run (their sources' task runs as their inputs, for
the UI's graph), makes the slot writes it asks for, feeds each finished task's outcome back, writes the
alerts it asks for, and waits for people's decisions (flows/arbitration.py).

How a run proceeds: the start nodes (or `start_nodes`) are submitted; whenever a node's task ends,
the routing step evaluates its routes from its output slot (priority order), the flow writes the input
slot of every target they lead to, and a target is submitted once the step says it may run (a join
once every source that can fire has settled). A route that does not hold leaves its target unrun, and
the summary says why.

Failures (L4/L5): `skip` goes on; an error of no declared type (or an escalation whose type says
`pause`) writes an alert and, once the branches that do not depend on that node have finished, pauses
the run for a decision (flows/arbitration.py): continue, retry, terminate or reload. `fail` (at once)
and an escalation whose type says `alert` write the alert and fail the node, and the run goes on with
everything that does not need it (a join whose other source fired runs); when nothing else can run and
that alert is still undecided, it is "an alert left unhandled" (CONTRACTS.md#dont-guess): the run
pauses on it the same way before it ends.

Key contract: `run_chain(...)` returns the `slotrelay run --json` summary dict; a failed run returns
`Failed` carrying a `ChainRunFailed` that holds the same dict (`state.result(raise_on_failure=False)`
gives it). The summary is also written to `summary_path(chain, flow_run_id)`; `read_summary` finds it
from a final state.
"""

from __future__ import annotations

import gc
import json
import queue
from pathlib import Path
from typing import Any, cast

from prefect import flow
from prefect.client.schemas.objects import RunInput, TaskRunResult
from prefect.context import FlowRunContext
from prefect.exceptions import FlowPauseTimeout
from prefect.futures import PrefectFuture
from prefect.results import ResultRecord  # type: ignore[attr-defined]  # re-exported without __all__
from prefect.runtime import flow_run
from prefect.states import Failed
from prefect.utilities.annotations import quote

from flows.arbitration import raise_alert, wait_for_decision
from slotrelay.chain import Chain, ChainValidationError, NodeOutcome, load_chain
from slotrelay.chain.alerts import alerts_of_run
from slotrelay.chain.preflight import prepared_chain
from slotrelay.chain.schedule import (
    Arbitrate,
    ChainSchedule,
    Escalation,
    RaiseAlert,
    Reload,
    RetryBook,
    Run,
    SlotWrite,
    Wait,
    Write,
    apply_write,
)
from slotrelay.chain.slots import read_slot, write_json_atomic
from slotrelay.lifetime import LifetimeUnavailable, die_with_parent
from tasks.node import node_task
from tasks.notes import RunNotes


def summary_path(chain: Chain, flow_run_id: str | None) -> Path:
    """Where a run's summary is kept: `<logs_dir>/runs/<flow_run_id>.json`."""
    return chain.logs_dir / "runs" / f"{flow_run_id or 'no-flow-run'}.json"


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


def freeze_set_up() -> None:
    """Put what is alive after the first run's set-up in this process beyond the garbage collector's reach.

    That is the process's imports, Prefect's state and the chain: they live as long as the process, and
    every full collection walked all of them again (100-380 ms a pass on a loaded machine, one every
    three or four runs of a 100-node chain). Once a process: a later run's set-up may hold garbage not
    yet collected, which a freeze would keep for good.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()


class ChainRunFailed(Exception):
    """Why a chain run ended FAILED, with its summary: the data of the `Failed` state `run_chain` returns.

    Prefect raises a failed state's data where a result is read: the process a runner or a worker starts
    for the run logs it as the run's error, and exits 1. A state carrying the summary dict itself could not
    be raised, and that process logged `TypeError: Unexpected result for failed state` instead.
    """

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        # Both in `args`: a pickled copy (a persisted result) is built again from them.
        super().__init__(message, summary)
        self.message = message
        self.summary = summary

    def __str__(self) -> str:
        return self.message


def finished_result(future: PrefectFuture[Any]) -> Any:
    """What a finished node task returned (its `NodeOutcome`), read from the final state this process holds.

    `future.result()` hands that reading to Prefect's run-sync event loop thread and waits for it
    (`State.result`): two thread switches a node for a value already in memory here. `wait()` keeps
    the final state on the future and makes Prefect's check for a suspension request, as `result()`
    does. A state whose data is not an in-memory record (a node task of this process leaves none) is
    read Prefect's way.
    """
    future.wait()
    data = future.state.data
    if isinstance(data, ResultRecord):
        return data.result
    return future.result(raise_on_failure=False)


class ChainDriver:
    """Drives a `ChainSchedule` inside the flow run: submits node tasks, feeds their outcomes back,
    writes the alerts it asks for and waits for people's decisions."""

    def __init__(self, schedule: ChainSchedule, *, flow_run_id: str | None,
                 executor_settings: dict[str, Any]) -> None:
        self.schedule = schedule
        self.flow_run_id = flow_run_id
        self.executor_settings = executor_settings
        self.futures: dict[str, Any] = {}
        self.done: queue.Queue[str] = queue.Queue()
        # Per-type failure counts of the node runs of this flow run, across their attempts.
        self.retries = RetryBook()

    def submit(self, node_id: str) -> None:
        # The schedule's chain: a reload replaces it, and the node's retry policy with it.
        chain = self.schedule.chain
        task = node_task(chain, chain.node(node_id))
        # The sources' task runs are given as the task run's inputs, for the UI's graph, and not as
        # `wait_for`: readiness is decided by the schedule (a source settled by a person's `continue`
        # after a failure still feeds its target), and Prefect would read each source's result again
        # through its event loop thread before the node starts (measured: ~15 ms a node on a busy
        # 2-core machine, 3.4 ms of CPU). This is how Prefect's own `map` hands its upstream runs on.
        sources: set[RunInput] = {TaskRunResult(id=self.futures[s].task_run_id)
                   for s in self.schedule.sources[node_id] if s in self.futures}
        context = FlowRunContext.get()
        assert context is not None  # drive() runs inside the flow run
        # quote(): Prefect would otherwise walk the whole chain model looking for futures on every
        # submit (measured ~100 ms for a 100-node chain), making a run quadratic in its size. The
        # parameters by name, as `run_node` takes them (`since` left to its default): Prefect's
        # `get_call_parameters` binds them through `inspect.signature`, 30-70 us a node on the flow's
        # thread to learn these names again.
        parameters = {"chain": quote(chain), "node_id": node_id,
                      "executor_settings": quote(self.executor_settings), "retry_book": quote(self.retries)}
        future = context.task_runner.submit(task, parameters, dependencies={"chain": sources})
        self.futures[node_id] = future
        future.add_done_callback(lambda _, node_id=node_id: self.done.put(node_id))

    def drive(self) -> None:
        schedule = self.schedule
        while True:
            step = schedule.next_step()
            if isinstance(step, Run):
                for node_id in step.nodes:
                    self.submit(node_id)
            elif isinstance(step, Wait):
                node_id = self.done.get()
                schedule.settle(node_id, finished_result(self.futures[node_id]))
            elif isinstance(step, Write):
                failed: list[tuple[SlotWrite, OSError]] = []
                for write in step.writes:
                    try:
                        apply_write(schedule.chain, write)
                    except OSError as denied:
                        failed.append((write, denied))
                schedule.written(failed)
            elif isinstance(step, RaiseAlert):
                schedule.alerted(step.escalation.node_id, self.alert(step.escalation))
            elif isinstance(step, Arbitrate):
                schedule.decided(step.node_id, step.alert, wait_for_decision(schedule.chain, step.alert))
            elif isinstance(step, Reload):
                self.reload(step)
            else:
                return

    def alert(self, escalation: Escalation) -> Path:
        outcome: NodeOutcome = escalation.outcome
        return raise_alert(self.schedule.chain, flow_run_id=self.flow_run_id, outcome={
            "node_id": outcome.node_id, "handling": outcome.handling, "error_type": outcome.error_type,
            "message": outcome.message, "attempts": outcome.attempts, "output_slot": outcome.output_slot,
        }, input_slot=escalation.input_slot, reason=escalation.reason)

    def reload(self, step: Reload) -> None:
        chain = self.schedule.chain
        assert chain.source is not None  # the schedule asks only for a chain loaded from a file
        try:
            reloaded = load_chain(chain.source, slots_root=chain.slots_root, alerts_dir=chain.alerts_dir,
                                  logs_dir=chain.logs_dir)
        except ChainValidationError as invalid:
            self.schedule.reload_refused(step.node_id, step.alert, f"the chain is invalid: {invalid.message}")
            return
        self.schedule.reloaded(step.node_id, step.alert, reloaded)


@flow(name="chain", flow_run_name=_run_name, log_prints=False, persist_result=False)
def run_chain(
    chain_path: str,
    start_nodes: list[str] | None = None,
    slots_root: str | None = None,
    stop_at_external: bool = False,
    folders_block: str | None = None,
    resume: bool = False,
    model_block: str | None = None,
    sandbox_policy: str | None = None,
) -> Any:
    """Run a chain file as one flow run.

    Parameters:
        chain_path: the `node_chain.json`.
        start_nodes: begin at these nodes (their input slots already written `pending` by a route)
            and go on downstream; default: the chain's start nodes.
        slots_root: folder relative slot paths resolve against (default: the chain file's folder).
        stop_at_external: leave an external node whose output slot is not there yet NotRun (the
            watchdog sensor routes it later) instead of waiting for it.
        folders_block: the name of a saved `ChainFolders` Block: its slots root (unless `slots_root`
            is given), alerts and logs folders.
        resume: go on from what the slots say: a node whose output slot is completed, passes its
            identity check and was made from its current input slot is not run again, and its routes
            are evaluated from that slot. Always so for a run started again after a suspend (it
            finds the alerts it wrote).
        model_block: the name of a saved `CodeModel` Block: the code model of the chain's `pen` nodes
            (else SLOTRELAY_MODEL_* / the pen root's .env), as for `pen-write`.
        sandbox_policy: the name of a saved `SandboxPolicy` Block: the daemon, images, default
            limits, egress allow-list and pool size of the `pen` nodes' sandbox, as for `pen-write`.

    Returns:
        The run summary (`slotrelay run --json`); a failed run returns `Failed` carrying it.
    """
    context = FlowRunContext.get()
    unfenced = None
    if context is not None and context.flow_run is not None and context.flow_run.work_pool_name:
        # A worker's run: its process must not outlive the worker, which would have it marked Crashed and
        # run again elsewhere while this process still wrote slots.
        try:
            die_with_parent(parent_command="worker")
        except LifetimeUnavailable as unavailable:
            unfenced = unavailable
    # Loaded, validated and checked (L1, L2) once per process: `slotrelay run` did it before starting.
    chain = prepared_chain(chain_path, **chain_folders(folders_block, slots_root))
    # Before anything runs: a block that is missing or unusable fails the run here.
    executor_settings = _executor_settings(chain, model_block, sandbox_policy)
    flow_run_id = str(context.flow_run.id) if context and context.flow_run else None
    notes = RunNotes(chain)
    if unfenced is not None:
        notes.warning("this run's process may outlive its worker (%s): a worker that dies leaves it running",
                      unfenced)
    schedule = ChainSchedule(chain, notes=notes, stop_at_external=stop_at_external, resume=resume)
    if flow_run_id:
        # A run suspended for a person starts again from the top once decided (flows/arbitration.py):
        # the alerts it wrote say so, and where their nodes stand.
        schedule.take_back(alerts_of_run(chain.alerts_dir, flow_run_id))
    schedule.start(list(start_nodes) if start_nodes else chain.start_nodes())
    freeze_set_up()
    try:
        ChainDriver(schedule, flow_run_id=flow_run_id, executor_settings=executor_settings).drive()
    except FlowPauseTimeout:
        schedule.fail_paused("no decision before the pause timed out")
    summary = schedule.summary(flow_run_id)
    notes.info("chain %s ended %s", chain.chain_id, summary["state"])
    # After a pause times out the server keeps its own Failed state and drops the data returned
    # here, so the summary is also kept on disk for the caller.
    write_json_atomic(summary_path(schedule.chain, flow_run_id), summary)
    if summary["state"] == "FAILED":
        reason = schedule.terminated or "a node of the chain failed"
        return Failed(message=reason, data=ChainRunFailed(f"chain {chain.chain_id}: {reason}", summary))
    return summary


def chain_folders(folders_block: str | None, slots_root: str | None) -> dict[str, str | None]:
    """`load_chain`'s folders: `slots_root`, else the named `ChainFolders` Block's; the block's alerts and
    logs."""
    if not folders_block:
        return {"slots_root": slots_root}
    from blocks.chain_folders import ChainFolders

    # from sync code load returns the block; its annotation also allows an async caller's coroutine
    saved = cast(ChainFolders, ChainFolders.load(folders_block))
    return {"slots_root": slots_root or saved.slots_root, "alerts_dir": saved.alerts, "logs_dir": saved.logs}


def _executor_settings(chain: Chain, model_block: str | None, sandbox_policy: str | None) -> dict[str, Any]:
    """The `pen` nodes' settings: PSMR's static screen, and the model and sandbox policy of the named
    Blocks, resolved as `pen-write` resolves them; {} without a pen node.

    Raises:
        InvalidPenRequest: the policy's daemon URL or TLS files are unusable (naming the field).
    """
    if all(n.executor.kind != "pen" for n in chain.nodes):
        return {}
    # Only here: a chain run without pen nodes does not load the pen (`watch` names the same blocks
    # for every chain it watches).
    from flows.pen import code_model, sandbox_settings
    from slotrelay.pen.node import PenNodeSettings
    from slotrelay.psmr.analysis.effects import effects

    model, sandbox = code_model(model_block), sandbox_settings(sandbox_policy)
    return {"pen": PenNodeSettings(effect_screen=effects, model=model, sandbox=sandbox)}


def read_summary(chain: Chain, state: Any) -> dict[str, Any] | None:
    """The summary of a finished `run_chain` state: its data, else the copy kept on disk, else None."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, ChainRunFailed):
        return result.summary
    if isinstance(result, dict):
        return result
    return read_slot(summary_path(chain, str(state.state_details.flow_run_id)))
