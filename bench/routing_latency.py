"""How fast the sensor routes: slot written -> downstream input slot written, and -> downstream flow run
started (p50/p95), the time to route a burst of 1,000 output slots across 3 chains, and the cost of
creating a run from a route (a kept API client vs `run_deployment(timeout=0)`).

Baselines, run in the same process: the bare watchdog notification (a write seen by an observer,
with no routing) for the input-slot latency, and a flow run created directly through the API for
the run-start latency (the runner's polling and process start, without the sensor).

    .venv/bin/python bench/routing_latency.py [--events 200] [--run-events 200] [--burst 1000] [--creations
    30]

It starts its own Prefect server (temporary PREFECT_HOME, a free port) and `slotrelay watch`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.chains import RunRecorder, agent_writes, make_chain
from harness.ports import free_port
from slotrelay.chain.ledger import LEDGER_FILE_NAME, RoutingLedger
from slotrelay.chain.sensor import ChainRouter, SlotSensor

console = Console()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(table: Table, name: str, values: list[float], baseline: list[float] | None = None) -> None:
    p50, p95 = statistics.median(values), pct(values, 0.95)
    ratio = f"{p50 / statistics.median(baseline):.1f}x" if baseline else "baseline"
    table.add_row(name, str(len(values)), f"{p50 * 1000:.1f}", f"{p95 * 1000:.1f}", ratio)


class _Arrivals(FileSystemEventHandler):
    """Records when each watched path first appears (created or moved onto), by a second observer."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.cond = threading.Condition()

    def on_any_event(self, event) -> None:
        path = getattr(event, "dest_path", "") or event.src_path
        if event.event_type in ("created", "moved", "modified", "closed"):
            with self.cond:
                self.seen.setdefault(str(path), time.perf_counter())
                self.cond.notify_all()

    def wait(self, path: Path, timeout: float = 10.0) -> float:
        with self.cond:
            self.cond.wait_for(lambda: str(path) in self.seen, timeout)
            return self.seen[str(path)]


def bench_watchdog_floor(work: Path, events: int) -> list[float]:
    """Baseline: write an output slot, time until a bare watchdog observer sees it."""
    folder = work / "floor"
    (folder / "slots").mkdir(parents=True)
    arrivals = _Arrivals()
    observer = Observer()
    observer.schedule(arrivals, str(folder / "slots"))
    observer.start()
    try:
        latencies = []
        for i in range(events):
            began = time.perf_counter()
            path = agent_writes(folder, f"src-{i}", {"i": i})
            latencies.append(arrivals.wait(path) - began)
        return latencies
    finally:
        observer.stop()
        observer.join()


def bench_slot_to_input(work: Path, events: int) -> list[float]:
    """Write an external node's output slot, time until the sensor has written the downstream input slot."""
    folder = work / "to-input"
    chain = make_chain(folder, "to-input", events)
    arrivals = _Arrivals()
    observer = Observer()
    observer.schedule(arrivals, str(folder / "slots"))
    sensor = SlotSensor([ChainRouter(chain)], RunRecorder())
    sensor.start()
    observer.start()
    try:
        latencies = []
        for i in range(events):
            began = time.perf_counter()
            agent_writes(folder, f"src-{i}", {"i": i})
            latencies.append(arrivals.wait(folder / "slots" / f"work-{i}_input.json") - began)
        return latencies
    finally:
        observer.stop()
        observer.join()
        sensor.stop()


def bench_burst(work: Path, total: int, start_run: Callable, label: str) -> tuple[float, float, int]:
    """Write `total` output slots across 3 chains at once; seconds to write them, to route all, and runs."""
    sizes = [total - 2 * (total // 3), total // 3, total // 3]
    chains = [make_chain(work / f"{label}-{c}", f"{label}-{c}", n) for c, n in enumerate(sizes)]
    sensor = SlotSensor([ChainRouter(p) for p in chains], start_run)
    sensor.start()
    try:
        began = time.perf_counter()
        for i in range(max(sizes)):
            for c, n in enumerate(sizes):
                if i < n:
                    agent_writes(work / f"{label}-{c}", f"src-{i}", {"i": i})
        written = time.perf_counter() - began
        ledgers = [RoutingLedger(work / f"{label}-{c}" / LEDGER_FILE_NAME) for c in range(3)]
        while sum(len(RoutingLedger(ledger.path).routed_entries()) for ledger in ledgers) < total:
            time.sleep(0.05)
        sensor.coalescer.wait_idle(120)
        routed = time.perf_counter() - began
    finally:
        sensor.stop()
    runs = sum(len(RoutingLedger(ledger.path).started_runs()) for ledger in ledgers)
    return written, routed, runs



def started_at(client, flow_run_id: str, timeout: float = 120.0) -> tuple[float, float] | str:
    """Epoch seconds at which a flow run was created and entered Running, once it has ended; else why not
    (the state it ended in without running, or that it did not end within `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.read_flow_run(flow_run_id)
        if run.state is not None and run.state.is_final():
            if run.start_time is None:
                return f"{run.state.name} without running: {run.state.message}"
            return run.created.timestamp(), run.start_time.timestamp()
        time.sleep(0.05)
    return f"still {run.state.name if run.state else 'without a state'} after {timeout:.0f} s"


def bench_run_creation(work: Path, creations: int) -> dict[str, list[float]]:
    """Route -> flow run exists: run_deployment(timeout=0) vs a kept client (the sensor's way)."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    from deployments.serve import chain_deployment
    from slotrelay.chain import load_chain

    chain = load_chain(make_chain(work / "create", "create", 1))
    chain_deployment(chain).apply()
    parameters = {"chain_path": str(chain.source), "start_nodes": ["work-0"], "stop_at_external": True}
    results: dict[str, list[float]] = {"run_deployment(timeout=0)": [], "kept client": []}
    with get_client(sync_client=True) as client:
        direct_id = client.read_deployment_by_name("chain/create").id
        for i in range(creations):
            began = time.perf_counter()
            run_deployment("chain/create", parameters=parameters, timeout=0, as_subflow=False,
                           idempotency_key=f"rd-{i}-{time.time_ns()}")
            results["run_deployment(timeout=0)"].append(time.perf_counter() - began)
            began = time.perf_counter()
            client.create_flow_run_from_deployment(direct_id, parameters=parameters,
                                                   idempotency_key=f"kc-{i}-{time.time_ns()}")
            results["kept client"].append(time.perf_counter() - began)
    return results


def bench_slot_to_run_started(work: Path, events: int, api_url: str, log_path: Path) -> dict[str, list]:
    """Through `slotrelay watch` (sensor + served deployment): output slot written -> flow run created and
    -> Running. Each run ends before the next write, so runs do not queue behind each other.

    Baseline: a run created directly through the API -> Running (the runner's poll and process start).
    """
    from prefect.client.orchestration import get_client

    folder = work / "to-run"
    chain = make_chain(folder, "to-run", events)
    log = log_path.open("w")
    watch = subprocess.Popen([sys.executable, "-m", "slotrelay.cli", "watch", str(chain)], cwd=ROOT,
                             env={**os.environ, "PREFECT_API_URL": api_url}, stdout=log,
                             stderr=subprocess.STDOUT)
    ledger_path = folder / LEDGER_FILE_NAME
    found: dict[str, list] = {"created": [], "running": [], "direct": [], "missed": []}
    try:
        while "watching" not in log_path.read_text():
            if watch.poll() is not None:
                raise RuntimeError(log_path.read_text())
            time.sleep(0.1)
        with get_client(sync_client=True) as client:
            deployment_id = client.read_deployment_by_name("chain/to-run").id
            with console.status("slot -> flow run started") as status:
                for i in range(events):
                    status.update(f"slot -> flow run started: {i + 1}/{events}")
                    began = time.time()
                    agent_writes(folder, f"src-{i}", {"i": i})
                    started: list[dict] = []
                    while len(started) < i + 1:
                        time.sleep(0.005)
                        text = ledger_path.read_text() if ledger_path.exists() else ""
                        started = [json.loads(x) for x in text.splitlines() if '"started"' in x]
                    times = started_at(client, started[-1]["flow_run_id"])
                    if isinstance(times, str):
                        found["missed"].append(f"event {i}: {times}")
                        continue
                    found["created"].append(times[0] - began)
                    found["running"].append(times[1] - began)
                for i in range(min(events, 30)):
                    status.update(f"baseline: API-created run -> started: {i + 1}")
                    began = time.time()
                    run = client.create_flow_run_from_deployment(
                        deployment_id, parameters={"chain_path": str(chain), "start_nodes": [f"work-{i}"],
                                                   "stop_at_external": True})
                    times = started_at(client, str(run.id))
                    if isinstance(times, str):
                        found["missed"].append(f"baseline {i}: {times}")
                        continue
                    found["direct"].append(times[1] - began)
        return found
    finally:
        watch.send_signal(signal.SIGINT)
        watch.wait(60)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--run-events", type=int, default=200, help="events for the flow-run latency")
    parser.add_argument("--creations", type=int, default=30)
    parser.add_argument("--watch-log", type=Path, help="keep the output of `slotrelay watch` in this file")
    args = parser.parse_args()

    from deployments.server import start_server

    with tempfile.TemporaryDirectory(prefix="slotrelay-bench-") as tmp:
        work = Path(tmp)
        latency = Table(title=f"slot written -> ... ({args.events} events, ms)")
        for column in ("path", "n", "p50", "p95", "vs baseline"):
            latency.add_column(column)
        floor = bench_watchdog_floor(work, args.events)
        row(latency, "write -> bare watchdog event", floor)
        row(latency, "write -> downstream input slot written", bench_slot_to_input(work, args.events), floor)

        server = start_server(port=free_port(), home=work / "prefect-home")
        os.environ["PREFECT_API_URL"] = server.api_url
        try:
            from deployments.sensor import ChainTarget, DeploymentStarter

            with console.status(f"burst of {args.burst}"):
                w1, r1, n1 = bench_burst(work, args.burst, RunRecorder(), "mem")
                # A deployment nobody serves: the burst's runs are created and left scheduled, so they
                # do not queue in front of the runs the next measurement times.
                from flows.chain import run_chain

                run_chain.to_deployment(name="burst-unserved").apply()
                targets = {
                    f"api-{c}": ChainTarget("chain/burst-unserved", work / f"api-{c}" / "node_chain.json")
                    for c in range(3)}
                starter = DeploymentStarter(targets)
                w2, r2, n2 = bench_burst(work, args.burst, starter, "api")
                starter.close()
            with console.status("run creation"):
                creation = bench_run_creation(work, args.creations)
            to_run = bench_slot_to_run_started(work, args.run_events, server.api_url,
                                               args.watch_log or work / "watch.log")
        finally:
            server.stop()

        burst = Table(title=f"burst: {args.burst} output slots across 3 chains")
        for column in ("start-run action", "written in (s)", "all routed + runs requested (s)", "runs"):
            burst.add_column(column)
        burst.add_row("in-memory recorder", f"{w1:.2f}", f"{r1:.2f}", str(n1))
        burst.add_row("Prefect API (flow runs created)", f"{w2:.2f}", f"{r2:.2f}", str(n2))

        create = Table(title=f"route -> flow run created ({args.creations} each, ms)")
        for column in ("path", "n", "p50", "p95", "vs baseline"):
            create.add_column(column)
        base = creation["kept client"]
        row(create, "kept client (used)", base)
        row(create, "run_deployment(timeout=0)", creation["run_deployment(timeout=0)"], base)

        runs = Table(
            title=f"slot written -> downstream flow run ({args.run_events} events, one at a time, ms)")
        for column in ("path", "n", "p50", "p95", "vs baseline"):
            runs.add_column(column)
        row(runs, "API-created run -> Running (runner poll 1 s)", to_run["direct"])
        row(runs, "write -> downstream flow run created", to_run["created"])
        row(runs, "write -> downstream flow run Running", to_run["running"], to_run["direct"])
        console.print(latency, runs, burst, create)
        for miss in to_run["missed"]:
            console.print(f"[yellow]not in the table: {miss}[/yellow]")
        console.print(f"measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
