"""Chain engine overhead: a chain of 100 trivial python nodes against 100 bare Prefect tasks.

Both run in this process as one flow run each, on a real local Prefect server started here
(temporary PREFECT_HOME, free port): the baseline is a flow of 100 sequential tasks doing the same
work (`n + 1`), the chain adds what the engine does per node (input slot read, checks, output slot
atomic write, route evaluation, input slot write of the next node).

The two variants are interleaved (bare, chain, bare, chain, ...) after one warm-up run each, and each
is reported as its median with the IQR (bench/spread.py); the ratio carries the range its quartiles
allow, and a comparison whose spread is wider than its gap says so. Beside the wall time it reports
the CPU time each run costs in this process and in the server's processes: on a machine shared with
other work the wall time swings with their load, this process's CPU time much less (the server's
includes its background services, which run per second, not per request).

Each run starts on a settled server: the server records task runs from their events after the flow
run has returned, and a run started while it still wrote the previous one's (SQLite, one writer) had
`POST /flow_runs/` refused with 503 and retried after 2, 4, 8 s (measured under load: 3 to 16 s
before a run's first task, against about 1.3 s on a settled server), the largest part of the spread.
So before a run the bench waits until the server has recorded every task run so far, and a run's
server CPU is counted until its own task runs are recorded.

    .venv/bin/python bench/chain_overhead.py [--rounds 15] [--profile FILE]

`--profile FILE` runs the chain once more under cProfile after the timed rounds and writes the stats
(read them with `python -m pstats FILE`).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from spread import described, interleaved, ratio, spread_note

NODES = 100
GOAL = 1.15


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_chain(folder: Path) -> Path:
    (folder / "trivial.py").write_text("def step(data):\n    return {'n': data.get('n', 0) + 1}\n")
    nodes = []
    for i in range(NODES):
        nodes.append({
            "node_id": f"n{i:03d}",
            "input_slot": None if i == 0 else {"slot_id": f"n{i:03d}-in",
                                               "path": f"slots/n{i:03d}_input.json"},
            "output_slot": {"slot_id": f"n{i:03d}", "path": f"slots/n{i:03d}_output.json"},
            "executor": {"kind": "python", "callable": "trivial:step"},
        })
    routes = [{"route_id": f"r{i:03d}", "from_node": f"n{i:03d}", "to_node": f"n{i + 1:03d}",
               "condition": {"field": "status", "operator": "equals", "value": "completed"}} for i in range(
                   NODES - 1)]
    path = folder / "node_chain.json"
    path.write_text(json.dumps({"chain_id": "bench", "nodes": nodes, "routes": routes}))
    return path


def cpu_seconds(processes: list[psutil.Process], *, leaving_out: psutil.Process | None = None) -> float:
    """User + system CPU time of these processes and all their children so far, but for `leaving_out`
    and its children (the server is a child of this process: counted in "CPU here" it was counted twice)."""
    left_out = set()
    if leaving_out is not None:
        left_out = {leaving_out.pid, *(child.pid for child in leaving_out.children(recursive=True))}
    total = 0.0
    for process in processes:
        for each in (process, *process.children(recursive=True)):
            if each.pid in left_out:
                continue
            try:
                times = each.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total


def wait_recorded(api_url: str, task_runs: int) -> None:
    """Wait until the server has recorded `task_runs` Completed task runs (at most a minute)."""
    query = {"task_runs": {"state": {"type": {"any_": ["COMPLETED"]}}}}
    deadline = time.monotonic() + 60
    while httpx.post(f"{api_url}/task_runs/count", json=query).json() < task_runs:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server has not recorded {task_runs} task runs in a minute")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (each runs both variants)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of one more chain run here")
    args = parser.parse_args()
    console = Console(width=170)
    home = Path(tempfile.mkdtemp(prefix="slotrelay-bench-"))
    from deployments.server import start_server

    with console.status("starting a Prefect server for the benchmark"):
        server = start_server(port=free_port(), home=home / "prefect")
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        from prefect import flow, task
        from prefect.cache_policies import NO_CACHE

        from flows.chain import run_chain

        @task(cache_policy=NO_CACHE, persist_result=False)
        def step(data: dict) -> dict:
            return {"n": data.get("n", 0) + 1}

        @flow(name="bare-tasks", persist_result=False)
        def bare() -> dict:
            data: dict = {}
            for i in range(NODES):
                data = step.with_options(task_run_name=f"t{i:03d}").submit(data).result()
            return data

        chain_path = write_chain(home)
        here, served = [psutil.Process()], [psutil.Process(server.process.pid)]
        server_process = served[0]
        cpu: dict[str, list[float]] = {"bare Prefect tasks": [], "slotrelay chain": []}
        server_cpu: dict[str, list[float]] = {"bare Prefect tasks": [], "slotrelay chain": []}

        recorded = [0]

        def timed(name: str, run: Callable[[], Any], check: Callable[[Any], bool]) -> Callable[[], float]:
            def once() -> float:
                wait_recorded(server.api_url, recorded[0])
                cpu_before, server_before = cpu_seconds(here, leaving_out=server_process), cpu_seconds(served)
                started = time.perf_counter()
                result = run()
                elapsed = time.perf_counter() - started
                cpu[name].append(cpu_seconds(here, leaving_out=server_process) - cpu_before)
                recorded[0] += NODES
                wait_recorded(server.api_url, recorded[0])
                server_cpu[name].append(cpu_seconds(served) - server_before)
                assert check(result), result
                return elapsed
            return once

        variants = {
            "bare Prefect tasks": timed("bare Prefect tasks", bare, lambda r: r == {"n": NODES}),
            "slotrelay chain": timed("slotrelay chain", lambda: run_chain(str(chain_path)),
                                     lambda r: r["state"] == "COMPLETED"),
        }
        with console.status(f"a warm-up run of each, then {args.rounds} interleaved rounds"):
            for run in variants.values():
                run()
            for times in (*cpu.values(), *server_cpu.values()):
                times.clear()
            samples = interleaved(variants, args.rounds)
        base, chain = samples["bare Prefect tasks"], samples["slotrelay chain"]
        base_cpu, chain_cpu = cpu["bare Prefect tasks"], cpu["slotrelay chain"]
        base_server, chain_server = server_cpu["bare Prefect tasks"], server_cpu["slotrelay chain"]
        per_node = 1000 / NODES
        table = Table(title=f"one flow run of {NODES} sequential nodes, {args.rounds} interleaved rounds:"
                            " per node ms, median (IQR), and ratio to bare tasks (quartile range)")
        for column in ("variant", "wall", "wall ratio", "CPU here", "CPU ratio", "CPU server",
                       "server ratio"):
            table.add_column(column, justify="right" if column != "variant" else "left")
        table.add_row("bare Prefect tasks", described(base, per_node, 1), "baseline",
                      described(base_cpu, per_node, 1), "baseline",
                      described(base_server, per_node, 1), "baseline")
        table.add_row("slotrelay chain", described(chain, per_node, 1), ratio(chain, base),
                      described(chain_cpu, per_node, 1), ratio(chain_cpu, base_cpu),
                      described(chain_server, per_node, 1), ratio(chain_server, base_server))
        console.print(table)
        for what, mine, reference in (("wall", chain, base), ("CPU here", chain_cpu, base_cpu)):
            met = "meets" if statistics.median(mine) / statistics.median(reference) <= GOAL else "misses"
            console.print(f"chain overhead ({what}) {met} the goal of {GOAL:.2f}x bare Prefect tasks")
            note = spread_note(mine, reference, f"chain vs bare tasks ({what})")
            if note:
                console.print(f"[yellow]{note}[/]")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            run_chain(str(chain_path))
            profiler.disable()
            profiler.dump_stats(args.profile)
            console.print(f"profile of one chain run written to {args.profile}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
