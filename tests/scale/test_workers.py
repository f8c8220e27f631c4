"""Chain runs on a Prefect work pool: `slotrelay watch --pool` requests them, two process workers run them.

On the session's Prefect server (SQLite; tests/scale/test_postgres_server.py covers PostgreSQL).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from slotrelay.ledger import LEDGER_FILE_NAME
from slotrelay.slots import read_slot
from tests.scale.test_readme_beyond import PAGE
from tests.scale.workers import (
    README_WATCH,
    README_WORKER,
    chain_runs,
    completed_tasks,
    start_watch,
    start_worker,
    stop,
    submitted_by,
    wait_for,
)
from tests.sensor.chains import agent_writes, make_chain

pytestmark = pytest.mark.prefect_server

CHAINS = 3
SOURCES = 15  # per chain: 45 agent output slots in one burst
WAVE_SECONDS = 0.3  # between the waves of agent writes; the sensor's window is 0.1 s


def completed(path) -> bool:
    document = read_slot(path)
    return bool(document) and document.get("status") == "completed"


def test_a_burst_across_three_chains_runs_each_target_once_on_two_workers(prefect_server, tmp_path):
    pool = f"slotrelay-{uuid.uuid4().hex[:6]}"
    chain_ids = [f"burst-{i}" for i in range(CHAINS)]
    chains = [make_chain(tmp_path / chain_id, chain_id, SOURCES) for chain_id in chain_ids]
    watch = start_watch(prefect_server, pool, chains, tmp_path / "watch.log")
    workers = []
    try:
        wait_for(lambda: "watching" in (tmp_path / "watch.log").read_text() or watch.poll() is not None, 90,
                 "watch to start")
        assert watch.poll() is None, (tmp_path / "watch.log").read_text()
        # Two runs at a time per worker: neither can take the whole burst in one poll.
        workers = [start_worker(prefect_server, pool, name, tmp_path / f"{name}.log", limit=2)
                   for name in ("worker-a", "worker-b")]
        wait_for(
            lambda: all(
                "started!" in (tmp_path / f"{name}.log").read_text() for name in ("worker-a", "worker-b")),
            120, "both workers to start")

        # Agents finishing one after another, a little slower than the sensor's window, so the burst
        # becomes many runs (writes within one window share a run).
        for i in range(SOURCES):
            for chain_id in chain_ids:
                agent_writes(tmp_path / chain_id, f"src-{i}", {"n": i, "chain": chain_id})
            time.sleep(WAVE_SECONDS)
        outputs = [
            tmp_path / c / "slots" / f"work-{i}_output.json" for c in chain_ids for i in range(SOURCES)]
        wait_for(lambda: all(completed(p) for p in outputs), 300, "every target's output slot")
        wait_for(lambda: all(r.state is not None and r.state.is_final() for r in chain_runs(chain_ids)), 120,
                 "the flow runs to end")
    finally:
        for worker in workers:
            stop(worker)
        code = stop(watch)
    assert code == 0, (tmp_path / "watch.log").read_text()

    for chain_id in chain_ids:
        data = read_slot(tmp_path / chain_id / "slots" / "work-3_output.json")["data"]
        assert data == {"seen": {"n": 3, "chain": chain_id}, "stamped": True}
    runs = chain_runs(chain_ids)
    assert {r.state.type.value for r in runs} == {"COMPLETED"}
    # Requested on the pool, resuming from the slots.
    assert all(r.parameters["resume"] is True for r in runs)
    assert {r.work_pool_name for r in runs} == {pool}

    # Every target ran exactly once, as a task run, across all the flow runs.
    tasks = completed_tasks([r.id for r in runs])
    assert tasks == {f"work-{i}": CHAINS for i in range(SOURCES)}, tasks
    started = []
    for chain_id in chain_ids:
        ledger = [
            json.loads(line) for line in (tmp_path / chain_id / LEDGER_FILE_NAME).read_text().splitlines()]
        assert sorted(e["route_id"] for e in ledger if e["kind"] == "routed") == sorted(
            f"route-{i}" for i in range(SOURCES))
        started += [e["flow_run_id"] for e in ledger if e["kind"] == "started"]
    assert sorted(started) == sorted(str(r.id) for r in runs)

    # Both workers took runs (each run's logs name the worker that submitted it).
    by_worker = submitted_by([r.id for r in runs])
    assert set(by_worker) == {str(r.id) for r in runs}
    assert set(by_worker.values()) == {"worker-a", "worker-b"}, by_worker


def test_the_docs_show_the_commands_this_test_runs() -> None:
    shown = PAGE.read_text()
    for command in (README_WATCH.format(pool="slotrelay"), README_WORKER.format(pool="slotrelay", limit=2)):
        assert f"\n{command}" in shown, command
