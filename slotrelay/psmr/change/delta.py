"""delta.propose (CONTRACTS.md#changes-go-through-a-delta), the SemanticDelta it persists, and
delta.list and delta.describe, which read those records.

A SemanticDelta (authority `ai_proposal`) holds the agent's intent, scope and typed operations, the
concrete edits they expand to (every call site from the graph's evidence), the unresolved sites that
may be affected, the expected graph change, assumptions, affected contracts and the tests that reach
the scope. It also holds each touched file's text and hash as proposed and as projected, so validate,
preview and apply work on exactly what was proposed, and a file changed meanwhile is detected.

Deltas are records of the workspace's folder of the store, in slotrelay's state folder:

    <store>/workspaces/<ws_id>/deltas/<delta_id>.json

bound to the workspace version they were proposed on. The steps after propose add their results to
the same record (`validation`, `preview`, `apply`, `before`, `runs`). A record is sealed like every
record of the store (`slotrelay.psmr.workspace.sealed`, under this user's key and its name), and its path is
made from the workspace it belongs to and a delta id of the pattern `dl_<hex>`, never from what a
record says. A record is used only if its seal holds, its `workspace_id` and `delta_id` are those of
where it is stored, and it has every field of its schema (`DELTA_RECORD_SCHEMA`); anything else is
not a delta (CONTRACTS.md#files-the-product-writes).

delta.list and delta.describe read the records as they are stored and write nothing: no record, no
status, no source file. A record that is not a delta of the workspace is left out of the list with a
warning naming it; it never hides the others. They are how a reader (the human view, an agent resuming
work) sees what was proposed and what the later steps recorded, without re-running them:

- `stale`: the delta was proposed on another version of the workspace than the current one (validate,
  preview and apply refuse it; propose again);
- `validation`: the result delta.validate recorded (each check with its problems, and the sites it left
  to review), or None;
- the preview diff: each changed file as the unified diff projection.preview renders (`file_diff`, the
  same function, so the same lines), derived from the texts the delta holds, whether or not preview
  was called.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import libcst as cst
import orjson

from slotrelay import fsio
from slotrelay.psmr.change import snippets
from slotrelay.psmr.change.constraints import parse as parse_constraint
from slotrelay.psmr.change.delta_ops import Planner
from slotrelay.psmr.change.rewrite import RewriteError, render
from slotrelay.psmr.errors import ConflictRequiresReview, ExecutionFailed, InvalidQuery, ObjectNotFound
from slotrelay.psmr.operators import OPERATION_SCHEMA
from slotrelay.psmr.ops.queries import Answer
from slotrelay.psmr.ops.slicing import CODE_KINDS, find_node, tests_reaching
from slotrelay.psmr.workspace.build import NotSource, Unanalysable, read_artifact
from slotrelay.psmr.workspace.identity import qname, sid
from slotrelay.psmr.workspace.store import Store, Workspace
from slotrelay.validation_text import schema_problem

DELTA_SCHEMA = "psmr-semantic-delta-0.1"
AUTHORITY = "ai_proposal"
DELTA_ID = re.compile(r"dl_[0-9a-f]{1,64}")
WORKSPACE_ID = re.compile(r"ws_[0-9a-f]{1,64}")
_TEXT = {"type": "string"}
_LIST = {"type": "array"}
_RECORDED = {"type": ["object", "null"], "required": ["at"], "properties": {"at": _TEXT}}
# What the operators read of a record: a record without it is not a delta (it is left out, with a note).
DELTA_RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "schema", "delta_id", "workspace_id", "workspace_version", "authority", "status", "proposed_at",
        "intent", "scope_refs", "constraints", "operations", "scope", "files", "edits", "needs_review",
        "possibly_affected", "expected", "assumptions", "affected_contracts", "suggested_validation",
        "validation", "preview", "apply", "before", "runs",
    ],
    "properties": {
        "schema": {"const": DELTA_SCHEMA},
        **{name: _TEXT for name in (
            "delta_id", "workspace_id", "workspace_version", "authority", "status", "proposed_at", "intent"
        )},
        **{name: _LIST for name in (
            "scope_refs", "constraints", "scope", "edits", "needs_review", "possibly_affected",
            "assumptions", "affected_contracts", "runs",
        )},
        "operations": {"type": "array", "items": OPERATION_SCHEMA},
        "files": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["module", "sha256", "original", "projected", "projected_sha256"],
                "properties": {
                    name: _TEXT for name in ("module", "sha256", "original", "projected", "projected_sha256")
                },
            },
        },
        "expected": {
            "type": "object",
            "required": [
                "symbols_added", "symbols_removed", "symbols_renamed", "symbols_changed",
                "call_sites_removed", "call_sites_added", "edges_free", "api_changes",
            ],
            "properties": {
                "symbols_renamed": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["old", "new"],
                        "properties": {"old": _TEXT, "new": _TEXT},
                    },
                },
                "symbols_changed": {
                    "type": "array",
                    "items": {"type": "object", "required": ["id", "changes"]},
                },
            },
        },
        "suggested_validation": {
            "type": "object",
            "required": ["tests", "pytest_node_ids"],
            "properties": {"tests": _LIST, "pytest_node_ids": {"type": "array", "items": _TEXT}},
        },
        "validation": {**_RECORDED, "required": ["at", "ok", "failed"], "properties": {
            "at": _TEXT, "ok": {"type": "boolean"}, "failed": _LIST,
        }},
        "preview": {
            **_RECORDED,
            "required": ["at", "hashes"],
            "properties": {"at": _TEXT, "hashes": {"type": "object"}},
        },
        "apply": _RECORDED,
    },
}  # fmt: skip
_RECORD_VALIDATOR = jsonschema.Draft202012Validator(DELTA_RECORD_SCHEMA)


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def sha256(text: str) -> str:
    """The hex sha256 of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def changed_on_disk(root: Path, expected: Iterable[tuple[str, str | None]]) -> list[str]:
    """The artifacts, in the order given, whose file under `root` no longer has the expected sha256.

    A file that cannot be read counts as changed (unless no hash was expected of it).

    Parameters:
        root: the source root the artifacts are relative to.
        expected: `(artifact, hex sha256)` pairs.
    """
    moved = []
    for artifact, sha in expected:
        try:
            digest: str | None = hashlib.sha256(read_artifact(root, artifact)).hexdigest()
        except (NotSource, Unanalysable):
            digest = None
        if digest != sha:
            moved.append(artifact)
    return moved


def folder_name(workspace_id: str) -> str:
    """The folder of a workspace's deltas, as a record name of the store.

    Raises:
        ObjectNotFound: the workspace id is not of the pattern `ws_<hex>`.
    """
    if not WORKSPACE_ID.fullmatch(workspace_id):
        raise ObjectNotFound(f"{workspace_id!r} is not a workspace id (ws_ and hex digits)")
    return f"workspaces/{workspace_id}/deltas"


def record_name(workspace_id: str, delta_id: str, suffix: str = ".json") -> str:
    """The store's name of a delta's record (`suffix` `.before.json`: the workspace before its apply).

    Raises:
        ObjectNotFound: an id is not of its pattern (`ws_<hex>`, `dl_<hex>`).
    """
    if not DELTA_ID.fullmatch(delta_id):
        raise ObjectNotFound(
            f"{delta_id!r} is not a delta id (dl_ and hex digits); delta.propose returns one"
        )
    return f"{folder_name(workspace_id)}/{delta_id}{suffix}"


def recorded_ids(store: Store, workspace_id: str) -> tuple[list[str], list[str]]:
    """The ids of the delta records stored for a workspace, and why any place was not read.

    The folder is opened without following a link: a `deltas` that is a symbolic link holds no delta.
    """
    folder = folder_name(workspace_id)
    try:
        with fsio.open_dir(store.path, folder) as opened:
            names = opened.names()
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [f"{store.path / folder} is {exc.strerror}; no delta was read from it"]
    ids = [name.removesuffix(".json") for name in names if name.endswith(".json")]
    return [i for i in ids if DELTA_ID.fullmatch(i)], []


def save(store: Store, ws: Workspace, delta: dict[str, Any]) -> None:
    """Seal and write a delta record of `ws` atomically, under the workspace's id and the delta's
    checked id.

    Raises:
        ObjectNotFound: the delta id is not of its pattern.
        InvalidQuery: the record is about another workspace.
    """
    if delta["workspace_id"] != ws.workspace_id:
        raise InvalidQuery(
            f"delta {delta['delta_id']} is of workspace {delta['workspace_id']}, not {ws.workspace_id}"
        )
    store.write_record(record_name(ws.workspace_id, delta["delta_id"]), orjson.dumps(delta))


def save_image(store: Store, ws: Workspace, delta_id: str, image: dict[str, Any]) -> None:
    """Seal and write the workspace as it stood before a delta's apply (`<delta_id>.before.json`)."""
    store.write_record(record_name(ws.workspace_id, delta_id, ".before.json"), orjson.dumps(image))


def load_image(store: Store, ws: Workspace, delta_id: str) -> Any:
    """The workspace as it stood before a delta's apply, or None when there is no sealed image."""
    record = store.read_record(record_name(ws.workspace_id, delta_id, ".before.json"))
    if record is None:
        return None
    try:
        return orjson.loads(record[0])
    except orjson.JSONDecodeError:
        return None


def load(store: Store, ws: Workspace, delta_id: str) -> dict[str, Any]:
    """A delta of the workspace, as sealed by this user's slotrelay.

    Raises:
        ObjectNotFound: no sealed delta by that id for this workspace, or a sealed record whose ids or
            fields are not a delta of this workspace's (the message names the field).
    """
    name = record_name(ws.workspace_id, delta_id)
    record = store.read_record(name)
    if record is None:
        raise ObjectNotFound(
            f"no delta {delta_id} in workspace {ws.workspace_id} (a record not sealed by this user's "
            "slotrelay is not one); delta.propose returns the delta_id to use"
        )
    try:
        delta = orjson.loads(record[0])
    except orjson.JSONDecodeError as exc:
        raise ObjectNotFound(f"{store.path / name} is not JSON; propose the delta again") from exc
    error = jsonschema.exceptions.best_match(_RECORD_VALIDATOR.iter_errors(delta))
    if error is not None:
        raise ObjectNotFound(
            f"{store.path / name} is not a {DELTA_SCHEMA} record ({schema_problem(error)}); "
            "propose the delta again"
        )
    if delta["workspace_id"] != ws.workspace_id or delta["delta_id"] != delta_id:
        raise ObjectNotFound(
            f"{store.path / name} says it is delta {delta['delta_id']} of {delta['workspace_id']}, not "
            f"{delta_id} of {ws.workspace_id}; it is not used"
        )
    result: dict[str, Any] = delta
    return result


def require_current(ws: Workspace, delta: dict[str, Any], operation: str) -> None:
    """Refuse a delta proposed on another version of the workspace.

    Raises:
        ConflictRequiresReview: the workspace was rebuilt since the proposal.
    """
    if delta["workspace_version"] != ws.version:
        raise ConflictRequiresReview(
            f"{operation}: delta {delta['delta_id']} was proposed on version {delta['workspace_version']} "
            f"of workspace {ws.workspace_id}, which is now at {ws.version}; review what changed "
            "(analysis.semantic_diff) and propose the delta again"
        )


def changed_files(delta: dict[str, Any]) -> list[str]:
    """The files the delta changes, sorted."""
    return sorted(a for a, f in delta["files"].items() if f["original"] != f["projected"])


def _changed_definitions(ws: Workspace, artifact: str, before: str, after: str) -> set[str]:
    """The definitions whose text the edit changed: every function around a changed line (a digest of
    a function covers what it nests), and a class only for a line of its own, outside its members."""
    defs = [
        (d["span"][2] - d["span"][0], d["span"][0], d["span"][2], n, d["kind"])
        for n, d in ws.graph.nodes(data=True)
        if d.get("artifact") == artifact and d["kind"] in CODE_KINDS - {"module"} and d.get("span")
    ]
    touched: set[str] = set()
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "equal":
            continue
        # Replaced lines belong to the definitions holding them; inserted ones (between lines i1 and
        # i1 + 1) only to those holding both neighbours, so a definition added after another is not
        # an edit of it.
        spans = [(line, line) for line in range(i1 + 1, i2 + 1)] if i2 > i1 else [(i1, i1 + 1)]
        for low, high in spans:
            inside_member = False
            for _, start, end, node, kind in sorted(defs):
                if not (start <= low and high <= end) or kind == "lambda":  # a lambda has no digest
                    continue
                if kind == "class":
                    if not inside_member:
                        touched.add(node)
                    inside_member = True
                else:
                    touched.add(node)
                    inside_member = True
    return touched


def _signatures(text: str, module: str) -> dict[str, str]:
    """Each function's signature in a text, by semantic identity, written as the analysis writes it."""
    out: dict[str, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        # Definitions nest in any block (`if __name__ == ...:`, loops, `try`); only they name a scope.
        for item in ast.iter_child_nodes(node):
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                returns = f" -> {ast.unparse(item.returns)}" if item.returns else ""
                out[sid(f"{prefix}.{item.name}")] = f"({ast.unparse(item.args)}){returns}"
                visit(item, f"{prefix}.{item.name}")
            elif isinstance(item, ast.ClassDef):
                visit(item, f"{prefix}.{item.name}")
            elif isinstance(item, ast.stmt):
                visit(item, prefix)

    visit(ast.parse(text), module)
    return out


def plan(ws: Workspace, operations: list[dict[str, Any]]) -> tuple[Planner, dict[str, dict[str, Any]]]:
    """Expand typed operations on the files as they are now: the planner (edits, expected change) and
    each touched file's text and hash as read and as projected.

    Raises:
        ConflictRequiresReview: a file changed since the workspace was built.
        InvalidQuery: the operations would leave a file unparsable.
        ExecutionFailed: a file could not be projected.
    """
    planner = Planner(ws)
    for index, op in enumerate(operations):
        getattr(planner, op["op"])(index, op)
    files: dict[str, dict[str, Any]] = {}
    for artifact, file_plan in sorted(planner.plans.items()):
        original = planner.originals[artifact]
        try:
            projected = render(original, file_plan)
        except RewriteError as exc:
            raise ExecutionFailed(f"could not project {artifact}: {exc}") from exc
        except cst.ParserSyntaxError as exc:
            raise InvalidQuery(f"the source to add to {artifact} does not parse: {exc.message}") from exc
        try:
            compile(projected, artifact, "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise InvalidQuery(
                f"the operations would leave {artifact} unparsable ({exc.msg} at line {exc.lineno}); "
                "fix the body or source text of the operation editing it"
            ) from exc
        files[artifact] = {
            "module": ws.files[artifact]["module"],
            "sha256": ws.files[artifact]["sha256"],
            "original": original,
            "projected": projected,
            "projected_sha256": sha256(projected),
        }
    return planner, files


def propose(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """delta.propose: expand the operations, persist the SemanticDelta, and summarise it."""
    if request.get("workspace_version") and request["workspace_version"] != ws.version:
        raise ConflictRequiresReview(
            f"workspace_version {request['workspace_version']} is stale: workspace {ws.workspace_id} is at "
            f"{ws.version}; re-read what the proposal rests on and propose against {ws.version}"
        )
    scope = _scope_nodes(ws, request.get("scope_refs", []))
    for index, constraint in enumerate(request.get("constraints", [])):
        parse_constraint(ws, constraint, f"constraints[{index}]")
    snippets.check(request["operations"])
    planner, files = plan(ws, request["operations"])
    scope_nodes = sorted(set(scope) | set(planner.targets))
    tests = {t["id"]: t for node in scope_nodes for t in tests_reaching(ws, node)}
    contracts = _contracts_of(ws, scope_nodes)
    delta_id = f"dl_{uuid.uuid4().hex[:12]}"
    delta = {
        "schema": DELTA_SCHEMA,
        "delta_id": delta_id,
        "workspace_id": ws.workspace_id,
        "workspace_version": ws.version,
        "authority": AUTHORITY,
        "status": "proposed",
        "proposed_at": now(),
        "intent": request["intent"],
        "scope_refs": scope,
        "constraints": request.get("constraints", []),
        "operations": request["operations"],
        "scope": scope_nodes,
        "files": files,
        "edits": planner.edits,
        "needs_review": planner.problems,
        "possibly_affected": sorted(planner.possibly_affected.values(), key=lambda u: u["id"]),
        "expected": _expected(planner, _expected_changes(ws, planner, files)),
        "assumptions": planner.assumptions,
        "affected_contracts": contracts,
        "suggested_validation": {
            "tests": sorted(tests),
            "pytest_node_ids": sorted({pytest_id(ws, t) for t in tests}),
        },
        "validation": None,
        "preview": None,
        "apply": None,
        "before": None,
        "runs": [],
    }
    save(store, ws, delta)
    return Answer(
        data={
            "delta_id": delta_id,
            "authority": AUTHORITY,
            "status": "proposed",
            "workspace_version": ws.version,
            "intent": request["intent"],
            "files": changed_files(delta),
            "expected": delta["expected"],
            "counts": {
                "edits": len(planner.edits),
                "needs_review": len(planner.problems),
                "possibly_affected": len(delta["possibly_affected"]),
                "suggested_tests": len(tests),
            },
            "next": "delta.validate with this delta_id, then projection.preview",
        },
        sections=[
            ("edits", planner.edits),
            ("needs_review", planner.problems),
            ("possibly_affected", delta["possibly_affected"]),
            ("assumptions", planner.assumptions),
            ("affected_contracts", contracts),
            ("suggested_validation", delta["suggested_validation"]["pytest_node_ids"]),
        ],
    )


def _scope_nodes(ws: Workspace, scope_refs: list[str]) -> list[str]:
    """The nodes the request's scope_refs name, each found as query.search would."""
    scope = []
    for index, ref in enumerate(scope_refs):
        try:
            scope.append(find_node(ws, ref))
        except ObjectNotFound as exc:
            raise ObjectNotFound(f"scope_refs[{index}]: {exc.message}") from exc
    return scope


def _expected_changes(
    ws: Workspace, planner: Planner, files: dict[str, dict[str, Any]]
) -> dict[str, list[str]]:
    """Each symbol the delta changes (named as it will be called after the delta's renames) with what
    changes in it: `signature_changed`, `body_changed`."""
    changed: dict[str, list[str]] = {}
    for node in sorted(planner.signature_changed):
        changed.setdefault(renamed_to(planner.renamed, node), []).append("signature_changed")
    for artifact, entry in files.items():
        signatures = _signatures(entry["projected"], entry["module"])
        for node in _changed_definitions(ws, artifact, entry["original"], entry["projected"]):
            if node in planner.renamed:
                continue
            identity = renamed_to(planner.renamed, node)
            changes = changed.setdefault(identity, [])
            changes.append("body_changed")
            before, after = ws.graph.nodes[node].get("signature"), signatures.get(identity)
            if before and after and before != after and "signature_changed" not in changes:
                changes.append("signature_changed")  # e.g. an annotation naming a renamed class
    return changed


def _expected(planner: Planner, changed: dict[str, list[str]]) -> dict[str, Any]:
    """The graph change the delta expects, as verification.roundtrip compares it with W' - W."""
    public = [n for n in planner.signature_changed | set(planner.renamed) if not _private(n)]
    return {
        "symbols_added": sorted(planner.added),
        "symbols_removed": [],
        "symbols_renamed": [{"old": o, "new": n} for o, n in sorted(planner.renamed.items())],
        "symbols_changed": [{"id": n, "changes": sorted(c)} for n, c in sorted(changed.items())],
        "call_sites_removed": planner.sites_removed,
        "call_sites_added": planner.sites_added,
        "edges_free": sorted(planner.edges_free),
        "api_changes": [
            {"symbol": n, "change": "renamed" if n in planner.renamed else "signature_changed"}
            for n in sorted(public)
        ],
    }


def _contracts_of(ws: Workspace, scope_nodes: list[str]) -> list[dict[str, Any]]:
    """The contracts (signature, doc, asserts, raises) of the code in the delta's scope."""
    return [
        {
            "symbol": node,
            "signature": ws.graph.nodes[node].get("signature"),
            "doc": ws.graph.nodes[node].get("doc"),
            "asserts": ws.graph.nodes[node].get("asserts", []),
            "raises": ws.graph.nodes[node].get("raises", []),
        }
        for node in scope_nodes
        if ws.graph.nodes[node]["kind"] in CODE_KINDS - {"module"}
    ]


def renamed_to(renamed: dict[str, str], node: str) -> str:
    """A node's identity after renames (old -> new); a member moves with its renamed class.

    Parameters:
        renamed: old identity -> new identity.
        node: an identity before the renames.

    Returns:
        Its identity after them.
    """
    for old, new in renamed.items():
        if node == old or node.startswith(old + "."):
            return new + node[len(old) :]
    return node


def renamed_from(renamed: dict[str, str], node: str) -> str:
    """A node's identity before renames (the inverse of `renamed_to`)."""
    return renamed_to({new: old for old, new in renamed.items()}, node)


def _private(node: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in qname(node).split("."))


def pytest_id(ws: Workspace, test: str) -> str:
    """The pytest node id of a test function or method (`tests/test_x.py::TestY::test_z`)."""
    data = ws.graph.nodes[test]
    module = data.get("module") or ""
    inner = (
        data["qualname"][len(module) + 1 :] if data["qualname"].startswith(module + ".") else data["qualname"]
    )
    return f"{data['artifact']}::{inner.replace('.', '::')}"


def is_test_module(module: str) -> bool:
    """True for a test module, by the names pytest collects (`test_*`, `*_test`, a `tests` package)."""
    last = module.rsplit(".", 1)[-1]
    return last.startswith("test_") or last.endswith("_test") or ".tests." in f".{module}."


def file_diff(artifact: str, before: str, after: str) -> dict[str, Any]:
    """One file's change as a unified diff (`a/` and `b/` paths) with its added and removed line counts."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{artifact}",
            f"b/{artifact}",
        )
    )
    return {
        "file": artifact,
        "diff": "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
        ),
        "added": sum(1 for line in lines if line.startswith("+") and not line.startswith("+++")),
        "removed": sum(1 for line in lines if line.startswith("-") and not line.startswith("---")),
    }


# What names the thing an operation works on, by operation kind (see operators.OPERATION_SCHEMA).
OPERATION_SUBJECT = {"add_symbol": "module", "move_call_site": "evidence_id"}


def _operation_summary(op: dict[str, Any]) -> dict[str, Any]:
    subject = op.get(OPERATION_SUBJECT.get(op["op"], "target"))
    return {"op": op["op"], "subject": subject}


def _recorded_at(record: dict[str, Any] | None) -> str | None:
    return record["at"] if record else None


def _validation_summary(delta: dict[str, Any]) -> dict[str, Any] | None:
    recorded = delta["validation"]
    if recorded is None:
        return None
    return {
        "at": recorded["at"],
        "ok": recorded["ok"],
        "failed": recorded["failed"],
        "needs_review": recorded.get("needs_review_count", 0),
    }


def _row(ws: Workspace, delta: dict[str, Any]) -> dict[str, Any]:
    return {
        "delta_id": delta["delta_id"],
        "intent": delta["intent"],
        "status": delta["status"],
        "authority": delta["authority"],
        "proposed_at": delta["proposed_at"],
        "workspace_version": delta["workspace_version"],
        "stale": delta["workspace_version"] != ws.version,
        "operations": [_operation_summary(op) for op in delta["operations"]],
        "files": changed_files(delta),
        "validation": _validation_summary(delta),
        "previewed_at": _recorded_at(delta["preview"]),
        "applied_at": _recorded_at(delta["apply"]),
    }


def list_deltas(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """delta.list: every delta recorded for the workspace, oldest first (by proposal time, which is to
    the second; ties by id), with its latest validation."""
    ids, warnings = recorded_ids(store, ws.workspace_id)
    rows = []
    for delta_id in ids:
        try:
            rows.append(_row(ws, load(store, ws, delta_id)))
        except ObjectNotFound as exc:
            warnings.append(f"{delta_id} is left out: {exc.message}")
    rows.sort(key=lambda r: (r["proposed_at"], r["delta_id"]))
    return Answer(
        data={
            "workspace_id": ws.workspace_id,
            "workspace_version": ws.version,
            "total": len(rows),
            "stale": sum(r["stale"] for r in rows),
        },
        sections=[("deltas", rows)],
        warnings=warnings,
    )


def _moved_files(ws: Workspace, delta: dict[str, Any]) -> list[str]:
    """The delta's files whose text on disk is no longer the one it was proposed on."""
    return changed_on_disk(
        Path(ws.source_root),
        ((artifact, entry["sha256"]) for artifact, entry in sorted(delta["files"].items())),
    )


def describe(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """delta.describe: one delta as recorded, its recorded validation and its diff per file.

    Raises:
        ObjectNotFound: no delta by that id in this workspace.
    """
    delta = load(store, ws, request["delta_id"])
    diffs = [
        {
            **file_diff(a, delta["files"][a]["original"], delta["files"][a]["projected"]),
            "test": is_test_module(delta["files"][a]["module"]),
        }
        for a in changed_files(delta)
    ]
    stale = delta["workspace_version"] != ws.version
    return Answer(
        data={
            **_row(ws, delta),
            "current_version": ws.version,
            "moved_files": [] if stale else _moved_files(ws, delta),
            "scope_refs": delta["scope_refs"],
            "scope": delta["scope"],
            "constraints": delta["constraints"],
            "operations": delta["operations"],
            "expected": delta["expected"],
            "suggested_validation": delta["suggested_validation"],
            "validation": delta["validation"],
            "apply": delta["apply"],
            "runs": delta["runs"],
            "roundtrip": delta.get("roundtrip"),
            "review": delta.get("review"),
        },
        sections=[
            ("edits", delta["edits"]),
            ("needs_review", delta["needs_review"]),
            ("possibly_affected", delta["possibly_affected"]),
            ("assumptions", delta["assumptions"]),
            ("affected_contracts", delta["affected_contracts"]),
            ("diffs", diffs),
        ],
    )
