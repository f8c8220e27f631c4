"""What a build may cost: the budget that stops resolving (`budget_exceeded`), and a tree shaped like
the one that made marshmallow's resolution explode, which builds at the cost of an ordinary one."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from slotrelay.cli import app
from slotrelay.psmr.analysis.buildbudget import BuildBudget
from slotrelay.psmr.api import build_workspace, call
from slotrelay.psmr.workspace.store import Store
from tests.support.psmr_trees import SHAPES, write_tree

# marshmallow's `merge_errors`, cut down: a recursive function that returns a container of its
# arguments (`[errors1, errors2]`) and merges into their elements (`merge(errors1[key], val)`). Each
# call level the resolver follows in its own context nested the containers once more, each level
# holding every combination of the level below.
MERGE = """SCHEMA = "_schema"


def merge(errors1, errors2):
    if not errors1:
        return errors2
    if not errors2:
        return errors1
    if isinstance(errors1, list):
        if isinstance(errors2, dict):
            errors2[SCHEMA] = merge(errors1, errors2.get(SCHEMA))
            return errors2
        return errors1
    if isinstance(errors1, dict):
        if isinstance(errors2, dict):
            for key, val in errors2.items():
                errors1[key] = merge(errors1[key], val)
            return errors1
        errors1[SCHEMA] = merge(errors1.get(SCHEMA), errors2)
        return errors1
    return [errors1, errors2]


class Store:
    def __init__(self):
        self.errors = {}

    def store(self, messages, field):
        self.errors = merge(self.errors, {field: messages})
"""
# The same recursion, followed as deep, over values that are no containers: where the other returns
# a container of both arguments it returns one of them, and it is given no dict to merge.
PLAIN = MERGE.replace("return [errors1, errors2]", "return errors2 or errors1").replace(
    "{field: messages}", "messages"
)
# Twelve modules of each, so that the ordinary tree's build is long enough to measure.
COPIES = 12
MERGING = {"errs/__init__.py": "", **{f"errs/store{i}.py": MERGE for i in range(COPIES)}}
ORDINARY = {"errs/__init__.py": "", **{f"errs/store{i}.py": PLAIN for i in range(COPIES)}}
# How many times an ordinary tree's build the blow-up's may take: generous, for a loaded machine.
MARGIN = 5


def _cpu_of_build(root: Path, store: Path, budget: BuildBudget | None = None) -> tuple[float, dict]:
    started = time.process_time()
    summary = build_workspace(root, store=store, budget=budget)
    return time.process_time() - started, summary


def test_a_recursive_merge_of_containers_builds_at_an_ordinary_trees_cost(tmp_path: Path) -> None:
    ordinary = write_tree(tmp_path / "ordinary", ORDINARY)
    merging = write_tree(tmp_path / "merging", MERGING)
    _cpu_of_build(ordinary, tmp_path / "warm-up")
    baseline, _ = _cpu_of_build(ordinary, tmp_path / "ordinary-store")
    # Bounded, so that a resolution that explodes ends as a failure instead of filling the memory.
    limit = BuildBudget(cpu_s=max(MARGIN * baseline, 1.0))
    cost, summary = _cpu_of_build(merging, tmp_path / "merging-store", limit)
    assert summary["budget_exceeded"] is None, (cost, baseline, summary["warnings"])
    assert cost <= MARGIN * baseline, (cost, baseline)
    ws = Store.open(tmp_path / "merging-store").load(summary["workspace_id"])
    assert ("semantic:errs.store0.Store.store", "semantic:errs.store0.merge", "calls") in ws.graph.edges


def test_a_build_past_its_budget_leaves_the_rest_unknown_and_a_usable_workspace(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", SHAPES)
    store = tmp_path / "store"
    summary = build_workspace(root, store=store, budget=BuildBudget(steps=3))
    assert summary["budget_exceeded"] == "steps"
    assert any("3 resolver steps" in w and "budget_exceeded" in w for w in summary["warnings"]), summary
    ws_id = summary["workspace_id"]
    unknowns = call("query.unknowns", {"workspace_id": ws_id, "reason": "budget_exceeded"}, store=store)
    assert unknowns["status"] == "ok" and unknowns["data"]["unknowns"], unknowns
    # What was resolved before the budget ran out is there, and the workspace answers queries.
    sliced = call(
        "query.subgraph",
        {"workspace_id": ws_id, "anchor": {"kind": "symbol", "value": "app.main.run"}, "depth": 1},
        store=store,
    )
    assert sliced["status"] == "ok", sliced
    # Built again (nothing changed) with the default budget, it is resolved in full.
    again = build_workspace(root, store=store)
    assert again["budget_exceeded"] is None and again["resolved_sites"] > 0
    ws = Store.open(store).load(ws_id)
    assert not [u for u in ws.unknowns.values() if u["reason"] == "budget_exceeded"]
    assert ("semantic:app.report.describe", "semantic:app.shapes.Circle.area", "calls") in ws.graph.edges


def test_the_default_budget_is_not_met_by_an_ordinary_tree(tmp_path: Path) -> None:
    summary = build_workspace(write_tree(tmp_path / "tree", SHAPES), store=tmp_path / "store")
    assert summary["budget_exceeded"] is None and not summary["warnings"]


def test_build_options_set_the_budget_and_refuse_a_bad_one(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", SHAPES)
    runner = CliRunner()
    refused = runner.invoke(app, ["psmr", "build", str(root), "--store", str(tmp_path), "--max-cpu-s", "0"])
    assert refused.exit_code == 2 and "--max-cpu-s must be above 0" in refused.output, refused.output
    built = runner.invoke(
        app, ["psmr", "build", str(root), "--store", str(tmp_path), "--max-memory-mb", "100000", "--json"]
    )
    assert built.exit_code == 0, built.output


# Two builds in a fresh interpreter, the second with the cyclic collector off and everything it frees
# kept: the types of what was left in cycles, one a line. Only the build runs there: in the test process
# other threads (Prefect's queue services, left by an earlier test) make cycles of their own meanwhile, and
# a filter that told them apart by type or frame let through the dicts, lists and closures of a build.
LEFT_IN_CYCLES = """
import gc
import sys
from pathlib import Path

from slotrelay.psmr.api import build_workspace


def leave_a_cycle(done, total, file):
    cycle = []
    cycle.append(cycle)


folder = Path(sys.argv[1])
# The first build imports the analysis, whose classes are cycles of their own.
build_workspace(folder / "warm", store=folder / "store")
gc.collect()
gc.disable()
gc.set_debug(gc.DEBUG_SAVEALL)
build_workspace(folder / "tree", store=folder / "store",
                progress=leave_a_cycle if sys.argv[2:] == ["leave-a-cycle"] else None)
gc.collect()
print("\\n".join(type(garbage).__qualname__ for garbage in gc.garbage))
"""


def left_in_cycles(folder: Path, *args: str) -> list[str]:
    """The types of what a build of a small package leaves in cycles (`LEFT_IN_CYCLES`), by a fresh
    interpreter; `leave-a-cycle` has the build's progress calls each leave a list holding itself."""
    for name in ("warm", "tree"):
        (folder / name / "pkg").mkdir(parents=True)
        (folder / name / "pkg" / "__init__.py").write_text("from pkg.calc import run\n")
        (folder / name / "pkg" / "calc.py").write_text(
            "class Calc:\n    def add(self, a, b):\n        return a + b\n\n\n"
            "def run():\n    return Calc().add(1, 2)\n"
        )
    built = subprocess.run([sys.executable, "-c", LEFT_IN_CYCLES, str(folder), *args],
                           check=False, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    return built.stdout.split()


def test_a_build_leaves_nothing_for_the_cyclic_collector(tmp_path: Path) -> None:
    """A build runs with the cyclic collector off; what it leaves in cycles (and all they hold: the
    facts, the resolver's tables) costs a pass over the whole build's objects when the collector is
    back on (0.3 CPU-s of rich's 2). The reference counts alone free a build."""
    assert left_in_cycles(tmp_path) == []


def test_the_cyclic_garbage_check_sees_a_list_a_build_leaves(tmp_path: Path) -> None:
    assert "list" in left_in_cycles(tmp_path, "leave-a-cycle")
