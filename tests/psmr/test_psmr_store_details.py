"""A workspace read from the store parses its parts' nodes when it is loaded, and merges their edges and
parses their details (evidence, unknowns, conflicts) only when a call first asks for them
(docs/psmr.md#store): a search answers from the nodes alone and finds what it finds in the whole
graph, what is read back later equals what the build assembled, and a part whose edges or details
are damaged under a valid seal is a clean VALIDATION_FAILED, never a traceback nor a wrong answer."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest

from slotrelay.psmr.api import build_workspace, call
from slotrelay.psmr.ops import queries
from slotrelay.psmr.workspace import store as store_module
from slotrelay.psmr.workspace.kept import KeptResolutions
from slotrelay.psmr.workspace.parts import Content, merge
from slotrelay.psmr.workspace.store import Store
from tests.support.psmr_trees import write_tree

# A shop: a class with state, calls across modules, an import from outside, a call nothing resolves.
SHOP = {
    "shop/__init__.py": "from shop.cart import Cart\n",
    "shop/pricing.py": (
        "import json\n\nRATE = 2\n\n\ndef price(item):\n    return len(json.dumps(item)) * RATE\n"
    ),
    "shop/cart.py": (
        "from shop.pricing import price\n\n\nclass Cart:\n"
        "    def __init__(self):\n        self.items = []\n\n"
        "    def add(self, item):\n        self.items.append(item)\n        return price(item)\n\n"
        "    def checkout(self, pay):\n        assert self.items\n        return pay(self.add(None))\n"
    ),
}


def _fresh(store: Path, workspace_id: str) -> store_module.Workspace:
    """The workspace as a new process reads it (nothing loaded in memory)."""
    with store_module._LOADED_LOCK:
        store_module._LOADED.clear()
    return Store.open(store).load(workspace_id)


def _built(tmp_path: Path, kept: KeptResolutions | None = None) -> tuple[str, Path]:
    root = write_tree(tmp_path / "shop", SHOP)
    summary = build_workspace(root, store=tmp_path / "store", kept=kept)
    return summary["workspace_id"], tmp_path / "store"


def test_what_a_load_reads_later_equals_what_the_build_assembled(tmp_path: Path) -> None:
    # The build keeps its assembled parts in memory, as the MCP server's do.
    kept = KeptResolutions()
    workspace_id, store = _built(tmp_path, kept)
    resolved = kept.get((str(Store.open(store).path), workspace_id))
    assert resolved is not None
    assembly = merge(resolved.assembled.parts.values())
    ws = _fresh(store, workspace_id)
    whole = dataclasses.replace(ws, content=Content(assembly))
    # A search sees only the nodes the modules define, and finds what a search of the whole graph finds.
    searches = [("", "symbol"), ("cart", "symbol"), ("", "state"), ("", "contract"), ("price", "symbol")]
    for text, kind in searches:
        request = {"text": text, "kind": kind}
        assert queries.search(ws, request, motifs=list, findings=dict) == queries.search(
            whole, request, motifs=list, findings=dict
        ), (text, kind)
    assert list(ws.nodes.items()) == list(assembly.nodes.items())
    assert list(ws.edges.items()) == list(assembly.edges.items())
    assert list(ws.evidence.items()) == list(assembly.evidence.items())
    assert ws.unknowns == assembly.unknowns and ws.conflicts == assembly.conflicts
    assert ws.unknowns, "the shop has unknowns: the comparison is not of empty records"


def _damage(store: Path, workspace_id: str, line: int, replacement: bytes) -> None:
    """Replace one line of every part, sealed again with this user's key and named by the manifest:
    only the line's own check can find it."""
    opened = Store.open(store)
    manifest = opened.manifest(workspace_id)
    for module, (name, _, _) in list(manifest["parts"].items()):
        record = f"workspaces/{workspace_id}/parts/{name}"
        found = opened.read_record(record)
        assert found is not None
        lines = found[0].split(b"\n")
        assert len(lines) == 3
        lines[line] = replacement
        seal = opened.write_record(record, b"\n".join(lines))
        info = (store / record).stat()
        manifest["parts"][module] = [name, seal, [info.st_size, info.st_mtime_ns, info.st_ino]]
    opened.write_record(f"workspaces/{workspace_id}/manifest.json", orjson.dumps(manifest))
    with store_module._LOADED_LOCK:
        store_module._LOADED.clear()


@pytest.mark.parametrize(("line", "later"), [(1, "query.subgraph"), (2, "query.unknowns")])
def test_a_search_answers_from_the_nodes_and_damaged_parts_are_a_clean_error(
    tmp_path: Path, line: int, later: str
) -> None:
    workspace_id, store = _built(tmp_path)
    _damage(store, workspace_id, line, b'{"edges": {}, "evidence": []}')

    found = call("query.search", {"workspace_id": workspace_id, "text": "checkout"}, store=store)
    assert found["status"] == "ok", found
    assert any(item["id"].endswith("Cart.checkout") for item in found["data"]["matches"]), found
    request = {"workspace_id": workspace_id}
    if later == "query.subgraph":
        request["anchor"] = {"kind": "symbol", "value": "shop.cart.Cart.checkout"}
    answer = call(later, request, store=store)
    assert answer["status"] == "error" and answer["error"]["code"] == "VALIDATION_FAILED", answer
