"""Process workers, `watch --pool` and what the API says about their runs: shared by tests/scale and the
bench."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]
# The worker's log line, sent to the flow run's logs by Prefect 3's `BaseWorker`.
SUBMITTED_BY = re.compile(r"Worker '([^']+)' submitting flow run")
# The commands docs/beyond.md shows; the processes below are started from them.
README_WATCH = "slotrelay watch --pool {pool} CHAIN.json"
README_WORKER = "prefect worker start --pool {pool} --limit {limit}"


# The burst of the workers test and bench: 200 agent output slots across 3 chains, agents finishing in
# waves of WAVE per chain a little slower than the sensor's window (0.1 s), so the burst becomes many
# runs of several targets each (writes within one window share a run).
BURST_SOURCES = (67, 67, 66)
WAVE = 10
WAVE_SECONDS = 0.3


def burst_sources(slots: int) -> tuple[int, ...]:
    """`slots` agent output slots spread over 3 chains as BURST_SOURCES spreads 200 (the bench's --slots)."""
    return tuple(slots // 3 + (i < slots % 3) for i in range(3))


def burst_chains(folder: Path, prefix: str, sources: tuple[int, ...] = BURST_SOURCES) -> dict[str, Path]:
    """chain_id -> chain file: a chain per `sources` entry, with that many sources routed to targets."""
    from harness.chains import make_chain

    return {f"{prefix}-{i}": make_chain(folder / f"{prefix}-{i}", f"{prefix}-{i}", n)
            for i, n in enumerate(sources)}


def write_burst(folder: Path, chain_ids: list[str], sources: tuple[int, ...] = BURST_SOURCES) -> list[Path]:
    """Write the burst's agent output slots (chain folders under `folder`); the targets' output slots."""
    from harness.chains import agent_writes

    for start in range(0, max(sources), WAVE):
        for chain_id, count in zip(chain_ids, sources, strict=True):
            for i in range(start, min(start + WAVE, count)):
                agent_writes(folder / chain_id, f"src-{i}", {"n": i, "chain": chain_id})
        time.sleep(WAVE_SECONDS)
    return [folder / c / "slots" / f"work-{i}_output.json"
            for c, n in zip(chain_ids, sources, strict=True) for i in range(n)]


def environment(api_url: str) -> dict[str, str]:
    """The environment of a worker or of `watch`: this worktree importable, the API, a 1 s poll."""
    return {**os.environ, "PREFECT_API_URL": api_url, "PYTHONPATH": str(ROOT),
            "PREFECT_WORKER_QUERY_SECONDS": "1", "COLUMNS": "200"}


def start_worker(api_url: str, pool: str, name: str, log: Path, limit: int) -> subprocess.Popen:
    """`prefect worker start --pool POOL --name NAME --limit N`, in its own process group."""
    with log.open("w") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", *README_WORKER.format(pool=pool, limit=limit).split(), "--name", name],
            cwd=ROOT, env=environment(api_url), stdout=handle, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )


def start_watch(api_url: str, pool: str, chains: list[Path], log: Path, *options: str) -> subprocess.Popen:
    """`slotrelay watch --pool POOL [OPTION...] CHAIN...`."""
    with log.open("w") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli",
             *README_WATCH.format(pool=pool).split()[1:-1], *options, *map(str, chains)],
            cwd=ROOT, env=environment(api_url), stdout=handle, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def pool_exists(pool: str) -> bool:
    """Whether the work pool is on the API. `watch --pool` creates it first, seconds before it watches:
    workers started then start while `watch` applies its deployments."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool)
        except ObjectNotFound:
            return False
    return True


def stop(process: subprocess.Popen, first: signal.Signals = signal.SIGINT, timeout: float = 60) -> int:
    """Signal a process group (or the process), wait, kill if it does not end in time; its exit code."""
    try:
        os.killpg(process.pid, first)
    except (ProcessLookupError, PermissionError):
        process.send_signal(first)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        return process.wait(timeout=30)


def kill_tree(process: subprocess.Popen) -> list[int]:
    """kill -9 a process and every process under it (a process worker's flow runs may be in sessions of
    their own): what a machine losing power does to them. Returns the pids killed."""
    import psutil

    root = psutil.Process(process.pid)
    tree = [root, *root.children(recursive=True)]
    for proc in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    process.wait(timeout=30)
    psutil.wait_procs(tree, timeout=30)
    return [proc.pid for proc in tree]


def flow_run_processes(worker: subprocess.Popen) -> list:
    """The processes a worker has started that are still running (its flow runs' processes)."""
    import psutil

    try:
        children = psutil.Process(worker.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    running = []
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.status() != psutil.STATUS_ZOMBIE:
                running.append(child)
    return running


PAGE = 200  # the server's largest page


def _every(read: Callable[..., list], **filters: object) -> list:
    """Every object a `client.read_*` call returns, page by page (give a `sort` on a unique key: without
    one PostgreSQL may order each page differently, and pages then repeat or skip rows)."""
    found: list = []
    while True:
        page = read(**filters, limit=PAGE, offset=len(found))
        found.extend(page)
        if len(page) < PAGE:
            return found


def chain_runs(chain_ids: list[str]) -> list:
    """Every flow run of the `chain/<chain_id>` deployments."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        return _every(client.read_flow_runs, sort=FlowRunSort.ID_DESC,
                      deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=chain_ids)))


def completed_tasks(flow_run_ids: list) -> Counter:
    """How many times each task-run name completed in these flow runs (a node's task run is named after
    it)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    with get_client(sync_client=True) as client:
        tasks = _every(client.read_task_runs, sort=TaskRunSort.ID_DESC,
                       flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=list(flow_run_ids))))
    return Counter(t.name for t in tasks if t.state is not None and t.state.is_completed())


def submissions(flow_run_ids: list) -> list[tuple[str, str]]:
    """(flow run id, worker name) for each time a worker submitted one of these runs, in log order."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId, LogFilterTextSearch
    from prefect.client.schemas.sorting import LogSort

    # Logs have no unique sort key: only the few submission lines are read, and each is kept once.
    with get_client(sync_client=True) as client:
        logs = _every(client.read_logs, sort=LogSort.TIMESTAMP_ASC, log_filter=LogFilter(
            flow_run_id=LogFilterFlowRunId(any_=list(flow_run_ids)),
            text=LogFilterTextSearch(query='"submitting flow run"')))
    logs = list({log.id: log for log in logs}.values())
    found = ((log.flow_run_id, SUBMITTED_BY.search(log.message)) for log in logs)
    return [(str(run_id), match.group(1)) for run_id, match in found if match]


def submitted_by(flow_run_ids: list) -> dict[str, str]:
    """flow run id -> the name of the worker that (last) submitted it, from the run's logs in the API."""
    return dict(submissions(flow_run_ids))


# The dead-worker chain's nodes: each notes its run in executions.log; `slow` then waits for a `release`
# file, so its worker can be killed while it runs.
DYING_NODES = '''
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
    (folder / "dying_nodes.py").write_text(DYING_NODES)
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
    """(node, pid) for each run of a `dying_chain` node, in order."""
    log = folder / "executions.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [(node, int(pid)) for node, pid in (line.split() for line in lines)]


@dataclass(frozen=True)
class WorkerDeath:
    """What `kill_a_worker_mid_chain` did: the pids it killed, the seconds from the kill to the run's
    completion on the other worker, and `watch`'s exit code."""

    killed: list[int]
    seconds: float
    watch_exit: int


def _nothing() -> None:
    """What a scenario run alone waits for once its watch and first worker are up: nothing."""


def kill_a_worker_mid_chain(api_url: str, pool: str, folder: Path, crash_after: float, *,
                            before_chain: Callable[[], object] = _nothing) -> WorkerDeath:
    """The dead-worker scenario: `watch --pool --crash-after crash_after` on `dying_chain(folder)`,
    worker-a takes its run; once `slow` runs, worker-b starts and worker-a is killed with its flow-run
    process (kill -9); then wait for the run to complete. The chain's id is the folder's name; logs go
    beside it.

    `before_chain` is called once `watch` watches and worker-a has started, before the agent's first write.
    Scenarios run together on one server wait there until every `watch` is up, so that their waits
    overlap."""
    from harness.chains import agent_writes

    chain_id = folder.name
    chain = dying_chain(folder, chain_id)
    logs = folder.parent
    watch = start_watch(api_url, pool, [chain], folder / "watch.log", "--crash-after", f"{crash_after:g}")
    workers: dict[str, subprocess.Popen] = {}
    try:
        wait_for(lambda: pool_exists(pool) or watch.poll() is not None, 90, "watch to create the pool")
        workers["worker-a"] = start_worker(api_url, pool, "worker-a", logs / f"{chain_id}-a.log", limit=2)
        wait_for(lambda: "watching" in (folder / "watch.log").read_text() or watch.poll() is not None, 90,
                 "watch to start")
        if watch.poll() is not None:
            raise RuntimeError((folder / "watch.log").read_text())
        wait_for(lambda: "started!" in (logs / f"{chain_id}-a.log").read_text(), 120, "worker-a to start")
        before_chain()
        agent_writes(folder, "src", {"n": 7})
        wait_for(lambda: [n for n, _ in executions(folder)] == ["first", "slow"], 180, "worker-a to run slow")
        # The other worker starts once worker-a holds the run, so the run cannot have gone to it first.
        workers["worker-b"] = start_worker(api_url, pool, "worker-b", logs / f"{chain_id}-b.log", limit=2)
        wait_for(lambda: "started!" in (logs / f"{chain_id}-b.log").read_text(), 120, "worker-b to start")
        killed = kill_tree(workers.pop("worker-a"))
        died = time.monotonic()
        (folder / "release").touch()
        # The run cannot complete before `slow` has written its output: the API is asked only from then on
        # (each question costs CPU here and in the server; the crash-after wait alone is tens of seconds).
        wait_for(lambda: (folder / "slots" / "slow_output.json").exists(), 600, "slow to run on worker-b")
        wait_for(lambda: any(r.state is not None and r.state.is_completed() for r in chain_runs([chain_id])),
                 600, "the run to complete on worker-b")
        seconds = time.monotonic() - died
        # The run is Completed before its process has sent its task runs' last events; stopping the worker
        # now would stop that process too, and the server would never record them.
        wait_for(lambda: not flow_run_processes(workers["worker-b"]), 120,
                 "worker-b's flow-run process to end")
    finally:
        for worker in workers.values():
            stop(worker)
        code = stop(watch)
    return WorkerDeath(killed, seconds, code)


# The second-run chain's nodes: each notes the content it ran for and its process; `slow` then waits for
# that content's `release-<n>` file, so its worker can be killed while it runs.
ROUNDS_NODES = '''
import os
import time
from pathlib import Path

HERE = Path(__file__).parent


def _note(node, n):
    with open(HERE / "executions.log", "a") as log:
        log.write(f"{node} {n} {os.getpid()}\\n")


def first(data):
    _note("first", data["n"])
    return {"n": data["n"]}


def slow(data):
    _note("slow", data["n"])
    while not (HERE / f"release-{data['n']}").exists():
        time.sleep(0.1)
    return {"n": data["n"]}


def third(data):
    _note("third", data["n"])
    return {"n": data["n"]}


def fourth(data):
    _note("fourth", data["n"])
    return {"n": data["n"]}
'''
ROUNDS_CHAIN = ("first", "slow", "third", "fourth")


def rounds_chain(folder: Path, chain_id: str) -> Path:
    """src (an agent) -> first -> slow -> third -> fourth, all python but src."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rounds_nodes.py").write_text(ROUNDS_NODES)
    nodes = [{"node_id": "src", "output_slot": {"slot_id": "src", "path": "slots/src_output.json"},
              "capabilities": ["Write"], "executor": {"kind": "external"}}]
    nodes += [{"node_id": name, "input_slot": {"slot_id": f"{name}-in", "path": f"slots/{name}_input.json"},
               "output_slot": {"slot_id": name, "path": f"slots/{name}_output.json"},
               "executor": {"kind": "python", "callable": f"rounds_nodes:{name}"}} for name in ROUNDS_CHAIN]
    routes = [{"route_id": f"{a}-{b}", "from_node": a, "to_node": b}
              for a, b in itertools.pairwise(("src", *ROUNDS_CHAIN))]
    path = folder / "node_chain.json"
    path.write_text(json.dumps({"chain_id": chain_id, "nodes": nodes, "routes": routes}, indent=1))
    return path


def completed_runs(chain_id: str) -> int:
    """How many runs of the chain's deployment have completed."""
    return sum(r.state is not None and r.state.is_completed() for r in chain_runs([chain_id]))


def round_executions(folder: Path) -> list[tuple[str, int, int]]:
    """(node, content n, pid) for each run of a `rounds_chain` node, in order."""
    log = folder / "executions.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [(node, int(n), int(pid)) for node, n, pid in (line.split() for line in lines)]


def _ran(folder: Path) -> list[tuple[str, int]]:
    """(node, content n) for each run of a `rounds_chain` node, in order."""
    return [(node, n) for node, n, _ in round_executions(folder)]


@dataclass(frozen=True)
class SecondRunDeath:
    """What `kill_a_worker_in_a_second_run` saw: the flow-run processes worker-a had when it was killed,
    those still alive 30 s after the kill, and `watch`'s exit code."""

    orphans: list[int]
    alive_after_kill: list[int]
    watch_exit: int


def kill_a_worker_in_a_second_run(api_url: str, pool: str, folder: Path, crash_after: float, *,
                                  before_chain: Callable[[], object] = _nothing) -> SecondRunDeath:
    """`watch --pool` on `rounds_chain(folder)`: a first run completes on worker-a; in the second (new
    content from the agent), once `slow` runs, worker-b starts and worker-a alone is killed (kill -9: its
    flow-run process is not); then `slow` may go on, and, unless that process outlived its worker, the
    test waits for the second run to complete. The chain's id is the folder's name; logs go beside it.
    `before_chain` as in `kill_a_worker_mid_chain`."""
    import psutil

    from harness.chains import agent_writes

    chain_id = folder.name
    chain = rounds_chain(folder, chain_id)
    logs = folder.parent
    watch = start_watch(api_url, pool, [chain], folder / "watch.log", "--crash-after", f"{crash_after:g}")
    workers: dict[str, subprocess.Popen] = {}
    try:
        wait_for(lambda: pool_exists(pool) or watch.poll() is not None, 90, "watch to create the pool")
        workers["worker-a"] = start_worker(api_url, pool, "worker-a", logs / f"{chain_id}-a.log", limit=2)
        wait_for(lambda: "watching" in (folder / "watch.log").read_text() or watch.poll() is not None, 90,
                 "watch to start")
        if watch.poll() is not None:
            raise RuntimeError((folder / "watch.log").read_text())
        wait_for(lambda: "started!" in (logs / f"{chain_id}-a.log").read_text(), 120, "worker-a to start")
        before_chain()
        (folder / "release-1").touch()
        agent_writes(folder, "src", {"n": 1})
        # A run cannot complete before its last node has started: the API is asked only from then on.
        wait_for(lambda: ("fourth", 1) in _ran(folder), 300, "the first run's last node to start")
        wait_for(lambda: completed_runs(chain_id) == 1, 300, "the first run to complete")
        agent_writes(folder, "src", {"n": 2})
        wait_for(lambda: ("slow", 2) in _ran(folder), 300, "worker-a to run slow for the new content")
        workers["worker-b"] = start_worker(api_url, pool, "worker-b", logs / f"{chain_id}-b.log", limit=2)
        wait_for(lambda: "started!" in (logs / f"{chain_id}-b.log").read_text(), 120, "worker-b to start")
        worker_a = workers.pop("worker-a")
        orphans = flow_run_processes(worker_a)
        worker_a.kill()
        worker_a.wait(timeout=30)
        _gone, alive = psutil.wait_procs(orphans, timeout=30)
        (folder / "release-2").touch()
        if not alive:
            wait_for(lambda: ("fourth", 2) in _ran(folder), 600, "the second run's last node to start")
            wait_for(lambda: completed_runs(chain_id) == 2, 600, "the second run to complete on worker-b")
            wait_for(lambda: not flow_run_processes(workers["worker-b"]), 120,
                     "worker-b's flow-run process to end")
    finally:
        for worker in workers.values():
            stop(worker)
        code = stop(watch)
    return SecondRunDeath([p.pid for p in orphans], [p.pid for p in alive], code)
