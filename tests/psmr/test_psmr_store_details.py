"""A workspace read from the store parses its parts' details (evidence, unknowns, conflicts) only when a
call first asks for them (docs/psmr.md#store): a search answers from the graph alone, the details
then read back equal the build's, and a part whose details are damaged under a valid seal is a clean
VALIDATION_FAILED, never a traceback nor a wrong answer."""

from __future__ import annotations

from pathlib import Path

import orjson
from conftest import SHOP
from psmr_trees import write_tree

from slotrelay.psmr import store as store_module
from slotrelay.psmr.api import build_workspace, call
from slotrelay.psmr.graph import GraphAssembler
from slotrelay.psmr.link import Linker
from slotrelay.psmr.parts import merge
from slotrelay.psmr.store import Store


def _fresh(store: Path, workspace_id: str) -> store_module.Workspace:
    """The workspace as a new process reads it (nothing kept in memory)."""
    with store_module._LOADED_LOCK:
        store_module._LOADED.clear()
    return Store.open(store).load(workspace_id)


def _built(tmp_path: Path) -> tuple[str, Path]:
    root = write_tree(tmp_path / "shop", SHOP)
    summary = build_workspace(root, store=tmp_path / "store")
    return summary["workspace_id"], tmp_path / "store"


def test_the_details_read_back_equal_those_the_build_assembled(tmp_path: Path) -> None:
    workspace_id, store = _built(tmp_path)
    ws = _fresh(store, workspace_id)
    facts = {}
    for entry in ws.files.values():
        facts[entry["module"]] = Store.open(store).get_facts(entry["key"])
    paths = {entry["module"]: rel for rel, entry in ws.files.items()}
    # The same resolution and assembly in memory, with no store between (import edges are in the
    # graph, not in the details).
    assembled = GraphAssembler({m: f for m, f in facts.items() if f}, paths, None).assemble(
        Linker({m: f for m, f in facts.items() if f}).run(), []
    )
    expected = merge(assembled.parts.values())
    assert ws.unknowns == expected.unknowns
    assert ws.conflicts == expected.conflicts
    assert ws.evidence.keys() >= expected.evidence.keys()
    assert list(ws.evidence) == list(ws.evidence)  # stable once parsed
    for key, data in ws.edges.items():
        assert all(ev in ws.evidence for ev in data["evidence"]), key


def test_a_search_answers_without_the_details_and_damaged_details_are_a_clean_error(tmp_path: Path) -> None:
    workspace_id, store = _built(tmp_path)
    opened = Store.open(store)
    manifest = opened.manifest(workspace_id)
    # Damage every part's details, sealed again with this user's key and named by the manifest: only
    # the details' own check can find it.
    for module, (name, _, _) in list(manifest["parts"].items()):
        record = f"workspaces/{workspace_id}/parts/{name}"
        found = opened.read_record(record)
        assert found is not None
        graph, newline, _ = found[0].partition(b"\n")
        assert newline
        seal = opened.write_record(record, graph + b'\n{"evidence": []}')
        info = (store / record).stat()
        manifest["parts"][module] = [name, seal, [info.st_size, info.st_mtime_ns, info.st_ino]]
    opened.write_record(f"workspaces/{workspace_id}/manifest.json", orjson.dumps(manifest))
    with store_module._LOADED_LOCK:
        store_module._LOADED.clear()

    found = call("query.search", {"workspace_id": workspace_id, "text": "checkout"}, store=store)
    assert found["status"] == "ok", found
    assert any(item["id"].endswith("Cart.checkout") for item in found["data"]["matches"]), found
    answer = call("query.unknowns", {"workspace_id": workspace_id}, store=store)
    assert answer["status"] == "error" and answer["error"]["code"] == "VALIDATION_FAILED", answer
