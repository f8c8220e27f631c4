"""A dead worker loses nothing: kill -9 a process worker (and its flow-run process) mid-chain.

`slotrelay watch --pool` has set up Prefect's zombie detection (deployments/pool.py): the run stops
sending heartbeats, an automation marks it Crashed, another puts it back to Scheduled, and the
other worker runs it again from its slots: the node that completed before the kill is not run again.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from deployments.pool import CRASH_MESSAGE, HEARTBEAT_TAG, RESCHEDULE_MESSAGE
from slotrelay.ledger import LEDGER_FILE_NAME
from tests.scale.workers import (
    chain_runs,
    completed_tasks,
    kill_tree,
    start_watch,
    start_worker,
    stop,
    submissions,
    wait_for,
)
from tests.sensor.chains import agent_writes

pytestmark = pytest.mark.prefect_server

# Each node notes its run in executions.log; `slow` then waits for the test's `release` file, so the
# worker can be killed while it runs.
NODES_MODULE = '''
import os
import time
from pathlib import Path

HERE = Path(__file__).parent


def _note(node):
    with open(HERE / "executions.log", "a") as log:
        log.write(f"{node} {os.getpid()}\\n")


def first(data):
    _note("first")
    return {"seen": data}


def slow(data):
    _note("slow")
    while not (HERE / "release").exists():
        time.sleep(0.1)
    return {"done": data["seen"]}
'''


def dying_chain(folder: Path, chain_id: str) -> Path:
    """src (an agent) -> first -> slow, all python but src."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dying_nodes.py").write_text(NODES_MODULE)
    chain = {
        "chain_id": chain_id,
        "nodes": [
            {"node_id": "src", "output_slot": {"slot_id": "src", "path": "slots/src_output.json"},
             "capabilities": ["Write"], "executor": {"kind": "external"}},
            {"node_id": "first", "input_slot": {"slot_id": "first-in", "path": "slots/first_input.json"},
             "output_slot": {"slot_id": "first", "path": "slots/first_output.json"},
             "executor": {"kind": "python", "callable": "dying_nodes:first"}},
            {"node_id": "slow", "input_slot": {"slot_id": "slow-in", "path": "slots/slow_input.json"},
             "output_slot": {"slot_id": "slow", "path": "slots/slow_output.json"},
             "executor": {"kind": "python", "callable": "dying_nodes:slow"}},
        ],
        "routes": [{"route_id": "src-first", "from_node": "src", "to_node": "first"},
                   {"route_id": "first-slow", "from_node": "first", "to_node": "slow"}],
    }
    path = folder / "node_chain.json"
    path.write_text(json.dumps(chain, indent=1))
    return path


def executions(folder: Path) -> list[tuple[str, int]]:
    log = folder / "executions.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [(node, int(pid)) for node, pid in (line.split() for line in lines)]


def test_a_run_whose_worker_is_killed_is_crashed_rescheduled_and_finished_by_the_other(
    prefect_server, tmp_path
):
    from prefect.client.orchestration import get_client

    pool = f"slotrelay-{uuid.uuid4().hex[:6]}"
    chain_id = f"dying-{uuid.uuid4().hex[:4]}"
    folder = tmp_path / chain_id
    chain = dying_chain(folder, chain_id)
    watch = start_watch(prefect_server, pool, [chain], tmp_path / "watch.log")
    workers = {}
    try:
        wait_for(lambda: "watching" in (tmp_path / "watch.log").read_text() or watch.poll() is not None, 90,
                 "watch to start")
        assert watch.poll() is None, (tmp_path / "watch.log").read_text()
        workers["worker-a"] = start_worker(prefect_server, pool, "worker-a", tmp_path / "a.log", limit=2)
        wait_for(lambda: "started!" in (tmp_path / "a.log").read_text(), 120, "worker-a to start")

        agent_writes(folder, "src", {"n": 7})
        wait_for(lambda: [n for n, _ in executions(folder)] == ["first", "slow"], 180, "worker-a to run slow")
        # The other worker starts once worker-a holds the run, so the run cannot have gone to it first.
        workers["worker-b"] = start_worker(prefect_server, pool, "worker-b", tmp_path / "b.log", limit=2)
        wait_for(lambda: "started!" in (tmp_path / "b.log").read_text(), 120, "worker-b to start")

        killed = kill_tree(workers.pop("worker-a"))
        died = time.monotonic()
        (folder / "release").touch()
        assert {pid for _, pid in executions(folder)} <= set(killed)

        wait_for(lambda: any(r.state is not None and r.state.is_completed() for r in chain_runs([chain_id])),
                 600, "the run to complete on worker-b")
        print(f"\nworker death -> run completed elsewhere: {time.monotonic() - died:.1f} s")
    finally:
        for worker in workers.values():
            stop(worker)
        code = stop(watch)
    assert code == 0, (tmp_path / "watch.log").read_text()

    [run] = chain_runs([chain_id])
    assert HEARTBEAT_TAG in run.tags
    with get_client(sync_client=True) as client:
        history = [(s.type.value, s.name, s.message) for s in client.read_flow_run_states(run.id)]
    # Prefect marked it crashed (no heartbeat), the automation rescheduled it, and it ran to the end.
    crashed = history.index(("CRASHED", "Crashed", CRASH_MESSAGE))
    assert history[crashed + 1] == ("SCHEDULED", "Rescheduled", RESCHEDULE_MESSAGE), history
    # The same steps as its first start: a worker takes it (Pending, Submitting), it runs, it completes.
    after = [name for _, name, _ in history[crashed + 2:]]
    assert after == ["Pending", "Submitting", "Running", "Completed"], history
    assert [worker for _, worker in submissions([run.id])] == ["worker-a", "worker-b"]

    # `first` completed before the kill and did not run again; `slow`, cut off, ran again and completed.
    ran = executions(folder)
    assert [n for n, _ in ran] == ["first", "slow", "slow"], ran
    assert ran[2][1] not in killed
    assert completed_tasks([run.id]) == {"first": 1, "slow": 1}
    assert json.loads((folder / "slots" / "slow_output.json").read_text())["data"] == {"done": {"n": 7}}
    ledger = [json.loads(line) for line in (folder / LEDGER_FILE_NAME).read_text().splitlines()]
    assert [e["flow_run_id"] for e in ledger if e["kind"] == "started"] == [str(run.id)]
