"""What a build may cost: the budget that stops resolving (`budget_exceeded`)."""

from __future__ import annotations

from pathlib import Path

from psmr_trees import SHAPES, write_tree
from typer.testing import CliRunner

from slotrelay.cli import app
from slotrelay.psmr.api import build_workspace, call
from slotrelay.psmr.buildbudget import BuildBudget
from slotrelay.psmr.store import Store


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
