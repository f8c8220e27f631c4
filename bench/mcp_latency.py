"""How fast the PSMR MCP server answers: cold start to first answer over stdio, and the p50 of
psmr_query_subgraph (depth 2) over stdio, streamable HTTP and the in-memory client, against the
same query through `slotrelay.psmr.api.call` in this process (the baseline the ratios divide by).

The cold start (spawn to the first tool answer, workspace already built) is measured against the
MCP SDK's minimal server (`bench/mcp_minimal_server.py`) in the same run, the two interleaved
(A, B, A, B, ...), each reported as its median with the interquartile range.

The workspace is a copy of an installed package (rich), so the numbers come from real code.

    .venv/bin/python bench/mcp_latency.py [--calls 50] [--cold 15]
"""

from __future__ import annotations

import argparse
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

from psmr_mcp import WorkspaceRegistry, build_server
from slotrelay import fsio
from slotrelay.psmr import api

SLOTRELAY = str(Path(sys.executable).with_name("slotrelay"))
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


def _stdio(root: Path) -> Client:
    """A client that spawns `slotrelay mcp serve` on stdio, its start-up lines sent to /dev/null."""
    params = StdioServerParameters(command=SLOTRELAY, args=_serve_args(root), cwd=root, env=SERVER_ENV)
    return Client(stdio_client(params, errlog=QUIET))


async def _cold_start(root: Path) -> float:
    """Seconds from spawning `slotrelay mcp serve` to the first tool answer over stdio."""
    return await _first_answer(_stdio(root), "psmr_query_search", {"text": "Console"})


async def _minimal_cold_start() -> float:
    """Seconds from spawning the SDK's minimal server to its first tool answer over stdio."""
    params = StdioServerParameters(command=sys.executable, args=[str(MINIMAL_SERVER)], env=SERVER_ENV)
    return await _first_answer(Client(stdio_client(params, errlog=QUIET)), "search", {"text": "Console"})


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
    parser.add_argument("--calls", type=int, default=50, help="timed calls per transport (default 50)")
    parser.add_argument("--cold", type=int, default=15, help="cold starts of each server (default 15)")
    arguments = parser.parse_args()
    calls = arguments.calls
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

        anyio.run(_cold_start, root)  # untimed: bytecode caches written, files in the page cache
        anyio.run(_minimal_cold_start)
        cold = interleaved(
            {
                "slotrelay mcp serve (built workspace)": lambda: anyio.run(_cold_start, root),
                "the SDK's minimal server (reference)": lambda: anyio.run(_minimal_cold_start),
            },
            arguments.cold,
        )
        first = anyio.run(_cold_start, _copy_package(Path(scratch) / "fresh"))
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

    table = Table(title=f"psmr_query_subgraph {ANCHOR} depth 2, {calls} calls each")
    for column in ("path", "p50 ms", "p90 ms", "p50 vs api.call"):
        table.add_column(column, justify="right" if column != "path" else "left")
    _row(table, "api.call (baseline, in process)", direct, baseline)
    _row(table, "MCP in-memory client", memory, baseline)
    _row(table, "MCP stdio (slotrelay mcp serve)", stdio, baseline)
    _row(table, "MCP streamable HTTP (127.0.0.1)", http, baseline)
    console.print(table)
    served, minimal = cold.values()
    cold_table = Table(
        title=f"cold start over stdio: spawn to first answer, {arguments.cold} interleaved rounds")
    cold_table.add_column("server")
    cold_table.add_column("median ms (IQR)", justify="right")
    cold_table.add_column("vs the SDK's minimal server", justify="right")
    for name, times in cold.items():
        cold_table.add_row(name, described(times, 1000), ratio(times, minimal))
    cold_table.add_row("slotrelay mcp serve, workspace not built (1 run)", f"{first * 1000:.0f}", "")
    console.print(cold_table)
    console.print(goal_note(served, COLD_GOAL_S, "slotrelay mcp serve cold start"))
    note = spread_note(served, minimal, "slotrelay vs the SDK's minimal server")
    if note:
        console.print(f"[yellow]{note}[/]")


if __name__ == "__main__":
    main()
