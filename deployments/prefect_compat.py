"""The private Prefect names slotrelay reaches, all of them, each with why no public API serves.

Prefect documents `ProcessStarter` (prefect/runner/AGENTS.md) as the seam for a new way of starting a
flow run, but the machinery around it (the executor context, its state proposer and process handle,
its cancellation manager, the flow-run child's control listener) lives in modules with a leading
underscore. The warm pool (deployments/warm.py, warm_child.py) and the served runner
(deployments/serve.py) use them the way Prefect's own workers do. Nothing else in the project may
import a private Prefect name: it goes through here.

`REACHED` lists every name used; tests/test_prefect_compat.py checks each against the installed
Prefect (present, and callable with the arguments used here), so a release that moves one fails that
test rather than a user's run. pyproject.toml pins Prefect to the minor release the test has checked.

Each function imports Prefect inside it: a warm process imports this module before Prefect, and pays
for Prefect's import where it prepares (before it says it is ready), not here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from multiprocessing.context import SpawnProcess
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.objects import FlowRun
    from prefect.runner import Runner
    from prefect.runner._flow_run_executor import FlowRunExecutorContext
    from prefect.runner._process_manager import ProcessHandle
    from prefect.runner._state_proposer import StateProposer

# The module a deployment run's suspension observer imports on first use (on the hot path otherwise): a
# warm process imports it ahead (deployments/warm_child.py's PRELOAD).
RUN_OBSERVERS_MODULE = "prefect._internal.observers"
# (module, attribute path) of every private name reached below.
REACHED: tuple[tuple[str, str], ...] = (
    ("prefect.runner._flow_run_executor", "FlowRunExecutorContext"),
    ("prefect.runner._flow_run_executor", "FlowRunExecutorContext.create_executor"),
    ("prefect.runner._state_proposer", "StateProposer.propose_pending"),
    ("prefect.runner._process_manager", "ProcessHandle"),
    ("prefect.runner._cancellation_manager", "CancellationManager.cancel_all"),
    ("prefect._internal.control_listener", "configure_from_env"),
    (RUN_OBSERVERS_MODULE, ""),
    ("prefect.runner._scheduled_run_poller", "ScheduledRunPoller._get_scheduled_flow_runs"),
)


def executor_context() -> FlowRunExecutorContext:
    """The context Prefect's workers run one flow run in, outside a runner (no public constructor)."""
    from prefect.runner._flow_run_executor import FlowRunExecutorContext

    return FlowRunExecutorContext()


def state_proposer(client: PrefectClient) -> StateProposer:
    """What proposes Pending for a run the way the runner's poll does before it starts one.

    Its claim goes through the server's orchestration rules (`PreventPendingTransitions`), which no
    public client call wraps with the runner's handling of a refusal.
    """
    from prefect.runner._state_proposer import StateProposer

    return StateProposer(client=client)


def process_handle(process: BaseProcess) -> ProcessHandle:
    """A `ProcessStarter`'s handle on the process it started: `start` must hand one to its task status.

    Prefect annotates the handle's process as a `SpawnProcess`; it reads only what every multiprocessing
    process has (pid, exit code), and a warm process is forked by the fork server.
    """
    from prefect.runner._process_manager import ProcessHandle

    return ProcessHandle(cast(SpawnProcess, process))


async def cancel_all(context: FlowRunExecutorContext) -> None:
    """Cancel the context's runs in flight with Prefect's own sequence (control channel, kill, hooks,
    Cancelled, event); the context offers no public way to it."""
    await context._cancellation_manager.cancel_all()


def configure_control_listener() -> None:
    """Connect this flow-run process to the runner's control channel (how "cancel" reaches it before
    SIGTERM). Prefect's child does this in its private entry point; a warm process runs the flow itself."""
    from prefect._internal.control_listener import configure_from_env

    configure_from_env()


def filter_scheduled_runs(runner: Runner, keep: Callable[[list[FlowRun]], list[FlowRun]]) -> None:
    """Let the runner's poll start only the runs `keep` returns of those it discovers.

    Prefect offers no filter of the runs a runner discovers (its query takes the deployments and a
    time), nor a way to start a discovered run other than by its own starters, so the poller's discovery
    is wrapped. Call once the runner has been entered (the poller is built then).
    """
    poller = runner._scheduled_run_poller
    discover: Callable[[], Awaitable[list[FlowRun]]] = poller._get_scheduled_flow_runs

    async def kept() -> list[FlowRun]:
        return keep(await discover())

    poller._get_scheduled_flow_runs = kept  # type: ignore[method-assign]


async def scheduled_runs(runner: Runner) -> list[Any]:
    """The runs the runner's poll would discover now (after `filter_scheduled_runs`)."""
    found: list[Any] = await runner._scheduled_run_poller._get_scheduled_flow_runs()
    return found
