"""A chain node as a Prefect task: one task run per node run, named after its node_id.

Mapping (CONTRACTS.md#error-types): `retries` is the node's R (or, for a node without one, the largest of
its chain's retry types); `retry_condition_fn` lets Prefect retry only a failure the chain's error types
say to retry, each type within its own `max_retries` (counted by the core's
`slotrelay.chain.schedule.RetryBook`, which the flow run's driver hands the task); and each retry waits
the W of the failure's own error type (`slotrelay.chain.runner.retry_interval`). A failure the chain
says to skip ends the task `Completed(name="Skipped")`; any other ends it `Failed` with the outcome as
its data, so the flow can escalate or arbitrate.

The task returns (or carries as its final state's data) a `slotrelay.chain.NodeOutcome`, which the
flow hands to the scheduler; it decides nothing about what runs next.

The node task and the chain flow say what happened through `tasks.notes.RunNotes`: the engine log
beside the slots, and (but for the per-node details of a healthy run) the run's log in Prefect.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.context import TaskRunContext
from prefect.states import Completed, Failed

from slotrelay.chain import Chain, Node, NodeError, NodeOutcome, NodeState
from slotrelay.chain.errors import SLOT_UNWRITABLE
from slotrelay.chain.provenance import output_slot_path
from slotrelay.chain.runner import decide_handling, execute_node, retry_interval, write_ended
from slotrelay.chain.schedule import RetryBook
from tasks.notes import RunNotes


class _DelayOfThisFailure(list[float]):
    """Prefect's `retry_delay_seconds`, whose one item is the wait of the failure being retried.

    Prefect takes a retry's delay from `retry_delay_seconds[n]` for the n-th retry, so a list fixed at
    task definition cannot follow the error type of each failure. Prefect reads it right after the
    task's `retry_condition_fn` has said yes, in the same thread; the node task puts the wait of its
    failure's type where this list reads it (`_next_delay`), so Prefect schedules each retry
    (AwaitingRetry, in the UI) after the right W.
    """

    def __init__(self) -> None:
        super().__init__([0.0])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            return getattr(_next_delay, "seconds", 0.0)
        return super().__getitem__(index)


_next_delay = threading.local()
_PER_FAILURE = _DelayOfThisFailure()


def _retry_requested(task: Any, task_run: TaskRun, state: State) -> bool:
    """Prefect's retry_condition_fn: retry only what the node task marked as a retry of its type."""
    return bool(getattr(state.data, "retry_requested", False))


def retry_count(chain: Chain, node: Node) -> int:
    """The most retries a node run may take (R): the node's own, else the largest of the chain's retry
    types (each type is held to its own max_retries by `RetryBook`)."""
    if node.retry is not None:
        return node.retry.max_retries
    return max((e.max_retries for e in chain.error_types if e.handling == "retry"), default=0)


@task(name="node", cache_policy=NO_CACHE, persist_result=False, retry_condition_fn=_retry_requested)
def run_node(chain: Chain, node_id: str, since: float | None = None,
             executor_settings: dict[str, Any] | None = None, retry_book: RetryBook | None = None) -> Any:
    """Run one node once (Prefect retries it as the chain's error types say).

    Parameters:
        chain: the chain, bound to its file.
        node_id: which node.
        since: an external node accepts only an output slot written after this (epoch seconds).
        executor_settings: settings by executor kind (the chain flow's `pen` settings from its Blocks).
        retry_book: the flow run's per-type failure counts (a book of the task's own when not given).

    Returns:
        The `NodeOutcome`, or a `Completed(name="Skipped")` / `Failed` state carrying it.
    """
    context = TaskRunContext.get()
    assert context is not None  # a task's body runs inside its task run
    book = retry_book if retry_book is not None else RetryBook()
    attempt = context.task_run.run_count
    key = str(context.task_run.id)
    notes = RunNotes(chain)
    slot = str(output_slot_path(chain, node_id))
    try:
        document, digest = execute_node(chain, node_id, attempt=attempt, since=since,
                                        flow_run_id=str(context.task_run.flow_run_id), logger=notes.engine,
                                        executor_settings=executor_settings)
    except NodeError as error:
        handling = book.failed(key, chain, error, attempt=attempt, retries=context.task.retries)
        if handling == "retry":
            error.retry_requested = True
            _next_delay.seconds = retry_interval(chain, chain.node(node_id), error)
            notes.debug("%s attempt %d failed (%s), retrying in %g s: %s", node_id, attempt, error.error_type,
                        _next_delay.seconds, error.message)
            raise
        try:
            ended = write_ended(chain, node_id, status="skipped" if handling == "skip" else "failed",
                                error=error, attempt=attempt)
        except OSError as denied:
            # L2: the output slot cannot be written, so neither a skip nor the failure can be recorded.
            error = NodeError(SLOT_UNWRITABLE, f"output slot {slot}: {denied}")
            ended, handling = None, decide_handling(chain, error, type_failures=10**9)
        if handling == "skip" and ended is not None:
            notes.info("%s skipped (%s): %s", node_id, error.error_type, error.message)
            result = NodeOutcome.failure(node_id, NodeState.SKIPPED, attempts=attempt, error=error,
                                         handling="skip", output_slot=slot, document=ended[0],
                                         digest=ended[1])
            return Completed(name="Skipped", message=f"{error.error_type}: {error.message}", data=result)
        notes.error("%s failed (%s, handling %s): %s", node_id, error.error_type, handling, error.message)
        result = NodeOutcome.failure(node_id, NodeState.FAILED, attempts=attempt, error=error,
                                     handling=handling if handling != "skip" else "fail",
                                     output_slot=slot if ended else None,
                                     document=ended[0] if ended else None)
        return Failed(message=f"{error.error_type}: {error.message}", data=result)
    book.forget(key)
    state = NodeState.SKIPPED if document.get("status") == "skipped" else NodeState.COMPLETED
    notes.debug("%s %s (attempt %d), output slot %s", node_id, state.lower(), attempt, slot)
    result = NodeOutcome(node_id, state, attempt, output_slot=slot, document=document, digest=digest)
    return Completed(name="Skipped", data=result) if state == NodeState.SKIPPED else result


def node_task(chain: Chain, node: Node) -> Any:
    """`run_node` configured for one node: its retries; the task run is named after its node_id.

    `timeout_seconds` is not given to Prefect: python, command and external executors enforce it
    themselves (the callable in a thread of their own, the program killed, the wait bounded) and
    fail with the chain's `timeout` error type, which the chain's error_types then handle. deploy
    and pen nodes do not read it: their own limits bound them (URL timeouts, sandbox limits).
    Prefect's task timeout would inject its exception anywhere in this task's thread, slot writes
    included, and would end the task outside the chain's error types.
    """
    return _configured(retry_count(chain, node))


@functools.cache
def _configured(retries: int) -> Any:
    """One task per retry count, kept for the process: building a Prefect task reads its function's
    source (measured ~4 ms a node on a 100-node chain, a tenth of a node's run). The run name is a
    template Prefect fills from the `node_id` parameter."""
    return run_node.with_options(task_run_name="{node_id}", retries=retries, retry_delay_seconds=_PER_FAILURE)
