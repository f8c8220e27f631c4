"""A dead worker loses nothing: kill -9 a process worker (and its flow-run process) mid-chain.

The scenario is `tests.scale.workers.kill_a_worker_mid_chain` (bench/workers_burst.py times it).
`slotrelay watch --pool` has set up Prefect's zombie detection (deployments/pool.py): the run stops
sending heartbeats, an automation marks it Crashed after `--crash-after` seconds of silence (the least
it allows here, 30 s sooner than its default), another puts it back to Scheduled, and the other worker
runs it again from its slots: the node that completed before the kill is not run again.
"""

from __future__ import annotations

import json
import uuid

import pytest

from deployments.pool import HEARTBEAT_TAG, MIN_CRASH_AFTER, RESCHEDULE_MESSAGE, crash_message
from slotrelay.ledger import LEDGER_FILE_NAME
from tests.scale.workers import (
    chain_runs,
    completed_tasks,
    executions,
    kill_a_worker_mid_chain,
    submissions,
    wait_for,
)

pytestmark = pytest.mark.prefect_server


def test_a_run_whose_worker_is_killed_is_crashed_rescheduled_and_finished_by_the_other(
    prefect_server, tmp_path
):
    from prefect.client.orchestration import get_client

    pool = f"slotrelay-{uuid.uuid4().hex[:6]}"
    folder = tmp_path / f"dying-{uuid.uuid4().hex[:4]}"
    death = kill_a_worker_mid_chain(prefect_server, pool, folder, MIN_CRASH_AFTER.total_seconds())
    assert death.watch_exit == 0, (folder / "watch.log").read_text()
    chain_id = folder.name

    [run] = chain_runs([chain_id])
    assert HEARTBEAT_TAG in run.tags
    with get_client(sync_client=True) as client:
        history = [(s.type.value, s.name, s.message) for s in client.read_flow_run_states(run.id)]
    # Prefect marked it crashed (no heartbeat), the automation rescheduled it, and it ran to the end.
    crashed = history.index(("CRASHED", "Crashed", crash_message(MIN_CRASH_AFTER)))
    assert history[crashed + 1] == ("SCHEDULED", "Rescheduled", RESCHEDULE_MESSAGE), history
    # The same steps as its first start: a worker takes it (Pending, Submitting), it runs, it completes.
    after = [name for _, name, _ in history[crashed + 2:]]
    assert after == ["Pending", "Submitting", "Running", "Completed"], history
    assert [worker for _, worker in submissions([run.id])] == ["worker-a", "worker-b"]

    # `first` completed before the kill and did not run again; `slow`, cut off, ran again and completed.
    ran = executions(folder)
    assert [n for n, _ in ran] == ["first", "slow", "slow"], ran
    assert {pid for _, pid in ran[:2]} <= set(death.killed) and ran[2][1] not in death.killed
    # Task-run states reach the server as events, recorded a moment after the flow run ends.
    wait_for(lambda: completed_tasks([run.id])["slow"] >= 1, 120, "slow's task run to be recorded")
    assert completed_tasks([run.id]) == {"first": 1, "slow": 1}
    assert json.loads((folder / "slots" / "slow_output.json").read_text())["data"] == {"done": {"n": 7}}
    ledger = [json.loads(line) for line in (folder / LEDGER_FILE_NAME).read_text().splitlines()]
    assert [e["flow_run_id"] for e in ledger if e["kind"] == "started"] == [str(run.id)]
