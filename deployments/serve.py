"""Serving slotrelay's flows as deployments from the current process (Prefect's `serve`).

`slotrelay watch` (and so `slotrelay up`) serves one deployment of the chain flow per watched chain,
named after the chain (`chain/<chain_id>`, default parameters: that chain file, stop at external
nodes), plus the magic pen's flows when they are installed. Each flow run is started by Prefect's
runner as a child process.

A run the sensor creates is handed at once to a warm process (deployments/warm.py) when one is idle;
every other run (a Quick run from the UI, a successor, a run resumed after a pause) is found by the
runner's poll, which hands a due run of the chain flow to an idle warm process too, and starts the rest
(other flows, bursts beyond the warm processes) in new processes (`_runner`). The poll leaves alone a run
the pool has reserved a warm process for, until the pool has claimed it or given it up: otherwise a poll
between the run's creation and the pool's claim would start it in a new process instead.

Choices, from measurements on Prefect 3.9.1:
- The runner polls for scheduled runs every second (`query_seconds=1`), not the default ten: a
  routed run then starts within about a second instead of up to ten.
- `pause_on_shutdown=False`: a stopped `watch` must not pause the deployments, or runs requested
  by the next sensor start (reconcile) would wait for a person to resume the deployment.
- A stop cancels the runs in flight and schedules a successor for each, instead of leaving them
  Running (`serve_until_stopped`).
- Each deployment is applied once, by the runner as it takes it (`Runner.add_deployment` creates or
  updates it on the API), and the sensor starts after that: a run it requests always finds its
  deployment. A second apply of each (there was one before the sensor, then the runner's) cost a
  one-chain `watch --warm 0` (4 deployments) 0.3 CPU-s and 1.5 s of wall time before the runner's first
  poll (medians of 5, load 6).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Self, cast

from deployments import prefect_compat
from deployments.sensor import CHAIN_FLOW_NAME

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment
    from prefect.runner import Runner

    from deployments.warm import WarmPool
    from slotrelay.chain.models import Chain

# Under "slotrelay", not this module's name: `watch` and `up` show the 'slotrelay' loggers on the
# console (slotrelay.commands.server._log_to_console); a name under "deployments" would be silent there.
logger = logging.getLogger("slotrelay.serve")

POLL_SECONDS = 1.0
# Flows of the other parts, served when their module exists: (module, flow function, deployment name).
PEN_FLOWS = (
    ("flows.pen", "pen_write", "pen-write"),
    ("flows.registry_review", "registry_review", "registry-review"),
)


def chain_deployment(
    chain: Chain, *, resume: bool = False, job_variables: dict[str, Any] | None = None,
    blocks: dict[str, str] | None = None,
) -> RunnerDeployment:
    """The deployment of the chain flow for one chain: `chain/<chain_id>`.

    Parameters:
        chain: a loaded chain (bound to its file).
        resume: runs go on from the slots by default (a work pool's, which a worker may pick up again).
        job_variables: the work pool's job variables (None: served by this process's runner).
        blocks: saved Blocks by the chain flow's parameter naming them (`folders_block`, `model_block`,
            `sandbox_policy`): default parameters of every run, the sensor's included.

    Returns:
        A deployment whose default parameters run that chain, stopping at external nodes.
    """
    from flows.chain import run_chain

    # from sync code to_deployment returns the deployment; its annotation also allows an async caller's
    # coroutine
    return cast("RunnerDeployment", run_chain.to_deployment(
        name=chain.chain_id,
        parameters={
            "chain_path": str(chain.source),
            "start_nodes": None,
            "slots_root": str(chain.work_dir) if chain.work_dir != chain.base_dir else None,
            "stop_at_external": True,
            **({"resume": True} if resume else {}),
            **(blocks or {}),
        },
        description=chain.description or f"The chain {chain.chain_id} ({chain.source})",
        tags=["slotrelay", "chain", chain.chain_id],
        job_variables=job_variables,
    ))


GENERIC_CHAIN_DEPLOYMENT = "run-chain"


def generic_chain_deployment() -> RunnerDeployment:
    """`chain/run-chain`: runs any chain file given as a parameter (from the UI or `prefect deployment
    run`)."""
    from flows.chain import run_chain

    # from sync code to_deployment returns the deployment; its annotation also allows an async caller's
    # coroutine
    return cast("RunnerDeployment", run_chain.to_deployment(
        name=GENERIC_CHAIN_DEPLOYMENT,
        description="Run a node_chain.json: give chain_path (and start_nodes to begin elsewhere than its "
                    "start).",
        tags=["slotrelay", "chain"],
    ))


def pen_deployments() -> list[RunnerDeployment]:
    """Deployments of the pen flows whose modules are present (none before the pen is installed)."""
    found = []
    for module_name, function, name in PEN_FLOWS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as missing:
            if missing.name != module_name:
                raise
            continue
        found.append(getattr(module, function).to_deployment(name=name, tags=["slotrelay", "pen"]))
    return found


def full_name(deployment: RunnerDeployment) -> str:
    """`flow/deployment`, as `run_deployment` and the CLI name it."""
    return f"{deployment.flow_name}/{deployment.name}"


def serve_until_stopped(deployments: list[RunnerDeployment], *, poll_seconds: float = POLL_SECONDS,
                        warm: WarmPool | None = None, on_applied: Callable[[], None] = lambda: None) -> None:
    """Serve the deployments in this process until SIGINT/SIGTERM, then stop without losing a run.

    Prefect's `serve` lets a Ctrl-C tear its event loop down, which kills the flow-run processes
    without telling the API: their runs stay Running in the UI forever. Here a signal stops the
    runner through `Runner.astop`, which cancels each run in flight through Prefect's own sequence
    (kill, hooks, Cancelled state, event), and each of those runs gets a successor: a new Scheduled
    run of the same deployment with the same parameters, which the next `watch` or `up` serving the
    deployment runs. A successor rather than the cancelled run forced back to Scheduled: the
    cancelled run's history stays true, and a final state is not moved without forcing it.

    Parameters:
        deployments: what to serve.
        poll_seconds: how often the runner asks the API for runs to start.
        warm: warm processes to run in this event loop beside the runner; runs in them are stopped
            and given successors the same way.
        on_applied: called once every deployment is on the API, before the runner starts (`watch` starts
            its sensor there, whose first request may come from the reconcile at its start).
    """
    import contextlib
    import signal

    started = asyncio.Event()
    runner = _runner(poll_seconds, warm, started)
    for deployment in deployments:
        # The one apply of each deployment: the runner creates or updates it on the API as it takes it. From
        # sync code it returns the deployment's id; its annotation also allows an async caller's coroutine.
        deployment_id = cast("uuid.UUID", runner.add_deployment(deployment))
        if warm is not None:
            warm.serve(deployment_id, deployment)
        logger.info("deployment %s ready", full_name(deployment))
    on_applied()

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        stopping: list[asyncio.Task[None]] = []

        def stop() -> None:
            if not stopping:
                stopping.append(loop.create_task(_stop_and_reschedule(runner, deployments, warm, started)))

        # Before the warm pool starts: its start imports the flow (seconds on a loaded machine), and a SIGINT
        # there went to asyncio's own handler, which cancels the main task wherever that start was, leaving
        # the pool half started. Ours asks for the stop, which waits until the runner has started.
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop)
        async with contextlib.AsyncExitStack() as stack:
            if warm is not None:
                await stack.enter_async_context(warm)
            # `Runner.start` installs its own SIGTERM handler (a stop with no successors) before it first
            # waits; this callback runs at that first wait and puts ours back in its place.
            loop.call_soon(loop.add_signal_handler, signal.SIGTERM, stop)
            await runner.start()
            if stopping:
                await stopping[0]

    asyncio.run(serve())


def _runner(poll_seconds: float, warm: WarmPool | None, started: asyncio.Event) -> Runner:
    """Prefect's runner, which sets `started` once it can be stopped, and whose poll, beside warm processes,
    leaves the runs reserved for them alone and hands them those they can take (`WarmPool.leave_to_runner`).

    `Runner.astop` refuses a runner that has not started yet: a SIGINT in the moment between the handler
    and the runner's start was lost, and `watch` served on. The stop waits for `started` instead.

    The sensor's run exists on the API from its creation, and the poll (every `poll_seconds`) finds it
    from then; the pool's claim comes after the creation's reply, the hand-off to the event loop and the
    claim's own request. Under load that gap spanned a poll, and the runner started the run in a new
    process. Leaving reserved runs out of what the poll discovers keeps them the pool's to claim; once
    claimed they are Pending (no longer found), and one it gives up is Scheduled for the next poll.

    The runs nobody reserved (a Quick run, a successor, a resumed run) would each cost a new
    `python -m prefect.engine` (~1.5 CPU-s) with a warm process idle beside it; the pool takes those of the
    chain flow the same way, reserved under their ids, from the poll that found them.
    """
    from prefect.runner import Runner

    pool = warm

    class ServedRunner(Runner):
        async def __aenter__(self) -> Self:
            await super().__aenter__()
            if pool is not None:
                prefect_compat.filter_scheduled_runs(self, pool.leave_to_runner)
            started.set()
            return self

    return ServedRunner(pause_on_shutdown=False, query_seconds=poll_seconds)


SHUTDOWN_MESSAGE = "Runner is shutting down."  # the state message of runs `Runner.astop` cancels
FINISHING_GRACE_SECONDS = 10.0


def _flow_run_processes() -> set[uuid.UUID]:
    """The flow runs this process's runner has processes for (the runner puts the id in their environment)."""
    import psutil

    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            flow_run_id = child.environ().get("PREFECT__FLOW_RUN_ID")
        except psutil.Error:
            continue
        if flow_run_id:
            found.add(uuid.UUID(flow_run_id))
    return found


async def _stop_and_reschedule(runner: Runner, deployments: list[RunnerDeployment],
                               warm: WarmPool | None, started: asyncio.Event) -> None:
    """Stop the runner once it has started; give each run it cancelled on the way out a Scheduled successor.

    Runs that have already ended are first given a moment for their processes to exit: the
    runner's stop (and the warm pool's) cancels every run it still has a process for, and would mark
    a run that has just completed Cancelled.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterName,
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Scheduled

    # The warm pool has started by then too (it is entered before the runner starts).
    await started.wait()
    began = datetime.now(UTC)
    async with get_client() as client:
        deadline = time.monotonic() + FINISHING_GRACE_SECONDS
        try:
            while time.monotonic() < deadline:
                running = _flow_run_processes() | (warm.running() if warm is not None else set())
                states = [(await client.read_flow_run(i)).state for i in running]
                if not any(state is not None and state.is_final() for state in states):
                    break
                await asyncio.sleep(0.2)
        except Exception:
            # Waiting is a courtesy to runs that have ended; the runner must stop whatever happens.
            logger.exception("could not tell which flow runs have ended; stopping the runner now")
        if warm is not None:
            await warm.stop()
        await runner.astop()
        cancelled = await client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=sorted({d.flow_name for d in deployments}))),
            deployment_filter=DeploymentFilter(
                name=DeploymentFilterName(any_=sorted({d.name for d in deployments}))),
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.CANCELLED]))
            ),
        )
        for run in cancelled:
            state = run.state
            if (run.deployment_id is None or state is None or state.message != SHUTDOWN_MESSAGE
                    or state.timestamp < began):
                continue
            # A chain run's successor goes on from its slots: nodes the cancelled run completed do not run
            # again.
            parameters = {**run.parameters,
                          "resume": True} if "chain_path" in run.parameters else run.parameters
            successor = await client.create_flow_run_from_deployment(
                run.deployment_id,
                parameters=parameters,
                name=run.name,
                tags=run.tags,
                idempotency_key=f"successor-of-{run.id}",
                state=Scheduled(message=f"Runs again what flow run {run.id} was doing when watch stopped"),
            )
            logger.info("flow run %s was cancelled by the stop; %s will run it again", run.id, successor.id)


def chain_flow_deployment_name(chain_id: str) -> str:
    """The full name of a chain's served deployment (`chain/<chain_id>`)."""
    return f"{CHAIN_FLOW_NAME}/{chain_id}"

