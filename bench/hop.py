"""The hop: an agent writes an output slot -> the downstream node's flow run is Running.

Three `slotrelay watch` processes on one real Prefect server started here (temporary PREFECT_HOME, free
port), each watching its own chain of `--rounds` external sources routed to python nodes:
- runner: `watch --warm 0`, the old path: the run waits for the runner's poll (every second) and a
  new Python process;
- warm: `watch --warm 2`, the run is handed to a warm process (deployments/warm.py);
- mcp: `watch --warm 2` as warm, but the agent submits its output over MCP (`node_submit`, through the
  SDK's client to a `slotrelay mcp serve --chain ... --agent src-i` on stdio, kept open) instead of
  writing the file: the hop starts before the call, so the call (its checks, the write, the answer of
  what follows) is in it (docs/agents.md).

Beside the times, each variant's CPU per hop: the CPU time the `watch`'s whole process tree spent
over the hops (its processes' own and that of the children they reaped: the runner's flow-run
processes, the warm processes and their replacements, the fork server's children), divided by the
hops. The runner's path is the baseline: a new Python process per run.

The variants are interleaved (runner, warm, runner, warm, ...), one hop at a time: each round writes a
source's output slot, waits until its run has ended, then goes on. The write's time is taken here; the
rest from the server's record of the run: its creation and the timestamps of its states (Scheduled,
Pending, Submitting, Running). Each step is reported as its median (IQR) and p95 per variant; the
warm path's total against the runner's as a ratio (bench/spread.py), with the goal (0.3 s p50,
0.6 s p95) and the load average before and after; the MCP path's against the file write's (warm).

    nice .venv/bin/python bench/hop.py [--rounds 30]
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
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from spread import described, goal_note, ratio, spread_note

from harness.chains import agent_writes, make_chain, start_watch_warm
from harness.load import tree_cpu
from harness.ports import free_port
from slotrelay.chain.ledger import LEDGER_FILE_NAME

console = Console()
GOAL_P50 = 0.3
GOAL_P95 = 0.6
# The steps of a hop, each from the previous one: (label, state or event that ends it).
STEPS = (
    ("write -> flow run created (sensor + API)", "created"),
    ("created -> Pending (claim)", "Pending"),
    ("Pending -> Submitting", "Submitting"),
    ("Submitting -> Running (child: engine set-up)", "Running"),
)
NODE_STEP = ("flow Running -> node task Running (chain load, task submit)", "node")



def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Variant:
    """One `slotrelay watch` process and the hops measured through it."""

    name: str
    warm: int
    folder: Path
    process: subprocess.Popen[bytes] | None = None
    via: str = "file"
    marks: list[dict[str, float]] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    submit: Any = None
    cpu: list[float] = field(default_factory=list)

    def start(self, rounds: int, api_url: str) -> None:
        self.chain = make_chain(self.folder, self.name, rounds)
        self.log = self.folder / "watch.log"
        self.process = start_watch_warm(self.chain, self.warm, api_url, self.log)

    def ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"watch ({self.name}) ended:\n{self.log.read_text()}")
        return "watching" in self.log.read_text()

    def tree_cpu(self) -> float:
        """CPU seconds of the watch's live process tree, with what each process's reaped children spent."""
        import psutil

        assert self.process is not None
        return tree_cpu(psutil.Process(self.process.pid))

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(120)

    def hop(self, client: Any, i: int) -> None:
        """Write source i's output slot; record when its run was created and reached each state."""
        ledger = self.folder / LEDGER_FILE_NAME
        began = time.time()
        if self.via == "mcp":
            answer = self.submit(f"src-{i}", {"i": i})
            if answer["status"] != "ok":
                self.missed.append(f"{self.name} {i}: node_submit refused: {answer['error']}")
                return
        else:
            agent_writes(self.folder, f"src-{i}", {"i": i})
        deadline = time.monotonic() + 60
        run_id = None
        while run_id is None and time.monotonic() < deadline:
            time.sleep(0.005)
            text = ledger.read_text() if ledger.exists() else ""
            started = [json.loads(x) for x in text.splitlines() if '"started"' in x]
            if len(started) > i:
                run_id = started[i]["flow_run_id"]
        if run_id is None:
            self.missed.append(f"{self.name} {i}: no run requested within 60 s")
            return
        while time.monotonic() < deadline:
            run = client.read_flow_run(run_id)
            if run.state is not None and run.state.is_final():
                break
            time.sleep(0.05)
        else:
            self.missed.append(f"{self.name} {i}: run {run_id} did not end within 60 s")
            return
        marks = {"created": run.created.timestamp() - began}
        for state in client.read_flow_run_states(run_id):
            marks.setdefault(state.name, state.timestamp.timestamp() - began)
        if "Running" not in marks:
            self.missed.append(f"{self.name} {i}: run {run_id} ended {run.state.name} without running")
            return
        node = node_started(client, run.id)
        if node is not None:
            marks["node"] = node - began
        self.marks.append(marks)


def node_started(client: Any, flow_run_id: Any) -> float | None:
    """When the run's node task entered Running (the server records task runs from their events, a
    moment after the flow run ends), or None if it is not recorded within 10 s."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    of_run = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        started = [t.start_time for t in client.read_task_runs(flow_run_filter=of_run) if t.start_time]
        if started:
            return min(started).timestamp()
        time.sleep(0.1)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="hops per variant")
    parser.add_argument("--keep", type=Path, help="copy the watch logs here")
    args = parser.parse_args()

    from deployments.server import start_server

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="slotrelay-hop-") as tmp:
        work = Path(tmp)
        server = start_server(port=free_port(), home=work / "prefect-home")
        os.environ["PREFECT_API_URL"] = server.api_url
        variants = [Variant("runner", 0, work / "runner"), Variant("warm", 2, work / "warm"),
                    Variant("mcp", 2, work / "mcp", via="mcp")]
        portal_cm = start_blocking_portal()
        portal = portal_cm.__enter__()
        mcp_client = None
        try:
            for variant in variants:
                variant.start(args.rounds, server.api_url)
            mcp = variants[2]
            agents = [word for i in range(args.rounds) for word in ("--agent", f"src-{i}")]
            mcp_client = portal.wrap_async_context_manager(Client(StdioServerParameters(
                command=str(Path(sys.executable).with_name("slotrelay")),
                args=["mcp", "serve", "--chain", str(mcp.chain), *agents], env=dict(os.environ))))
            session = mcp_client.__enter__()

            def submit(node_id: str, data: dict[str, Any]) -> dict[str, Any]:
                arguments = {"node_id": node_id, "status": "completed", "data": data,
                             "capabilities_used": ["Write"]}
                return portal.call(session.call_tool, "node_submit", arguments).structured_content

            mcp.submit = submit
            with console.status("starting the watchers"):
                while not all(v.ready() for v in variants):
                    time.sleep(0.2)
                time.sleep(10)  # the warm processes import Prefect (a few seconds on a loaded machine)
            from prefect.client.orchestration import get_client

            for variant in variants:
                variant.cpu.append(variant.tree_cpu())
            with get_client(sync_client=True) as client, console.status("hops") as status:
                for i in range(args.rounds):
                    for variant in variants:
                        status.update(f"hop {i + 1}/{args.rounds} ({variant.name})")
                        variant.hop(client, i)
            for variant in variants:
                variant.cpu.append(variant.tree_cpu())
        finally:
            if mcp_client is not None:
                mcp_client.__exit__(None, None, None)
            portal_cm.__exit__(None, None, None)
            for variant in variants:
                variant.stop()
            server.stop()
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for variant in variants:
                    (args.keep / f"watch-{variant.name}.log").write_text(variant.log.read_text())
    load_after = os.getloadavg()
    report(variants, load_before, load_after)


def hops_made(variant: Variant) -> int:
    """The hops a variant made (measured or missed): each wrote a slot and may have started a run."""
    return max(1, len(variant.marks) + len(variant.missed))


def report(variants: list[Variant], load_before: tuple[float, ...], load_after: tuple[float, ...]) -> None:
    table = Table(title="the hop, per step (ms): median (IQR), p95")
    table.add_column("step")
    for variant in variants:
        table.add_column(f"{variant.name} (n={len(variant.marks)})")
    totals: dict[str, list[float]] = {}
    previous = {v.name: [0.0] * len(v.marks) for v in variants}
    for label, mark in STEPS:
        cells = []
        for variant in variants:
            # A state a path does not go through counts as a step of no time.
            starts = previous[variant.name]
            ends = [m.get(mark, start) for m, start in zip(variant.marks, starts, strict=True)]
            steps = [end - start for end, start in zip(ends, starts, strict=True)]
            previous[variant.name] = ends
            cells.append(f"{described(steps, 1000)}, p95 {pct(steps, 0.95) * 1000:.0f}" if steps else "-")
        table.add_row(label, *cells)
    for variant in variants:
        totals[variant.name] = [m["Running"] for m in variant.marks]
    table.add_row("[bold]write -> flow run Running[/bold]", *(
        f"[bold]{described(totals[v.name], 1000)}, p95 {pct(totals[v.name], 0.95) * 1000:.0f}[/bold]"
        if totals[v.name] else "-" for v in variants))
    label, mark = NODE_STEP
    nodes = {v.name: [m[mark] for m in v.marks if mark in m] for v in variants}
    table.add_row(label, *(
        f"{described([m[mark] - m['Running'] for m in v.marks if mark in m], 1000)}" if nodes[v.name] else "-"
        for v in variants))
    table.add_row("write -> node task Running", *(
        f"{described(n, 1000)}, p95 {pct(n, 0.95) * 1000:.0f}" if (n := nodes[v.name]) else "-"
        for v in variants))
    console.print(table)
    runner, warm = totals.get("runner", []), totals.get("warm", [])
    if len(runner) >= 4 and len(warm) >= 4:
        console.print(f"warm / runner, write -> Running: {ratio(warm, runner)}")
        for note in (spread_note(warm, runner, "warm vs runner"), goal_note(warm, GOAL_P50, "warm p50")):
            if note:
                console.print(note)
        p95 = pct(warm, 0.95)
        console.print(f"warm p95 {p95 * 1000:.0f} ms {'meets' if p95 <= GOAL_P95 else 'misses'} the goal of "
                      f"{GOAL_P95 * 1000:.0f} ms; runner p50 {statistics.median(runner) * 1000:.0f} ms")
    warm_mcp = totals.get("mcp", [])
    if len(warm) >= 4 and len(warm_mcp) >= 4:
        console.print(f"mcp / warm (node_submit vs a file write), write -> Running: {ratio(warm_mcp, warm)}; "
                      f"mcp p50 {statistics.median(warm_mcp) * 1000:.0f} ms, warm p50 "
                      f"{statistics.median(warm) * 1000:.0f} ms")
        node_mcp, node_warm = nodes.get("mcp", []), nodes.get("warm", [])
        if len(node_mcp) >= 4 and len(node_warm) >= 4:
            medians = (f"{statistics.median(node_mcp) * 1000:.0f} vs "
                       f"{statistics.median(node_warm) * 1000:.0f} ms")
            console.print(f"mcp / warm, write -> node task Running: {ratio(node_mcp, node_warm)}; "
                          f"medians {medians}")
    per_hop = {v.name: (v.cpu[1] - v.cpu[0]) / hops_made(v) for v in variants if len(v.cpu) == 2}
    if per_hop:
        console.print("CPU per hop (watch's process tree): " + ", ".join(
            f"{name} {cpu:.2f} s" for name, cpu in per_hop.items()))
        if "runner" in per_hop and "warm" in per_hop:
            console.print(f"warm / runner, CPU per hop: {per_hop['warm'] / per_hop['runner']:.2f}x")
    for variant in variants:
        for miss in variant.missed:
            console.print(f"[yellow]not in the table: {miss}[/yellow]")
    console.print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
                  f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; "
                  f"measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
