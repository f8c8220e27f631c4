"""How fast the PSMR MCP server answers: cold start to first answer over stdio, and the p50 of
psmr_query_subgraph (depth 2) over stdio, streamable HTTP and the in-memory client, against the
same query through `slotrelay.psmr.api.call` in this process (the baseline the ratios divide by).

The cold start (spawn to the first tool answer, workspace already built) is measured against the
MCP SDK's minimal server (`bench/mcp_minimal_server.py`) in the same run, the two interleaved
(A, B, A, B, ...), each reported as its median with the interquartile range: the wall time through the
SDK's client, and in rounds of their own the CPU time the server process spent until it answered
(every thread's, from /proc/PID/task/*/schedstat), which the load of a shared machine inflates far
less than the wall time.

The workspace is a copy of an installed package (rich), so the numbers come from real code.
`--base-tree PATH` adds a third server to the same interleaved rounds: `slotrelay mcp serve` of another
checkout (e.g. `git archive main | tar -x -C PATH`), run with this venv and PYTHONPATH=PATH, so a change
and its base are compared under the same load; it keeps its workspace in a state folder of its own
(built by its untimed first start), so a change of the store's format does not make either server
rebuild the other's. `--calls 0` measures the cold start only.

    .venv/bin/python bench/mcp_latency.py [--calls 50] [--cold 15] [--base-tree PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from rich.console import Console
from rich.table import Table
from spread import described, goal_note, interleaved, ratio, spread_note

from harness.commands import SLOTRELAY
from psmr_mcp import WorkspaceRegistry, build_server
from slotrelay import fsio
from slotrelay.psmr import api

PACKAGE = "rich"
ANCHOR = "rich.console.Console.print"
QUERY = {"anchor": {"kind": "symbol", "value": ANCHOR}, "depth": 2}
console = Console()
QUIET = open(os.devnull, "w")  # noqa: SIM115 - the servers' stderr sink, open for the whole run
# What the servers get: this process's environment (the SDK passes only a few safe variables, and
# PYTHONPATH must reach them so a worktree's code is the one measured), with bytecode caches allowed,
# as in any installed copy: without them every start compiles slotrelay's sources again.
SERVER_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
MINIMAL_SERVER = Path(__file__).with_name("mcp_minimal_server.py")
COLD_GOAL_S = 0.5


def _copy_package(into: Path) -> Path:
    import importlib

    source = Path(importlib.import_module(PACKAGE).__file__).parent
    root = into / PACKAGE
    shutil.copytree(source, root / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _serve_args(root: Path) -> list[str]:
    return ["mcp", "serve", "--workspace", str(root)]


def _stdio(root: Path, tree: Path | None = None) -> Client:
    """A client that spawns `slotrelay mcp serve` on stdio, its start-up lines sent to /dev/null; with
    `tree`, that checkout's code (first on PYTHONPATH) instead of this one's."""
    env = _server_env(tree)
    params = StdioServerParameters(command=SLOTRELAY, args=_serve_args(root), cwd=root, env=env)
    return Client(stdio_client(params, errlog=QUIET))


async def _cold_start(root: Path, tree: Path | None = None) -> float:
    """Seconds from spawning `slotrelay mcp serve` to the first tool answer over stdio."""
    return await _first_answer(_stdio(root, tree), "psmr_query_search", {"text": "Console"})


async def _minimal_cold_start() -> float:
    """Seconds from spawning the SDK's minimal server to its first tool answer over stdio."""
    params = StdioServerParameters(command=sys.executable, args=[str(MINIMAL_SERVER)], env=SERVER_ENV)
    return await _first_answer(Client(stdio_client(params, errlog=QUIET)), "search", {"text": "Console"})


def _server_env(tree: Path | None) -> dict[str, str]:
    """The environment of this checkout's server, or of another checkout's (its code first on
    PYTHONPATH, its own state folder beside this run's)."""
    if tree is None:
        return SERVER_ENV
    state = Path(SERVER_ENV[fsio.STATE_HOME_ENV]).with_name("state-of-base-tree")
    return {**SERVER_ENV, "PYTHONPATH": str(tree), fsio.STATE_HOME_ENV: str(state)}


def _server_command(root: Path, tree: Path | None = None) -> tuple[list[str], dict[str, str]]:
    return [SLOTRELAY, *_serve_args(root)], _server_env(tree)


def _cold_cpu(command: list[str], env: dict[str, str], tool: str) -> float:
    """CPU seconds a stdio server spends from its spawn to its first tool answer, all threads counted.

    Spoken as raw JSON-RPC lines (initialize, initialized, tools/call): the server's CPU is read the
    moment the answer arrives, before stdin closes.
    """
    process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    call = {"name": tool, "arguments": {"text": "Console"}}
    reply: dict = {}
    try:
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
        ):
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            # A server may send notifications (log messages) before the answer: read up to the answer.
            while "id" in message and reply.get("id") != message["id"]:
                reply = json.loads(process.stdout.readline())
        threads = Path(f"/proc/{process.pid}/task").glob("*/schedstat")
        cpu_ns = sum(int(path.read_text().split()[0]) for path in threads)
    finally:
        process.stdin.close()
        process.wait(timeout=60)
    assert "result" in reply and not reply["result"].get("isError"), reply
    return cpu_ns / 1e9


async def _first_answer(connect: Client, tool: str, arguments: dict) -> float:
    started = time.perf_counter()
    async with connect as client:
        result = await client.call_tool(tool, arguments)
        elapsed = time.perf_counter() - started
    assert not result.is_error, result.content[0].text
    return elapsed


async def _timed_calls(client: Client, calls: int) -> list[float]:
    await client.call_tool("psmr_query_subgraph", QUERY)  # warm caches and the connection
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        result = await client.call_tool("psmr_query_subgraph", QUERY)
        times.append(time.perf_counter() - started)
        assert not result.is_error, result.content[0].text
    return times


async def _over(connect: Callable[[], Client], calls: int) -> list[float]:
    async with connect() as client:
        return await _timed_calls(client, calls)


def _direct(root: Path, store: Path, calls: int) -> list[float]:
    workspace_id = api.build_workspace(root)["workspace_id"]
    request = {**QUERY, "workspace_id": workspace_id}
    api.call("query.subgraph", request, store=store)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        answer = api.call("query.subgraph", request, store=store)
        times.append(time.perf_counter() - started)
        assert answer["status"] == "ok", answer
    return times


def _start_http(root: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [SLOTRELAY, *_serve_args(root), "--http", f"127.0.0.1:{port}"],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while (
        "PSMR MCP server at " not in log.read_text()
        and process.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    if process.poll() is not None or "PSMR MCP server at " not in log.read_text():
        raise SystemExit(f"the HTTP server did not start:\n{log.read_text()}")
    return process, f"http://127.0.0.1:{port}/mcp"


def _row(table: Table, name: str, times: list[float], baseline: float) -> None:
    p50 = statistics.median(times)
    p90 = statistics.quantiles(times, n=10)[-1]
    table.add_row(name, f"{p50 * 1000:.2f}", f"{p90 * 1000:.2f}", f"{p50 / baseline:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50,
                        help="timed calls per transport (default 50; 0: the cold start only)")
    parser.add_argument("--cold", type=int, default=15, help="cold starts of each server (default 15)")
    parser.add_argument("--base-tree", type=Path, default=None,
                        help="another checkout whose `slotrelay mcp serve` joins the cold-start rounds")
    arguments = parser.parse_args()
    calls = arguments.calls
    base_tree = arguments.base_tree.resolve() if arguments.base_tree else None
    with tempfile.TemporaryDirectory(prefix="psmr-mcp-bench-") as scratch:
        # The bench's store and keys live in its scratch folder, never in the user's state folder.
        state = str(Path(scratch) / "state")
        os.environ[fsio.STATE_HOME_ENV] = SERVER_ENV[fsio.STATE_HOME_ENV] = state
        root = _copy_package(Path(scratch))
        started = time.perf_counter()
        summary = api.build_workspace(root)
        build_s = time.perf_counter() - started
        store = Path(summary["store"])
        console.print(
            f"{PACKAGE}: {summary['files']} files, {summary['nodes']} nodes, built in {build_s:.2f}s"
        )

        servers: dict[str, Callable[[], float]] = {
            "slotrelay mcp serve (built workspace)": lambda: anyio.run(_cold_start, root),
            "the SDK's minimal server (reference)": lambda: anyio.run(_minimal_cold_start),
        }
        if base_tree is not None:
            servers[f"slotrelay mcp serve of {base_tree}"] = lambda: anyio.run(_cold_start, root, base_tree)
        for start in servers.values():
            start()  # untimed: bytecode caches written, files in the page cache
        ours = _server_command(root)
        minimal_command = ([sys.executable, str(MINIMAL_SERVER)], SERVER_ENV)
        cpu_of: dict[str, Callable[[], float]] = {
            "slotrelay mcp serve (built workspace)": lambda: _cold_cpu(*ours, "psmr_query_search"),
            "the SDK's minimal server (reference)": lambda: _cold_cpu(*minimal_command, "search"),
        }
        if base_tree is not None:
            base = _server_command(root, base_tree)
            cpu_of[f"slotrelay mcp serve of {base_tree}"] = lambda: _cold_cpu(*base, "psmr_query_search")
        load = os.getloadavg()
        cold = interleaved(servers, arguments.cold)
        cpu = interleaved(cpu_of, arguments.cold)
        load = tuple((a + b) / 2 for a, b in zip(load, os.getloadavg(), strict=True))
        first = anyio.run(_cold_start, _copy_package(Path(scratch) / "fresh"))
        if calls > 0:
            direct = _direct(root, store, calls)
            baseline = statistics.median(direct)

            registry = WorkspaceRegistry([root])
            registry.build(root, at_startup=True)
            memory = anyio.run(_over, lambda: Client(build_server(registry)), calls)
            stdio = anyio.run(_over, lambda: _stdio(root), calls)
            process, url = _start_http(root, Path(scratch) / "http.log")
            try:
                http = anyio.run(_over, lambda: Client(url), calls)
            finally:
                os.killpg(process.pid, signal.SIGINT)
                process.wait(timeout=20)

    if calls > 0:
        table = Table(title=f"psmr_query_subgraph {ANCHOR} depth 2, {calls} calls each")
        for column in ("path", "p50 ms", "p90 ms", "p50 vs api.call"):
            table.add_column(column, justify="right" if column != "path" else "left")
        _row(table, "api.call (baseline, in process)", direct, baseline)
        _row(table, "MCP in-memory client", memory, baseline)
        _row(table, "MCP stdio (slotrelay mcp serve)", stdio, baseline)
        _row(table, "MCP streamable HTTP (127.0.0.1)", http, baseline)
        console.print(table)
    served, minimal = (cold[name] for name in list(servers)[:2])
    cold_table = Table(
        title=f"cold start over stdio: spawn to first answer, {arguments.cold} interleaved rounds, "
              f"load average {load[0]:.1f} (1 min, mean of start and end)")
    cold_table.add_column("server")
    cold_table.add_column("median ms (IQR)", justify="right")
    cold_table.add_column("vs the SDK's minimal server", justify="right")
    for name, times in cold.items():
        cold_table.add_row(name, described(times, 1000), ratio(times, minimal))
    cold_table.add_row("slotrelay mcp serve, workspace not built (1 run)", f"{first * 1000:.0f}", "")
    console.print(cold_table)
    cpu_table = Table(
        title=f"CPU of the server from spawn to its first answer, {arguments.cold} interleaved rounds")
    cpu_table.add_column("server")
    cpu_table.add_column("median ms (IQR)", justify="right")
    cpu_table.add_column("vs the SDK's minimal server", justify="right")
    minimal_cpu = cpu["the SDK's minimal server (reference)"]
    for name, times in cpu.items():
        cpu_table.add_row(name, described(times, 1000), ratio(times, minimal_cpu))
    console.print(cpu_table)
    console.print(goal_note(served, COLD_GOAL_S, "slotrelay mcp serve cold start"))
    note = spread_note(served, minimal, "slotrelay vs the SDK's minimal server")
    if note:
        console.print(f"[yellow]{note}[/]")


if __name__ == "__main__":
    main()
