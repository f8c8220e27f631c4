"""The Prefect server on SQLite vs on PostgreSQL: the same small burst of chain runs against each.

For each database a Prefect server is started here (`deployments.server.start_server`, temporary
PREFECT_HOME, free port; PostgreSQL is a private cluster made with initdb + pg_ctl, as in
tests/scale). A child process then runs a burst of BURST runs of a two-node python chain (count,
then double: two task runs, four slot writes per run) through `flows.chain.run_chain`, CONCURRENCY
at a time from a thread pool, each run in a slots folder of its own, after one warm-up run. The child
reports the burst's wall time; this prints runs per minute on each database and the ratio
PostgreSQL / SQLite (the baseline: the same burst, same process layout, on the default SQLite).
Rounds alternate the two databases so a change of machine load hits both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BURST = 12
CONCURRENCY = 4
ROUNDS = 2


def burst(api_url: str, chain: str, runs: int, concurrency: int, folder: str) -> None:
    """The child's part: a warm-up run, then the burst; prints {"seconds": ..., "completed": ...}."""
    os.environ["PREFECT_API_URL"] = api_url
    from flows.chain import run_chain

    def one(index: int) -> str:
        return run_chain(chain, slots_root=str(Path(folder) / f"run-{index}"))["state"]

    one(-1)
    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        states = list(pool.map(one, range(runs)))
    seconds = time.monotonic() - started
    print(json.dumps({"seconds": seconds, "completed": states.count("COMPLETED")}))


def _child(api_url: str, chain: Path, folder: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--burst", api_url, str(chain), str(BURST), str(CONCURRENCY), str(folder)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=1800,
        check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    from deployments.server import start_server
    from harness.chains import small_chain
    from harness.ports import free_port
    from harness.postgres_cluster import postgres_cluster

    console = Console()
    seconds: dict[str, list[float]] = {"SQLite": [], "PostgreSQL": []}
    with tempfile.TemporaryDirectory() as tmp, postgres_cluster() as postgres:
        chain = small_chain(Path(tmp) / "chain", "burst")
        servers = {
            "SQLite": start_server(port=free_port(), home=Path(tmp) / "home-sqlite"),
            "PostgreSQL": start_server(port=free_port(), home=Path(tmp) / "home-pg", database=postgres.url),
        }
        try:
            for round_ in range(ROUNDS):
                for name in (("SQLite", "PostgreSQL") if round_ % 2 == 0 else ("PostgreSQL", "SQLite")):
                    result = _child(servers[name].api_url, chain, Path(tmp) / f"{name}-{round_}")
                    if result["completed"] != BURST:
                        raise SystemExit(f"{name}: only {result['completed']} of {BURST} runs completed")
                    seconds[name].append(result["seconds"])
                    console.print(f"round {round_ + 1} {name}: {result['seconds']:.1f} s")
        finally:
            for server in servers.values():
                server.stop()
    table = Table(
        title=f"{BURST} chain runs (2 nodes each), {CONCURRENCY} at a time, median of {ROUNDS} rounds")
    for column in ("database", "burst (s)", "runs/min", "vs SQLite"):
        table.add_column(column)
    base = statistics.median(seconds["SQLite"])
    for name, values in seconds.items():
        median = statistics.median(values)
        table.add_row(name, f"{median:.1f}", f"{60 * BURST / median:.1f}", f"{median / base:.2f}x time")
    console.print(table)
    load = os.getloadavg()[0]
    console.print(f"load average at the end: {load:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", nargs=5, metavar=("API_URL", "CHAIN", "RUNS", "CONCURRENCY", "FOLDER"))
    arguments = parser.parse_args()
    if arguments.burst:
        api, chain_file, runs, concurrency, folder = arguments.burst
        burst(api, chain_file, int(runs), int(concurrency), folder)
    else:
        main()
