"""Crash windows on a work pool: a dead worker loses nothing, and a live run on a busy machine is never
taken for a dead one (issue 34).

`slotrelay watch --pool` has set up Prefect's zombie detection (deployments/pool.py): a run sends a
heartbeat every 30 s, an automation marks it Crashed after `--crash-after` seconds of silence, another puts
it back to Scheduled, and another worker runs it again from its slots.

- Killed with its worker (`harness.workers.kill_a_worker_mid_chain`, which bench/workers_burst.py times):
  kill -9 a process worker and its flow-run process mid-chain; the run is crashed, rescheduled and finished
  by the other worker, and the node that completed before the kill is not run again.
- A second run whose worker dies (`harness.workers.kill_a_worker_in_a_second_run`): the worker alone is
  killed, in a second run of a chain after a completed first one; its flow-run process dies with it
  (flows/chain.py: `slotrelay.lifetime.die_with_parent`), and the run, crashed and rescheduled, runs every
  node after the cut for the new content (what a slot was made from decides,
  slotrelay/chain/provenance.py), none of the first run's outputs taken for done.
- A live run on a busy machine (`keep_a_run_alive_under_load`): one process worker runs a chain whose
  `slow` node waits for a file. While it waits, a process spins on one of the machine's cores
  (`harness.load.cpu_hogs`, the busy machine of `bench/chain_overhead.py`: another user's process on one
  core of two, beside whatever else loads it), and the run lives on through two windows: until the server
  has received three of its heartbeats (two gaps, each a chance for the crash automation; the first window
  has closed by the third). Then the node is released: the run completes, and no state in its history is
  Crashed.

Each scenario mostly waits on those windows, about a minute each, so the three run at once (the `scenarios`
fixture: a thread each, with its own pool, `watch`, workers and folder on the session's Prefect server),
their waits overlapping instead of following each other; the live run's CPU hog loads the two deaths as
well, a busy machine they survive too. All three have the default window, `CRASH_AFTER`: a server holds one
crash automation, which the last `watch --pool` to start sets for every pool's runs.
"""

from __future__ import annotations

import contextvars
import json
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from deployments.pool import CRASH_AFTER, HEARTBEAT_TAG, RESCHEDULE_MESSAGE, crash_message
from harness.chains import agent_writes
from harness.load import cpu_hogs
from harness.workers import (
    ROUNDS_CHAIN,
    chain_runs,
    completed_tasks,
    dying_chain,
    executions,
    kill_a_worker_in_a_second_run,
    kill_a_worker_mid_chain,
    pool_exists,
    round_executions,
    start_watch,
    start_worker,
    stop,
    submissions,
)
from slotrelay.chain.ledger import LEDGER_FILE_NAME
from slotrelay.chain.slots import content_hash
from tests.support.waiting import API_POLL_SECONDS, wait_until

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

# The first test's setup runs the three scenarios together: 103-185 s measured at load 4-10.
pytestmark = [pytest.mark.prefect_server, pytest.mark.timeout(900)]
WINDOW = CRASH_AFTER
HEARTBEATS = 3
# Three watches and their first workers starting at once were up within 60 s at load 8; a scenario
# still not up long after fails its own test, the others theirs (`before_chain`).
ALL_WATCHING_SECONDS = 420


@dataclass(frozen=True)
class Scenario:
    """One scenario of the `scenarios` fixture: its chain's folder, and what it returns or raises."""

    folder: Path
    outcome: Future[Any]


@pytest.fixture(scope="module")
def scenarios(prefect_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scenario]:
    """The three scenarios run at once, by name, once all have ended: nothing of them runs on beside the
    tests that come after (a `watch --pool` with another window changes the server's crash automation)."""
    all_watching = threading.Barrier(3, timeout=ALL_WATCHING_SECONDS)

    def before_chain() -> None:
        # No chain runs until every watch is up: the three waits start together and overlap.
        try:
            all_watching.wait()
        except threading.BrokenBarrierError:
            raise RuntimeError("another scenario failed before its chain started (its test says why)") \
                from None

    def together(scenario: Callable[..., Any], *args: object) -> Any:
        try:
            return scenario(*args, before_chain=before_chain)
        except BaseException:
            all_watching.abort()
            raise

    window = WINDOW.total_seconds()
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="crash-window") as threads:

        def start(name: str, scenario: Callable[..., Any], *rest: object) -> Scenario:
            """Start `scenario` on its own pool and in a folder of its own (named `name-xxxx`)."""
            folder = tmp_path_factory.mktemp(name) / f"{name}-{uuid.uuid4().hex[:4]}"
            pool = f"{name}-{uuid.uuid4().hex[:6]}"
            # A copy of this context: the session's `temporary_settings` (the API's address) hold there.
            context = contextvars.copy_context()
            return Scenario(folder, threads.submit(context.run, together, scenario, prefect_server, pool,
                                                   folder, *rest))

        return {"killed": start("dying", kill_a_worker_mid_chain, window),
                "second": start("rounds", kill_a_worker_in_a_second_run, window),
                "live": start("live", keep_a_run_alive_under_load)}


def others(scenarios: dict[str, Scenario], name: str) -> list[str]:
    """The chain ids of the scenarios other than `name` (each chain's id is its folder's name)."""
    return [scenario.folder.name for other, scenario in scenarios.items() if other != name]


def heartbeats(client: SyncPrefectClient, flow_run_id) -> int:
    """How many heartbeats of the run the server has received."""
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    return client.read_events(filter=EventFilter(
        event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
        resource=EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"])), limit=1).total


def keep_a_run_alive_under_load(api_url: str, pool: str, folder: Path, *,
                                before_chain: Callable[[], object]) -> list[str]:
    """The live-run scenario on `dying_chain(folder)` with watch's default window (logs beside the
    folder); the state types of the run's history."""
    from prefect.client.orchestration import get_client

    chain = dying_chain(folder, folder.name)
    watch_log, worker_log = folder.parent / "watch.log", folder.parent / "worker.log"
    watch = start_watch(api_url, pool, [chain], watch_log)
    worker = None
    try:
        wait_until(lambda: pool_exists(pool) or watch.poll() is not None, timeout=120,
                   what="watch to create the pool", interval=API_POLL_SECONDS)
        worker = start_worker(api_url, pool, "live", worker_log, limit=1)
        wait_until(lambda: "watching" in watch_log.read_text() or watch.poll() is not None, timeout=120,
                   what="watch to start")
        assert watch.poll() is None, watch_log.read_text()
        wait_until(lambda: "started!" in worker_log.read_text(), timeout=120, what="the worker to start")
        before_chain()
        agent_writes(folder, "src", {"n": 1})
        wait_until(lambda: [n for n, _ in executions(folder)] == ["first", "slow"], timeout=180,
                   what="slow to run")
        # Two gaps between heartbeats: about 60 s of a live run under load, asked through one client at the
        # API's pace (a new client every 0.2 s cost this process about 3.5 CPU-s more over the wait).
        with cpu_hogs(), get_client(sync_client=True) as client:
            [run] = chain_runs([folder.name])
            wait_until(lambda: heartbeats(client, run.id) >= HEARTBEATS,
                       timeout=HEARTBEATS * WINDOW.total_seconds() + 120,
                       what=f"{HEARTBEATS} heartbeats of the live run", interval=API_POLL_SECONDS)
        (folder / "release").touch()
        wait_until(lambda: chain_runs([folder.name])[0].state.is_final(), timeout=240, what="the run to end",
                   interval=API_POLL_SECONDS)
        with get_client(sync_client=True) as client:
            return [s.type.value for s in client.read_flow_run_states(run.id)]
    finally:
        if worker is not None:
            stop(worker)
        stop(watch)


def test_a_run_whose_worker_is_killed_is_crashed_rescheduled_and_finished_by_the_other(scenarios):
    from prefect.client.orchestration import get_client

    folder = scenarios["killed"].folder
    death = scenarios["killed"].outcome.result()
    assert death.watch_exit == 0, (folder / "watch.log").read_text()
    chain_id = folder.name

    [run] = chain_runs([chain_id])
    assert HEARTBEAT_TAG in run.tags
    with get_client(sync_client=True) as client:
        states = client.read_flow_run_states(run.id)
    history = [(s.type.value, s.name, s.message) for s in states]
    timeline = [(s.name, s.timestamp.isoformat(timespec="milliseconds")) for s in states]
    # Prefect marked it crashed (no heartbeat), the automation rescheduled it, and it ran to the end.
    # Prefect's automations act at least once: the one silence may be marked Crashed twice, and each
    # Crashed rescheduled (deployments/pool.py).
    crash = ("CRASHED", "Crashed", crash_message(WINDOW))
    reschedule = ("SCHEDULED", "Rescheduled", RESCHEDULE_MESSAGE)
    crashed = history.index(crash)
    rescheduled = max(i for i, state in enumerate(history) if state == reschedule)
    assert set(history[crashed:rescheduled + 1]) == {crash, reschedule}, (history, timeline)
    # The same steps as its first start: a worker takes it (Pending, Submitting), it runs, it completes.
    after = [name for _, name, _ in history[rescheduled + 1:]]
    assert after == ["Pending", "Submitting", "Running", "Completed"], (history, timeline)
    assert [worker for _, worker in submissions([run.id])] == ["worker-a", "worker-b"]

    # `first` completed before the kill and did not run again; `slow`, cut off, ran again and completed.
    ran = executions(folder)
    assert [n for n, _ in ran] == ["first", "slow", "slow"], ran
    assert {pid for _, pid in ran[:2]} <= set(death.killed) and ran[2][1] not in death.killed
    # Task-run states reach the server as events, recorded a moment after the flow run ends.
    wait_until(lambda: completed_tasks([run.id])["slow"] >= 1, timeout=120,
               what="slow's task run to be recorded", interval=API_POLL_SECONDS)
    assert completed_tasks([run.id]) == {"first": 1, "slow": 1}
    assert json.loads((folder / "slots" / "slow_output.json").read_text())["data"] == {"done": {"n": 7}}
    ledger = [json.loads(line) for line in (folder / LEDGER_FILE_NAME).read_text().splitlines()]
    assert [e["flow_run_id"] for e in ledger if e["kind"] == "started"] == [str(run.id)]


def test_a_second_run_whose_worker_dies_runs_every_node_after_the_cut_for_the_new_content(scenarios):
    from prefect.client.orchestration import get_client

    folder = scenarios["second"].folder
    death = scenarios["second"].outcome.result()
    assert death.watch_exit == 0, (folder / "watch.log").read_text()
    # The worker's flow-run process died with it: nothing of the cut-off run could write a slot after it.
    assert death.orphans and death.alive_after_kill == [], "a flow-run process outlived its worker"

    _first, second = sorted(chain_runs([folder.name]), key=lambda run: run.created)
    with get_client(sync_client=True) as client:
        history = [(s.type.value, s.name) for s in client.read_flow_run_states(second.id)]
    assert ("CRASHED", "Crashed") in history and ("SCHEDULED", "Rescheduled") in history, history
    assert history[-1] == ("COMPLETED", "Completed")
    # Its watch reported its own run's crash, once (a silence marked Crashed twice too), and no other
    # pool's (the killed scenario's run crashed too).
    watch_log = (folder / "watch.log").read_text()
    assert watch_log.count("crashed on the work pool") == 1, watch_log
    assert not any(other in watch_log for other in others(scenarios, "second")), watch_log
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


def test_a_live_run_on_a_busy_machine_outlives_the_crash_window(scenarios) -> None:
    live = scenarios["live"]
    history = live.outcome.result()
    assert "CRASHED" not in history, history
    assert history[-1] == "COMPLETED", history
    assert [n for n, _ in executions(live.folder)] == ["first", "slow"]
    # The other scenarios' runs crashed on the same server, on other pools: not this watch's to report.
    watch_log = (live.folder.parent / "watch.log").read_text()
    assert "crashed on the work pool" not in watch_log, watch_log
    assert not any(other in watch_log for other in others(scenarios, "live")), watch_log
