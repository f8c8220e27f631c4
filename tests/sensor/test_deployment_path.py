"""The deployment path on the session's real Prefect server: `slotrelay watch` runs a chain end to end."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

from harness.chains import WORK_CALLABLE, WORK_MODULE, agent_writes, make_chain
from harness.ports import free_port
from harness.workers import environment, start_worker, stop
from slotrelay.chain.ledger import LEDGER_FILE_NAME
from slotrelay.chain.slots import read_slot
from tests.support.prefect_api import deployment_runs, http_status, recorded_task_runs, runs_finished
from tests.support.waiting import API_POLL_SECONDS, wait_until

pytestmark = pytest.mark.prefect_server

ROOT = Path(__file__).resolve().parents[2]


def relay_chain(folder: Path) -> Path:
    """external `ask` -> python `work` -> external `review` -> python `publish`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sensor_work.py").write_text(WORK_MODULE)

    def node(node_id: str, kind: str, with_input: bool) -> dict:
        return {
            "node_id": node_id,
            "input_slot": {"slot_id": f"{node_id}-in",
                           "path": f"slots/{node_id}_input.json"} if with_input else None,
            "output_slot": {"slot_id": node_id, "path": f"slots/{node_id}_output.json"},
            "capabilities": ["Write"],
            "executor": {"kind": "external"} if kind == "external" else {"kind": "python",
                                                                         "callable": WORK_CALLABLE},
        }

    def route(a: str, b: str) -> dict:
        return {"route_id": f"{a}-to-{b}", "from_node": a, "to_node": b,
                "condition": {"field": "status", "operator": "equals", "value": "completed"}}

    chain = {
        "chain_id": "relay",
        "nodes": [node("ask", "external", False), node("work", "python", True),
                  node("review", "external", True), node("publish", "python", True)],
        "routes": [route("ask", "work"), route("work", "review"), route("review", "publish")],
    }
    path = folder / "node_chain.json"
    path.write_text(json.dumps(chain, indent=1))
    return path


def completed(path: Path) -> bool:
    document = read_slot(path)
    return bool(document) and document.get("status") == "completed"


def test_idempotency_key_gives_back_the_same_run(prefect_server, tmp_path):
    from deployments.sensor import ChainTarget, DeploymentStarter
    from deployments.serve import chain_deployment
    from slotrelay.chain import load_chain

    chain = load_chain(relay_chain(tmp_path))
    chain_deployment(chain).apply()
    starter = DeploymentStarter({"relay": ChainTarget("chain/relay", chain.source)})
    try:
        first = starter("relay", ["work"], "slotrelay-test-key-1")
        again = starter("relay", ["work"], "slotrelay-test-key-1")
        other = starter("relay", ["work"], "slotrelay-test-key-2")
    finally:
        starter.close()
    assert first == again != other

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(first)
        client.delete_flow_run(first)
        client.delete_flow_run(other)
    assert run.parameters == {"chain_path": str(chain.source), "start_nodes": ["work"],
                              "slots_root": None, "stop_at_external": True, "resume": True}


# `slotrelay watch` with each request creating (POST /deployments/) or updating (PATCH /deployments/<id>) a
# deployment written to the file $DEPLOYMENT_WRITES with the API's answer, as it is answered.
WATCH_COUNTING_DEPLOYMENT_WRITES = """
import os, re, runpy, sys

import httpx

WRITE = re.compile(r"/deployments/([0-9a-f-]{36})?$")


def record(request, response):
    if request.method in ("POST", "PATCH") and WRITE.search(request.url.path):
        with open(os.environ["DEPLOYMENT_WRITES"], "a") as writes:
            writes.write(f"{request.method} {request.url.path} {response.status_code}\\n")


send, send_async = httpx.Client.send, httpx.AsyncClient.send


def counted(self, request, **options):
    response = send(self, request, **options)
    record(request, response)
    return response


async def counted_async(self, request, **options):
    response = await send_async(self, request, **options)
    record(request, response)
    return response


httpx.Client.send, httpx.AsyncClient.send = counted, counted_async
sys.argv = ["slotrelay", "watch", *sys.argv[1:]]
runpy.run_module("slotrelay.cli", run_name="__main__", alter_sys=True)
"""


BURST_SIZES = {"pburst-a": 50, "pburst-b": 50}


class CountedWatch(NamedTuple):
    """What the module's counted `watch` left: its folder, its log, the burst's chain files."""

    root: Path
    log: str
    bursts: dict[str, Path]


@pytest.fixture(scope="module")
def counted_watch(prefect_server, tmp_path_factory) -> CountedWatch:
    """One `watch` for the apply-once test and the burst test (a `watch` less in the suite), on three chains.

    It counts the deployment writes it makes (WATCH_COUNTING_DEPLOYMENT_WRITES); `applied-once`'s agent
    answered before it started; the two burst chains get 100 answers once it watches. Returns once every
    target ran, every flow run ended and `watch` stopped with 0.
    """
    root = tmp_path_factory.mktemp("counted-watch")
    folder = root / "once"
    once = make_chain(folder, "applied-once", 1)
    agent_writes(folder, "src-0", {"i": 0})
    bursts = {cid: make_chain(root / cid, cid, n) for cid, n in BURST_SIZES.items()}
    writes, log = root / "deployment-writes.txt", root / "watch.log"
    with log.open("w") as handle:
        # A wider window than the default: the burst lands in a few runs, so few flow-run processes start.
        # No warm process: the runner runs the routed runs, so it has taken its deployments when the run at
        # the sensor's start ends; and the burst is routed in the seconds after start, before one could be
        # ready, so warm processes would start and run nothing (test_warm has their runs).
        watch = subprocess.Popen(
            [sys.executable, "-c", WATCH_COUNTING_DEPLOYMENT_WRITES, "--window", "0.5", "--warm", "0",
             str(once), *map(str, bursts.values())],
            cwd=ROOT, env={**os.environ, "PREFECT_API_URL": prefect_server, "COLUMNS": "200",
                           "DEPLOYMENT_WRITES": str(writes)},
            stdout=handle, stderr=subprocess.STDOUT)
    outputs = [root / cid / "slots" / f"work-{i}_output.json" for cid, n in BURST_SIZES.items()
               for i in range(n)]
    try:
        wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=240,
                   what="watch to start")
        assert watch.poll() is None, log.read_text()
        for i in range(max(BURST_SIZES.values())):
            for cid, n in BURST_SIZES.items():
                if i < n:
                    agent_writes(root / cid, f"src-{i}", {"i": i})
        wait_until(lambda: completed(folder / "slots" / "work-0_output.json") or watch.poll() is not None,
                   timeout=180, what="the run requested at the sensor's start to run work-0")
        assert watch.poll() is None, log.read_text()
        wait_until(lambda: all(completed(p) for p in outputs), timeout=180, what="all 100 targets to run")
        wait_until(lambda: runs_finished("applied-once", *BURST_SIZES), timeout=120,
                   what="the flow runs to end", interval=API_POLL_SECONDS)
    finally:
        watch.send_signal(signal.SIGINT)
        code = watch.wait(timeout=180)
    assert code == 0, log.read_text()
    return CountedWatch(root, log.read_text(), bursts)


def test_watch_applies_each_deployment_once_and_before_its_sensor_requests_a_run(counted_watch):
    """`watch` creates or updates each deployment it serves on the API exactly once (the runner's apply), and
    before its sensor starts: an agent's answer written before `watch` started is routed by the reconcile at
    the sensor's start, and the run it requests there finds the chain's deployment and runs the target."""
    [served] = re.findall(r"serving (\d+) deployment", counted_watch.log)
    # A request the API refused while busy (503) is sent again by Prefect's client: one apply, counted once.
    answered = (counted_watch.root / "deployment-writes.txt").read_text().splitlines()
    assert len([line for line in answered if line.split()[2].startswith("2")]) == int(served), answered
    [run] = deployment_runs("applied-once")
    assert run.state.is_completed() and run.parameters["start_nodes"] == ["work-0"]
    ledger_file = counted_watch.root / "once" / LEDGER_FILE_NAME
    ledger = [json.loads(line) for line in ledger_file.read_text().splitlines()]
    assert [e["flow_run_id"] for e in ledger if e["kind"] == "started"] == [str(run.id)]


@pytest.fixture
def site_example(tmp_path):
    """The `examples/relay` chain copied to a temporary folder, deploying to its `public/` folder served on
    127.0.0.1 by the example's own `serve_site.py` (docs/deploy.md), on a free port: the live release at
    `/current/`, a new one checked at `/releases/<id>/` before the switch."""
    folder = tmp_path / "site"
    shutil.copytree(ROOT / "examples" / "relay", folder,
                    ignore=shutil.ignore_patterns("slots", "build", "public", "mirror-b", "logs", "alerts",
                                                  ".slotrelay-*"))
    port = free_port()
    site = subprocess.Popen([sys.executable, str(folder / "serve_site.py"), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    chain_file = folder / "node_chain.json"
    chain = json.loads(chain_file.read_text())
    deploy = next(n for n in chain["nodes"] if n["node_id"] == "deploy-site")
    deploy["executor"]["targets"][0]["base_url"] = f"http://127.0.0.1:{port}/current/"
    deploy["executor"]["targets"][0]["preview_url"] = f"http://127.0.0.1:{port}/releases/"
    chain_file.write_text(json.dumps(chain, indent=1))
    try:
        wait_until(lambda: http_status(f"http://127.0.0.1:{port}/") == 200, timeout=60,
                   what="serve_site.py to answer")
        yield chain_file, f"http://127.0.0.1:{port}/current/build/index.html"
    finally:
        site.send_signal(signal.SIGINT)
        site.wait(timeout=30)


def test_watch_runs_two_chains_end_to_end_through_their_deployments(prefect_server, tmp_path, site_example):
    chain = relay_chain(tmp_path / "relay")
    site_chain, page_url = site_example
    slots = tmp_path / "relay" / "slots"
    log = tmp_path / "watch.log"
    with log.open("w") as handle:
        watch = subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "watch", str(chain), str(site_chain)],
            cwd=ROOT, env={**os.environ, "PREFECT_API_URL": prefect_server, "COLUMNS": "200"},
            stdout=handle, stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=240,
                   what="watch to start")
        assert watch.poll() is None, log.read_text()

        agent_writes(tmp_path / "relay", "ask", {"question": "ship it?"})
        agent_writes(tmp_path / "site", "draft", {"title": "Relay <1>", "body": "routed once"})
        wait_until(lambda: completed(slots / "work_output.json"), timeout=90,
                   what="`work` to run in a flow run")
        assert read_slot(slots / "work_output.json")["data"] == {"seen": {"question": "ship it?"},
                                                                 "stamped": True}
        # The run stops at the external `review`: it writes its input (just after `work`'s output), and
        # the output is the agent's to write.
        wait_until(lambda: read_slot(slots / "review_input.json") is not None, timeout=60,
                   what="`review`'s input slot")
        assert read_slot(slots / "review_input.json")["data"]["stamped"] is True
        assert not (slots / "review_output.json").exists()

        agent_writes(tmp_path / "relay", "review", {"approved": True})
        wait_until(lambda: completed(slots / "publish_output.json"), timeout=90,
                   what="`publish` to run in a second flow run")
        deployed = tmp_path / "site" / "slots" / "deploy_output.json"
        wait_until(lambda: completed(deployed), timeout=90, what="the site chain's deploy node")
        wait_until(lambda: runs_finished("relay", "site-relay"), timeout=90, what="the flow runs to end",
                   interval=API_POLL_SECONDS)
    finally:
        watch.send_signal(signal.SIGINT)
        code = watch.wait(timeout=180)
    assert code == 0, log.read_text()

    # The deploy node copied the page to the served folder and the B mirror, and the URL serves it.
    page = (tmp_path / "site" / "build" / "index.html").read_bytes()
    assert b"<h1>Relay &lt;1&gt;</h1>" in page
    assert (tmp_path / "site" / "mirror-b" / "current" / "build" / "index.html").read_bytes() == page
    with urllib.request.urlopen(page_url) as answer:
        assert answer.read() == page
    # Checked at its preview URL before `current` switched to it.
    output = read_slot(deployed)["data"]
    release = output["release"]
    assert output["checked_urls"] == [page_url.replace("/current/", f"/releases/{release}/")]
    assert output["targets"]["C"]["checked"] == "before_switch"

    runs, site_runs = deployment_runs("relay"), deployment_runs("site-relay")
    assert sorted(r.parameters["start_nodes"][0] for r in runs) == ["publish", "work"]
    assert {r.state.type.value for r in runs} == {"COMPLETED"}
    assert [r.parameters["start_nodes"] for r in site_runs] == [["render"]]
    assert site_runs[0].state.type.value == "COMPLETED"
    ledger = [json.loads(line) for line in (tmp_path / "relay" / LEDGER_FILE_NAME).read_text().splitlines()]
    assert sorted(e["route_id"] for e in ledger if e["kind"] == "routed") == ["ask-to-work",
                                                                              "review-to-publish"]
    assert {e["flow_run_id"] for e in ledger if e["kind"] == "started"} == {str(r.id) for r in runs}


def test_prefect_deploy_all_then_a_worker_runs_what_watch_no_serve_requests(prefect_server, tmp_path):
    """docs/sensor.md's "Workers instead of `serve`", command by command."""
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "PWD": str(ROOT)}
    subprocess.run([sys.executable, "-m", "prefect", "work-pool", "create", "slotrelay", "--type", "process"],
                   check=False, cwd=ROOT, env=env, capture_output=True, timeout=120)
    done = subprocess.run([sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all"],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        chain = client.read_deployment_by_name("chain/run-chain")
        names = {f"{d.entrypoint}" for d in client.read_deployments()}
    assert {"flows/chain.py:run_chain", "flows/pen.py:pen_write",
            "flows/registry_review.py:registry_review"} <= names
    assert chain.work_pool_name == "slotrelay"
    assert chain.parameters["stop_at_external"] is True
    assert chain.pull_steps == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}
    ]

    chain_file = make_chain(tmp_path / "noserve", "noserve", 1)
    output = tmp_path / "noserve" / "slots" / "work-0_output.json"

    def runs() -> list:
        return [r for r in deployment_runs("run-chain")
                if Path(r.parameters.get("chain_path", "")).resolve() == chain_file.resolve()]

    worker = start_worker(prefect_server, "slotrelay", "docs-worker", tmp_path / "worker.log", limit=1)
    log = tmp_path / "watch.log"
    with log.open("w") as handle:
        watch = subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "watch", "--no-serve", "--deployment", "chain/run-chain",
             str(chain_file)],
            cwd=ROOT, env=environment(prefect_server), stdout=handle, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=120,
                   what="watch to start")
        assert watch.poll() is None, log.read_text()
        agent_writes(tmp_path / "noserve", "src-0", {"n": 1})
        wait_until(lambda: completed(output), timeout=240, what="the worker to run work-0")
        wait_until(lambda: bool(runs()) and all(r.state.is_final() for r in runs()), timeout=120,
                   what="the run to end", interval=API_POLL_SECONDS)
    finally:
        stop(watch)
        stop(worker)
    assert read_slot(output)["data"]["stamped"] is True
    assert [run.state.type.value for run in runs()] == ["COMPLETED"]


def test_a_burst_of_100_across_2_chains_runs_each_target_in_exactly_one_flow_run(counted_watch):
    expected = {f"work-{i}" for n in BURST_SIZES.values() for i in range(n)}
    runs = deployment_runs(*BURST_SIZES)
    ran = Counter(t.name for t in recorded_task_runs([r.id for r in runs], 100))
    assert {r.state.type.value for r in runs} == {"COMPLETED"}
    assert len(runs) < 100, "the burst's targets were not coalesced into fewer runs"
    # Each routed target is started by exactly one run, and runs as a task in exactly one (work-i: once per
    # chain).
    started = Counter(
        (r.parameters["chain_path"], node) for r in runs for node in r.parameters["start_nodes"])
    assert len(started) == 100 and set(started.values()) == {1}
    assert set(ran) == expected and set(ran.values()) == {len(BURST_SIZES)}
    for cid, chain in counted_watch.bursts.items():
        ledger = [json.loads(line)
                  for line in (counted_watch.root / cid / LEDGER_FILE_NAME).read_text().splitlines()]
        chain_runs = {str(r.id) for r in runs if r.parameters["chain_path"] == str(chain)}
        assert {e["flow_run_id"] for e in ledger if e["kind"] == "started"} == chain_runs


NAP_MODULE = '''
import pathlib, time

def nap(data):
    with (pathlib.Path(__file__).parent / "attempts.txt").open("a") as attempts:
        attempts.write("started\\n")
    time.sleep(6)
    return {"slept": True}
'''


def test_a_run_in_flight_when_watch_stops_is_run_by_the_next_watch(prefect_server, tmp_path):
    # Stopping leaves no run Running in the UI with nobody running it: it is cancelled, and a successor runs
    # it.
    folder = tmp_path / "nap"
    chain = make_chain(folder, "nap", 1)
    (folder / "nap_work.py").write_text(NAP_MODULE)
    document = json.loads(chain.read_text())
    document["nodes"][1]["executor"]["callable"] = "nap_work:nap"
    chain.write_text(json.dumps(document))
    attempts = folder / "attempts.txt"
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "COLUMNS": "200"}

    def start_watch(log: Path) -> subprocess.Popen:
        # The runner's runs, with no warm process: test_warm stops a `watch` with a warm run in flight. The
        # successor is the runner's in any case (no warm process is ever reserved for it), and the routed
        # run is written before a warm process could be ready: warm processes would start and run nothing.
        with log.open("w") as handle:
            watch = subprocess.Popen(
                [sys.executable, "-m", "slotrelay.cli", "watch", "--warm", "0", str(chain)],
                cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
        wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=240,
                   what="watch to start")
        assert watch.poll() is None, log.read_text()
        return watch

    first = start_watch(tmp_path / "watch-1.log")
    try:
        agent_writes(folder, "src-0", {"i": 0})
        wait_until(attempts.exists, timeout=90, what="the node to start in a flow run")
    finally:
        first.send_signal(signal.SIGTERM)  # as a service manager stops it; the second watch gets a Ctrl-C
        assert first.wait(timeout=180) == 0, (tmp_path / "watch-1.log").read_text()

    [stopped] = [r for r in deployment_runs("nap") if not r.state.is_scheduled()]
    assert stopped.state.is_cancelled(), "a run in flight must not be left Running with nobody running it"
    [successor] = [r for r in deployment_runs("nap") if r.id != stopped.id]
    assert successor.state.is_scheduled() and successor.parameters == {**stopped.parameters, "resume": True}

    second = start_watch(tmp_path / "watch-2.log")
    try:
        wait_until(lambda: completed(folder / "slots" / "work-0_output.json"), timeout=120,
                   what="the next watch to run it")
        wait_until(lambda: runs_finished("nap"), timeout=60, what="the flow run to end",
                   interval=API_POLL_SECONDS)
    finally:
        second.send_signal(signal.SIGINT)
        assert second.wait(timeout=180) == 0, (tmp_path / "watch-2.log").read_text()
    states = {r.id: r.state for r in deployment_runs("nap")}
    assert states.keys() == {stopped.id, successor.id}
    assert states[stopped.id].is_cancelled() and states[successor.id].is_completed()
    # The successor resumes from the slots: it runs the node again unless the cancelled run's process
    # finished writing its output before it ended (the node's thread outlives the flow's cancellation).
    log = (folder / "logs" / "engine.log").read_text()
    if attempts.read_text() == "started\n":
        assert "work-0: its output slot says completed, made from its current input: not run again" in log
    else:
        assert attempts.read_text() == "started\nstarted\n"
