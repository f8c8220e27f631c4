"""PSMR one-file update as a user gets it: a one-shot `slotrelay psmr build` against `build --watch`.

    nice .venv/bin/python bench/psmr_watch_bench.py [package] [--rounds N]

The installed package (networkx by default) is copied to a temporary folder and built once. Then
each kind of edit of `psmr_update_bench` (`leaf`, `flow`: a function appended to the largest module)
is made N times and brought into the workspace twice over: by a one-shot `slotrelay psmr build`
process (the baseline: what a user runs without a watcher), timed from its start to its exit; and by
a running `slotrelay psmr build --watch --json` process, timed from the edit's write to the summary
line it prints, which includes the watcher's quiet window (0.2 s). Both are whole processes as a user
meets them; the in-process phases are `psmr_update_bench`'s. Run it on a quiet machine and report
the load average.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from psmr_update_bench import arguments, edit
from rich.console import Console
from rich.table import Table

CLI = [sys.executable, "-m", "slotrelay.cli", "psmr", "build"]


def main() -> None:
    args, source = arguments()
    work = Path(tempfile.mkdtemp(prefix="psmr-watch-bench-"))
    env = {**os.environ, "PSMR_STORE": str(work / "store")}
    rows: list[tuple[str, list[float], list[int]]] = []
    try:
        root = work / args.package
        shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__"))
        target = max(root.rglob("*.py"), key=lambda f: f.stat().st_size if f.name != "__init__.py" else 0)
        subprocess.run([*CLI, str(root)], env=env, check=True, capture_output=True)
        number = 0
        for kind in ("leaf", "flow"):
            walls = []
            for _ in range(args.rounds):
                edit(target, kind, number, args.package)
                number += 1
                started = time.perf_counter()
                subprocess.run([*CLI, str(root)], env=env, check=True, capture_output=True)
                walls.append(time.perf_counter() - started)
            rows.append((f"{kind} update, one-shot `psmr build`", walls, []))
        started = time.perf_counter()
        watcher = subprocess.Popen(
            [*CLI, str(root), "--watch", "--json"], env=env, stdout=subprocess.PIPE, text=True
        )
        assert watcher.stdout is not None
        try:
            first = json.loads(watcher.stdout.readline())
            rows.append(
                ("watcher start (resolves once)", [time.perf_counter() - started], [first["resolved_sites"]])
            )
            for kind in ("leaf", "flow"):
                walls, sites = [], []
                for _ in range(args.rounds):
                    started = time.perf_counter()
                    edit(target, kind, number, args.package)
                    number += 1
                    summary = json.loads(watcher.stdout.readline())
                    walls.append(time.perf_counter() - started)
                    sites.append(summary["resolved_sites"])
                rows.append((f"{kind} update, `psmr build --watch`", walls, sites))
        finally:
            watcher.terminate()
            watcher.wait()
        load = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    baseline = {kind: statistics.median(rows[i][1]) for i, kind in enumerate(("leaf", "flow"))}
    table = Table(
        title=f"{args.package}: edit to updated workspace, load average {load[0]:.2f} {load[1]:.2f}"
    )
    for column in ("run", "wall s (each)", "median s", "x one-shot", "sites resolved"):
        table.add_column(column, justify="right" if column != "run" else "left")
    for name, walls, sites in rows:
        kind = name.split()[0]
        median = statistics.median(walls)
        table.add_row(
            name,
            " ".join(f"{w:.2f}" for w in walls),
            f"{median:.2f}",
            f"{median / baseline[kind]:.2f}" if kind in baseline else "",
            " ".join(map(str, sites)) or "all",
        )
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
