"""What `slotrelay mcp serve` imports before its first answer (docs/mcp.md#cold-start).

The server runs as an MCP host runs it, over stdio through the SDK's client, under `python -X
importtime`, which writes one line to stderr per module as its import completes. Once the client has
its answer to initialize, tools/list and the first call an agent makes, every import that answer
needed is in the log: none of them may be a library or a part of PSMR that only other calls need.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from harness.commands import SLOTRELAY
from slotrelay.commands.mcp import frozen_imports
from tests.support.import_times import IMPORTED

pytestmark = pytest.mark.anyio

# Libraries the first answer has no use for: the graph algorithms, the schema checker of requests that
# are wrong, the change side's syntax trees, inference, the import graph, the findings' checker, the
# sandbox, the engine, and rich: the server's few start-up lines are plain text, and its progress bar
# is drawn only on a terminal, which an MCP host never gives it.
NOT_NEEDED = ("networkx", "jsonschema", "libcst", "jedi", "grimp", "pyflakes", "docker", "prefect", "rich")
# PSMR's build (the fast pass, the resolver, the assembler), its change side and its analyses.
# Named in full, so that a module's move (its dotted name rewritten) keeps it checked.
NOT_NEEDED_OF_PSMR = (
    "slotrelay.psmr.analysis.extract",
    "slotrelay.psmr.analysis.link",
    "slotrelay.psmr.analysis.relink",
    "slotrelay.psmr.workspace.graph",
    "slotrelay.psmr.analysis.callbinding",
    "slotrelay.psmr.change.delta",
    "slotrelay.psmr.change.projection",
    "slotrelay.psmr.change.rewrite",
    "slotrelay.psmr.ops.analyses",
    "slotrelay.psmr.ops.findings",
    "slotrelay.psmr.ops.diff",
    # The chain engine's slots (pydantic models built at import): only the engine's tools use them, and a
    # server without --chain answers workspaces alone.
    "slotrelay.chain.slots",
)
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("psmr_query_search", {"text": "login"}),
        ("psmr_workspace_describe", {}),
        ("psmr_query_subgraph", {"anchor": {"kind": "symbol", "value": "shop.auth.login"}}),
    ],
)
async def test_the_first_answer_imports_only_what_it_needs(
    shop: Path, tmp_path: Path, tool: str, arguments: dict[str, object]
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-X", "importtime", SLOTRELAY, "mcp", "serve", "--workspace", str(shop)],
        cwd=shop,
        env=dict(os.environ),
    )
    log = tmp_path / "stderr.log"
    with log.open("w") as sink:
        async with Client(stdio_client(params, errlog=sink)) as client:
            listed = await client.list_tools()
            result = await client.call_tool(tool, arguments)
            imported = set(IMPORTED.findall(log.read_text()))
    assert tool in {t.name for t in listed.tools}
    assert not result.is_error, result.content[0].text
    # The log is complete:
    assert "psmr_mcp.server" in imported and "slotrelay.psmr.workspace.store" in imported
    roots = {name.split(".")[0] for name in imported}
    assert roots.isdisjoint(NOT_NEEDED), sorted(roots & set(NOT_NEEDED))
    assert imported.isdisjoint(NOT_NEEDED_OF_PSMR), sorted(imported & set(NOT_NEEDED_OF_PSMR))


def test_the_imports_objects_are_frozen_and_collection_resumes_after_them() -> None:
    """`slotrelay mcp serve` imports the SDK under `frozen_imports`: the collector is off while the
    objects are made, never scans them after, and collects what is made later (the workspaces)."""
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        with frozen_imports():
            assert not gc.isenabled()
            made = [[index] for index in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(made)
        with pytest.raises(ImportError), frozen_imports():
            raise ImportError("the MCP SDK is not installed")
        assert gc.isenabled()
    finally:
        # The test process's own objects go back to the collector's oldest generation.
        gc.unfreeze()


def test_a_ctrl_c_during_the_imports_leaves_the_collector_as_it_was() -> None:
    """A Ctrl-C while the SDK is imported turns the collector back on; one that was off stays off."""
    try:
        with pytest.raises(KeyboardInterrupt), frozen_imports():
            raise KeyboardInterrupt
        assert gc.isenabled()
        gc.disable()
        with pytest.raises(KeyboardInterrupt), frozen_imports():
            raise KeyboardInterrupt
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
