"""Chain engine overhead: a chain of 100 trivial python nodes against 100 bare Prefect tasks.

Both run in this process as one flow run each, on a real local Prefect server started here
(temporary PREFECT_HOME, free port): the baseline is a flow of 100 sequential tasks doing the same
work (`n + 1`), the chain adds what the engine does per node (input slot read, checks, output slot
atomic write, route evaluation, input slot write of the next node).

The two variants are interleaved (bare, chain, bare, chain, ...) after one warm-up run each, and each
is reported as its median with the IQR (bench/spread.py); the ratio carries the range its quartiles
allow, and a comparison whose spread is wider than its gap says so.

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
from pathlib import Path

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
            "input_slot": None if i == 0 else {"slot_id": f"n{i:03d}-in", "path": f"slots/n{i:03d}_input.json"},
            "output_slot": {"slot_id": f"n{i:03d}", "path": f"slots/n{i:03d}_output.json"},
            "executor": {"kind": "python", "callable": "trivial:step"},
        })
    routes = [{"route_id": f"r{i:03d}", "from_node": f"n{i:03d}", "to_node": f"n{i + 1:03d}",
               "condition": {"field": "status", "operator": "equals", "value": "completed"}} for i in range(NODES - 1)]
    path = folder / "node_chain.json"
    path.write_text(json.dumps({"chain_id": "bench", "nodes": nodes, "routes": routes}))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (each runs both variants)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of one more chain run here")
    args = parser.parse_args()
    console = Console()
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

        def timed_bare() -> float:
            started = time.perf_counter()
            result = bare()
            elapsed = time.perf_counter() - started
            assert result == {"n": NODES}, result
            return elapsed

        def timed_chain() -> float:
            started = time.perf_counter()
            result = run_chain(str(chain_path))
            elapsed = time.perf_counter() - started
            assert result["state"] == "COMPLETED", result
            return elapsed

        variants = {"bare Prefect tasks": timed_bare, "slotrelay chain": timed_chain}
        with console.status(f"a warm-up run of each, then {args.rounds} interleaved rounds"):
            for run in variants.values():
                run()
            samples = interleaved(variants, args.rounds)
        base, chain = samples["bare Prefect tasks"], samples["slotrelay chain"]
        per_node = 1000 / NODES
        table = Table(title=f"one flow run of {NODES} sequential nodes, {args.rounds} interleaved rounds")
        for column in ("variant", "per node ms, median (IQR)", "ratio to bare tasks (quartile range)"):
            table.add_column(column, justify="right" if column != "variant" else "left")
        table.add_row("bare Prefect tasks", described(base, per_node, 1), "baseline")
        table.add_row("slotrelay chain", described(chain, per_node, 1), ratio(chain, base))
        console.print(table)
        met = "meets" if statistics.median(chain) / statistics.median(base) <= GOAL else "misses"
        console.print(f"chain overhead {met} the goal of {GOAL:.2f}x bare Prefect tasks")
        note = spread_note(chain, base, "chain vs bare tasks")
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
