"""A dead worker loses nothing: kill -9 a process worker (and its flow-run process) mid-chain.

The second test kills the worker alone, in a second run of a chain after a completed first one: its
flow-run process dies with it (flows/chain.py: `slotrelay.lifetime.die_with_parent`), and the run, crashed
and rescheduled, runs every node after the cut for the new content (what a slot was made from decides,
slotrelay/chain/provenance.py), none of the first run's outputs taken for done.

The scenario is `harness.workers.kill_a_worker_mid_chain` (bench/workers_burst.py times it).
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
from harness.workers import (
    ROUNDS_CHAIN,
    chain_runs,
    completed_tasks,
    executions,
    kill_a_worker_in_a_second_run,
    kill_a_worker_mid_chain,
    round_executions,
    submissions,
    wait_for,
)
from slotrelay.chain.ledger import LEDGER_FILE_NAME
from slotrelay.chain.slots import content_hash

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


def test_a_second_run_whose_worker_dies_runs_every_node_after_the_cut_for_the_new_content(prefect_server,
                                                                                          tmp_path):
    from prefect.client.orchestration import get_client

    pool = f"slotrelay-{uuid.uuid4().hex[:6]}"
    folder = tmp_path / f"rounds-{uuid.uuid4().hex[:4]}"
    death = kill_a_worker_in_a_second_run(prefect_server, pool, folder, MIN_CRASH_AFTER.total_seconds())
    assert death.watch_exit == 0, (folder / "watch.log").read_text()
    # The worker's flow-run process died with it: nothing of the cut-off run could write a slot after it.
    assert death.orphans and death.alive_after_kill == [], "a flow-run process outlived its worker"

    _first, second = sorted(chain_runs([folder.name]), key=lambda run: run.created)
    with get_client(sync_client=True) as client:
        history = [(s.type.value, s.name) for s in client.read_flow_run_states(second.id)]
    assert ("CRASHED", "Crashed") in history and ("SCHEDULED", "Rescheduled") in history, history
    assert history[-1] == ("COMPLETED", "Completed")
    ran = round_executions(folder)
    assert [(node, n) for node, n, _ in ran] == [
        ("first", 1), ("slow", 1), ("third", 1), ("fourth", 1),
        ("first", 2), ("slow", 2), ("slow", 2), ("third", 2), ("fourth", 2)]
    # After the cut every node ran in the rescheduled run's process, none in the dead worker's.
    assert not {pid for _, _, pid in ran[6:]} & set(death.orphans)
    for node in ROUNDS_CHAIN:
        output = json.loads((folder / "slots" / f"{node}_output.json").read_text())
        assert output["data"] == {"n": 2}
        assert output["produced_from"] == content_hash((folder / "slots" / f"{node}_input.json").read_bytes())
