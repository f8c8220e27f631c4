"""Process workers, `watch --pool` and what the API says about their runs: shared by tests/scale and the
bench."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The worker's log line, sent to the flow run's logs by Prefect 3's `BaseWorker`.
SUBMITTED_BY = re.compile(r"Worker '([^']+)' submitting flow run")
# The commands docs/beyond.md shows; the processes below are started from them.
README_WATCH = "slotrelay watch --pool {pool} CHAIN.json"
README_WORKER = "prefect worker start --pool {pool} --limit {limit}"


def environment(api_url: str) -> dict[str, str]:
    """The environment of a worker or of `watch`: this worktree importable, the API, a 1 s poll."""
    return {**os.environ, "PREFECT_API_URL": api_url, "PYTHONPATH": str(ROOT),
            "PREFECT_WORKER_QUERY_SECONDS": "1", "COLUMNS": "200"}


def start_worker(api_url: str, pool: str, name: str, log: Path, limit: int) -> subprocess.Popen:
    """`prefect worker start --pool POOL --name NAME --limit N`, in its own process group."""
    with log.open("w") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", *README_WORKER.format(pool=pool, limit=limit).split(), "--name", name],
            cwd=ROOT, env=environment(api_url), stdout=handle, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )


def start_watch(api_url: str, pool: str, chains: list[Path], log: Path) -> subprocess.Popen:
    """`slotrelay watch --pool POOL CHAIN...`."""
    with log.open("w") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli",
             *README_WATCH.format(pool=pool).split()[1:-1], *map(str, chains)],
            cwd=ROOT, env=environment(api_url), stdout=handle, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def stop(process: subprocess.Popen, first: signal.Signals = signal.SIGINT, timeout: float = 60) -> int:
    """Signal a process group (or the process), wait, kill if it does not end in time; its exit code."""
    try:
        os.killpg(process.pid, first)
    except (ProcessLookupError, PermissionError):
        process.send_signal(first)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        return process.wait(timeout=30)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until it holds; raise TimeoutError naming `what` past `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


PAGE = 200  # the server's largest page


def _every(read: Callable[..., list], **filters: object) -> list:
    """Every object a `client.read_*` call returns, page by page."""
    found: list = []
    while True:
        page = read(**filters, limit=PAGE, offset=len(found))
        found.extend(page)
        if len(page) < PAGE:
            return found


def chain_runs(chain_ids: list[str]) -> list:
    """Every flow run of the `chain/<chain_id>` deployments."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    with get_client(sync_client=True) as client:
        return _every(client.read_flow_runs,
                      deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=chain_ids)))


def completed_tasks(flow_run_ids: list) -> Counter:
    """How many times each task-run name completed in these flow runs (a node's task run is named after
    it)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        tasks = _every(client.read_task_runs,
                       flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=list(flow_run_ids))))
    return Counter(t.name for t in tasks if t.state is not None and t.state.is_completed())


def submitted_by(flow_run_ids: list) -> dict[str, str]:
    """flow run id -> the name of the worker that submitted it, from the run's logs in the API."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    found: dict[str, str] = {}
    with get_client(sync_client=True) as client:
        logs = _every(client.read_logs,
                      log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=list(flow_run_ids))))
    for log in logs:
        match = SUBMITTED_BY.search(log.message)
        if match:
            found[str(log.flow_run_id)] = match.group(1)
    return found
