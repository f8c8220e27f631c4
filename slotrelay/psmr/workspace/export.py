"""The call-graph export: `{"<caller>": ["<callee>", ...]}`, the interchange format of Python
call-graph tools (PyCG and its successors), so a workspace can be compared with theirs.

Names are dotted relative to the analysed root; a module's top level is the module name; builtins
are `<builtin>.name`; external callees are their import path; a constructor call is the class's
`__init__` when the tree defines one. This is an export interface, not an agent query (CONTRACTS.md#no-dumps).
"""

from __future__ import annotations

from typing import Any

from slotrelay.psmr.workspace.identity import qname
from slotrelay.psmr.workspace.store import Workspace

CALLERS = frozenset({"module", "class", "function", "method", "lambda", "test"})


def callgraph(ws: Workspace) -> dict[str, list[str]]:
    """Every code node of the workspace with the sorted names it calls.

    Parameters:
        ws: the workspace.

    Returns:
        caller -> callees, callers sorted.
    """
    graph = ws.graph
    out: dict[str, set[str]] = {}
    for node, data in graph.nodes(data=True):
        if data["kind"] in CALLERS:
            out.setdefault(qname(node), set())
    for source, target, key in graph.edges(keys=True):
        if key == "calls" and graph.nodes[target]["kind"] != "class" and qname(source) in out:
            out[qname(source)].add(qname(target))
    return {caller: sorted(callees) for caller, callees in sorted(out.items())}


def callgraph_of(facts: dict[str, Any]) -> dict[str, list[str]]:
    """The call graph of an in-memory tree (module -> source), without a store: for tests and the screen."""
    from slotrelay.psmr.analysis.extract import extract
    from slotrelay.psmr.analysis.link import Linker
    from slotrelay.psmr.workspace.graph import GraphAssembler
    from slotrelay.psmr.workspace.parts import Content
    from slotrelay.psmr.workspace.store import Workspace as _Workspace

    parsed = {m: extract(src, m, is_package=is_pkg) for m, (src, is_pkg) in facts.items()}
    assembly = GraphAssembler(parsed, {m: m for m in parsed}, None).build(Linker(parsed).run(), [])
    ws = _Workspace(
        workspace_id="ws_memory",
        root="",
        source_root="",
        rev=None,
        commit=None,
        version="",
        files={},
        content=Content(assembly),
    )
    return callgraph(ws)
