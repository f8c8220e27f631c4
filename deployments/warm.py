"""Warm processes for served chain runs: the sensor hands a flow run it created straight to one, and the
runner's poll every other run of the chain flow it finds.

Served by Prefect's runner alone, a run waits for the runner's next poll (every second) and then for a
new interpreter to import Prefect (`python -m prefect.engine`, ~1.5 CPU-s). `slotrelay watch` instead
keeps `size` processes started ahead of need (deployments/warm_child.py), each with Prefect's flow
engine and the chain flow already imported, blocked on a pipe: forked from a fork server that imported
them once, so that a process costs a fork and its warm-up, not an import. Before the sensor creates a
flow run it sets an idle one aside for it (`reserve`, keyed by the run's idempotency key); once created,
the run is handed to it at once; a replacement starts warming once that run's process has ended.

Every other run of a served deployment of the chain flow reaches `watch` through the runner's poll: a
Quick or Custom run from the UI, a successor a stopped `watch` left, a run resumed after a pause (the
server's `resume_flow_run` puts a Suspended run back to Scheduled, "Resuming"; Prefect 3.9.1,
prefect/server/api/flow_runs.py, and the runner starts it again like any Scheduled run, in a new process:
prefect/runner/_scheduled_run_poller.py `_submit_run`). The poll's discovery goes through
`leave_to_runner` (applied by deployments/serve.py): a due run of such a deployment is reserved for an idle
warm process (keyed by its id) and handed to it as the sensor's are; while a process is warming (the pool
starting, a replacement after a run), as many due runs as there are warming processes wait for them
(the next poll hands them over) rather than each paying for a process of its own; the rest, and runs
of other flows or not due yet, stay the runner's.

The flow run stays a normal Prefect flow run, executed by Prefect's own machinery for one run
outside a runner (`FlowRunExecutorContext` and `FlowRunExecutor`, Prefect 3.9.1, the path its
workers and `prefect flow-run execute` use), with a warm process as the starter instead of a new
one:
- claim: the pool proposes Pending, as the runner's poll does before it starts a run. The server
  refuses a second Pending (`PreventPendingTransitions`), so exactly one of the pool and the runner's
  poll runs it. The runner's poll leaves a reserved run alone (`is_reserved`, applied by
  deployments/serve.py) until the pool has claimed it or given it up: the run exists on the API from
  its creation, a poll every second finds it, and the pool's claim comes only after the creation's
  reply, the hand-off to this event loop and its own request, which on a loaded machine took longer
  than the gap to the next poll (the runner then ran the run in a new process). A run the pool does
  not claim (one that died idle, the pool closing) is given up, Scheduled again, for the next poll.
- then the executor proposes Submitting, hands the run to the process, tracks the process,
  and marks the run Crashed when the process dies without a final state (its exit code in the
  message), as the runner does;
- cancellation from the UI: the context's cancelling observer sees the run go Cancelling, says
  "cancel" on the control channel, then ends the process; the run ends Cancelled;
- stopping `watch` cancels the runs in flight with the runner's shutdown message, so
  `serve_until_stopped` gives each a successor exactly as it does for the runner's own runs. From the
  stop's start (`stop`) the pool starts and sets aside no process: a replacement would import Prefect and
  the chain flow (about 2 CPU-s) only to be closed.

Each warm process runs one flow run and exits (deployments/warm_child.py says why). The Prefect
modules with a leading underscore this takes are reached through deployments/prefect_compat.py, as
Prefect's own workers use them; they are the seam Prefect documents for a new way of starting a run
(`ProcessStarter`, prefect/runner/AGENTS.md).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.abc

from deployments import prefect_compat
from deployments.warm_child import PRELOAD, READY, HandOff, load_entrypoint, wait_and_run

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments.runner import RunnerDeployment

    from deployments.prefect_compat import FlowRunExecutorContext, ProcessHandle

# Under "slotrelay", not this module's name: `watch` and `up` show the 'slotrelay' loggers on the
# console (slotrelay.commands.server._log_to_console); a name under "deployments" would be silent there.
logger = logging.getLogger("slotrelay.warm")

CHAIN_FLOW_ENTRYPOINT = "flows.chain:run_chain"
# What Prefect's `run_flow_in_subprocess` sets for its child: the runner, not the child, runs the
# cancellation and crashed hooks.
CHILD_ENV = {"PREFECT__ENABLE_CANCELLATION_AND_CRASHED_HOOKS": "false"}
CLOSE_SECONDS = 5.0
# How long a run found by the runner's poll may wait for a warm process still importing: one taking longer
# is stuck or starved, and the run goes to the runner rather than wait on it for good. A bound on a wait,
# not a measurement: the fork server imports in 1-3 s, up to about 10 s under heavy load, and a fork
# warms up in a fraction of that.
WARMING_WAIT_SECONDS = 30.0


@dataclass(eq=False)  # kept in a set: each is itself
class _Warm:
    process: BaseProcess
    connection: Connection
    # When it was asked for (time.monotonic): a process still warming long after is not waited for.
    started: float


class WarmPool:
    """`size` warm processes of one flow, and the Prefect machinery that runs flow runs in them.

    Enter it in the event loop that should own the runs (the runner's, in `serve_until_stopped`);
    `reserve`, `release`, `hand_off` and `is_reserved` may be called from any thread, `leave_to_runner`
    from that loop.

    Parameters:
        size: how many processes are kept warm; each runs one flow run at a time.
        entrypoint: `module:flow` of the served flow (the chain flow).
        chains: the chain files its runs may load; a warm process checks them before it is ready.
    """

    def __init__(
        self, size: int, entrypoint: str = CHAIN_FLOW_ENTRYPOINT, chains: Sequence[str | Path] = ()
    ) -> None:
        self._entrypoint = entrypoint
        self._chains = [str(path) for path in chains]
        self._size = size
        # `_idle` and `_reserved` are shared with the sensor's thread (`reserve`), under `_lock`.
        self._lock = threading.Lock()
        self._idle: list[_Warm] = []
        # Idempotency key of a flow run being created or handed off -> the process set aside for it (None
        # once `_run` has taken it, until the claim is decided). The runner's poll leaves these runs alone.
        self._reserved: dict[str, _Warm | None] = {}
        self._warming: set[_Warm] = set()
        # When each warm process still being forked was asked for (the first waits for the fork server's
        # import): warming too, for the runs the runner's poll finds meanwhile.
        self._forking: list[float] = []
        self._running: set[uuid.UUID] = set()
        # Deployment id -> (flow name, deployment name) of the served deployments (`serve`).
        self._deployments: dict[uuid.UUID, tuple[str | None, str]] = {}
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stack = AsyncExitStack()
        self._processes = multiprocessing.get_context("forkserver")

    async def __aenter__(self) -> Self:
        from prefect.settings import get_current_settings

        self._flow = load_entrypoint(self._entrypoint)
        # Prefect and the flow are imported once, by the fork server the warm processes are forked from.
        # deployments.fork_server_start first: from then on a Ctrl-C is the pool's, not the fork server's.
        self._processes.set_forkserver_preload(
            ["deployments.fork_server_start", *PRELOAD, self._entrypoint.partition(":")[0]])
        # The environment Prefect's `run_flow_in_subprocess` gives its child, in the same order of
        # precedence: the settings in force, this process's environment, then the child's flags. Taken
        # once: `watch` changes neither its settings nor its environment while it serves.
        merged: dict[str, str | None] = {
            **get_current_settings().to_environment_variables(exclude_unset=True), **os.environ, **CHILD_ENV}
        self._env = {k: v for k, v in merged.items() if v is not None}
        self._remove_env = [k for k, v in merged.items() if v is None]
        self._context: FlowRunExecutorContext = await self._stack.enter_async_context(
            prefect_compat.executor_context())
        self._claims = prefect_compat.state_proposer(self._context.client)
        self._tasks: anyio.abc.TaskGroup = await self._stack.enter_async_context(anyio.create_task_group())
        for _ in range(self._size):
            self._tasks.start_soon(self._warm_one)
        self._loop = asyncio.get_running_loop()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        self._loop = None
        # Again if `stop` came first: a run claimed while that stop cancelled the others is cancelled too.
        await self.stop()
        await self._stack.__aexit__(kind, error, trace)
        for warm in self._idle:
            await anyio.to_thread.run_sync(warm.process.join, CLOSE_SECONDS)
            if warm.process.exitcode is None:
                warm.process.kill()

    def running(self) -> set[uuid.UUID]:
        """The flow runs handed to warm processes whose processes have not ended yet."""
        return set(self._running)

    async def stop(self) -> None:
        """Begin closing, then cancel the runs running in warm processes with the runner's shutdown message.

        From then the pool starts no process (not even the replacement of a run this cancels) and sets
        none aside for a run: `watch` is stopping, and such a process would import Prefect only to be
        closed. Call it in the pool's event loop; leaving the pool calls it too.
        """
        self._begin_closing()
        await prefect_compat.cancel_all(self._context)

    def _begin_closing(self) -> None:
        """Set `_closing`, which every start and reservation checks, and close the processes running
        nothing."""
        with self._lock:
            self._closing = True
            # A process set aside for a run not handed to `_run` yet is idle: it is closed with them.
            self._idle.extend(warm for warm in self._reserved.values() if warm is not None)
            self._reserved.clear()
            # An idle process reads end-of-file and exits (`__aexit__` joins it); one still importing is
            # ended (it has run nothing, and its pool task, waiting for its word, then sees end-of-file).
            for warm in self._idle:
                warm.connection.close()
        for warm in self._warming:
            warm.process.terminate()

    def reserve(self, idempotency_key: str) -> bool:
        """Set an idle warm process aside for the flow run about to be created with `idempotency_key` (or
        for a run the runner's poll found, under its id: `leave_to_runner`).

        From then until the pool has claimed the run or given it up, the runner's poll leaves that run
        alone (`is_reserved`). Follow with `hand_off` once the run is created, or `release` if it was not.

        Returns:
            Whether a process was set aside (False: none idle, or the pool is closing; the run will be
            the runner's).
        """
        with self._lock:
            if self._loop is None or self._closing or not self._idle or idempotency_key in self._reserved:
                return False
            self._reserved[idempotency_key] = self._idle.pop()
            return True

    def release(self, idempotency_key: str) -> None:
        """Give up a reservation whose run was not created: its process is idle again."""
        with self._lock:
            warm = self._reserved.pop(idempotency_key, None)
            if warm is not None:
                self._idle.append(warm)

    def is_reserved(self, flow_run: FlowRun) -> bool:
        """Whether `flow_run` is the pool's to claim: the runner's poll must not start it (yet)."""
        with self._lock:
            return _polled_key(flow_run) in self._reserved or (
                flow_run.idempotency_key is not None and flow_run.idempotency_key in self._reserved)

    def serve(self, deployment_id: uuid.UUID, deployment: RunnerDeployment) -> None:
        """Let the runs of `deployment` (on the API as `deployment_id`) that the runner's poll finds run in
        warm processes, when it is a deployment of the pool's flow (`leave_to_runner`)."""
        self._deployments[deployment_id] = (deployment.flow_name, deployment.name)

    def leave_to_runner(self, flow_runs: list[FlowRun]) -> list[FlowRun]:
        """Of the Scheduled runs the runner's poll found, those the runner starts; the pool takes the others.

        Left out: runs reserved already (the sensor's, being created or claimed; one found earlier), and due
        runs of a served deployment of the pool's flow, each either handed now to an idle warm process, or
        left for a later poll while a process is warming that it can then take (one run a warming process
        started less than `WARMING_WAIT_SECONDS` ago: waiting costs no process of its own, and the runner's
        new one would take as long to start). Runs of other flows, runs not due yet (a schedule's, which
        the poll prefetches and the runner's claim waits for: a warm process would sit reserved that long),
        and those beyond the pool stay the runner's, started in new processes. Call it in the pool's event
        loop.
        """
        if self._loop is None or self._closing:
            return flow_runs
        now = time.monotonic()
        warming = sum(now - started < WARMING_WAIT_SECONDS
                      for started in [*self._forking, *(warm.started for warm in self._warming)])
        left = []
        for flow_run in flow_runs:
            if self.is_reserved(flow_run):
                continue
            served = self._deployments.get(flow_run.deployment_id) if flow_run.deployment_id else None
            if served is None or served[0] != self._flow.name or not _due(flow_run):
                left.append(flow_run)
                continue
            key = _polled_key(flow_run)
            if self.reserve(key):
                self.hand_off(flow_run, served[1], key)
            elif warming:
                warming -= 1
            else:
                left.append(flow_run)
        return left

    def hand_off(self, flow_run: FlowRun, deployment_name: str, key: str) -> None:
        """Run `flow_run` (Scheduled: just created, or found by the runner's poll) in the warm process
        reserved for it; from any thread.

        A run not Scheduled (an earlier run the API returned for the same key), or handed off once the pool
        is closing, is left to the runner's poll, and its reservation given up.

        Parameters:
            flow_run: the flow run the API returned on creation, or the poll found.
            deployment_name: its deployment's name (the runner gives it to its child too).
            key: what it was reserved under (`reserve`): the idempotency key it was created with, or for a
                run the poll found, its id (`leave_to_runner`).
        """
        loop = self._loop
        if loop is None or flow_run.state is None or not flow_run.state.is_scheduled():
            self.release(key)
            return
        start = self._start(flow_run, deployment_name, key)
        try:
            asyncio.run_coroutine_threadsafe(start, loop)
        except RuntimeError:  # the loop has closed
            start.close()
            self.release(key)

    async def _start(self, flow_run: FlowRun, deployment_name: str, key: str) -> None:
        # In the loop, so that the run belongs to the pool's task group (anyio needs a running task).
        self._tasks.start_soon(self._run, flow_run, deployment_name, key)

    async def _warm_one(self) -> None:
        """Start one warm process and wait until it has imported the flow."""
        if self._closing:
            return
        parent, child = self._processes.Pipe()
        process = self._processes.Process(
            target=wait_and_run,
            args=(child, self._entrypoint, self._env, self._remove_env, self._chains),
            name="slotrelay-warm",
            daemon=False,
        )
        asked = time.monotonic()
        self._forking.append(asked)
        try:
            # In a thread: the first start waits for the fork server to import Prefect (seconds).
            await anyio.to_thread.run_sync(process.start)
        except (OSError, EOFError):
            # No process to be had (memory, process limit, a fork server that died): the runs go to the
            # runner; `watch` goes on. The fork server shares `watch`'s process group, which a terminal's
            # Ctrl-C (and `up`'s stop) signals as a whole: one during its import of Prefect ends it, and
            # this start with EOFError, while `watch` is stopping anyway.
            parent.close()
            if not self._closing:
                logger.exception("could not start a warm process")
            return
        finally:
            self._forking.remove(asked)
            child.close()
        logger.info("starting warm process %d", process.pid)
        warm = _Warm(process, parent, asked)
        self._warming.add(warm)
        try:
            await anyio.wait_readable(parent)
            said = parent.recv()
        except (EOFError, OSError):
            said = None
        finally:
            self._warming.discard(warm)
        if said != READY or self._closing:
            # Closing: an idle process reads end-of-file and exits.
            parent.close()
            await anyio.to_thread.run_sync(process.join, CLOSE_SECONDS)
            if not self._closing:
                # Not replaced: a process that cannot import the flow would fail again. Runs go to the
                # runner.
                logger.error("a warm process ended before it was ready (exit code %s); routed runs wait "
                             "for the runner's poll instead", process.exitcode)
            return
        with self._lock:
            self._idle.append(warm)
        logger.info("warm process %d ready", process.pid)  # said once it can be reserved

    def _take_reserved(self, key: str) -> _Warm | None:
        """The process reserved for `key`, alive (a dead one is replaced and another idle one taken), or
        None; the reservation then stays, empty, until the claim is decided."""
        with self._lock:
            warm = self._reserved.get(key)
            if warm is None or self._closing:
                return None
            self._reserved[key] = None
            while not warm.process.is_alive():
                logger.warning(
                    "a warm process died while idle (exit code %s); starting another", warm.process.exitcode
                )
                warm.connection.close()
                self._tasks.start_soon(self._warm_one)
                if not self._idle:
                    return None
                warm = self._idle.pop()
            return warm

    async def _run(self, flow_run: FlowRun, deployment_name: str, key: str) -> None:
        """Claim the run (Pending), then run it in its reserved warm process through Prefect's executor."""
        try:
            warm = self._take_reserved(key)
            if warm is None:
                return
            try:
                claimed = await self._claims.propose_pending(flow_run)
            except BaseException:
                self._idle_again(warm)
                raise
            if not claimed:
                # Claimed elsewhere first (a runner of another `watch` serving the same deployment).
                self._idle_again(warm)
                return
        finally:
            # Claimed (Pending: the poll no longer finds it) or given up (Scheduled: the next poll runs it).
            with self._lock:
                self._reserved.pop(key, None)
        logger.info("flow run %s runs in warm process %d", flow_run.id, warm.process.pid)
        starter = _WarmStarter(warm, self._context, deployment_name)

        async def resolve_flow(_: FlowRun) -> Any:
            return self._flow

        executor = self._context.create_executor(flow_run, starter, resolve_flow=resolve_flow)
        self._running.add(flow_run.id)
        try:
            await executor.submit()
        except Exception:
            logger.exception("flow run %s in a warm process", flow_run.id)
        finally:
            self._running.discard(flow_run.id)
            # The replacement warms once this run's process has ended, not while the run starts: its
            # imports take a core for about a second and would slow the very start it is meant to
            # speed up. Meanwhile the other warm processes take the next runs.
            self._tasks.start_soon(self._warm_one)

    def _idle_again(self, warm: _Warm) -> None:
        """A process that ran nothing is idle again (closed at once if the pool has begun closing)."""
        with self._lock:
            self._idle.append(warm)
            if self._closing:
                warm.connection.close()  # it reads end-of-file and exits; `__aexit__` joins it


class _WarmStarter:
    """A Prefect `ProcessStarter` that gives the flow run to a warm process instead of starting one."""

    def __init__(self, warm: _Warm, context: FlowRunExecutorContext, deployment_name: str) -> None:
        self._warm = warm
        self._context = context
        self._deployment_name = deployment_name

    async def start(self, flow_run: FlowRun,
                    task_status: anyio.abc.TaskStatus[ProcessHandle] = anyio.TASK_STATUS_IGNORED) -> None:
        channel = self._context.control_channel
        port, token = channel.register(flow_run.id)
        try:
            self._warm.connection.send(HandOff(
                flow_run=flow_run,
                control_env={"PREFECT__CONTROL_PORT": str(port), "PREFECT__CONTROL_TOKEN": token},
                run_env={"PREFECT__DEPLOYMENT_NAME": self._deployment_name},
            ))
            self._warm.connection.close()
        except BaseException:
            channel.unregister(flow_run.id)
            raise
        task_status.started(prefect_compat.process_handle(self._warm.process))
        await anyio.to_thread.run_sync(self._warm.process.join)


def _polled_key(flow_run: FlowRun) -> str:
    """What a run the runner's poll found is reserved under (the sensor's: their idempotency keys)."""
    return f"polled-{flow_run.id}"


def _due(flow_run: FlowRun) -> bool:
    """Whether a Scheduled run's time has come (no time: now)."""
    start = flow_run.next_scheduled_start_time
    return start is None or start <= datetime.now(UTC)
