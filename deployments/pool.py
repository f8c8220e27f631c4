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
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment

    from slotrelay.chain.models import Chain

logger = logging.getLogger("slotrelay.pool")

POOL_TYPE = "process"
# The folder holding `flows/`: a process worker runs each flow run there (else in a fresh temporary folder).
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def pool_chain_deployment(chain: Chain) -> RunnerDeployment:
    """The deployment of one chain for a work pool: `chain/<chain_id>`, resuming from its slots.

    Parameters:
        chain: a loaded chain (bound to its file).

    Returns:
        A deployment (not yet applied) whose default parameters run that chain, stopping at external
        nodes and going on from the slots.
    """
    from deployments.serve import chain_deployment

    return chain_deployment(chain, resume=True, job_variables={"working_dir": str(PROJECT_ROOT)})


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


def apply_on_pool(deployments: list[RunnerDeployment], pool: str) -> None:
    """Create or update the deployments on the API, on the work pool `pool`."""
    ensure_pool(pool)
    for deployment in deployments:
        deployment.apply(work_pool_name=pool)
        logger.info("deployment %s/%s ready on work pool %s", deployment.flow_name, deployment.name, pool)
