"""Chain runs on a Prefect work pool: the deployments `slotrelay watch --pool NAME` requests runs of.

Instead of serving the flows from its own runner, `watch --pool` creates one `chain/<chain_id>`
deployment per watched chain on the work pool (a `process` pool, created if missing), and any number
of `prefect worker start --pool NAME` processes run them. The deployment's entrypoint is the flow's
module path (`flows.chain.run_chain`), with the project folder as the process's working folder and no
pull step: a worker imports the flow wherever `watch` was started (a file entrypoint would be recorded
relative to the folder `watch` ran in, which leads nowhere from the worker's folder). Every machine
running a worker must have the project (and the chain's python modules, beside the chain file) at the
same paths, and share the slots folder. A run a worker cannot start (it cannot import the flow, its
process dies) ends Crashed; `PoolRunReports` prints each such run in `watch`'s console with its reason.

Runs requested on a pool carry `resume=True`: a run a worker picks up again (rescheduled after its
worker died, or requested twice out of order) goes on from the slots, and a node whose output slot is
already completed is not run again.

A dead worker loses nothing, through Prefect's own machinery ("Detect zombie flows" in Prefect 3's
docs), set up here from code:
- the pool deployments' job variables make each flow-run process send a heartbeat event every
  `HEARTBEAT_SECONDS` (Prefect's smallest), and tag the runs `HEARTBEAT_TAG`;
- the automation `CRASH_AUTOMATION` (a proactive trigger) marks a run of that tag Crashed when no
  heartbeat and no final state came for `crash_after` (`watch --crash-after`, `CRASH_AFTER` unless
  given) after its last heartbeat: its worker (or its machine) died with it;
- the automation `RESCHEDULE_AUTOMATION` puts a Crashed run of that tag back to Scheduled, at most
  `RESCHEDULES` times: any worker of the pool picks it up and it resumes from the slots.
Both are scoped by the tag, so a run that beats at Prefect's default rate (every 180 s: runs served
by `watch` itself) is never taken for a zombie.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.deployments.runner import RunnerDeployment
    from prefect.events.schemas.automations import AutomationCore

    from slotrelay.chain.models import Chain

# Under "slotrelay", not this module's name: `watch` and `up` show the 'slotrelay' loggers on the
# console (slotrelay.commands.server._log_to_console); a name under "deployments" would be silent there.
logger = logging.getLogger("slotrelay.pool")

POOL_TYPE = "process"
# The folder holding `flows/`: a process worker runs each flow run there (else in a fresh temporary folder).
PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Prefect accepts no less than 30 s between heartbeats (MINIMUM_HEARTBEAT_INTERVAL in its flow engine).
HEARTBEAT_SECONDS = 30
# A heartbeat and a margin of 10 s for the next one to be late. A live run's heartbeats come from a thread
# of their own that sleeps between them, and arrive on time on a loaded machine (bench/dead_worker.py;
# docs/beyond.md has the figures and what the margin does not cover).
CRASH_AFTER = timedelta(seconds=HEARTBEAT_SECONDS + 10)
# A heartbeat and 5 s: less would take a heartbeat a few seconds late for a death.
MIN_CRASH_AFTER = timedelta(seconds=HEARTBEAT_SECONDS + 5)
# A run silent for longer has no worker worth waiting for (and the window must stay a finite number).
MAX_CRASH_AFTER = timedelta(days=1)
HEARTBEAT_TAG = "slotrelay-heartbeat"
# A run found silent again and again (each of its workers dies) stays Crashed after this many reschedules.
RESCHEDULES = 2
CRASH_AUTOMATION = "slotrelay: crash zombie chain runs"
RESCHEDULE_AUTOMATION = "slotrelay: reschedule crashed chain runs"
RESCHEDULE_MESSAGE = "Rescheduled after a crash: a worker of the pool runs it again from its slots"


# How the message of every Crashed state `CRASH_AUTOMATION` sets begins, whatever its window.
CRASH_MESSAGE_START = "Marked crashed: no heartbeat for "


def crash_message(crash_after: timedelta) -> str:
    """The message of the Crashed state `CRASH_AUTOMATION` sets, naming the silence that set it."""
    return f"{CRASH_MESSAGE_START}{crash_after.total_seconds():g} s (its worker died?)"


def pool_chain_deployment(chain: Chain, blocks: dict[str, str] | None = None) -> RunnerDeployment:
    """The deployment of one chain for a work pool: `chain/<chain_id>`, resuming from its slots.

    Parameters:
        chain: a loaded chain (bound to its file).
        blocks: saved Blocks by the chain flow's parameter naming them (`chain_deployment`).

    Returns:
        A deployment (not yet applied) whose default parameters run that chain, stopping at external
        nodes and going on from the slots; its runs send heartbeats and carry `HEARTBEAT_TAG`.
    """
    from deployments.serve import chain_deployment
    from flows.chain import run_chain

    deployment = chain_deployment(chain, resume=True, blocks=blocks, job_variables={
        "working_dir": str(PROJECT_ROOT),
        "env": {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_SECONDS)},
    })
    # A module path, imported wherever the worker runs (see the module docstring), not the file path
    # Prefect records relative to this process's folder.
    deployment.entrypoint = f"{run_chain.fn.__module__}.{run_chain.fn.__qualname__}"
    deployment.tags.append(HEARTBEAT_TAG)
    return deployment


def ensure_pool(name: str) -> None:
    """Create the work pool `name` as a process pool unless it exists (of whatever type it was made)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists
    from prefect.workers.process import ProcessWorker

    # The process worker's own job template, as `prefect work-pool create --type process` gives it.
    template = ProcessWorker.get_default_base_job_template()
    with get_client(sync_client=True) as client:
        try:
            client.create_work_pool(WorkPoolCreate(name=name, type=POOL_TYPE, base_job_template=template))
            logger.info("work pool %s created (%s)", name, POOL_TYPE)
        except ObjectAlreadyExists:
            pass


def crash_and_reschedule_automations(crash_after: timedelta = CRASH_AFTER) -> list[AutomationCore]:
    """The two automations that find a dead worker's runs and give them to another worker.

    Parameters:
        crash_after: the silence after a heartbeat that marks a run Crashed (at least `MIN_CRASH_AFTER`).

    Returns:
        `CRASH_AUTOMATION`: the proactive trigger of Prefect's "Detect zombie flows" page, limited to
        runs tagged `HEARTBEAT_TAG`; `RESCHEDULE_AUTOMATION`: each Crashed state that `CRASH_AUTOMATION`
        set on a run of that tag that has run at most `RESCHEDULES` times is forced back to Scheduled (a
        final state moves only when forced). A run its worker reports Crashed (the worker could not start
        it, or saw its process die) is not the crash automation's, and stays Crashed for a person.

    Prefect's automations act at least once. On a loaded SQLite server (Prefect 3.9) the proactive
    evaluation fires the crash action before it commits the removal of the silence's bucket; when that
    commit is late or fails, the run's own Crashed event finds the expired bucket and fires the action
    again, about 0.1 s after the first. That second Crashed may land before the reschedule or after it,
    so the reschedule automation reacts to every Crashed the crash automation sets, with no window:
    one that let repeats pass would leave a run whose second Crashed came after its reschedule Crashed
    for good. A repeat before the reschedule gives a second, harmless Scheduled; only a worker taking the
    run up within that 0.1 s could see its run forced back.
    """
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    tagged = {"prefect.resource.role": "tag", "prefect.resource.id": f"prefect.tag.{HEARTBEAT_TAG}"}
    crash = AutomationCore(
        name=CRASH_AUTOMATION,
        description=f"A run tagged {HEARTBEAT_TAG} beats every {HEARTBEAT_SECONDS} s; silent for "
                    f"{crash_after.total_seconds():g} s, its process is gone.",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed", "prefect.flow-run.Failed",
                    "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed"},
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related=tagged,
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=crash_after,
        ),
        actions=[ChangeFlowRunState(state=StateType.CRASHED, message=crash_message(crash_after))],
    )
    reschedule = AutomationCore(
        name=RESCHEDULE_AUTOMATION,
        description=f"A run tagged {HEARTBEAT_TAG} that the crash automation marked Crashed runs again "
                    f"(resuming from its slots), at most {RESCHEDULES} times.",
        trigger=EventTrigger(
            expect={"prefect.flow-run.Crashed"},
            # The crash automation's own Crashed, of a run that has run at most RESCHEDULES times.
            match={"prefect.resource.id": "prefect.flow-run.*",
                   "prefect.state-message": f"{CRASH_MESSAGE_START}*",
                   "prefect.run-count": [str(n) for n in range(1, RESCHEDULES + 1)]},
            match_related=tagged,
            for_each={"prefect.resource.id"},
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[ChangeFlowRunState(state=StateType.SCHEDULED, name="Rescheduled", message=RESCHEDULE_MESSAGE,
                                    force=True)],
    )
    return [crash, reschedule]


def ensure_automations(crash_after: timedelta = CRASH_AFTER) -> None:
    """Create the crash and reschedule automations, or bring existing ones of those names up to date (one
    pair per server: the last `watch --pool` to start sets the crash window of every pool's runs).

    An automation that already says what it should is left as it is. Updating one gives its trigger a new
    id, and the server forgets the silences the old trigger was timing: a run whose worker died just
    before a `watch --pool` started again (or one on another pool) would then stay Running for good.

    Two `watch --pool` starting at once on a server without them both find none and both create a pair;
    two crash automations would act twice. So every `watch` keeps the one of a name with the least id,
    the same one whichever looks, and deletes the others; one whose kept automation is deleted before
    its update (another, starting at once, saw one of a smaller id) looks again.
    """
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        for automation in crash_and_reschedule_automations(crash_after):
            while not _ensure_one(client, automation):
                pass


def _ensure_one(client: SyncPrefectClient, automation: AutomationCore) -> bool:
    """One pass of `ensure_automations` for one automation; False when the one kept was deleted before its
    update (another watch starting at once found one of a smaller id): the next pass keeps that one."""
    from prefect.exceptions import PrefectHTTPStatusError

    existing = client.read_automations_by_name(automation.name)
    if not existing:
        client.create_automation(automation)
        logger.info("automation %r created", automation.name)
        existing = client.read_automations_by_name(automation.name)
    kept, *others = sorted(existing, key=lambda found: str(found.id))
    for other in others:
        try:
            client.delete_automation(other.id)
        except PrefectHTTPStatusError as error:
            # Another watch deleted it first (the client raises on the 404 it means to ignore).
            if error.response.status_code != HTTPStatus.NOT_FOUND:
                raise
    if _settings(kept) != _settings(automation):
        try:
            client.update_automation(kept.id, automation)
        except PrefectHTTPStatusError as error:
            if error.response.status_code == HTTPStatus.NOT_FOUND:
                return False
            raise
        logger.info("automation %r updated", automation.name)
    return True


def _settings(automation: AutomationCore) -> dict[str, Any]:
    """What an automation does: its fields but its id (an automation read back is an `Automation`)."""
    from prefect.events.schemas.automations import AutomationCore

    return automation.model_dump(include=set(AutomationCore.model_fields))


def apply_on_pool(
    deployments: list[RunnerDeployment], pool: str, crash_after: timedelta = CRASH_AFTER
) -> list[UUID]:
    """Create or update the deployments on the API, on the work pool `pool`, and the crash automations;
    returns the deployments' ids."""
    ensure_pool(pool)
    ensure_automations(crash_after)
    ids = []
    for deployment in deployments:
        # from sync code apply returns the id; its annotation also allows an async caller's coroutine
        ids.append(cast(UUID, deployment.apply(work_pool_name=pool)))
        logger.info("deployment %s/%s ready on work pool %s", deployment.flow_name, deployment.name, pool)
    return ids


class PoolRunReports:
    """Prints, in `watch`'s console, each run of its deployments that ends Crashed on the pool, and why;
    once for each crash, though the crash automation may mark one silence Crashed twice.

    A worker that cannot start a run (it cannot import the flow, its process dies at once) leaves it
    Crashed, and nothing else would tell the person running `watch`. The reports come from Prefect's event
    stream (a `prefect.flow-run.Crashed` event related to one of the deployments), on a thread of their
    own; the reason is the state's message and the last line of the run's first error log with a
    traceback (the exception the flow-run process ended on).

    Parameters:
        deployment_ids: the deployments whose runs are watched.
        report: where a report goes (one line).
    """

    def __init__(self, deployment_ids: list[UUID], report: Callable[[str], None]) -> None:
        self._deployments = deployment_ids
        self._report = report
        self._listening = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        # Run in the context it is made in: the command's `temporary_settings` (its API address) are a
        # context variable, which a new thread does not otherwise see.
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(self._run,),
                                        name="slotrelay-pool-reports", daemon=True)

    def start(self) -> None:
        """Subscribe, and return once the subscription is live (reports from now on)."""
        self._thread.start()
        self._listening.wait(timeout=60)

    def stop(self) -> None:
        """End the subscription and its thread."""
        if self._loop is not None and self._task is not None:
            # Closed once the reports ended on an error (logged as they ended): nothing is left to cancel.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            asyncio.run(self._listen())
        except Exception:
            logger.exception("the reports of crashed pool runs stopped")
        finally:
            self._listening.set()

    async def _listen(self) -> None:
        import httpx
        from prefect.events.clients import get_events_subscriber
        from prefect.events.filters import (
            EventFilter,
            EventNameFilter,
            EventOccurredFilter,
            EventRelatedFilter,
        )
        from prefect.exceptions import ObjectNotFound

        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        now = datetime.now(UTC)
        wanted = [f"prefect.deployment.{d}" for d in self._deployments]
        crashed = EventFilter(
            # From now on (no backfill of earlier runs), for as long as `watch` runs.
            occurred=EventOccurredFilter(since=now, until=now + timedelta(days=3650)),
            event=EventNameFilter(name=["prefect.flow-run.Crashed"]),
            related=EventRelatedFilter(id=wanted),
        )
        reported: set[tuple[str, str | None, str | None]] = set()
        with contextlib.suppress(asyncio.CancelledError):
            async with get_events_subscriber(filter=crashed) as events:
                self._listening.set()
                async for event in events:
                    # The subscription's filter does not narrow by related resource: every watch on the
                    # server would otherwise print every pool's crashed runs. The same Crashed of a run
                    # that has not run since is a repeat of one crash: the crash automation acts at least
                    # once.
                    crash = (event.resource.id, event.resource.get("prefect.run-count"),
                             event.resource.get("prefect.state-message"))
                    if crash not in reported and any(resource.id in wanted for resource in event.related):
                        reported.add(crash)
                        try:
                            report = await self._describe(event)
                        except (ObjectNotFound, httpx.HTTPError) as error:
                            # Its run could not be read (deleted meanwhile, the API unreachable): the crash
                            # is reported all the same, and the reports go on.
                            report = (f"{event.resource.id} crashed on the work pool (its details could not "
                                      f"be read: {error!r})")
                        self._report(report)

    async def _describe(self, event: Any) -> str:
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId, LogFilterLevel
        from prefect.client.schemas.sorting import LogSort

        run_id = UUID(event.resource.id.removeprefix("prefect.flow-run."))
        deployment = next((r.get("prefect.resource.name") for r in event.related
                           if r.id.startswith("prefect.deployment.")), "?")
        state = (event.payload.get("validated_state") or {}).get("message") or "no message"
        async with get_client() as client:
            run = await client.read_flow_run(run_id)
            errors = await client.read_logs(log_filter=LogFilter(
                flow_run_id=LogFilterFlowRunId(any_=[run_id]), level=LogFilterLevel(ge_=logging.ERROR)),
                sort=LogSort.TIMESTAMP_ASC, limit=20)
        traceback = next((log.message for log in errors if "Traceback" in log.message), None)
        cause = f"; it ended on: {traceback.strip().splitlines()[-1]}" if traceback else ""
        return f"run {run.name} of chain/{deployment} ({run_id}) crashed on the work pool: {state}{cause}"
