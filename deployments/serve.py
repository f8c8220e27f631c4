"""Serving slotrelay's flows as deployments from the current process (Prefect's `serve`).

`slotrelay watch` (and so `slotrelay up`) serves one deployment of the chain flow per watched chain,
named after the chain (`chain/<chain_id>`, default parameters: that chain file, stop at external
nodes), plus the magic pen's flows when they are installed. Each flow run is started by Prefect's
runner as a child process.

Choices, from measurements on Prefect 3.9.1:
- The runner polls for scheduled runs every second (`query_seconds=1`), not the default ten: a
  routed run then starts within about a second instead of up to ten.
- `pause_on_shutdown=False`: a stopped `watch` must not pause the deployments, or runs requested
  by the next sensor start (reconcile) would wait for a person to resume the deployment.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

from deployments.sensor import CHAIN_FLOW_NAME, chain_deployment_name

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment

    from slotrelay.chain.models import Chain

logger = logging.getLogger("slotrelay.serve")

POLL_SECONDS = 1.0
# Flows of the other parts, served when their module exists: (module, flow function, deployment name).
PEN_FLOWS = (
    ("flows.pen", "pen_write", "pen-write"),
    ("flows.registry_review", "registry_review", "registry-review"),
)


def chain_deployment(chain: Chain) -> RunnerDeployment:
    """The deployment of the chain flow for one chain: `chain/<chain_id>`.

    Parameters:
        chain: a loaded chain (bound to its file).

    Returns:
        A deployment whose default parameters run that chain, stopping at external nodes.
    """
    from flows.chain import run_chain

    return run_chain.to_deployment(
        name=chain_deployment_name(chain.chain_id),
        parameters={
            "chain_path": str(chain.source),
            "start_nodes": None,
            "slots_root": str(chain.work_dir) if chain.work_dir != chain.base_dir else None,
            "stop_at_external": True,
        },
        description=chain.description or f"The chain {chain.chain_id} ({chain.source})",
        tags=["slotrelay", "chain", chain.chain_id],
    )


GENERIC_CHAIN_DEPLOYMENT = "run-chain"


def generic_chain_deployment() -> RunnerDeployment:
    """`chain/run-chain`: runs any chain file given as a parameter (from the UI or `prefect deployment run`)."""
    from flows.chain import run_chain

    return run_chain.to_deployment(
        name=GENERIC_CHAIN_DEPLOYMENT,
        description="Run a node_chain.json: give chain_path (and start_nodes to begin elsewhere than its start).",
        tags=["slotrelay", "chain"],
    )


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


def apply_all(deployments: list[RunnerDeployment]) -> None:
    """Create or update the deployments on the API now (before the sensor starts runs of them)."""
    for deployment in deployments:
        deployment.apply()
        logger.info("deployment %s ready", full_name(deployment))


def serve_until_stopped(deployments: list[RunnerDeployment], *, poll_seconds: float = POLL_SECONDS) -> None:
    """Serve the deployments in this process until SIGINT/SIGTERM.

    Parameters:
        deployments: what to serve.
        poll_seconds: how often the runner asks the API for runs to start.
    """
    from prefect import serve

    serve(
        *deployments,
        pause_on_shutdown=False,
        print_starting_message=False,
        query_seconds=poll_seconds,
    )


def chain_flow_deployment_name(chain_id: str) -> str:
    """The full name of a chain's served deployment (`chain/<chain_id>`)."""
    return f"{CHAIN_FLOW_NAME}/{chain_deployment_name(chain_id)}"

