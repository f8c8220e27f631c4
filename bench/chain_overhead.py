"""Chain engine overhead: a chain of 100 trivial python nodes against 100 bare Prefect tasks.

Both run in this process as one flow run each, on a real local Prefect server started here
(temporary PREFECT_HOME, free port): the baseline is a flow of 100 sequential tasks doing the same
work (`n + 1`), the chain adds what the engine does per node (input slot read, checks, output slot
atomic write, route evaluation, input slot write of the next node). Prints the medians and the ratio.
"""

from __future__ import annotations

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

NODES = 100
REPEATS = 5


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


def main() -> None:
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
        timings: dict[str, list[float]] = {"bare Prefect tasks": [], "slotrelay chain": []}
        with console.status("running") as status:
            for repeat in range(REPEATS + 1):
                for name, run in (("bare Prefect tasks", bare),
                                  ("slotrelay chain", lambda: run_chain(str(chain_path)))):
                    status.update(f"{name}, run {repeat + 1} of {REPEATS + 1} (the first is a warm-up)")
                    started = time.perf_counter()
                    result = run()
                    elapsed = time.perf_counter() - started
                    if name == "slotrelay chain":
                        assert result["state"] == "COMPLETED", result
                    else:
                        assert result == {"n": NODES}, result
                    if repeat:
                        timings[name].append(elapsed)
        base = statistics.median(timings["bare Prefect tasks"])
        table = Table(
            title=f"one flow run of {NODES} sequential nodes (median of {REPEATS}, after a warm-up)")
        for column in ("variant", "total s", "per node ms", "ratio to bare tasks"):
            table.add_column(column, justify="right" if column != "variant" else "left")
        for name, values in timings.items():
            total = statistics.median(values)
            table.add_row(name, f"{total:.2f}", f"{total / NODES * 1000:.1f}", f"{total / base:.2f}x")
        console.print(table)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
