"""Chain engine overhead: a chain of 100 trivial python nodes against 100 bare Prefect tasks.

Both run in this process as one flow run each, on a real local Prefect server started here
(temporary PREFECT_HOME, free port): the baseline is a flow of 100 sequential tasks doing the same
work (`n + 1`), the chain adds what the engine does per node (input slot read, checks, output slot
atomic write, route evaluation, input slot write of the next node).

Each pair is also run with a CPU hog beside it: a process of the bench's own spinning on one core
(pinned to it), started before the pair's run and stopped after it, as another user's busy process on
a 2-core machine would be. Both pay the same contention, so the ratio with the hog shows what the
engine adds per node when it must share the machine.

The four variants are interleaved (bare, chain, bare with the hog, chain with the hog, bare, ...)
after one warm-up run of each pair, and each is reported as its median with the IQR
(bench/spread.py); the ratio carries the range its quartiles allow, and a comparison whose spread is
wider than its gap says so. Beside the wall time it reports
the CPU time each run costs in this process and in the server's processes: on a machine shared with
other work the wall time swings with their load, this process's CPU time much less (the server's
includes its background services, which run per second, not per request).

Each run starts on a settled server: the server records task runs from their events after the flow
run has returned, and a run started while it still wrote the previous one's (SQLite, one writer) had
`POST /flow_runs/` refused with 503 and retried after 2, 4, 8 s (measured under load: 3 to 16 s
before a run's first task, against about 1.3 s on a settled server), the largest part of the spread.
So before a run the bench waits until the server has recorded every task run so far, and a run's
server CPU is counted until its own task runs are recorded.

Prefect's flow-run heartbeat is off in both (`--prefect-heartbeats` keeps Prefect's default, a
heartbeat every 180 s). Its thread sleeps in steps of one second and the flow engine joins it when a
run ends (prefect/flow_engine.py, `_send_heartbeats`: `time.sleep(1)` in `heartbeat_loop`, then
`thread.join(timeout=2)`), so every run ends on its next whole second after the thread started: a
constant of 0-1 s a run, not a cost of its nodes, that put a 100-node run's wall time in steps of 10 ms
a node (bare tasks 11.0 ms, the chain 21.0 ms, for a gap of a few ms).

`--slot-write-control` adds a third variant to each condition: the bare tasks, each also writing one
slot the way an engine node writes its output slot (`write_slot`: a temporary file, fsync, rename,
folder fsync). It prices that durable write alone: a task that waits on fsync leaves Prefect's threads
idle, and their work after the wait costs the process more CPU than the fsync itself
(docs/benchmarks.md, the chain section). The chain's ratio to it is what the engine adds besides the
write the durability contract keeps.

    .venv/bin/python bench/chain_overhead.py [--rounds 15] [--without-hog] [--prefect-heartbeats]
        [--slot-write-control] [--profile FILE]

`--profile FILE` runs the chain once more under cProfile after the timed rounds and writes the stats
(read them with `python -m pstats FILE`).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
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

from harness.load import cpu_hogs
from harness.ports import free_port

NODES = 100
GOAL = 1.15
# Wall time with the hog: the engine's work waits for the core the hog leaves it, as bare tasks' does.
GOAL_WALL_WITH_HOG = 1.3
BARE, CHAIN = "bare Prefect tasks", "slotrelay chain"
BARE_SLOT = "bare tasks + a slot write"
QUIET, HOG = "", " + CPU hog"



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


def cpu_seconds(processes: list[psutil.Process], *, leaving_out: tuple[psutil.Process, ...] = ()) -> float:
    """User + system CPU time of these processes and all their children so far, but for `leaving_out`
    and their children (the server and the hog are children of this process: counted in "CPU here"
    the server's was counted twice)."""
    left_out = set()
    for process in leaving_out:
        left_out |= {process.pid, *(child.pid for child in process.children(recursive=True))}
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


def wait_recorded(api: httpx.Client, task_runs: int) -> None:
    """Wait until the server has recorded `task_runs` Completed task runs (at most a minute)."""
    query = {"task_runs": {"state": {"type": {"any_": ["COMPLETED"]}}}}
    deadline = time.monotonic() + 60
    while api.post("/task_runs/count", json=query).json() < task_runs:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server has not recorded {task_runs} task runs in a minute")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (each runs every variant)")
    parser.add_argument("--without-hog", action="store_true", help="leave out the variants with a CPU hog")
    parser.add_argument("--prefect-heartbeats", action="store_true",
                        help="keep Prefect's flow-run heartbeat (its end of run waits for a whole second)")
    parser.add_argument("--slot-write-control", action="store_true",
                        help="add bare tasks that each write one slot as a node writes its output slot")
    parser.add_argument("--profile", type=Path, help="write a cProfile of one more chain run here")
    args = parser.parse_args()
    console = Console(width=170)
    home = Path(tempfile.mkdtemp(prefix="slotrelay-bench-"))
    from deployments.server import start_server

    with console.status("starting a Prefect server for the benchmark"):
        server = start_server(port=free_port(), home=home / "prefect")
    os.environ["PREFECT_API_URL"] = server.api_url
    # One client for the waits between runs: a new one per poll built an SSL context each time.
    api = httpx.Client(base_url=server.api_url)
    try:
        from prefect import flow, task
        from prefect.cache_policies import NO_CACHE
        from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

        from flows.chain import run_chain
        from slotrelay.chain.slots import write_slot

        @task(cache_policy=NO_CACHE, persist_result=False)
        def step(data: dict) -> dict:
            return {"n": data.get("n", 0) + 1}

        control_slot = home / "control" / "output.json"

        @task(cache_policy=NO_CACHE, persist_result=False)
        def step_writing(data: dict) -> dict:
            output = {"n": data.get("n", 0) + 1}
            write_slot(control_slot, {"status": "completed", "data": output})
            return output

        def tasks_flow(name: str, each: Any) -> Any:
            """A flow of NODES runs of the task `each`, one after the other."""

            @flow(name=name, persist_result=False)
            def tasks() -> dict:
                data: dict = {}
                for i in range(NODES):
                    data = each.with_options(task_run_name=f"t{i:03d}").submit(data).result()
                return data

            return tasks

        bare, bare_writing = tasks_flow("bare-tasks", step), tasks_flow("bare-tasks-writing", step_writing)

        chain_path = write_chain(home)
        here, served = [psutil.Process()], [psutil.Process(server.process.pid)]
        server_process = served[0]
        conditions = (QUIET,) if args.without_hog else (QUIET, HOG)
        kinds = (BARE, CHAIN, BARE_SLOT) if args.slot_write_control else (BARE, CHAIN)
        names = [f"{variant}{condition}" for condition in conditions for variant in kinds]
        cpu: dict[str, list[float]] = {name: [] for name in names}
        server_cpu: dict[str, list[float]] = {name: [] for name in names}
        load: list[float] = []

        recorded = [0]

        def measured(name: str, run: Callable[[], Any], check: Callable[[Any], bool],
                     hog: psutil.Process | None) -> float:
            wait_recorded(api, recorded[0])
            load.append(os.getloadavg()[0])
            left_out = (server_process, hog) if hog is not None else (server_process,)
            cpu_before, server_before = cpu_seconds(here, leaving_out=left_out), cpu_seconds(served)
            started = time.perf_counter()
            result = run()
            elapsed = time.perf_counter() - started
            cpu[name].append(cpu_seconds(here, leaving_out=left_out) - cpu_before)
            recorded[0] += NODES
            wait_recorded(api, recorded[0])
            server_cpu[name].append(cpu_seconds(served) - server_before)
            assert check(result), result
            return elapsed

        def timed(name: str, run: Callable[[], Any], check: Callable[[Any], bool]) -> Callable[[], float]:
            def once() -> float:
                if not name.endswith(HOG):
                    return measured(name, run, check, None)
                with cpu_hogs() as [hog]:
                    return measured(name, run, check, hog)
            return once

        runs: dict[str, tuple[Callable[[], Any], Callable[[Any], bool]]] = {
            BARE: (bare, lambda r: r == {"n": NODES}),
            CHAIN: (lambda: run_chain(str(chain_path)), lambda r: r["state"] == "COMPLETED"),
            BARE_SLOT: (bare_writing, lambda r: r == {"n": NODES}),
        }
        variants = {name: timed(name, *runs[name.removesuffix(HOG)]) for name in names}
        heartbeats = {} if args.prefect_heartbeats else {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
        with console.status(f"a warm-up run of each, then {args.rounds} interleaved rounds"), \
                temporary_settings(updates=heartbeats):
            for run in variants.values():
                run()
            for times in (*cpu.values(), *server_cpu.values(), load):
                times.clear()
            samples = interleaved(variants, args.rounds)
        per_node = 1000 / NODES
        table = Table(title=f"one flow run of {NODES} sequential nodes, {args.rounds} interleaved rounds:"
                            " per node ms, median (IQR), and ratio to bare tasks (quartile range)")
        for column in ("variant", "wall", "wall ratio", "CPU here", "CPU ratio", "CPU server",
                       "server ratio"):
            table.add_column(column, justify="right" if column != "variant" else "left")
        for condition in conditions:
            base_name, chain_name = f"{BARE}{condition}", f"{CHAIN}{condition}"
            base, chain = samples[base_name], samples[chain_name]
            table.add_row(base_name, described(base, per_node, 1), "baseline",
                          described(cpu[base_name], per_node, 1), "baseline",
                          described(server_cpu[base_name], per_node, 1), "baseline")
            table.add_row(chain_name, described(chain, per_node, 1), ratio(chain, base),
                          described(cpu[chain_name], per_node, 1), ratio(cpu[chain_name], cpu[base_name]),
                          described(server_cpu[chain_name], per_node, 1),
                          ratio(server_cpu[chain_name], server_cpu[base_name]))
            if args.slot_write_control:
                control_name = f"{BARE_SLOT}{condition}"
                control = samples[control_name]
                table.add_row(control_name, described(control, per_node, 1), ratio(control, base),
                              described(cpu[control_name], per_node, 1),
                              ratio(cpu[control_name], cpu[base_name]),
                              described(server_cpu[control_name], per_node, 1),
                              ratio(server_cpu[control_name], server_cpu[base_name]))
        console.print(table)
        if args.slot_write_control:
            for condition in conditions:
                chain_name, control_name = f"{CHAIN}{condition}", f"{BARE_SLOT}{condition}"
                console.print(f"chain against {control_name}: wall"
                              f" {ratio(samples[chain_name], samples[control_name])},"
                              f" CPU here {ratio(cpu[chain_name], cpu[control_name])}")
        console.print(f"load average (1 min) before each run: {described(load, 1, 1)},"
                      f" {min(load):.1f}-{max(load):.1f}; Prefect's flow-run heartbeat"
                      f" {'on' if args.prefect_heartbeats else 'off'}")
        for condition in conditions:
            wall_goal = GOAL_WALL_WITH_HOG if condition == HOG else GOAL
            base_name, chain_name = f"{BARE}{condition}", f"{CHAIN}{condition}"
            for what, mine, reference, goal in (
                    ("wall", samples[chain_name], samples[base_name], wall_goal),
                    ("CPU here", cpu[chain_name], cpu[base_name], GOAL)):
                met = "meets" if statistics.median(mine) / statistics.median(reference) <= goal else "misses"
                console.print(f"chain overhead{condition} ({what}) {met} the goal of {goal:.2f}x bare Prefect"
                              " tasks")
                note = spread_note(mine, reference, f"chain vs bare tasks{condition} ({what})")
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
        api.close()
        server.stop()


if __name__ == "__main__":
    main()
