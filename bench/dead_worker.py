"""A worker's death noticed sooner, safely: how long a dead worker's run takes to complete elsewhere, and
how late a live run's heartbeats come on a loaded machine.

One Prefect server on a private PostgreSQL cluster (initdb + pg_ctl, as in tests/scale), process workers,
`slotrelay watch --pool --crash-after W` (deployments/pool.py: Prefect's heartbeats every 30 s, the crash
automation's window W).

- Deaths (`--deaths N`): the scenario of tests/scale/test_dead_worker.py (`kill_a_worker_mid_chain`: kill
  -9 a worker and its flow-run process while the chain's `slow` node runs, a second worker waiting). The
  figure is kill -> the run Completed on the other worker, minus the cut-off node's own time when it
  runs again (its completed task run's duration). Each death also reports where the time went, from the
  run's state history and heartbeat events: the silence since the last heartbeat at the kill, the crash,
  the reschedule, the other worker's pick-up, the run's start.
- Live runs (`--live-seconds S`, `--hogs H`): a run held for S seconds (its `slow` node waits) while H
  processes spin on the CPUs; then its heartbeats' gaps as the crash automation sees them: from one
  heartbeat's `occurred` to the next one's `received` by the server (a heartbeat's own delay in the
  flow-run process, its sending and the server's queue all count). The run must never be crashed.

    .venv/bin/python bench/dead_worker.py [--deaths 3] [--crash-after 45] [--live-seconds 300 --hogs 2]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def heartbeats(flow_run_id) -> list:
    """The run's heartbeat events, oldest first."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventOccurredFilter, EventResourceFilter

    found = []
    with get_client(sync_client=True) as client:
        page = client.read_events(filter=EventFilter(
            occurred=EventOccurredFilter(since=datetime(2000, 1, 1)),
            event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
            resource=EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"])), limit=50)
        found.extend(page.events)
        while page.next_page:
            page = client.read_events_page(page.next_page)
            found.extend(page.events)
    return sorted(found, key=lambda e: e.occurred)


def states(flow_run_id) -> list:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return sorted(client.read_flow_run_states(flow_run_id), key=lambda s: s.timestamp)


def rerun_seconds(flow_run_id) -> float:
    """The cut-off node's own time when it ran again: its completed task run's duration."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    [slow] = [r for r in runs if r.name == "slow" and r.state is not None and r.state.is_completed()]
    return (slow.end_time - slow.start_time).total_seconds()


def one_death(api_url: str, folder: Path, crash_after: float) -> dict[str, float]:
    from harness.workers import chain_runs, kill_a_worker_mid_chain

    death = kill_a_worker_mid_chain(api_url, f"death-{uuid.uuid4().hex[:6]}", folder, crash_after)
    [run] = chain_runs([folder.name])
    history = states(run.id)
    completed = next(s.timestamp for s in reversed(history) if s.type.value == "COMPLETED")
    killed = completed.timestamp() - death.seconds
    crashed = next(s.timestamp for s in history if s.type.value == "CRASHED").timestamp()
    rescheduled = next(s.timestamp for s in history if s.name == "Rescheduled").timestamp()
    after = [s for s in history if s.timestamp.timestamp() > rescheduled]
    picked = next(s.timestamp for s in after if s.type.value == "PENDING").timestamp()
    running = next(s.timestamp for s in after if s.type.value == "RUNNING").timestamp()
    last_beat = max(e.occurred.timestamp() for e in heartbeats(run.id) if e.occurred.timestamp() < killed)
    for _ in range(60):
        with contextlib.suppress(ValueError):
            node = rerun_seconds(run.id)
            break
        time.sleep(1)
    return {"kill_to_completed": death.seconds, "node": node, "figure": death.seconds - node,
            "silent_at_kill": killed - last_beat, "crashed": crashed - killed,
            "rescheduled": rescheduled - killed, "picked_up": picked - killed, "running": running - killed}


def live_run(api_url: str, folder: Path, crash_after: float, seconds: float, hogs: int) -> dict[str, float]:
    """A run held `seconds` on a pool worker while `hogs` processes spin; its heartbeat gaps, its states."""
    from harness.chains import agent_writes
    from harness.load import cpu_hogs
    from harness.waiting import wait_for
    from harness.workers import (
        chain_runs,
        dying_chain,
        executions,
        pool_exists,
        start_watch,
        start_worker,
        stop,
    )

    pool = f"live-{uuid.uuid4().hex[:6]}"
    chain = dying_chain(folder, folder.name)
    watch = start_watch(api_url, pool, [chain], folder / "watch.log", "--crash-after", f"{crash_after:g}")
    worker = None
    try:
        wait_for(lambda: pool_exists(pool) or watch.poll() is not None, 120, "the pool")
        if watch.poll() is not None:
            raise RuntimeError((folder / "watch.log").read_text())
        worker_log = folder.parent / f"{folder.name}-worker.log"
        worker = start_worker(api_url, pool, "live", worker_log, limit=1)
        wait_for(lambda: "watching" in (folder / "watch.log").read_text(), 120, "watch")
        wait_for(lambda: "started!" in worker_log.read_text(), 120, "worker")
        agent_writes(folder, "src", {"n": 1})
        wait_for(lambda: [n for n, _ in executions(folder)] == ["first", "slow"], 180, "slow to run")
        stop_at = time.time() + seconds
        loads = []
        with cpu_hogs(hogs):
            while time.time() < stop_at:
                loads.append(os.getloadavg()[0])
                time.sleep(5)
        (folder / "release").touch()
        wait_for(lambda: any(r.state is not None and r.state.is_final() for r in chain_runs([folder.name])),
                 300, "the live run to end")
        [run] = chain_runs([folder.name])
    finally:
        if worker is not None:
            stop(worker)
        stop(watch)
    beats = heartbeats(run.id)
    gaps = [later.received.timestamp() - earlier.occurred.timestamp()
            for earlier, later in itertools.pairwise(beats)]
    return {"heartbeats": len(beats), "max_gap": max(gaps), "median_gap": statistics.median(gaps),
            "crashed": float(any(s.type.value == "CRASHED" for s in states(run.id))),
            "completed": float(run.state.is_completed()), "load_mean": statistics.mean(loads),
            "load_max": max(loads)}


def main() -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from rich.console import Console

    from deployments.pool import CRASH_AFTER
    from deployments.server import start_server
    from harness.ports import free_port
    from harness.postgres_cluster import postgres_cluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deaths", type=int, default=3)
    parser.add_argument("--crash-after", type=float, default=CRASH_AFTER.total_seconds())
    parser.add_argument("--live-seconds", type=float, default=0)
    parser.add_argument("--hogs", type=int, default=2)
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory() as tmp, postgres_cluster() as postgres:
        server = start_server(port=free_port(), home=Path(tmp) / "home", database=postgres.url,
                              ready_timeout=240)
        try:
            with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
                if args.live_seconds:
                    live = live_run(server.api_url, Path(tmp) / "live" / "live-chain", args.crash_after,
                                    args.live_seconds, args.hogs)
                    console.print(
                        f"live run held {args.live_seconds:g} s with {args.hogs} CPU hog(s), load "
                        f"{live['load_mean']:.1f} (max {live['load_max']:.1f}): {live['heartbeats']:g} "
                        f"heartbeats, gap (occurred -> next received) median {live['median_gap']:.1f} s, max "
                        f"{live['max_gap']:.1f} s; crashed: {bool(live['crashed'])}, completed: "
                        f"{bool(live['completed'])}")
                deaths = []
                for n in range(args.deaths):
                    death = one_death(server.api_url, Path(tmp) / "deaths" / f"dying-{n}", args.crash_after)
                    deaths.append(death)
                    console.print(
                        f"death {n + 1} (--crash-after {args.crash_after:g}, load {os.getloadavg()[0]:.1f}): "
                        f"kill -> Completed {death['kill_to_completed']:.1f} s, minus the cut-off node's "
                        f"{death['node']:.1f} s = {death['figure']:.1f} s; silent "
                        f"{death['silent_at_kill']:.1f} s at the kill; crashed +{death['crashed']:.1f}, "
                        f"rescheduled +{death['rescheduled']:.1f}, picked up +{death['picked_up']:.1f}, "
                        f"running +{death['running']:.1f}")
        finally:
            server.stop()
    if deaths:
        figures = [d["figure"] for d in deaths]
        console.print(f"kill -> Completed minus the cut-off node's time: median "
                      f"{statistics.median(figures):.1f} s of {len(figures)} (min {min(figures):.1f}, max "
                      f"{max(figures):.1f}), --crash-after {args.crash_after:g}")


if __name__ == "__main__":
    main()
