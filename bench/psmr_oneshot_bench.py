"""PSMR one-shot updates: `slotrelay psmr build` after a one-file edit, each in a new process, against a
full build, also in a process of its own.

    nice .venv/bin/python bench/psmr_oneshot_bench.py [package] [--rounds N]

The installed package (networkx by default) is copied to a temporary folder and built from an empty
store by the command (the full build). Then one edit and build that resolve in full and leave the
resolution in the store (the store already held a build of the workspace: see
`slotrelay.psmr.workspace.replay`), and N one-shot updates of each kind, as `bench/psmr_update_bench.py`
makes them (a function appended to the package's largest module: `leaf` calls nothing of the package,
`flow` passes its parameter into it). Each figure is the command's process wall time (what its caller
waits: the resolution's record is written by a child after the command answered, and the bench waits
for it before the next edit, outside the figure), its CPU time (with grimp's, without the child's), the
build's own `duration_s`, and the ratios of wall and CPU time to the mean of two full builds, one at the
start and one at the end (into an empty store again), so that a load that changes meanwhile shows. Also
the record's size on disk, and when it was in place (its modification time less the command's end). Run
it on a quiet machine and report the load average.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from psmr_update_bench import arguments, edit
from rich.console import Console
from rich.table import Table

from slotrelay.psmr.workspace import replay
from slotrelay.psmr.workspace.store import Store

SLOTRELAY = str(Path(sys.executable).with_name("slotrelay"))


def command(root: Path, store: Path) -> tuple[dict[str, Any], float, float, float]:
    """One `slotrelay psmr build --json` process: its summary, wall time, CPU time (its own and its
    waited children's, grimp's; not the child that writes the record after it), and when it ended."""
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        [SLOTRELAY, "psmr", "build", str(root), "--store", str(store), "--json"],
        capture_output=True,
        check=True,
    )
    ended = time.time()
    return json.loads(done.stdout), time.perf_counter() - started, _children_cpu() - cpu, ended


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def record_written(store: Path, summary: dict[str, Any], ended: float) -> tuple[float, int]:
    """Wait for the record of the build's version (written by the command's child), then how long
    after the command ended it was in place, and its size."""
    path = store / replay.record_name(summary["workspace_id"])
    deadline = time.monotonic() + 600
    while True:
        record = Store.open(store).read_record(replay.record_name(summary["workspace_id"]))
        if record is not None and _version(record[0]) == summary["version"]:
            info = path.stat()
            return info.st_mtime - ended, info.st_size
        if time.monotonic() > deadline:
            raise TimeoutError(f"no record of version {summary['version']} in {path}")
        time.sleep(0.2)


def _version(payload: bytes) -> str | None:
    import msgpack

    head_length = replay.LENGTHS.unpack_from(payload)[0]
    head = msgpack.unpackb(payload[replay.LENGTHS.size : replay.LENGTHS.size + head_length])
    version: str | None = head.get("version")
    return version


def main() -> None:
    args, source = arguments()
    work = Path(tempfile.mkdtemp(prefix="psmr-oneshot-bench-"))
    rows: list[tuple[str, float, float, float, int, str]] = []
    fulls: list[tuple[float, float]] = []
    try:
        root = work / args.package
        shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__"))
        target = max(root.rglob("*.py"), key=lambda f: f.stat().st_size if f.name != "__init__.py" else 0)
        store = work / "store"
        full, wall, cpu, _ = command(root, store)
        fulls.append((wall, cpu))
        rows.append(("full build", wall, cpu, full["duration_s"], full["resolved_sites"], ""))
        number = 0
        edit(target, "leaf", number, args.package)
        number += 1
        first, wall, cpu, ended = command(root, store)
        delay, size = record_written(store, first, ended)
        note = f"record {size / 1e6:.0f} MB in place {delay:.1f} s after"
        rows.append(("first update (records)", wall, cpu, first["duration_s"], first["resolved_sites"], note))
        for kind in ("leaf", "flow"):
            for _ in range(args.rounds):
                edit(target, kind, number, args.package)
                number += 1
                summary, wall, cpu, ended = command(root, store)
                assert summary["analysed"] == 1, summary
                delay, size = record_written(store, summary, ended)
                note = f"record {size / 1e6:.0f} MB in place {delay:.1f} s after"
                rows.append(
                    (
                        f"{kind} update, one-shot",
                        wall,
                        cpu,
                        summary["duration_s"],
                        summary["resolved_sites"],
                        note,
                    )
                )
        # The full build again, into an empty store, for a baseline taken under the load of the end too.
        again, wall, cpu, _ = command(root, work / "again")
        fulls.append((wall, cpu))
        rows.append(("full build, again", wall, cpu, again["duration_s"], again["resolved_sites"], ""))
        load = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    full_wall = statistics.mean(wall for wall, _ in fulls)
    full_cpu = statistics.mean(cpu for _, cpu in fulls)
    table = Table(
        title=f"{args.package}: {full['files']} files, load average {load[0]:.2f} {load[1]:.2f}; "
        "x full build: against the mean of the two full builds"
    )
    columns = (
        "run",
        "process wall s",
        "x full",
        "process cpu s",
        "x full",
        "duration_s",
        "sites resolved",
        "note",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("run", "note") else "right")
    for name, wall, cpu, duration, sites, note in rows:
        table.add_row(
            name,
            f"{wall:.2f}",
            f"{wall / full_wall:.3f}",
            f"{cpu:.2f}",
            f"{cpu / full_cpu:.3f}",
            f"{duration:.2f}",
            str(sites),
            note,
        )
    Console(width=180).print(table)


if __name__ == "__main__":
    main()
