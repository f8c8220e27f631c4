"""PSMR one-file update and unchanged rebuild against a full build of the same tree, per phase.

    nice .venv/bin/python bench/psmr_update_bench.py [package] [--rounds N]

The installed package (networkx by default) is copied to a temporary folder and built from an empty
store (the full build). Then, N times: an unchanged rebuild, and a one-file update (a changed body in
the package's largest module). Each figure is wall time in this process, with the ratio to the full
build beside it, and each update's time split over the build's phases (facts read from the store,
resolution, import graph, assembly, save). Run it on a quiet machine and report the load average.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from slotrelay.psmr import build as build_module
from slotrelay.psmr import store as store_module
from slotrelay.psmr.api import build_workspace

PHASES: dict[str, tuple[Any, str]] = {
    "facts": (store_module.Store, "get_facts"),
    "resolve": (build_module.Linker, "run"),
    "imports": (build_module, "import_edges"),
    "assemble": (build_module.GraphAssembler, "build"),
    "save": (store_module.Store, "save"),
}


@contextmanager
def phase_clock() -> Iterator[dict[str, float]]:
    """Wall time spent in each phase while the block runs (the phases' functions wrapped)."""
    spent: dict[str, float] = defaultdict(float)
    saved = {}
    for phase, (owner, name) in PHASES.items():
        original = getattr(owner, name)
        saved[phase] = original

        def timed(
            *args: Any, _original: Callable[..., Any] = original, _phase: str = phase, **kw: Any
        ) -> Any:
            started = time.perf_counter()
            try:
                return _original(*args, **kw)
            finally:
                spent[_phase] += time.perf_counter() - started

        setattr(owner, name, timed)
    try:
        yield spent
    finally:
        for phase, (owner, name) in PHASES.items():
            setattr(owner, name, saved[phase])


def timed_build(root: Path, store: Path) -> tuple[dict[str, Any], float, dict[str, float]]:
    """A build's summary, wall time, and its phases' wall times plus its CPU time ("cpu")."""
    with phase_clock() as spent:
        started, cpu = time.perf_counter(), time.process_time()
        summary = build_workspace(root, store=store)
        wall = time.perf_counter() - started
        spent["cpu"] = time.process_time() - cpu
    return summary, wall, dict(spent)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("package", nargs="?", default="networkx")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    source = Path(importlib.import_module(args.package).__file__ or "").parent
    work = Path(tempfile.mkdtemp(prefix="psmr-update-bench-"))
    try:
        root = work / args.package
        shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__"))
        target = max(root.rglob("*.py"), key=lambda f: f.stat().st_size if f.name != "__init__.py" else 0)
        full, full_wall, full_phases = timed_build(root, work / "store")
        # The full build again with every file's facts already stored: the resolution-and-after part.
        shutil.copytree(work / "store" / "facts", work / "relink" / "facts")
        _, relink_wall, relink_phases = timed_build(root, work / "relink")
        noops, updates, phases = [], [], []
        for number in range(args.rounds):
            _, wall, _ = timed_build(root, work / "store")
            noops.append(wall)
            target.write_text(target.read_text() + f"\n\ndef _bench_{number}():\n    return {number}\n")
            summary, wall, spent = timed_build(root, work / "store")
            assert summary["analysed"] == 1, summary
            updates.append(wall)
            phases.append(spent)
        load = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"{args.package}: {full['files']} files, load average {load[0]:.2f} {load[1]:.2f}")
    for column in ("run", "wall s", "x full build", "cpu s", *PHASES):
        table.add_column(column, justify="right" if column != "run" else "left")

    def row(name: str, wall: float, spent: dict[str, float]) -> None:
        table.add_row(
            name,
            f"{wall:.3f}",
            f"{wall / full_wall:.3f}",
            *(f"{spent.get(p, 0.0):.3f}" for p in ("cpu", *PHASES)),
        )

    row("full build", full_wall, full_phases)
    row("full build, facts stored", relink_wall, relink_phases)
    row("unchanged rebuild (median)", statistics.median(noops), {})
    for number, (wall, spent) in enumerate(zip(updates, phases, strict=True), start=1):
        row(f"one-file update {number}", wall, spent)
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
