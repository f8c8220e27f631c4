"""Chain runs per minute on a work pool: one process worker vs two, and the server on SQLite vs PostgreSQL.

Two Prefect servers are started here (`deployments.server.start_server`, temporary PREFECT_HOMEs): one
on SQLite (the default), one on a private PostgreSQL cluster (initdb + pg_ctl, as in tests/scale). Each
measurement makes the burst of tests/scale/test_workers.py in fresh chains (200 agent output slots across
3 chains, written in waves a little slower than the sensor's window, so the burst is many runs), starts
`slotrelay watch --pool` on a fresh pool and N `prefect worker start --pool --limit LIMIT` processes, and
times from the first write until every flow run has ended and every target's task run is recorded.
The baseline is the same burst on one worker on SQLite. How many runs a burst becomes depends on how the
sensor's windows fall, so the burst's time (the same 200 targets every time) is printed beside it.
Rounds alternate the order of the four set-ups so a change of machine load hits them all.

Then, on the PostgreSQL server, the dead-worker scenario of tests/scale/test_dead_worker.py (kill -9 a
worker and its flow-run process mid-chain) DEATHS times: seconds from the kill to the run completed on
the other worker. Its floor is Prefect's zombie detection: up to 30 s since the last heartbeat, then the
crash window of silence (deployments/pool.py: CRASH_AFTER, the default of `watch --crash-after`);
bench/dead_worker.py breaks that time down.

    .venv/bin/python bench/workers_burst.py [--rounds N] [--deaths N] [--slots N]

--slots makes a smaller burst (the same waves, N slots spread over the 3 chains) for a loaded machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LIMIT = 2
SETUPS = (("SQLite", 1), ("SQLite", 2), ("PostgreSQL", 1), ("PostgreSQL", 2))


def measure(api_url: str, folder: Path, workers: int, sources: tuple[int, ...]) -> tuple[int, float]:
    """One burst on `workers` workers: (flow runs, seconds from the first write to the last run's end)."""
    from harness.waiting import wait_for
    from harness.workers import (
        burst_chains,
        chain_runs,
        completed_tasks,
        start_watch,
        start_worker,
        stop,
        write_burst,
    )

    pool = f"bench-{uuid.uuid4().hex[:6]}"
    chains = burst_chains(folder, pool, sources)
    chain_ids = list(chains)
    watch = start_watch(api_url, pool, list(chains.values()), folder / "watch.log")
    started = []
    try:
        wait_for(lambda: "watching" in (folder / "watch.log").read_text(), 120, "watch to start")
        started = [start_worker(api_url, pool, f"w{i}", folder / f"w{i}.log", LIMIT) for i in range(workers)]
        wait_for(lambda: all("started!" in (folder / f"w{i}.log").read_text() for i in range(workers)), 120,
                 "the workers to start")
        began = time.monotonic()
        targets = len(write_burst(folder, chain_ids, sources))

        def ended() -> bool:
            runs = chain_runs(chain_ids)
            return bool(runs) and all(r.state is not None and r.state.is_final() for r in runs) and sum(
                completed_tasks([r.id for r in runs]).values()) == targets

        wait_for(ended, 1200, "every run to end")
        seconds = time.monotonic() - began
        return len(chain_runs(chain_ids)), seconds
    finally:
        for worker in started:
            stop(worker)
        stop(watch)


def main() -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from rich.console import Console
    from rich.table import Table

    from deployments.pool import CRASH_AFTER
    from deployments.server import start_server
    from harness.ports import free_port
    from harness.postgres_cluster import postgres_cluster
    from harness.workers import burst_sources, kill_a_worker_mid_chain

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--deaths", type=int, default=2)
    parser.add_argument("--slots", type=int, default=200)
    args = parser.parse_args()
    sources = burst_sources(args.slots)
    rounds = args.rounds
    console = Console()
    rates: dict[tuple[str, int], list[float]] = {setup: [] for setup in SETUPS}
    bursts: dict[tuple[str, int], list[float]] = {setup: [] for setup in SETUPS}
    with tempfile.TemporaryDirectory() as tmp, postgres_cluster() as postgres:
        servers = {
            "SQLite": start_server(port=free_port(), home=Path(tmp) / "home-sqlite"),
            "PostgreSQL": start_server(port=free_port(), home=Path(tmp) / "home-pg", database=postgres.url,
                                       ready_timeout=240),
        }
        try:
            for round_ in range(rounds):
                for database, workers in (SETUPS if round_ % 2 == 0 else tuple(reversed(SETUPS))):
                    api_url = servers[database].api_url
                    with temporary_settings(updates={PREFECT_API_URL: api_url}):
                        folder = Path(tmp) / f"r{round_}-{database}-{workers}"
                        runs, seconds = measure(api_url, folder, workers, sources)
                    rates[database, workers].append(60 * runs / seconds)
                    bursts[database, workers].append(seconds)
                    console.print(f"round {round_ + 1}, {database}, {workers} worker(s): {runs} runs in "
                                  f"{seconds:.1f} s (load {os.getloadavg()[0]:.1f})")
            deaths = []
            api_url = servers["PostgreSQL"].api_url
            for death in range(args.deaths):
                with temporary_settings(updates={PREFECT_API_URL: api_url}):
                    folder = Path(tmp) / "deaths" / f"dying-{death}"
                    deaths.append(kill_a_worker_mid_chain(
                        api_url, f"bench-death-{death}", folder, CRASH_AFTER.total_seconds()).seconds)
                console.print(f"worker death {death + 1}: run completed elsewhere {deaths[-1]:.1f} s later")
        finally:
            for server in servers.values():
                server.stop()
    table = Table(title=f"{args.slots} agent slots across 3 chains, --limit {LIMIT} per worker, "
                        f"median of {rounds} rounds")
    for column in ("database", "workers", "chain runs/min", "burst (s)", "time vs SQLite, 1 worker"):
        table.add_column(column)
    base = statistics.median(bursts["SQLite", 1])
    for setup in SETUPS:
        seconds = statistics.median(bursts[setup])
        table.add_row(setup[0], str(setup[1]), f"{statistics.median(rates[setup]):.1f}", f"{seconds:.1f}",
                      f"{seconds / base:.2f}x")
    console.print(table)
    if deaths:
        console.print(f"worker killed -> its run completed on the other worker: median "
                      f"{statistics.median(deaths):.1f} s of {len(deaths)} (min {min(deaths):.1f}, "
                      f"max {max(deaths):.1f})")
    console.print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
