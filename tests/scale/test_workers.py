"""Chain runs on a Prefect work pool: `slotrelay watch --pool` requests them, two process workers run them.

On a Prefect server on PostgreSQL (the session's cluster): a burst of 200 agent output slots.
"""

from __future__ import annotations

import json
import uuid

import pytest

from deployments.pool import MIN_CRASH_AFTER
from harness.workers import (
    BURST_SOURCES,
    README_WATCH,
    README_WORKER,
    burst_chains,
    chain_runs,
    completed_tasks,
    pool_exists,
    start_watch,
    start_worker,
    stop,
    submitted_by,
    write_burst,
)
from slotrelay.chain.ledger import LEDGER_FILE_NAME
from slotrelay.chain.slots import read_slot
from tests.support.beyond_page import PAGE
from tests.support.waiting import API_POLL_SECONDS, wait_until


def completed(path) -> bool:
    document = read_slot(path)
    return bool(document) and document.get("status") == "completed"


# `slow`: 200 slots on PostgreSQL and two workers (a minute and a half of one worker). Each target running
# exactly once in a burst is tests/sensor/test_deployment_path.py's; runs on a pool's workers,
# tests/scale/test_dead_worker.py's; a chain into PostgreSQL, tests/scale/test_postgres_server.py's.
@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(1200)
def test_a_burst_across_three_chains_runs_each_target_once_on_two_workers(postgres_prefect_server, tmp_path):
    api = postgres_prefect_server
    pool = f"slotrelay-{uuid.uuid4().hex[:6]}"
    chains = burst_chains(tmp_path, "burst")
    chain_ids = list(chains)
    watch = start_watch(api, pool, list(chains.values()), tmp_path / "watch.log")
    workers = []
    try:
        wait_until(lambda: pool_exists(pool) or watch.poll() is not None, timeout=90,
                   what="watch to create the pool", interval=API_POLL_SECONDS)
        # Two runs at a time per worker: neither can take the whole burst in one poll.
        workers = [start_worker(api, pool, name, tmp_path / f"{name}.log", limit=2)
                   for name in ("worker-a", "worker-b")]
        wait_until(lambda: "watching" in (tmp_path / "watch.log").read_text() or watch.poll() is not None,
                   timeout=90, what="watch to start")
        assert watch.poll() is None, (tmp_path / "watch.log").read_text()
        wait_until(
            lambda: all(
                "started!" in (tmp_path / f"{name}.log").read_text() for name in ("worker-a", "worker-b")),
            timeout=120, what="both workers to start")

        outputs = write_burst(tmp_path, chain_ids)
        assert len(outputs) == 200
        wait_until(lambda: all(completed(p) for p in outputs), timeout=900, what="every target's output slot")
        wait_until(lambda: all(r.state is not None and r.state.is_final() for r in chain_runs(chain_ids)),
                   timeout=120, what="the flow runs to end", interval=API_POLL_SECONDS)
        # Task-run states reach the server as events, recorded a moment after the flow run ends.
        wait_until(
            lambda: sum(completed_tasks([r.id for r in chain_runs(chain_ids)]).values()) >= len(outputs),
            timeout=120, what="the task runs to be recorded", interval=API_POLL_SECONDS)
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
    assert tasks == {f"work-{i}": sum(i < n for n in BURST_SOURCES) for i in range(max(BURST_SOURCES))}, tasks
    started = []
    for chain_id, sources in zip(chain_ids, BURST_SOURCES, strict=True):
        ledger = [
            json.loads(line) for line in (tmp_path / chain_id / LEDGER_FILE_NAME).read_text().splitlines()]
        assert sorted(e["route_id"] for e in ledger if e["kind"] == "routed") == sorted(
            f"route-{i}" for i in range(sources))
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


@pytest.mark.parametrize(("options", "says"), [
    (["--crash-after", "120"], "--crash-after is the crash window of runs on a work pool: give --pool too"),
    (["--pool", "p", "--crash-after", "30"],
     f"--crash-after 30: at least {MIN_CRASH_AFTER.total_seconds():g} s (a heartbeat and a margin"),
    (["--pool", "p", "--crash-after", "nan"], "--crash-after nan: not a finite number of seconds"),
    (["--pool", "p", "--crash-after", "inf"], "--crash-after inf: not a finite number of seconds"),
    (["--pool", "p", "--crash-after", "86401"], "--crash-after 86401: at most 86400 s"),
])
def test_watch_refuses_a_crash_window_it_cannot_keep(options, says, tmp_path) -> None:
    from typer.testing import CliRunner

    from slotrelay.cli import app

    done = CliRunner().invoke(app, ["watch", *options, str(tmp_path / "node_chain.json")])
    assert done.exit_code == 2, done.output
    assert says in done.output.replace("\n", " ")
