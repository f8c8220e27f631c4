"""`slotrelay watch --pool` started from the chain's own folder (issue 30), on the session's Prefect server.

A person starts `watch` where their chain is (`cd examples/phase2 && slotrelay watch --pool P
node_chain.json`) and a worker somewhere else: the deployment `watch` records must load wherever the worker
runs. The chain's folder is inside the project, as examples/phase2 is (under its git-ignored `.slotrelay/`,
removed afterwards): Prefect records a file entrypoint relative to the folder `watch` runs in, and from
there that path leads nowhere for a worker, which runs flows in the project's folder. And a worker that
cannot load the flow at all (a machine without the project at the same path; here a deployment pointing
at a module that does not exist) is an error `watch` prints, naming the run and why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from deployments.pool import CRASH_AFTER, CRASH_AUTOMATION, ensure_automations
from harness.chains import agent_writes, make_chain
from harness.workers import ROOT, chain_runs, pool_exists, stop
from slotrelay.chain.slots import read_slot
from tests.support.waiting import API_POLL_SECONDS, wait_until

pytestmark = pytest.mark.prefect_server
# Not the default: `--crash-after` reaches the crash automation.
WINDOW = 50


def start(args: list[str], *, cwd: Path, api_url: str, log: Path) -> subprocess.Popen:
    """A command of this project's interpreter, run from `cwd`, in its own session, logging to `log`."""
    env = {**os.environ, "PREFECT_API_URL": api_url, "PREFECT_WORKER_QUERY_SECONDS": "1", "COLUMNS": "200"}
    env.pop("PYTHONPATH", None)
    with log.open("w") as handle:
        return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, env=env, stdout=handle,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def crash_window() -> timedelta:
    """The window of the server's crash automation, which `watch --pool --crash-after` sets."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        [automation] = client.read_automations_by_name(CRASH_AUTOMATION)
    return automation.trigger.within


def completed(path: Path) -> bool:
    document = read_slot(path)
    return bool(document) and document.get("status") == "completed"


@pytest.fixture
def pool_watch(prefect_server, tmp_path):
    """`slotrelay watch --pool` started in the chain's folder with the chain's relative path, and a process
    worker started in another folder; yields (chain id, chain folder, watch log)."""
    pool = f"from-folder-{uuid.uuid4().hex[:6]}"
    chain_id = f"folder-{uuid.uuid4().hex[:6]}"
    inside = ROOT / ".slotrelay" / "test-pool-chains" / chain_id
    folder = inside / "my-chain"
    make_chain(folder, chain_id, 1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    log = tmp_path / "watch.log"
    watch = start(["slotrelay.cli", "watch", "--pool", pool, "--crash-after", str(WINDOW), "node_chain.json"],
                  cwd=folder, api_url=prefect_server, log=log)
    worker = None
    try:
        wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=120,
                   what="watch to start")
        assert watch.poll() is None and pool_exists(pool), log.read_text()
        assert crash_window() == timedelta(seconds=WINDOW)
        worker_log = tmp_path / "worker.log"
        worker = start(["prefect", "worker", "start", "--pool", pool, "--name", "elsewhere"], cwd=elsewhere,
                       api_url=prefect_server, log=worker_log)
        wait_until(lambda: "started!" in worker_log.read_text() or worker.poll() is not None, timeout=120,
                   what="the worker to start")
        assert worker.poll() is None, worker_log.read_text()
        yield chain_id, folder, log
    finally:
        if worker is not None:
            stop(worker)
        code = stop(watch)
        shutil.rmtree(inside)
        # The other tests on this server expect the default window.
        ensure_automations(CRASH_AFTER)
    assert code == 0, log.read_text()


def test_a_run_requested_by_watch_in_the_chains_folder_completes_on_a_worker_elsewhere(pool_watch) -> None:
    chain_id, folder, log = pool_watch
    agent_writes(folder, "src-0", {"n": 1})
    wait_until(lambda: any(r.state is not None and r.state.is_final() for r in chain_runs([chain_id])),
               timeout=240, what="the run to end", interval=API_POLL_SECONDS)
    [run] = chain_runs([chain_id])
    assert run.state.is_completed(), (run.state, log.read_text())
    assert completed(folder / "slots" / "work-0_output.json")
    assert read_slot(folder / "slots" / "work-0_output.json")["data"]["seen"] == {"n": 1}


def test_a_worker_that_cannot_load_the_flow_is_an_error_watch_shows(pool_watch) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentUpdate

    chain_id, folder, log = pool_watch
    # What a worker on a machine without the project at the same path meets: nothing to import.
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(f"chain/{chain_id}")
        client.update_deployment(deployment.id, DeploymentUpdate(entrypoint="flows.nowhere.run_chain"))
    agent_writes(folder, "src-0", {"n": 2})
    wait_until(lambda: any(r.state is not None and r.state.is_final() for r in chain_runs([chain_id])),
               timeout=240, what="the run to end", interval=API_POLL_SECONDS)
    [run] = chain_runs([chain_id])
    assert run.state.is_crashed(), run.state
    wait_until(lambda: f"run {run.name} of chain/{chain_id}" in log.read_text(), timeout=120,
               what="watch to say so")
    said = log.read_text()
    assert "ERROR" in said and "crashed" in said and "No module named 'flows.nowhere'" in said, said
