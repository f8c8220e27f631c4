"""Asking a Prefect server what a test's runs left there: an address's HTTP status, the task runs of a
test's flow runs once final, the newest artifact of a key, the flow runs of deployments."""

from __future__ import annotations

import urllib.request

from tests.support.waiting import wait_until


def http_status(url: str) -> int:
    """The HTTP status `url` answers with, or 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return answer.status
    except OSError:
        return 0


def deployment_runs(*deployments: str) -> list:
    """The flow runs of the deployments with these names, read from the session's server."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(
            deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=list(deployments))))


def runs_finished(*deployments: str) -> bool:
    """Every flow run of these deployments has ended (`watch` stopped earlier would cancel the running
    ones)."""
    runs = deployment_runs(*deployments)
    return bool(runs) and all(r.state is not None and r.state.is_final() for r in runs)


def recorded_task_runs(flow_run_ids: list, count: int, timeout: float = 120) -> list:
    """The task runs of these flow runs once the server holds `count` of them, each in a final state.

    The server records task runs from their events, after the flow run has ended and in batches: a
    task run can be on record from its first (Pending) event, still carrying Prefect's default name
    (`node-4e1`) before the event that renames it to its node_id is recorded. Reading names only
    once every run is final reads the names a person sees in the UI.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    in_runs = FlowRunFilter(id=FlowRunFilterId(any_=[str(i) for i in flow_run_ids]))
    seen: list = []
    with get_client(sync_client=True) as client:

        def final_runs() -> tuple[list] | None:
            """The runs, in a tuple: one that holds none (`count` 0) is still an answer."""
            seen[:] = client.read_task_runs(flow_run_filter=in_runs, limit=max(200, 2 * count))
            if len(seen) >= count and all(r.state is not None and r.state.is_final() for r in seen):
                return (list(seen),)
            return None

        (found,) = wait_until(
            final_runs, timeout=timeout, interval=0.25, what=f"{count} final task runs",
            details=lambda: f"the server has {sorted((r.name, r.state_type) for r in seen)}",
        )
    return found


def latest_artifact(key: str) -> str | None:
    """The data of the newest artifact of this key on the server, or None.

    A pen's artifact key comes from its pen id (`pen-execution-mpp-p1-20261203-001`), which restarts at
    001 in each test's own pen root: a test that shares the server with an earlier one of the same
    persona finds that one's artifact under the same key, so the newest is the test's own.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
                                      sort=ArtifactSort.CREATED_DESC, limit=1)
    return found[0].data if found else None
