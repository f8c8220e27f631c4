"""How long PSMR's change loop takes on real code: propose -> validate -> preview -> apply -> rebuild ->
roundtrip (and review) for a signature change of a function of `rich` with many call sites, split by
step, each also as a ratio of the full build of the same copy in this process (the baseline).

The target is the public function with the most resolved call sites; the change adds a required
parameter that every call site receives through the parameter map, so every site is rewritten.

    .venv/bin/python bench/psmr_change_bench.py
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from slotrelay import fsio
from slotrelay.psmr import api
from slotrelay.psmr.grants import Grants
from slotrelay.psmr.workspace.store import Store

PACKAGE = "rich"
console = Console()


def _copy(into: Path) -> Path:
    source = Path(importlib.import_module(PACKAGE).__file__).parent
    root = into / PACKAGE
    shutil.copytree(source, root / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _target(workspace_id: str, store: Path) -> tuple[str, str, int]:
    """The public function with the most call sites, its signature, and how many."""
    ws = Store.open(store).load(workspace_id)
    best: tuple[int, str] = (0, "")
    for node, data in ws.graph.nodes(data=True):
        if data["kind"] != "function" or any(p.startswith("_") for p in data["qualname"].split(".")):
            continue
        if "*" in data.get("signature", "") or "/" in data.get("signature", ""):
            continue
        sites = sum(
            len(e["evidence"]) for _, _, k, e in ws.graph.in_edges(node, keys=True, data=True) if k == "calls"
        )
        best = max(best, (sites, node))
    sites, node = best
    return node, ws.graph.nodes[node]["signature"], sites


def _step(
    name: str, timings: dict[str, float], operation: str, request: dict[str, Any], **kwargs: Any
) -> dict[str, Any]:
    started = time.perf_counter()
    answer = api.call(operation, request, **kwargs)
    timings[name] = time.perf_counter() - started
    if answer["status"] != "ok":
        raise SystemExit(f"{operation} failed: {answer['error']}\n{answer.get('data')}")
    return answer["data"]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="psmr-change-bench-") as folder:
        # The apply log goes to the tree's state folder: the bench's own, not the user's.
        os.environ[fsio.STATE_HOME_ENV] = str(Path(folder) / "state")
        root = _copy(Path(folder))
        store = Path(folder) / "store"
        started = time.perf_counter()
        summary = api.build_workspace(root, store=store)
        build_s = time.perf_counter() - started
        ws = summary["workspace_id"]
        api.call("workspace.describe", {"workspace_id": ws}, store=store)  # imports and loads, untimed
        target, signature, sites = _target(ws, store)
        parameters = signature.split("->")[0].strip()[1:-1]
        parameters = f"{parameters.split(',')[0]}, trace_id, {','.join(parameters.split(',')[1:])}".rstrip(
            ", "
        )
        operation = {
            "op": "change_signature",
            "target": target,
            "parameters": parameters,
            "parameter_map": {"trace_id": {"value": "None"}},
        }
        timings: dict[str, float] = {}
        common = {"workspace_id": ws}
        proposed = _step(
            "propose",
            timings,
            "delta.propose",
            {**common, "intent": f"{target} takes a trace id", "operations": [operation]},
            store=store,
        )
        delta = {**common, "delta_id": proposed["delta_id"]}
        _step("validate", timings, "delta.validate", delta, store=store)
        _step("preview", timings, "projection.preview", delta, store=store)
        _step("apply", timings, "projection.apply", delta, store=store, grants=Grants.of(write_roots=[root]))
        rebuilt = _step("rebuild", timings, "verification.rebuild", delta, store=store)
        roundtrip = _step("roundtrip", timings, "verification.roundtrip", delta, store=store)
        _step("review", timings, "verification.review", delta, store=store)
    console.print(
        f"{PACKAGE}: {summary['files']} files, {summary['nodes']} nodes; full build {build_s:.2f}s "
        "(baseline). "
        f"Target {target}{signature}: {sites} call sites, {len(proposed['files'])} files changed; "
        f"rebuild re-analysed {rebuilt['analysed']} files; roundtrip all matched: {roundtrip['all_matched']}",
        soft_wrap=True,
    )
    table = Table("step", "seconds", "x full build")
    for name, seconds in timings.items():
        table.add_row(name, f"{seconds:.3f}", f"{seconds / build_s:.2f}")
    loop = sum(v for k, v in timings.items() if k != "review")
    table.add_row("propose..roundtrip", f"{loop:.3f}", f"{loop / build_s:.2f}")
    console.print(table)
    # On a shared machine the figures mean little without the load they were taken under.
    console.print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
