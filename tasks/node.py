"""A chain node as a Prefect task: one task run per node run, named after its node_id.

Mapping (CONTRACTS.md#error-types): `retries` / `retry_delay_seconds` come from the node's R/W (or, for a node
without one, the largest of its chain's retry types); `retry_condition_fn` lets Prefect retry only a
failure the chain's error types say to retry, each type within its own `max_retries` (counted by the
core's `slotrelay.chain.schedule.RetryBook`). A failure the
chain says to skip ends the task `Completed(name="Skipped")`; any other ends it `Failed` with the
outcome as its data, so the flow can escalate or arbitrate.

The task returns (or carries as its final state's data) an outcome dict
(`slotrelay.chain.schedule.node_outcome`), which the flow hands to the scheduler.

The node task and the chain flow say what happened through `flows.notes.RunNotes`: the engine log
beside the slots, and (but for the per-node details of a healthy run) the run's log in Prefect.
"""

from __future__ import annotations

import functools
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.context import TaskRunContext
from prefect.states import Completed, Failed

from flows.notes import RunNotes
from slotrelay.chain import Chain, Node, NodeError
from slotrelay.chain.routing import output_slot_path
from slotrelay.chain.runner import execute_node, write_ended
from slotrelay.chain.schedule import RetryBook, node_outcome

# Failures per error type of each running task run, across Prefect's retries of it (same process).
_RETRIES = RetryBook()


def _retry_requested(task: Any, task_run: TaskRun, state: State) -> bool:
    """Prefect's retry_condition_fn: retry only what the node task marked as a retry of its type."""
    return bool(getattr(state.data, "retry_requested", False))


def retry_policy(chain: Chain, node: Node) -> tuple[int, float]:
    """(retries, retry_delay_seconds) for a node: its own R/W, else the largest of the chain's retry types."""
    if node.retry is not None:
        return node.retry.max_retries, node.retry.retry_interval_seconds
    retry_types = [e for e in chain.error_types if e.handling == "retry"]
    if not retry_types:
        return 0, 0.0
    return max(e.max_retries for e in retry_types), max(e.retry_interval_seconds for e in retry_types)


@task(name="node", cache_policy=NO_CACHE, persist_result=False, retry_condition_fn=_retry_requested)
def run_node(chain: Chain, node_id: str, since: float | None = None,
             executor_settings: dict[str, Any] | None = None) -> Any:
    """Run one node once (Prefect retries it as the chain's error types say).

    Parameters:
        chain: the chain, bound to its file.
        node_id: which node.
        since: an external node accepts only an output slot written after this (epoch seconds).
        executor_settings: settings by executor kind (the chain flow's `pen` settings from its Blocks).

    Returns:
        The outcome dict, or a `Completed(name="Skipped")` / `Failed` state carrying it.
    """
    context = TaskRunContext.get()
    assert context is not None  # a task's body runs inside its task run
    attempt = context.task_run.run_count
    key = str(context.task_run.id)
    notes = RunNotes(chain)
    slot = str(output_slot_path(chain, node_id))
    try:
        document = execute_node(chain, node_id, attempt=attempt, since=since,
                                flow_run_id=str(context.task_run.flow_run_id), logger=notes.engine,
                                executor_settings=executor_settings)
    except NodeError as error:
        handling = _RETRIES.failed(key, chain, error, attempt=attempt, retries=context.task.retries)
        if handling == "retry":
            error.retry_requested = True
            notes.debug("%s attempt %d failed (%s), retrying: %s", node_id, attempt, error.error_type,
                        error.message)
            raise
        if handling == "skip":
            skipped = write_ended(chain, node_id, status="skipped", error=error, attempt=attempt)
            notes.info("%s skipped (%s): %s", node_id, error.error_type, error.message)
            result = node_outcome(node_id, "Skipped", attempts=attempt, error=error, handling="skip",
                             output_slot=slot, document=skipped)
            return Completed(name="Skipped", message=f"{error.error_type}: {error.message}", data=result)
        failed = write_ended(chain, node_id, status="failed", error=error, attempt=attempt)
        notes.error("%s failed (%s, handling %s): %s", node_id, error.error_type, handling, error.message)
        result = node_outcome(node_id, "Failed", attempts=attempt, error=error, handling=handling,
                         output_slot=slot if failed else None, document=failed)
        return Failed(message=f"{error.error_type}: {error.message}", data=result)
    _RETRIES.forget(key)
    state = "Skipped" if document.get("status") == "skipped" else "Completed"
    notes.debug("%s %s (attempt %d), output slot %s", node_id, state.lower(), attempt, slot)
    result = node_outcome(node_id, state, attempts=attempt, output_slot=slot, document=document)
    return Completed(name="Skipped", data=result) if state == "Skipped" else result


def node_task(chain: Chain, node: Node) -> Any:
    """`run_node` configured for one node: retries and retry delay; the task run is named after its node_id.

    `timeout_seconds` is not given to Prefect: python, command and external executors enforce it
    themselves (the callable in a thread of their own, the program killed, the wait bounded) and
    fail with the chain's `timeout` error type, which the chain's error_types then handle. deploy
    and pen nodes do not read it: their own limits bound them (URL timeouts, sandbox limits).
    Prefect's task timeout would inject its exception anywhere in this task's thread, slot writes
    included, and would end the task outside the chain's error types.
    """
    return _configured(*retry_policy(chain, node))


@functools.cache
def _configured(retries: int, delay: float) -> Any:
    """One task per retry policy, kept for the process: building a Prefect task reads its function's
    source (measured ~4 ms a node on a 100-node chain, a tenth of a node's run). The run name is a
    template Prefect fills from the `node_id` parameter."""
    return run_node.with_options(task_run_name="{node_id}", retries=retries, retry_delay_seconds=delay)
