"""How fast the PSMR human view answers: the symbol page of `rich.console.Console.print`, median of 20.

    .venv/bin/python bench/psmr_view_bench.py [--loads 20]

The workspace is a copy of the installed `rich` (real code), built into a temporary store.
`slotrelay psmr view --store` runs as a subprocess on 127.0.0.1 and the page is fetched over HTTP,
whole (HTML with its inline SVG), after one warm-up load; where Chromium and the test tools are
installed (scripts/bootstrap.sh), headless Chromium also loads it (tests/ui/psmr_view.js: navigation
start to the load event, so parsing and drawing the SVG count). The baseline, in this process, is the
page's own operator call (`query.subgraph` with the page's budget through `slotrelay.psmr.api.call`);
the ratio shows what the view adds on top: the second operator calls of page 1 (contracts, unknowns,
conflicts), the graphviz layout, the templates and HTTP. The layout alone is measured too.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from harness.commands import SLOTRELAY
from psmr_view.graph_svg import nearest, slice_svg
from psmr_view.links import SYMBOL_RELATIONS, Links
from psmr_view.paging import BUDGETS
from slotrelay.psmr import api

UI_TESTS = Path(__file__).resolve().parents[1] / "tests" / "ui"
NODE = UI_TESTS.parent / "mcp" / "node_modules" / ".bin" / "node"
CHROMIUM = "/usr/bin/chromium"
ANCHOR = "rich.console.Console.print"
READY = "PSMR view at "
console = Console(width=160)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _timed(fn, loads: int) -> list[float]:
    times = []
    for _ in range(loads):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def _start_view(store: Path, log: Path) -> tuple[subprocess.Popen, str]:
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [SLOTRELAY, "psmr", "view", "--store", str(store), "--port", str(_free_port())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if READY in text:
            return process, text.split(READY, 1)[1].split()[0]
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit(f"the view did not start:\n{log.read_text(errors='replace')}")


def browser_loads(url: str, loads: int, work: Path) -> list[float] | None:
    """Load times in headless Chromium (seconds), or None where the browser tools are not installed."""
    if not (
        NODE.exists() and Path(CHROMIUM).exists() and (UI_TESTS / "node_modules" / "playwright-core").is_dir()
    ):
        return None
    browser = {"profile": str(work / f"chromium-{time.monotonic_ns()}"), "timeout_ms": 120_000}
    job = {"step": "loads", "url": url, "loads": loads, "screenshot": str(work / "loads.png")}
    done = subprocess.run(
        [str(NODE), str(UI_TESTS / "psmr_view.js"), json.dumps(browser)],
        cwd=UI_TESTS,
        input=json.dumps(job) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"], result
    return [ms / 1000 for ms in result["load_ms"]]


def measure(base: str, store: Path, workspace_id: str, depth: int, loads: int, work: Path) -> dict:
    """Page loads over HTTP, the baseline operator call and the layout alone, for one depth."""
    links = Links(workspace_id)
    url = base.rstrip("/") + links.symbol(ANCHOR, depth)
    request = {
        "workspace_id": workspace_id,
        "anchor": {"kind": "symbol", "value": ANCHOR},
        "depth": depth,
        "relations": list(SYMBOL_RELATIONS),
        "budget": BUDGETS["symbol"],
    }
    with httpx.Client(timeout=120) as http:
        first = http.get(url)
        assert first.status_code == 200, first.text[:2000]
        pages = _timed(lambda: http.get(url).raise_for_status(), loads)
    browser = browser_loads(url, loads, work)
    data = api.call("query.subgraph", request, store=store)["data"]
    baseline = _timed(lambda: api.call("query.subgraph", request, store=store), loads)

    def layout() -> str:
        return slice_svg(
            data["anchor"],
            data["nodes"],
            nearest(data["anchor"], data["nodes"], data["edges"]),
            node_url=links.symbol,
            edge_url=lambda e: links.evidence(e["evidence_refs"], e),
        )

    return {
        "depth": depth,
        "shown": f"{len(data['nodes'])}/{len(data['edges'])}",
        "size": len(first.content),
        "pages": pages,
        "browser": browser,
        "baseline": baseline,
        "layout": _timed(layout, loads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="psmr-view-bench-"))
    process = None
    try:
        root = work / "rich"
        shutil.copytree(
            Path(importlib.import_module("rich").__file__).parent,
            root,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        store = work / "store"
        built = api.build_workspace(root, store=store)
        process, base = _start_view(store, work / "view.log")
        rows = [measure(base, store, built["workspace_id"], depth, args.loads, work) for depth in (1, 2)]
    finally:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            process.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)

    def ms(times: list[float]) -> str:
        return f"{statistics.median(times) * 1000:.1f}"

    table = Table(title=f"symbol page of {ANCHOR} on rich ({built['files']} files), median of {args.loads}")
    for column in (
        "depth",
        "nodes/edges on page 1",
        "HTML",
        "page over HTTP ms",
        "max ms",
        "in Chromium ms",
        "baseline query.subgraph ms",
        "ratio",
        "graphviz layout ms",
    ):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            str(row["depth"]),
            row["shown"],
            f"{row['size'] // 1024} KiB",
            ms(row["pages"]),
            f"{max(row['pages']) * 1000:.1f}",
            ms(row["browser"]) if row["browser"] else "(no browser)",
            ms(row["baseline"]),
            f"{statistics.median(row['pages']) / statistics.median(row['baseline']):.1f}x",
            ms(row["layout"]),
        )
    console.print(table)


if __name__ == "__main__":
    main()
