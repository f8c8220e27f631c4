"""PSMR one-file update and unchanged rebuild against a full build of the same tree, per phase.

    nice .venv/bin/python bench/psmr_update_bench.py [package] [--rounds N]

The installed package (networkx by default) is copied to a temporary folder and built from an empty
store (the full build). Then, N times each: an unchanged rebuild, and one-file updates of two kinds,
both a function appended to the package's largest module: one that nothing calls and that calls
nothing of the package (`leaf`), and one that passes its parameter to a function of the package
(`flow`: arguments flow into the whole program). Each kind runs twice: as a one-shot command updates
(nothing kept in the process: every call site resolved again) and as the MCP server does (the last
resolution kept, a `KeptResolutions` given to each build: replayed where the edit reaches, `relink`,
or resolved in full when it reaches too far). Each figure is wall time in this process, with the
ratio to the full build beside it, the call sites resolved again and the modules whose part of the
graph was assembled again, and the update's time split over the build's phases (facts read from the
store, resolution, import graph, assembly, save). Run it on a quiet machine and report the load
average.
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

from slotrelay.psmr.analysis import link, relink
from slotrelay.psmr.api import build_workspace
from slotrelay.psmr.workspace import graph, importgraph, parts
from slotrelay.psmr.workspace import store as store_module
from slotrelay.psmr.workspace.kept import KeptResolutions

# Each phase and the functions whose time counts in it (a replay, or the full resolution it falls
# back to, is resolution). The build imports them from their modules when it runs a phase, so they
# are wrapped there.
TIMED: tuple[tuple[str, Any, str], ...] = (
    ("facts", store_module.Store, "get_facts"),
    ("resolve", link.Linker, "run"),
    ("resolve", relink, "relink"),
    ("imports", importgraph, "import_edges"),
    ("assemble", graph.GraphAssembler, "assemble"),
    ("assemble", parts, "merge"),
    ("save", store_module.Store, "save"),
)
PHASES = tuple(dict.fromkeys(phase for phase, _, _ in TIMED))


@contextmanager
def phase_clock() -> Iterator[dict[str, float]]:
    """Wall time spent in each phase while the block runs (the phases' functions wrapped)."""
    spent: dict[str, float] = defaultdict(float)
    saved = []
    for phase, owner, name in TIMED:
        original = getattr(owner, name)
        saved.append((owner, name, original))

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
        for owner, name, original in saved:
            setattr(owner, name, original)


def timed_build(
    root: Path, store: Path, kept: KeptResolutions | None = None
) -> tuple[dict[str, Any], float, dict[str, float]]:
    """A build's summary, wall time, and its phases' wall times plus its CPU time ("cpu")."""
    with phase_clock() as spent:
        started, cpu = time.perf_counter(), time.process_time()
        summary = build_workspace(root, store=store, kept=kept)
        wall = time.perf_counter() - started
        spent["cpu"] = time.process_time() - cpu
    return summary, wall, dict(spent)


def edit(target: Path, kind: str, number: int, package: str) -> None:
    """Append a function of a kind (see the module docstring) to the target module."""
    call = "return 0" if kind == "leaf" else f"return {package}.has_path(G, 0, {number})"
    head = f"import {package}\n" if kind == "flow" else ""
    target.write_text(target.read_text() + f"\n\n{head}def _bench_{kind}_{number}(G):\n    {call}\n")


def arguments() -> tuple[argparse.Namespace, Path]:
    """The command line (`[package] [--rounds N]`) and the folder of the package it names."""
    parser = argparse.ArgumentParser()
    parser.add_argument("package", nargs="?", default="networkx")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    return args, Path(importlib.import_module(args.package).__file__ or "").parent


def main() -> None:
    args, source = arguments()
    work = Path(tempfile.mkdtemp(prefix="psmr-update-bench-"))
    rows: list[tuple[str, float, dict[str, float], int, int]] = []
    try:
        root = work / args.package
        shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__"))
        target = max(root.rglob("*.py"), key=lambda f: f.stat().st_size if f.name != "__init__.py" else 0)
        full, full_wall, full_phases = timed_build(root, work / "store")
        rows.append(("full build", full_wall, full_phases, full["resolved_sites"], full["assembled_modules"]))
        # The full build again with every file's facts already stored: the resolution-and-after part.
        shutil.copytree(work / "store" / "facts", work / "relink" / "facts")
        relinked, wall, phases = timed_build(root, work / "relink")
        rows.append(
            (
                "full build, facts stored",
                wall,
                phases,
                relinked["resolved_sites"],
                relinked["assembled_modules"],
            )
        )
        noops = [timed_build(root, work / "store")[1] for _ in range(args.rounds)]
        rows.append(("unchanged rebuild (median)", statistics.median(noops), {}, 0, 0))
        number = 0
        for kept in (None, KeptResolutions()):
            mode = "resolution kept" if kept is not None else "nothing kept"
            if kept is not None:
                # The first update of a process resolves in full (and records what a replay needs).
                edit(target, "leaf", number, args.package)
                number += 1
                summary, wall, phases = timed_build(root, work / "store", kept)
                rows.append(
                    (
                        f"first update, {mode}",
                        wall,
                        phases,
                        summary["resolved_sites"],
                        summary["assembled_modules"],
                    )
                )
            for kind in ("leaf", "flow"):
                for _ in range(args.rounds):
                    edit(target, kind, number, args.package)
                    number += 1
                    summary, wall, phases = timed_build(root, work / "store", kept)
                    assert summary["analysed"] == 1, summary
                    rows.append(
                        (
                            f"{kind} update, {mode}",
                            wall,
                            phases,
                            summary["resolved_sites"],
                            summary["assembled_modules"],
                        )
                    )
        load = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"{args.package}: {full['files']} files, load average {load[0]:.2f} {load[1]:.2f}")
    for column in ("run", "wall s", "x full build", "sites resolved", "modules assembled", "cpu s", *PHASES):
        table.add_column(column, justify="right" if column != "run" else "left")
    for name, wall, spent, sites, assembled in rows:
        table.add_row(
            name,
            f"{wall:.3f}",
            f"{wall / full_wall:.3f}",
            str(sites),
            str(assembled),
            *(f"{spent.get(p, 0.0):.3f}" for p in ("cpu", *PHASES)),
        )
    Console(width=170).print(table)


if __name__ == "__main__":
    main()
