"""The Prefect side of the sensor: how a routed target becomes a run of the chain's deployment.

The core sensor (`slotrelay.chain.sensor`) decides WHAT runs; `DeploymentStarter` is the action it
is given to start one run, through the Prefect API: a flow run created from the chain's deployment
with parameters `chain_path`, `start_nodes`, `stop_at_external=True` and `resume=True`, and the
ledger's batch id as the idempotency key, so a request repeated after a crash returns the run already
created. Every such run goes on from the slots: a target whose output already answers the input the
sensor wrote (a request repeated, a run picked up again) is not run twice, and a node handed over to the
engine settles from its agent's slot and meets the routing step there.

Why a direct API call and not an event with a deployment trigger: the call returns the run it
created, so the ledger can record it; the event is fire-and-forget, the OSS server drops events past
its 10,000-message queue under bursts, and a trigger whose template names a missing event field
silently creates no run.
"""

from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

    from deployments.warm import WarmPool

CHAIN_FLOW_NAME = "chain"


@dataclass(frozen=True)
class ChainTarget:
    """Where the runs of one chain go: its deployment (`flow/deployment`), chain file and slots root."""

    deployment: str
    chain_path: Path
    slots_root: Path | None = None


class DeploymentStarter:
    """`start_run(chain_id, start_nodes, idempotency_key) -> flow_run_id` on a Prefect API.

    One synchronous client is kept for the sensor's lifetime (the coalescer calls from one thread),
    and each deployment id is looked up once.

    Parameters:
        targets: chain_id -> its deployment and chain file.
        warm: warm processes (`slotrelay watch --warm`): one idle is reserved for each run before it is
            created, and the run handed to it once created, so that the runner's poll, which would
            otherwise find the new run first, leaves it alone; without one idle (or without `warm`)
            the runner's poll finds the run.
    """

    def __init__(self, targets: dict[str, ChainTarget], *, warm: WarmPool | None = None) -> None:
        self._targets = targets
        self._warm = warm
        self._ids: dict[str, UUID] = {}
        self._client: SyncPrefectClient | None = None
        self._lock = threading.Lock()
        # The settings in force where the starter is made (the command's `temporary_settings`: its API
        # address): the client is made on the coalescer's thread, which a context variable does not reach.
        self._settings = contextvars.copy_context()

    def _client_and_id(self, deployment: str) -> tuple[SyncPrefectClient, UUID]:
        from prefect.client.orchestration import get_client

        if self._client is None:
            self._client = self._settings.run(get_client, sync_client=True)
            self._client.__enter__()
        if deployment not in self._ids:
            self._ids[deployment] = self._client.read_deployment_by_name(deployment).id
        return self._client, self._ids[deployment]

    def __call__(self, chain_id: str, start_nodes: list[str], idempotency_key: str) -> str:
        """Create one flow run of the chain's deployment beginning at `start_nodes`; returns its id."""
        target = self._targets[chain_id]
        parameters = {
            "chain_path": str(target.chain_path),
            "start_nodes": list(start_nodes),
            "slots_root": str(target.slots_root) if target.slots_root else None,
            "stop_at_external": True,
            "resume": True,
        }
        # Reserved before the run exists: from its creation the runner's poll could find it.
        warm = self._warm if self._warm is not None and self._warm.reserve(idempotency_key) else None
        try:
            with self._lock:
                client, deployment_id = self._client_and_id(target.deployment)
                run = client.create_flow_run_from_deployment(
                    deployment_id,
                    parameters=parameters,
                    idempotency_key=idempotency_key,
                    tags=["slotrelay", "routed"],
                )
        except BaseException:
            if warm is not None:
                warm.release(idempotency_key)
            raise
        if warm is not None:
            warm.hand_off(run, target.deployment.partition("/")[2], idempotency_key)
        return str(run.id)

    def close(self) -> None:
        """Close the API client."""
        with self._lock:
            if self._client is not None:
                self._client.__exit__(None, None, None)
                self._client = None
