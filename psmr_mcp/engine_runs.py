"""The engine tools that reach the Prefect API: `run_status` and `alert_decide`.

Prefect is imported here, on the first call of one of these tools, never when the server starts. A
decision goes through `flows.arbitration.send_decision`, the path `slotrelay decide` takes (the run
records it in the alert file: who, when, what, `via: mcp`). A run's status is what the API says of the
flow run and its node tasks, plus, once it has ended, the summary `slotrelay run --json` prints (the copy
every run keeps in `logs/runs/<flow_run_id>.json`, `flows.chain.summary_path`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

from slotrelay.chain.alerts import AlertError, DecisionName, decidable_alert
from slotrelay.chain.models import Chain
from slotrelay.psmr.errors import ExecutionFailed, InvalidQuery, ObjectNotFound

RECENT_RUNS = 5


def api_url() -> str:
    """The Prefect API the server was started against (`deployments.server.require_api`), answering.

    Raises:
        ExecutionFailed: no Prefect server answers there.
    """
    from deployments.server import require_api
    from slotrelay.errors import EnvironmentMissing

    try:
        return require_api().url
    except EnvironmentMissing as missing:
        raise ExecutionFailed(
            f"{missing.message}; start this MCP server with PREFECT_API_URL naming the server "
            "`slotrelay watch` uses"
        ) from None


def decide(
    alert_file: Path, decision: str, *, comment: str, data: dict[str, Any] | None, decided_by: str
) -> dict[str, Any]:
    """Send a decision on an alert to its paused run (`send_decision`), as `slotrelay decide` does.

    Raises:
        InvalidQuery: the alert cannot be decided (already decided, timed out, its run no longer paused).
        ExecutionFailed: no Prefect server answers.
    """
    try:
        # Refused before the server is asked, as `slotrelay decide` refuses it.
        decidable_alert(alert_file)
    except AlertError as refused:
        raise InvalidQuery(f"alert_decide: {refused.message}") from None
    url = api_url()
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.arbitration import send_decision

    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):
            alert = send_decision(
                alert_file,
                DecisionName(decision),
                comment=comment,
                data=data,
                decided_by=decided_by,
                via="mcp",
            )
    except AlertError as refused:
        raise InvalidQuery(f"alert_decide: {refused.message}") from None
    return {
        "alert": alert_file.name,
        "node_id": alert.node_id,
        "flow_run_id": alert.flow_run_id,
        "decision": decision,
        "decided_by": decided_by,
        "resumed": True,
        "next": "the run takes the decision and records it in the alert file (status decided); "
        "run_status with this flow_run_id follows it",
    }


def run_status(chains: dict[str, Chain], flow_run_id: str) -> dict[str, Any]:
    """One flow run: its state, its nodes' task states, its UI link, and its summary once it has ended.

    Raises:
        InvalidQuery: `flow_run_id` is not a UUID.
        ObjectNotFound: no such flow run on the server.
        ExecutionFailed: no Prefect server answers.
    """
    try:
        run_id = UUID(flow_run_id)
    except ValueError:
        raise InvalidQuery(f"flow_run_id {flow_run_id!r} is not a flow run id (a UUID)") from None
    url = api_url()
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.exceptions import ObjectNotFound as PrefectNotFound
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.chain import summary_path

    with temporary_settings(updates={PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        try:
            run = client.read_flow_run(run_id)
        except PrefectNotFound:
            raise ObjectNotFound(f"no flow run {flow_run_id} on {url}") from None
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])))
    nodes: dict[str, Any] = {}
    for task in sorted(tasks, key=lambda t: t.created or 0):
        nodes[task.name] = {
            "state": task.state.name if task.state else None,
            "state_type": task.state.type.value if task.state else None,
        }
    chain = next((c for c in chains.values() if run.name.split("@", 1)[0] == c.chain_id), None)
    summary_file = summary_path(chain, flow_run_id) if chain is not None else None
    from slotrelay.chain.slots import read_slot

    answer: dict[str, Any] = {
        "flow_run_id": flow_run_id,
        "name": run.name,
        "chain_id": chain.chain_id if chain else None,
        "state": run.state.type.value if run.state else None,
        "state_name": run.state.name if run.state else None,
        "message": run.state.message if run.state else None,
        "ui_url": f"{url.removesuffix('/api')}/runs/flow-run/{flow_run_id}",
        "nodes": nodes,
        "current": [name for name, node in nodes.items() if node["state_type"] in ("RUNNING", "PAUSED")],
        "summary": read_slot(summary_file) if summary_file is not None else None,
    }
    return answer


def recent_runs(chain: Chain) -> list[dict[str, Any]]:
    """The chain's latest flow runs (named `<chain_id>` or `<chain_id>@<start nodes>`), newest first; empty
    when no Prefect server answers (the slots still say where the chain stands)."""
    try:
        url = api_url()
    except ExecutionFailed:
        return []
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=chain.chain_id)),
            sort=FlowRunSort.START_TIME_DESC,
            limit=RECENT_RUNS * 4,
        )
    mine = [r for r in runs if r.name.split("@", 1)[0] == chain.chain_id][:RECENT_RUNS]
    return [
        {
            "flow_run_id": str(r.id),
            "name": r.name,
            "state": r.state.type.value if r.state else None,
            "state_name": r.state.name if r.state else None,
            "ui_url": f"{url.removesuffix('/api')}/runs/flow-run/{r.id}",
        }
        for r in mine
    ]
