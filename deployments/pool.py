"""Chain runs on a Prefect work pool: the deployments `slotrelay watch --pool NAME` requests runs of.

Instead of serving the flows from its own runner, `watch --pool` creates one `chain/<chain_id>`
deployment per watched chain on the work pool (a `process` pool, created if missing), and any number
of `prefect worker start --pool NAME` processes run them. The deployment records the folder `watch`
ran in as its path and the project folder as the process's working folder, with no pull step: a
worker loads `flows/chain.py` from that folder, so every
machine running a worker must have the project (and the chain's python modules, beside the chain
file) at the same paths, and share the slots folder.

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

import logging
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment
    from prefect.events.schemas.automations import AutomationCore

    from slotrelay.chain.models import Chain

logger = logging.getLogger("slotrelay.pool")

POOL_TYPE = "process"
# The folder holding `flows/`: a process worker runs each flow run there (else in a fresh temporary folder).
PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Prefect accepts no less than 30 s between heartbeats (MINIMUM_HEARTBEAT_INTERVAL in its flow engine).
HEARTBEAT_SECONDS = 30
# Three heartbeats missed: a busy machine may delay one, not three.
CRASH_AFTER = timedelta(seconds=3 * HEARTBEAT_SECONDS)
# Less than two heartbeats would crash a live run whose one heartbeat came late.
MIN_CRASH_AFTER = timedelta(seconds=2 * HEARTBEAT_SECONDS)
# A run silent for longer has no worker worth waiting for (and the window must stay a finite number).
MAX_CRASH_AFTER = timedelta(days=1)
HEARTBEAT_TAG = "slotrelay-heartbeat"
# A run crashing again and again (its code kills its process) stays Crashed after this many reschedules.
RESCHEDULES = 2
CRASH_AUTOMATION = "slotrelay: crash zombie chain runs"
RESCHEDULE_AUTOMATION = "slotrelay: reschedule crashed chain runs"
RESCHEDULE_MESSAGE = "Rescheduled after a crash: a worker of the pool runs it again from its slots"


def crash_message(crash_after: timedelta) -> str:
    """The message of the Crashed state `CRASH_AUTOMATION` sets, naming the silence that set it."""
    return f"Marked crashed: no heartbeat for {crash_after.total_seconds():g} s (its worker died?)"


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

    deployment = chain_deployment(chain, resume=True, blocks=blocks, job_variables={
        "working_dir": str(PROJECT_ROOT),
        "env": {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_SECONDS)},
    })
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
        runs tagged `HEARTBEAT_TAG`; `RESCHEDULE_AUTOMATION`: a Crashed run of that tag that has run
        at most `RESCHEDULES` times is forced back to Scheduled (a final state moves only when forced).
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
        description=f"A crashed run tagged {HEARTBEAT_TAG} runs again (resuming from its slots), "
                    f"at most {RESCHEDULES} times.",
        trigger=EventTrigger(
            expect={"prefect.flow-run.Crashed"},
            # run-count 0: the run never started (its worker could not launch it); it would crash again.
            match={"prefect.resource.id": "prefect.flow-run.*",
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
    pair per server: the last `watch --pool` to start sets the crash window of every pool's runs)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        for automation in crash_and_reschedule_automations(crash_after):
            existing = client.read_automations_by_name(automation.name)
            if existing:
                client.update_automation(existing[0].id, automation)
            else:
                client.create_automation(automation)
                logger.info("automation %r created", automation.name)


def apply_on_pool(
    deployments: list[RunnerDeployment], pool: str, crash_after: timedelta = CRASH_AFTER
) -> None:
    """Create or update the deployments on the API, on the work pool `pool`, and the crash automations."""
    ensure_pool(pool)
    ensure_automations(crash_after)
    for deployment in deployments:
        deployment.apply(work_pool_name=pool)
        logger.info("deployment %s/%s ready on work pool %s", deployment.flow_name, deployment.name, pool)
