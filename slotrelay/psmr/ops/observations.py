"""Runtime evidence: the test runs `execution.run_tests` recorded, as `analysis.impact` and
`query.evidence` read them.

Two records per workspace in its store: the latest run of each test (`runtime/pytest`, what impact
reports as runtime certainty while the files keep the hashes the test ran on) and every run's
evidence by id (`runtime/pytest-evidence`), so an `ev_…` id any answer handed out resolves in
query.evidence: one recorded at the current version of the workspace, or one whose files still have
the hashes it ran on (the only ones impact hands out later). Others are dropped when runs are added.

Kept apart from `execution` (the change room, which imports the sandbox and libcst through `delta`):
the operators that read the records sit in the room under it.
"""

from __future__ import annotations

from typing import Any

from slotrelay.psmr.workspace.store import Store, Workspace

AUTHORITY = "runtime:pytest"
RUNTIME_KIND = "runtime/pytest"
EVIDENCE_KIND = "runtime/pytest-evidence"


def _current(ws: Workspace, record: dict[str, Any]) -> bool:
    return all(ws.files.get(a, {}).get("sha256") == h for a, h in record["files"].items())


def _resolvable(ws: Workspace, record: dict[str, Any]) -> bool:
    return record.get("version") == ws.version or _current(ws, record)


def record_runs(ws: Workspace, store: Store, records: list[dict[str, Any]]) -> None:
    """Store the evidence of a run: the latest record of each test, and every record by id (those no
    longer resolvable at this version dropped).

    Parameters:
        ws: the workspace the tests ran on.
        store: its store.
        records: the run's evidence records (`id`, `test`, `files`, `version`, ...).
    """
    latest = store.get_json(RUNTIME_KIND, ws.workspace_id) or {}
    latest.update({r["test"]: r for r in records})
    store.put_json(RUNTIME_KIND, ws.workspace_id, latest)
    by_id = store.get_json(EVIDENCE_KIND, ws.workspace_id) or {}
    by_id = {i: r for i, r in by_id.items() if _resolvable(ws, r)}
    by_id.update({r["id"]: r for r in records})
    store.put_json(EVIDENCE_KIND, ws.workspace_id, by_id)


def runtime_evidence(ws: Workspace, store: Store) -> dict[str, dict[str, Any]]:
    """The runtime evidence records query.evidence resolves at this version of the workspace, by id."""
    by_id = store.get_json(EVIDENCE_KIND, ws.workspace_id) or {}
    return {i: r for i, r in by_id.items() if _resolvable(ws, r)}


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
        if _current(ws, record) and node in record["reached"]:
            out.append(
                {"test": test, "status": record["status"], "evidence_ref": record["id"],
                 "authority": AUTHORITY, "at": record["at"]}
            )  # fmt: skip
    return out
