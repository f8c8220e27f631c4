"""Warm processes on the session's real Prefect server: a routed run starts in one, exactly once, as a
normal flow run; so does a run asked for through the API (as the UI asks), found by the runner's poll, and
a run resumed after a decision; a warm process killed mid-run leaves its run Crashed and is replaced; a run
cancelled as the UI cancels it ends Cancelled and its process with it; stopping `watch` with a warm run in
flight cancels it and leaves a successor, as for the runner's runs, which the next `watch` runs warm. The
first test checks the runner's side of the hand-off alone. The tests taking the `watch` fixture share one
`watch` (each writes its own sources and reads back only its own runs, so they run in any order); the others
start a `watch` of their own, on a chain of their own."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from deployments import prefect_compat
from harness.chains import agent_writes, asking_chains, make_chain
from slotrelay.chain.slots import input_slot_document, read_slot, write_slot
from tests.support.processes import log_text
from tests.support.slotrelay_up import migrated_home
from tests.support.waiting import API_POLL_SECONDS, wait_until, wait_until_async

pytestmark = pytest.mark.prefect_server

ROOT = Path(__file__).resolve().parents[2]
# The node records where it ran (a warm process is named by its pool), then naps as long as it is told, or
# until its flow run is torn down: a cancel or a stop ends the engine's task runner, which sets the cancel
# event it keeps for each task run, then waits for the node's thread. A node that napped on regardless held
# its process past that SIGTERM until Prefect's SIGKILL, 30 s later (as it would Prefect's own child): each
# test that cancels a run waited those 30 s. The run is in flight all the same when it is cancelled.
NOTE_MODULE = '''
import json, multiprocessing, os, pathlib

from prefect.context import FlowRunContext, TaskRunContext

def note(data):
    with (pathlib.Path(__file__).parent / "attempts.jsonl").open("a") as attempts:
        attempts.write(json.dumps({"source": data.get("source"), "pid": os.getpid(),
                                   "process": multiprocessing.current_process().name}) + "\\n")
    torn_down = FlowRunContext.get().task_runner._cancel_events[TaskRunContext.get().task_run.id]
    torn_down.wait(data.get("nap", 0))
    return {"noted": True}
'''
# A source per hop, none written by two tests: work-0..1 (runs once), 2..3 (killed), 4 (cancelled), 5 (asked
# for through the API), and on the stopped `watch`'s own chain, 0.
SOURCES = 6


def noting_chain(folder: Path, chain_id: str) -> Path:
    """A chain of `SOURCES` hops whose nodes note where they ran (`NOTE_MODULE`)."""
    chain = make_chain(folder, chain_id, SOURCES)
    (folder / "warm_work.py").write_text(NOTE_MODULE)
    document = json.loads(chain.read_text())
    for node in document["nodes"]:
        if node["executor"]["kind"] == "python":
            node["executor"]["callable"] = "warm_work:note"
    chain.write_text(json.dumps(document))
    return chain


def attempts_of(folder: Path, source: int) -> list[dict]:
    """Where the node of hop `source` ran, once per attempt."""
    path = folder / "attempts.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [a for a in map(json.loads, lines) if a["source"] == source]


class Watch:
    """`slotrelay watch --warm 1` on one chain whose nodes note where they ran (its deployment is named
    after the chain)."""

    def __init__(self, folder: Path, api_url: str | None, chain_id: str = "warm", cwd: Path = ROOT) -> None:
        """`api_url` None: none in the environment; `watch` finds the server of `cwd`'s home."""
        self.folder = folder
        self.chain_id = chain_id
        self.chain = noting_chain(folder, chain_id)
        self.log = folder / "watch.log"
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "slotrelay.cli", "watch", str(self.chain), "--warm", "1"],
                cwd=cwd, env={**env, **({"PREFECT_API_URL": api_url} if api_url else {}), "COLUMNS": "250"},
                stdout=out, stderr=subprocess.STDOUT)

    def wait_until_warm(self) -> None:
        """Until a warm process is idle: one more has said ready than have been handed a run."""

        def idle() -> bool:
            text = self.log.read_text()
            return len(re.findall(r"warm process \d+ ready", text)) > text.count("runs in warm process")

        wait_until(idle, timeout=120, what="an idle warm process", details=lambda: log_text(self.log))

    def started(self) -> list[str]:
        """The flow runs the sensor has started, in order (from its ledger)."""
        ledger = self.folder / ".slotrelay-routing-ledger.jsonl"
        lines = ledger.read_text().splitlines() if ledger.exists() else []
        return [e["flow_run_id"] for e in map(json.loads, lines) if e["kind"] == "started"]

    def hop(self, source: int, nap: float = 0) -> str:
        """An agent writes src-i (with how long its node should nap); returns the flow run it started."""
        self.wait_until_warm()
        before = len(self.started())
        agent_writes(self.folder, f"src-{source}", {"source": source, "nap": nap})
        wait_until(lambda: len(self.started()) > before, timeout=60,
                   what=f"the run of work-{source} to be requested", details=lambda: log_text(self.log))
        return self.started()[-1]

    def attempts(self, source: int) -> list[dict]:
        return attempts_of(self.folder, source)

    def runs(self) -> list:
        """The flow runs of the chain's deployment on the API."""
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

        with get_client(sync_client=True) as client:
            return client.read_flow_runs(
                deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[self.chain_id])))

    def stop(self, how: signal.Signals = signal.SIGINT) -> None:
        if self.process.poll() is None:
            self.process.send_signal(how)
        assert self.process.wait(timeout=120) == 0, self.log.read_text()


@contextmanager
def watching(folder: Path, api_url: str | None, chain_id: str = "warm", cwd: Path = ROOT) -> Iterator[Watch]:
    """A started `Watch`, stopped on the way out."""
    started = Watch(folder, api_url, chain_id, cwd)
    try:
        wait_until(lambda: "watching" in started.log.read_text() or started.process.poll() is not None,
                   timeout=90, what="watch to start", details=lambda: log_text(started.log))
        assert started.process.poll() is None, started.log.read_text()
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def watch(prefect_server, tmp_path_factory):
    with watching(tmp_path_factory.mktemp("warm"), prefect_server) as started:
        yield started


def run_of(flow_run_id: str):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id), client.read_flow_run_states(flow_run_id)


def final(flow_run_id: str) -> bool:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(flow_run_id).state
    return state is not None and state.is_final()


def test_the_runners_poll_leaves_a_run_reserved_for_a_warm_process_alone(prefect_server, tmp_path):
    """The race behind these tests' flakes under load, made deterministic: the run exists (Scheduled) from its
    creation, before the pool can claim it. The served runner's poll must leave it alone while it is
    reserved, however late the hand-off (a loaded machine), and find it once the pool gives it up."""
    import asyncio

    from prefect.client.orchestration import get_client

    from deployments.serve import _runner, chain_deployment
    from slotrelay.chain import load_chain

    deployment = chain_deployment(load_chain(make_chain(tmp_path, "reserved", 1)))
    key = "slotrelay-reserved-1"
    reserved = {key}

    class Pool:
        """What the runner asks of the WarmPool: which of the runs its poll found it may start."""

        def leave_to_runner(self, runs):
            return [run for run in runs if run.idempotency_key not in reserved]

    async def poll() -> None:
        runner = _runner(1.0, Pool(), asyncio.Event())
        await runner.aadd_deployment(deployment)
        async with runner, get_client() as client:
            [deployment_id] = runner._deployment_registry.get_deployment_ids()
            run = await client.create_flow_run_from_deployment(deployment_id, idempotency_key=key)
            try:
                for _ in range(3):  # polls that would have claimed it and started a process
                    await runner._get_and_submit_flow_runs()
                    await asyncio.sleep(0.2)
                assert (await client.read_flow_run(run.id)).state.is_scheduled()
                reserved.clear()  # given up (no claim): the runner's again
                found = await prefect_compat.scheduled_runs(runner)
                assert [r.id for r in found] == [run.id]
            finally:
                await client.delete_flow_run(run.id)

    asyncio.run(poll())


def test_a_routed_run_runs_once_in_a_warm_process_as_a_normal_flow_run(watch):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    before = {str(r.id) for r in watch.runs()}
    flow_run_id = watch.hop(0)
    wait_until(lambda: final(flow_run_id), timeout=120, what="the run to end", interval=API_POLL_SECONDS,
               details=lambda: log_text(watch.log))
    run, states = run_of(flow_run_id)
    assert run.state.is_completed(), run.state
    assert [s.name for s in states] == ["Scheduled", "Pending", "Submitting", "Running", "Completed"]
    assert read_slot(watch.folder / "slots" / "work-0_output.json")["status"] == "completed"
    [attempt] = watch.attempts(0)
    assert attempt["process"] == "slotrelay-warm"
    assert f"flow run {flow_run_id} runs in warm process {attempt['pid']}" in watch.log.read_text()
    # One flow run for the write, the one the sensor created, and its logs are on the API.
    assert [str(r.id) for r in watch.runs() if str(r.id) not in before] == [flow_run_id]
    with get_client(sync_client=True) as client:
        wait_until(lambda: any("ended COMPLETED" in entry.message for entry in client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])))), timeout=60,
                   what="the run's logs", interval=API_POLL_SECONDS, details=lambda: log_text(watch.log))
    # One run per process: the next hop runs in the replacement.
    second = watch.hop(1)
    wait_until(lambda: final(second), timeout=120, what="the second run to end", interval=API_POLL_SECONDS,
               details=lambda: log_text(watch.log))
    assert run_of(second)[0].state.is_completed()
    [again] = watch.attempts(1)
    assert again["process"] == "slotrelay-warm" and again["pid"] != attempt["pid"]


def test_a_warm_run_goes_to_the_server_watch_found_in_its_folder(prefect_server, tmp_path):
    """`watch` in a folder whose server `slotrelay run` left, with no PREFECT_API_URL anywhere: its API
    address is in its settings only (deployments.server.require_api). A warm process is forked from a fork
    server that imported Prefect under the watcher's environment, which has no address; the run must still
    go to that folder's server, not to an API of the warm process's own making."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from deployments.server import HOME_FOLDER, start_server
    from harness.ports import free_port

    server = start_server(port=free_port(), home=migrated_home(tmp_path / HOME_FOLDER), ready_timeout=240)
    try:
        with watching(tmp_path / "chain", None, "warm-home", cwd=tmp_path) as watch, temporary_settings(
                updates={PREFECT_API_URL: server.api_url}):
            assert f"1 chain(s) on {server.api_url}" in watch.log.read_text(), watch.log.read_text()
            flow_run_id = watch.hop(0)
            wait_until(lambda: final(flow_run_id), timeout=120, what="the run to end",
                       interval=API_POLL_SECONDS, details=lambda: log_text(watch.log))
            with get_client(sync_client=True) as client:
                state = client.read_flow_run(flow_run_id).state
            assert state is not None and state.is_completed(), (state, watch.log.read_text())
            [attempt] = watch.attempts(0)
            assert attempt["process"] == "slotrelay-warm"
    finally:
        server.stop()


def test_a_run_asked_for_through_the_api_runs_in_an_idle_warm_process(watch):
    """A run the sensor did not create (a Quick or Custom run from the UI, a successor a stopped `watch`
    left, a run resumed after a pause) is found by the runner's poll; with a warm process idle, it runs
    there, claimed and run as the sensor's runs are, not in a new `python -m prefect.engine`."""
    from prefect.client.orchestration import get_client

    watch.wait_until_warm()
    # What the route into work-5 writes; the run is then asked for as the UI asks, not by the sensor.
    write_slot(watch.folder / "slots" / "work-5_input.json",
               input_slot_document(from_node="src-5", route_id="route-5", data={"source": 5}))
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(f"chain/{watch.chain_id}")
        flow_run_id = str(client.create_flow_run_from_deployment(
            deployment.id, parameters={"start_nodes": ["work-5"]}).id)
    wait_until(lambda: final(flow_run_id), timeout=120, what="the run to end", interval=API_POLL_SECONDS,
               details=lambda: log_text(watch.log))
    run, states = run_of(flow_run_id)
    assert run.state.is_completed(), run.state
    assert [s.name for s in states] == ["Scheduled", "Pending", "Submitting", "Running", "Completed"]
    [attempt] = watch.attempts(5)
    assert attempt["process"] == "slotrelay-warm", attempt
    assert f"flow run {flow_run_id} runs in warm process {attempt['pid']}" in watch.log.read_text()


def test_a_run_resumed_after_a_decision_starts_again_in_a_warm_process(prefect_server, tmp_path):
    """A deployment run that needs a person's decision is suspended (its warm process ends with it); the
    decision puts it back to Scheduled ("Resuming"), the runner's poll finds it, and it starts again in the
    replacement warm process, not in a new `python -m prefect.engine`."""
    from prefect.client.orchestration import get_client

    waits, _ = asking_chains(tmp_path / "chains")
    log = tmp_path / "watch.log"
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "COLUMNS": "250"}
    with log.open("w") as out:
        watching = subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "watch", "--warm", "1", str(waits)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    def ready() -> int:
        return len(re.findall(r"warm process \d+ ready", log.read_text()))

    try:
        wait_until(lambda: ready() or watching.poll() is not None, timeout=120, what="an idle warm process",
                   details=lambda: log_text(log))
        assert watching.poll() is None, log.read_text()
        with get_client(sync_client=True) as client:
            # Its own slots root: the sensor, which watches the chain's folder, does not route its writes.
            run = client.create_flow_run_from_deployment(
                client.read_deployment_by_name("chain/waits").id,
                parameters={"slots_root": str(tmp_path / "run"), "stop_at_external": False})
            wait_until(lambda: client.read_flow_run(run.id).state.name == "Suspended", timeout=120,
                       what="the run to be suspended for a decision", interval=API_POLL_SECONDS,
                       details=lambda: log_text(log))
            assert f"flow run {run.id} runs in warm process" in log.read_text(), log.read_text()
            wait_until(lambda: ready() == 2, timeout=120, what="the replacement warm process",
                       details=lambda: log_text(log))
            [alert_file] = sorted((tmp_path / "run" / "alerts").glob("alert-*.json"))
            decided = subprocess.run(
                [sys.executable, "-m", "slotrelay.cli", "decide", str(alert_file), "continue", "--data",
                 '{"answer": 42}'],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
            assert decided.returncode == 0, decided.stderr
            wait_until(lambda: final(str(run.id)), timeout=180, what="the decided run to end",
                       interval=API_POLL_SECONDS, details=lambda: log_text(log))
            assert client.read_flow_run(run.id).state.is_completed(), client.read_flow_run(run.id).state
    finally:
        watching.send_signal(signal.SIGINT)
        code = watching.wait(timeout=90)
    assert code == 0, log.read_text()
    started = re.findall(rf"flow run {run.id} runs in warm process (\d+)", log.read_text())
    assert len(started) == 2 and started[0] != started[1], log.read_text()
    after = read_slot(tmp_path / "run" / "slots" / "after_output.json")
    assert after["data"] == {"after": {"answer": 42}}


def test_a_warm_process_killed_mid_run_leaves_its_run_crashed_and_is_replaced(watch):
    flow_run_id = watch.hop(2, nap=600)
    wait_until(lambda: bool(watch.attempts(2)), timeout=120, what="the node to start",
               details=lambda: log_text(watch.log))
    [attempt] = watch.attempts(2)
    os.kill(attempt["pid"], signal.SIGKILL)
    wait_until(lambda: final(flow_run_id), timeout=120, what="the run to end", interval=API_POLL_SECONDS,
               details=lambda: log_text(watch.log))
    run, _ = run_of(flow_run_id)
    assert run.state.is_crashed(), run.state
    assert "-9" in (run.state.message or ""), run.state.message
    # The next write runs in a new warm process.
    following = watch.hop(3)
    wait_until(lambda: final(following), timeout=120, what="the next run to end", interval=API_POLL_SECONDS,
               details=lambda: log_text(watch.log))
    assert run_of(following)[0].state.is_completed()
    [replacement] = watch.attempts(3)
    assert replacement["process"] == "slotrelay-warm" and replacement["pid"] != attempt["pid"]


def test_cancelling_a_run_in_a_warm_process_stops_it(watch, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelling

    flow_run_id = watch.hop(4, nap=600)
    wait_until(lambda: bool(watch.attempts(4)), timeout=120, what="the node to start",
               details=lambda: log_text(watch.log))
    [attempt] = watch.attempts(4)
    pid = attempt["pid"]
    with get_client(sync_client=True) as client:
        # What the UI's Cancel does.
        client.set_flow_run_state(flow_run_id, Cancelling(), force=True)
    wait_until(lambda: final(flow_run_id), timeout=120, what="the run to end", interval=API_POLL_SECONDS,
               details=lambda: log_text(watch.log))
    run, _ = run_of(flow_run_id)
    assert run.state.is_cancelled(), run.state
    wait_until(lambda: not psutil.pid_exists(pid), timeout=30, what="the warm process to end",
               details=lambda: log_text(watch.log))


def test_stopping_watch_cancels_a_warm_run_in_flight_and_its_successor_runs_warm_in_the_next(prefect_server,
                                                                                             tmp_path):
    """The successor is found by the next `watch`'s first poll, while its warm process is still importing: it
    waits for that process instead of starting a new one."""
    # A `watch` of its own (the one this test stops), on a chain of its own: the successor it leaves is
    # never run by the shared `watch`.
    with watching(tmp_path / "stopped", prefect_server, "warm-stopped") as watch:
        flow_run_id = watch.hop(0, nap=600)
        wait_until(lambda: bool(watch.attempts(0)), timeout=120, what="the node to start",
                   details=lambda: log_text(watch.log))
        [attempt] = watch.attempts(0)
        assert attempt["process"] == "slotrelay-warm"
        watch.stop(signal.SIGTERM)
    run, _ = run_of(flow_run_id)
    assert run.state.is_cancelled(), run.state
    [successor] = [r for r in watch.runs() if r.state.is_scheduled()]
    assert successor.parameters == {**run.parameters, "resume": True}
    # (Its node was not cut off: the cancel ended its nap and it completed, so the successor has nothing left
    # to run but the flow run itself.)
    with watching(tmp_path / "stopped", prefect_server, "warm-stopped") as again:
        wait_until(lambda: final(str(successor.id)), timeout=120, what="the successor to end",
                   interval=API_POLL_SECONDS, details=lambda: log_text(again.log))
        assert run_of(str(successor.id))[0].state.is_completed()
        assert re.search(rf"flow run {successor.id} runs in warm process \d+", again.log.read_text()), \
            again.log.read_text()


def test_once_a_stop_has_begun_the_pool_starts_no_process_and_hands_none_out(prefect_server, tmp_path):
    """`watch`'s stop, in-process against a real pool of two: a run in a warm process is cancelled by the
    stop and gets its successor, every process the pool started has ended once it is closed, and from the
    stop's start the pool started no process (the cancelled run's replacement used to warm up, at the cost
    of a Prefect import, only to be closed) and sets none aside for a new run."""
    import asyncio
    import logging
    import logging.handlers

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from deployments.serve import _runner, _stop_and_reschedule, chain_deployment, full_name
    from deployments.warm import WarmPool
    from slotrelay.chain import load_chain

    chain = noting_chain(tmp_path, "warm-stop")
    deployment = chain_deployment(load_chain(chain))
    # What the sensor's router writes before it starts the run: work-0's input, from src-0.
    write_slot(tmp_path / "slots" / "work-0_input.json",
               input_slot_document(from_node="src-0", route_id="route-0", data={"source": 0, "nap": 600}))
    pool = WarmPool(2, chains=[chain])

    # The pool's log, read from its own logger: Prefect's logging setup replaces the root's handlers.
    log = logging.handlers.BufferingHandler(capacity=10_000)
    log.setLevel(logging.INFO)

    def said(what: str) -> list[int]:
        """The pids of the pool's processes in the log lines saying `what` ("starting", "ready")."""
        found = (re.fullmatch(r"(starting )?warm process (\d+)( ready)?", r.getMessage()) for r in log.buffer)
        return [int(m[2]) for m in found if m and (m[1] if what == "starting" else m[3])]

    async def until(condition, what: str) -> None:
        # The pool's event loop must go on while the test waits.
        await wait_until_async(condition, timeout=120, what=what,
                               details=lambda: "\n".join(r.getMessage() for r in log.buffer))

    async def stop_with_a_run_in_flight() -> tuple[str, list[int]]:
        started = asyncio.Event()
        runner = _runner(1.0, pool, started)
        await runner.aadd_deployment(deployment)
        async with pool, get_client() as client:  # entered as `serve_until_stopped` enters them
            serving = asyncio.create_task(runner.start())
            await until(lambda: len(said("ready")) == 2, "two idle warm processes")
            key = "slotrelay-warm-stop-0"
            assert pool.reserve(key)
            run = await client.create_flow_run_from_deployment(
                (await client.read_deployment_by_name(full_name(deployment))).id,
                parameters={"start_nodes": ["work-0"]}, idempotency_key=key)
            pool.hand_off(run, deployment.name, key)
            await until(lambda: bool(attempts_of(tmp_path, 0)), "the node to start in a warm process")
            before_the_stop = said("starting")
            await _stop_and_reschedule(runner, [deployment], pool, started)
            await serving
            await until(lambda: not pool.running(), "the cancelled run's process to end")
            # A yield, not a wait: a task the pool scheduled as that run ended takes its first step, where a
            # warm process is started.
            await asyncio.sleep(0)
            assert said("starting") == before_the_stop
            assert not pool.reserve("slotrelay-warm-stop-after")
        return str(run.id), before_the_stop

    pool_logger = logging.getLogger("slotrelay.warm")
    level = pool_logger.level
    pool_logger.addHandler(log)
    pool_logger.setLevel(logging.INFO)
    try:
        with temporary_settings({PREFECT_API_URL: prefect_server}):
            flow_run_id, before_the_stop = asyncio.run(stop_with_a_run_in_flight())
    finally:
        pool_logger.removeHandler(log)
        pool_logger.setLevel(level)
    [attempt] = attempts_of(tmp_path, 0)
    assert attempt["process"] == "slotrelay-warm"
    assert said("starting") == before_the_stop and len(before_the_stop) == 2
    assert not set(before_the_stop) & {p.pid for p in psutil.Process().children(recursive=True)}
    run, _ = run_of(flow_run_id)
    assert run.state.is_cancelled(), run.state
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[
            deployment.name])))
    [successor] = [r for r in runs if r.state.is_scheduled()]
    assert successor.idempotency_key == f"successor-of-{flow_run_id}"
    assert successor.parameters == {**run.parameters, "resume": True}
