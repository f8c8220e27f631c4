"""The Prefect server's CPU on the same API calls under uvicorn's two stacks: uvloop and httptools (what
uvicorn picks once they are installed, as they are with slotrelay) against asyncio and h11 (its fallback,
the baseline the ratio divides by).

Each round starts one Prefect API server (SQLite, a fresh home) in a process of its own, with uvicorn told
which loop and HTTP parser to use, warms it with a few runs, then times the same client workload: flow
runs created, moved through Pending, Running and Completed, read one by one and listed, as the sensor,
a run's engine and the tests' waits ask. The figure is the server process's CPU seconds (user + system)
over the workload; the two stacks alternate (A, B, A, B, ...) so a shared machine's load falls on both.

    .venv/bin/python bench/server_loop.py [--rounds 3] [--runs 150]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deployments.server import api_answers  # noqa: E402
from harness.ports import free_port  # noqa: E402
from harness.waiting import wait_for  # noqa: E402

BASELINE = "asyncio + h11 (baseline)"
STACKS = {"uvloop + httptools": ("uvloop", "httptools"), BASELINE: ("asyncio", "h11")}
SERVER = """
import sys
import uvicorn
from prefect.server.api.server import create_app
uvicorn.run(create_app(), host="127.0.0.1", port=int(sys.argv[1]), loop=sys.argv[2], http=sys.argv[3],
            log_level="warning")
"""
WORKLOAD = """
import asyncio, sys
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.states import Completed, Pending, Running

@flow
def bench_flow():
    pass

async def main(runs):
    async with get_client() as client:
        for i in range(runs):
            run = await client.create_flow_run(bench_flow, name=f"run-{i}")
            for state in (Pending(), Running()):
                await client.set_flow_run_state(run.id, state)
            await client.read_flow_run(run.id)
            await client.set_flow_run_state(run.id, Completed())
            await client.read_flow_runs(limit=10)

asyncio.run(main(int(sys.argv[1])))
"""


def server_cpu(loop: str, http: str, runs: int) -> float:
    """The server's CPU seconds over `runs` runs' worth of API calls, after a warm-up."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    with tempfile.TemporaryDirectory(prefix="server-loop-") as home:
        env = {**os.environ, "PREFECT_HOME": home, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        env.pop("PREFECT_API_URL", None)
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(port), loop, http], env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            what = f"the server ({loop}, {http})"
            wait_for(lambda: api_answers(url) or server.poll() is not None, 120, what)
            if server.poll() is not None:
                raise SystemExit(f"{what} ended with {server.returncode}")
            client_env = {**os.environ, "PREFECT_API_URL": url}
            subprocess.run([sys.executable, "-c", WORKLOAD, "20"], env=client_env, check=True)
            before = psutil.Process(server.pid).cpu_times()
            subprocess.run([sys.executable, "-c", WORKLOAD, str(runs)], env=client_env, check=True)
            after = psutil.Process(server.pid).cpu_times()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait()
    return (after.user + after.system) - (before.user + before.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=150)
    args = parser.parse_args()
    console = Console()
    seen: dict[str, list[float]] = {name: [] for name in STACKS}
    with console.status("") as status:
        for round_ in range(args.rounds):
            for name, (loop, http) in STACKS.items():
                status.update(f"round {round_ + 1}/{args.rounds}: {name}")
                seen[name].append(server_cpu(loop, http, args.runs))
    baseline = statistics.median(seen[BASELINE])
    load = os.getloadavg()[0]
    table = Table(title=f"Prefect server CPU over {args.runs} runs' API calls (load {load:.1f})")
    for column in ("stack", "CPU-s per round", "median", "x baseline"):
        table.add_column(column)
    for name, values in seen.items():
        median = statistics.median(values)
        rounds = ", ".join(f"{v:.2f}" for v in values)
        table.add_row(name, rounds, f"{median:.2f}", f"{median / baseline:.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
