"""`watch` started on a folder `slotrelay run` worked in, on the session's real Prefect server.

The sensor's start-up catch-up routes only what has not been routed: an agent's answer that `run`
already carried to its targets (their input slots hold an input written from that very answer) runs
nothing again and creates no flow run, though the ledger has never seen it; an answer whose route a
crash cut short is routed, and the chain goes on from it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.commands import SLOTRELAY
from slotrelay.chain.routing import CRASH_BEFORE_ROUTE_ENV
from tests.support.prefect_api import deployment_runs, runs_finished
from tests.support.sensor_processes import agent, start_watch, stop_watch
from tests.support.waiting import API_POLL_SECONDS, wait_until
from tests.support.watch_chains import agent_node, ledger, python_node, ran, route, write_chain

pytestmark = pytest.mark.prefect_server
STEPS = '''
import pathlib

HERE = pathlib.Path(__file__).parent


def note(name):
    with (HERE / "ran.txt").open("a") as ran:
        ran.write(name + "\\n")


def draft(data):
    note("draft")
    return {"text": "a draft"}


def publish(data):
    note("publish")
    return {"published": data["text"]}


def archive(data):
    note("archive")
    return {"archived": data["published"]}
'''


def review_chain(folder: Path, chain_id: str) -> Path:
    """python `draft` -> external `review` (an agent) -> python `publish` -> python `archive`."""
    draft = python_node("draft", "draft")
    del draft["input_slot"]
    review = agent_node("review")
    review["output_slot"]["babel_path"] = "slots/review_babel.jsonl"
    path = write_chain(folder, chain_id, [draft, review, python_node("publish", "publish"),
                                          python_node("archive", "archive")],
                       [route("draft", "review"), route("review", "publish"), route("publish", "archive")],
                       STEPS)
    return path


def run_answered_by_agent(chain: Path, api: str, **extra_env: str) -> subprocess.CompletedProcess:
    """`slotrelay run` of the chain, with the reviewer (an agent in its own process) answering its input."""
    folder = chain.parent
    log = folder / "run.log"
    with log.open("w") as handle:
        run = subprocess.Popen([SLOTRELAY, "run", str(chain), "--json"], stdout=handle, stderr=handle,
                               env={**os.environ, "PREFECT_API_URL": api, **extra_env})
    try:
        wait_until(lambda: (folder / "slots" / "review_input.json").exists() or run.poll() is not None,
                   timeout=180,
                   what="the run to ask the reviewer")
        assert run.poll() is None, log.read_text()[-3000:]
        agent(folder, "review", {"text": "a draft", "approved": True})
        run.wait(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    return subprocess.CompletedProcess(run.args, run.returncode, log.read_text(), "")


def slot_bytes(folder: Path, *names: str) -> dict[str, bytes]:
    return {name: (folder / "slots" / name).read_bytes() for name in names}


def test_watch_after_a_completed_run_runs_nothing_again(prefect_server, tmp_path):
    folder = tmp_path / "done"
    chain = review_chain(folder, "catchup-done")
    finished = run_answered_by_agent(chain, prefect_server)
    assert finished.returncode == 0, finished.stdout[-3000:]
    assert ran(folder) == ["draft", "publish", "archive"]
    before = slot_bytes(folder, "publish_input.json", "archive_input.json", "review_babel.jsonl")
    assert len(before["review_babel.jsonl"].splitlines()) == 1

    log = tmp_path / "watch.log"
    watch = start_watch([chain], log, prefect_server)
    try:
        # "watching" is logged once the start-up catch-up is done: whatever it routed, or asked a run
        # for, is in the ledger by then (and the runs it asked for are requested before `watch` exits).
        assert [e for e in ledger(folder) if e["kind"] != "babel"] == [], log.read_text()
    finally:
        stop_watch(watch, log)
    assert "fired" not in log.read_text()
    assert deployment_runs("catchup-done") == []
    assert ran(folder) == ["draft", "publish", "archive"]
    assert slot_bytes(folder, *before) == before


def test_watch_after_a_run_cut_before_the_agents_route_routes_it(prefect_server, tmp_path):
    folder = tmp_path / "cut"
    chain = review_chain(folder, "catchup-cut")
    # The run is killed (-9, the test-only fault hook) after the reviewer answered, before review's route
    # writes publish's input slot.
    crashed = run_answered_by_agent(chain, prefect_server, **{CRASH_BEFORE_ROUTE_ENV: "review"})
    assert crashed.returncode == -9, crashed.stdout[-3000:]
    assert ran(folder) == ["draft"]
    assert not (folder / "slots" / "publish_input.json").exists()

    log = tmp_path / "watch.log"
    # No warm process: the catch-up asks for its run at start, before a warm process could be ready, so the
    # runner runs it; warm processes would start and run nothing.
    watch = start_watch([chain], log, prefect_server, "--warm", "0")
    try:
        routed = [e for e in ledger(folder) if e["kind"] == "routed"]
        assert [(e["route_id"], e["starts"]) for e in routed] == [("review-to-publish", True)]
        wait_until(lambda: runs_finished("catchup-cut"), timeout=180,
                   what="the run the catch-up started to end",
                   interval=API_POLL_SECONDS)
    finally:
        stop_watch(watch, log)
    assert ran(folder) == ["draft", "publish", "archive"]
    assert [r.state_name for r in deployment_runs("catchup-cut")] == ["Completed"]
    assert [e["route_id"] for e in ledger(folder) if e["kind"] == "routed"] == ["review-to-publish"]
