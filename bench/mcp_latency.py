"""How fast the PSMR MCP server answers: cold start to first answer over stdio, and the p50 of
psmr_query_subgraph (depth 2) over stdio, streamable HTTP and the in-memory client, against the
same query through `slotrelay.psmr.api.call` in this process (the baseline the ratios divide by).

The workspace is a copy of an installed package (rich), so the numbers come from real code.

    .venv/bin/python bench/mcp_latency.py [--calls 50]
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

from psmr_mcp import WorkspaceRegistry, build_server
from slotrelay.psmr import api

SLOTRELAY = str(Path(sys.executable).with_name("slotrelay"))
PACKAGE = "rich"
ANCHOR = "rich.console.Console.print"
QUERY = {"anchor": {"kind": "symbol", "value": ANCHOR}, "depth": 2}
console = Console()
QUIET = open(os.devnull, "w")  # noqa: SIM115 - the servers' stderr sink, open for the whole run


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
    params = StdioServerParameters(command=SLOTRELAY, args=_serve_args(root), cwd=root)
    return Client(stdio_client(params, errlog=QUIET))


async def _cold_start(root: Path) -> float:
    """Seconds from spawning `slotrelay mcp serve` to the first tool answer over stdio."""
    started = time.perf_counter()
    async with _stdio(root) as client:
        result = await client.call_tool("psmr_query_search", {"text": "Console"})
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
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory(prefix="psmr-mcp-bench-") as scratch:
        root = _copy_package(Path(scratch))
        started = time.perf_counter()
        summary = api.build_workspace(root)
        build_s = time.perf_counter() - started
        store = Path(summary["store"])
        console.print(
            f"{PACKAGE}: {summary['files']} files, {summary['nodes']} nodes, built in {build_s:.2f}s"
        )

        cold = [anyio.run(_cold_start, root) for _ in range(3)]
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
    cold_table = Table(title="cold start over stdio: spawn to first answer (psmr_query_search)")
    cold_table.add_column("workspace at start")
    cold_table.add_column("runs", justify="right")
    cold_table.add_column("median s", justify="right")
    cold_table.add_column("vs loaded", justify="right")
    loaded = statistics.median(cold)
    cold_table.add_row("already built (loaded)", str(len(cold)), f"{loaded:.2f}", "1.0x")
    cold_table.add_row("not built (first build)", "1", f"{first:.2f}", f"{first / loaded:.1f}x")
    console.print(cold_table)


if __name__ == "__main__":
    main()
