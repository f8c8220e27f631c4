"""The crash window never takes a live run for a dead one on a loaded machine (issue 34).

`watch --pool` with its default window (deployments/pool.py: `CRASH_AFTER`, a heartbeat and a margin)
on the session's Prefect server; one process worker runs a chain whose `slow` node waits for a file.
While it waits, a process spins on one of the machine's cores (`harness.load.cpu_hogs`, the busy machine
of `bench/chain_overhead.py`: another user's process on one core of two, beside whatever else loads it,
as the rest of the suite does on CI), and the run lives on through two windows: until the server has
received three of its heartbeats (two gaps, each a chance for the crash automation; the first window has
closed by the third). Then the node is released: the run completes, and no state in its history is
Crashed.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from deployments.pool import CRASH_AFTER
from harness.chains import agent_writes
from harness.load import cpu_hogs
from harness.workers import (
    chain_runs,
    dying_chain,
    executions,
    pool_exists,
    start_watch,
    start_worker,
    stop,
    wait_for,
)
from tests.support.waiting import API_POLL_SECONDS, wait_until

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

pytestmark = pytest.mark.prefect_server
HEARTBEATS = 3


def heartbeats(client: SyncPrefectClient, flow_run_id) -> int:
    """How many heartbeats of the run the server has received."""
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    return client.read_events(filter=EventFilter(
        event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
        resource=EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"])), limit=1).total


@pytest.mark.timeout(900)
def test_a_live_run_on_a_busy_machine_outlives_the_crash_window(prefect_server, tmp_path) -> None:
    from prefect.client.orchestration import get_client

    pool = f"live-{uuid.uuid4().hex[:6]}"
    folder = tmp_path / f"live-{uuid.uuid4().hex[:4]}"
    chain = dying_chain(folder, folder.name)
    watch = start_watch(prefect_server, pool, [chain], tmp_path / "watch.log")
    worker = None
    try:
        wait_for(lambda: pool_exists(pool) or watch.poll() is not None, 120, "watch to create the pool")
        worker = start_worker(prefect_server, pool, "live", tmp_path / "worker.log", limit=1)
        wait_for(lambda: "watching" in (tmp_path / "watch.log").read_text() or watch.poll() is not None, 120,
                 "watch to start")
        assert watch.poll() is None, (tmp_path / "watch.log").read_text()
        wait_for(lambda: "started!" in (tmp_path / "worker.log").read_text(), 120, "the worker to start")
        agent_writes(folder, "src", {"n": 1})
        wait_for(lambda: [n for n, _ in executions(folder)] == ["first", "slow"], 180, "slow to run")
        # Two gaps between heartbeats: about 60 s of a live run under load, asked through one client at the
        # API's pace (a new client every 0.2 s cost this process about 3.5 CPU-s more over the wait).
        with cpu_hogs(), get_client(sync_client=True) as client:
            [run] = chain_runs([folder.name])
            wait_until(lambda: heartbeats(client, run.id) >= HEARTBEATS,
                       timeout=HEARTBEATS * CRASH_AFTER.total_seconds() + 120,
                       what=f"{HEARTBEATS} heartbeats of the live run", interval=API_POLL_SECONDS)
        (folder / "release").touch()
        wait_for(lambda: chain_runs([folder.name])[0].state.is_final(), 240, "the run to end")
        with get_client(sync_client=True) as client:
            history = [s.type.value for s in client.read_flow_run_states(run.id)]
    finally:
        if worker is not None:
            stop(worker)
        stop(watch)
    assert "CRASHED" not in history, history
    assert history[-1] == "COMPLETED", history
    assert [n for n, _ in executions(folder)] == ["first", "slow"]
