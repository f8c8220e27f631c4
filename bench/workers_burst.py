"""Chain runs per minute on a work pool: one process worker vs two, on the same burst of agent slots.

A Prefect server (SQLite, temporary PREFECT_HOME) is started here. Each measurement makes CHAINS fresh
chains of SOURCES external sources each routed to a python target (tests/sensor/chains.py), starts
`slotrelay watch --pool` on a fresh pool and N `prefect worker start --pool --limit LIMIT` processes,
writes the agents' output slots in waves (WAVE_SECONDS apart, wider than the sensor's window, so the
burst is many runs), and times from the first write until every flow run of the chains has ended.
The baseline is the same burst on one worker; the ratio is runs/min with two over runs/min with one.
How many runs a burst becomes depends on how the sensor's windows fall, so the burst's time (the same
CHAINS * SOURCES targets either way) is printed beside it.
Measurements alternate (1, 2, 2, 1, ...) so a change of machine load hits both.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHAINS = 3
SOURCES = 10
LIMIT = 2
WAVE_SECONDS = 0.3
ROUNDS = 2


def measure(api_url: str, folder: Path, workers: int) -> tuple[int, float]:
    """One burst on `workers` workers: (flow runs, seconds from the first write to the last run's end)."""
    from tests.scale.workers import chain_runs, completed_tasks, start_watch, start_worker, stop, wait_for
    from tests.sensor.chains import agent_writes, make_chain

    pool = f"bench-{uuid.uuid4().hex[:6]}"
    chain_ids = [f"{pool}-{i}" for i in range(CHAINS)]
    chains = [make_chain(folder / chain_id, chain_id, SOURCES) for chain_id in chain_ids]
    watch = start_watch(api_url, pool, chains, folder / "watch.log")
    started = []
    try:
        wait_for(lambda: "watching" in (folder / "watch.log").read_text(), 120, "watch to start")
        started = [start_worker(api_url, pool, f"w{i}", folder / f"w{i}.log", LIMIT) for i in range(workers)]
        wait_for(lambda: all("started!" in (folder / f"w{i}.log").read_text() for i in range(workers)), 120,
                 "the workers to start")
        began = time.monotonic()
        for i in range(SOURCES):
            for chain_id in chain_ids:
                agent_writes(folder / chain_id, f"src-{i}", {"n": i})
            time.sleep(WAVE_SECONDS)

        def ended() -> bool:
            runs = chain_runs(chain_ids)
            return bool(runs) and all(r.state is not None and r.state.is_final() for r in runs) and sum(
                completed_tasks([r.id for r in runs]).values()) == CHAINS * SOURCES

        wait_for(ended, 600, "every run to end")
        seconds = time.monotonic() - began
        return len(chain_runs(chain_ids)), seconds
    finally:
        for worker in started:
            stop(worker)
        stop(watch)


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    from deployments.server import start_server
    from tests.conftest import free_port

    console = Console()
    results: dict[int, list[float]] = {1: [], 2: []}
    burst_seconds: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(port=free_port(), home=Path(tmp) / "home")
        os.environ["PREFECT_API_URL"] = server.api_url
        try:
            for round_ in range(ROUNDS):
                for workers in ((1, 2) if round_ % 2 == 0 else (2, 1)):
                    runs, seconds = measure(server.api_url, Path(tmp) / f"r{round_}-w{workers}", workers)
                    results[workers].append(60 * runs / seconds)
                    burst_seconds[workers].append(seconds)
                    console.print(f"round {round_ + 1}, {workers} worker(s): {runs} runs in {seconds:.1f} s")
        finally:
            server.stop()
    table = Table(title=f"{CHAINS * SOURCES} agent slots across {CHAINS} chains, --limit {LIMIT} per worker, "
                        f"median of {ROUNDS} rounds")
    for column in ("workers", "chain runs/min", "vs 1 worker", "burst (s)", "time vs 1 worker"):
        table.add_column(column)
    base, base_seconds = statistics.median(results[1]), statistics.median(burst_seconds[1])
    for workers, rates in results.items():
        median_seconds = statistics.median(burst_seconds[workers])
        table.add_row(str(workers), f"{statistics.median(rates):.1f}",
                      f"{statistics.median(rates) / base:.2f}x",
                      f"{median_seconds:.1f}", f"{median_seconds / base_seconds:.2f}x")
    console.print(table)
    console.print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
