"""Runtime evidence: the test runs `execution.run_tests` recorded, as `analysis.impact` reads them.

Kept apart from `execution` (which imports the sandbox and libcst through `delta`) so a read-side
operator reaches the records without loading the change side.
"""

from __future__ import annotations

from typing import Any

from slotrelay.psmr.store import Store, Workspace

AUTHORITY = "runtime:pytest"
RUNTIME_KIND = "runtime/pytest"


def runtime_observations(ws: Workspace, store: Store, node: str) -> list[dict[str, Any]]:
    """The recorded test runs that reached a symbol, while the files they ran on are unchanged.

    Parameters:
        ws: the workspace.
        store: its store.
        node: the symbol.

    Returns:
        One `{"test", "status", "evidence_ref", "authority", "at"}` per test, sorted by test.
    """
    stored = store.get_json(RUNTIME_KIND, ws.workspace_id) or {}
    out = []
    for test, record in sorted(stored.items()):
        current = all(ws.files.get(a, {}).get("sha256") == h for a, h in record["files"].items())
        if current and node in record["reached"]:
            out.append(
                {"test": test, "status": record["status"], "evidence_ref": record["id"],
                 "authority": AUTHORITY, "at": record["at"]}
            )  # fmt: skip
    return out
