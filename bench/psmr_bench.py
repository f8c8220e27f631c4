"""PSMR benchmark: build time, files per CPU-second, one-file update, workspace load, query latency,
peak memory.

    .venv/bin/python bench/psmr_bench.py [requests rich networkx]

Each package's source (from the installed copy) is copied to a temporary folder and measured in its
own child process, so peak memory (ru_maxrss) is that package's alone. The baseline, in the same
process, is `ast.parse` of every file: the floor any Python analyzer pays; the ratio shows what the
resolution, graph and store cost on top of it.
"""

from __future__ import annotations

import ast
import importlib
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from rich.console import Console
from rich.table import Table

DEFAULT = ["requests", "rich", "networkx"]
SAMPLES = 30


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def measure(package: str) -> dict:
    """All figures for one package (run in a child process)."""
    from slotrelay.psmr.api import build_workspace, call
    from slotrelay.psmr.workspace.store import Store

    source = Path(importlib.import_module(package).__file__).parent
    work = Path(tempfile.mkdtemp(prefix="psmr-bench-"))
    try:
        root = work / package
        shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__"))
        files = sorted(root.rglob("*.py"))

        def parse_all():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for f in files:
                    ast.parse(f.read_text(encoding="utf-8", errors="replace"))

        _, parse_wall, _ = _timed(parse_all)
        summary, build_wall, build_cpu = _timed(lambda: build_workspace(root, store=work / "store"))
        _, noop_wall, _ = _timed(lambda: build_workspace(root, store=work / "store"))
        target = max(files, key=lambda f: f.stat().st_size if f.name != "__init__.py" else 0)
        target.write_text(target.read_text() + "\n\ndef _bench_added():\n    return _bench_added\n")
        update, inc_wall, _ = _timed(lambda: build_workspace(root, store=work / "store"))
        ws_id = summary["workspace_id"]
        # A build does not keep its workspace in memory: this first load reads and checks the record.
        ws, load_wall, _ = _timed(lambda: Store.open(work / "store").load(ws_id))
        functions = sorted(n for n, d in ws.graph.nodes(data=True) if d["kind"] in ("function", "method"))
        sample = random.Random(7).sample(functions, min(SAMPLES, len(functions)))
        sub, imp = [], []
        for node in sample:
            subgraph = {"workspace_id": ws_id, "depth": 2, "anchor": {"kind": "symbol", "value": node}}
            impact = {"workspace_id": ws_id, "target": node, "depth": 3, "accept_conflicts": True}
            _, wall, _ = _timed(lambda q=subgraph: call("query.subgraph", q, store=work / "store"))
            sub.append(wall)
            result, wall, _ = _timed(lambda q=impact: call("analysis.impact", q, store=work / "store"))
            assert result["status"] == "ok", result.get("error")
            imp.append(wall)
        return {
            "package": package,
            "files": summary["files"],
            "nodes": summary["nodes"],
            "edges": summary["edges"],
            "unknowns": summary["unknowns"],
            "parse_s": parse_wall,
            "build_s": build_wall,
            "build_cpu_s": build_cpu,
            "files_per_cpu_s": summary["files"] / build_cpu,
            "ratio": build_wall / parse_wall,
            "noop_s": noop_wall,
            "incremental_s": inc_wall,
            "incremental_analysed": update["analysed"],
            "load_s": load_wall,
            "subgraph_p50_ms": statistics.median(sub) * 1000,
            "impact_p50_ms": statistics.median(imp) * 1000,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(packages: list[str]) -> None:
    console = Console()
    rows = []
    for package in packages:
        with console.status(f"measuring {package}"):
            done = subprocess.run(
                [sys.executable, __file__, "--one", package], capture_output=True, text=True, check=True
            )
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    table = Table(title="PSMR build and query (each package in its own process)")
    for column in (
        "package",
        "files",
        "nodes",
        "edges",
        "unknowns",
        "ast.parse s",
        "build s",
        "x parse",
        "files/CPU-s",
        "no-op s",
        "1-file update s",
        "load s",
        "subgraph d2 p50 ms",
        "impact d3 p50 ms",
        "peak MB",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["package"],
            str(r["files"]),
            str(r["nodes"]),
            str(r["edges"]),
            str(r["unknowns"]),
            f"{r['parse_s']:.2f}",
            f"{r['build_s']:.2f}",
            f"{r['ratio']:.1f}",
            f"{r['files_per_cpu_s']:.0f}",
            f"{r['noop_s']:.2f}",
            f"{r['incremental_s']:.2f} ({r['incremental_analysed']})",
            f"{r['load_s']:.2f}",
            f"{r['subgraph_p50_ms']:.1f}",
            f"{r['impact_p50_ms']:.1f}",
            f"{r['peak_mb']:.0f}",
        )
    console.print(table)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(measure(sys.argv[2])))
    else:
        main(sys.argv[1:] or DEFAULT)
