"""Operator name -> handler: load the workspace, run the operator, page it, wrap it in the envelope.

The references an envelope lists (`evidence_refs`, `unknown_refs`, `conflict_refs`) are collected from
the items actually on the page, so they always match what the caller received.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slotrelay.psmr import envelope
from slotrelay.psmr.grants import Grants
from slotrelay.psmr.ops import queries
from slotrelay.psmr.ops.budgets import Layout, Page, effective_budget, paginate
from slotrelay.psmr.ops.infer import infer_slice, recorded_disagreements
from slotrelay.psmr.ops.observations import runtime_evidence
from slotrelay.psmr.ops.queries import Answer
from slotrelay.psmr.workspace.store import Store, Workspace

if TYPE_CHECKING:
    from slotrelay.psmr.workspace.kept import KeptResolutions

Handler = Callable[..., dict[str, Any]]


def _collect(value: Any, refs: dict[str, set[str]]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "evidence_refs" and isinstance(inner, list):
                refs["evidence"].update(inner)
            elif key == "id" and isinstance(inner, str):
                for prefix, name in (("ev_", "evidence"), ("unk_", "unknown"), ("cf_", "conflict")):
                    if inner.startswith(prefix):
                        refs[name].add(inner)
            else:
                _collect(inner, refs)
    elif isinstance(value, list):
        for inner in value:
            _collect(inner, refs)


def _respond(
    operation: str, answer: Answer, request: dict[str, Any], request_id: str, version: str
) -> dict[str, Any]:
    limit = effective_budget(request)["max_text_bytes"]
    layout = Layout(answer.sections, answer.ranks)

    def cut(allowance: int) -> tuple[dict[str, Any], int]:
        page = paginate(
            layout,
            operation=operation,
            request=request,
            version=version,
            text_allowance=allowance,
        )
        return _envelope(answer, page, request_id), page.returned

    # The budget holds for the answer as sent: the items' share is what the rest leaves, and a page
    # whose envelope still runs over (references repeated at the top, the token) is cut again by the
    # excess, until it fits or holds a single item.
    bare = Page(sections={name: [] for name, _ in answer.sections})
    allowance = limit - envelope.text_bytes(_envelope(answer, bare, request_id))
    result, returned = cut(allowance)
    while (excess := envelope.text_bytes(result) - limit) > 0 and returned > 1:
        allowance -= excess
        result, returned = cut(allowance)
    if excess > 0:
        result["warnings"].append(
            f"this answer is {excess + limit} bytes, above max_text_bytes={limit}: "
            + ("its first item alone does not fit" if returned else "its summary alone does not fit")
            + "; returned whole rather than dropped"
        )
    return result


def _envelope(answer: Answer, page: Page, request_id: str) -> dict[str, Any]:
    refs: dict[str, set[str]] = {"evidence": set(answer.evidence_refs), "unknown": set(), "conflict": set()}
    _collect(page.sections, refs)
    data = {**answer.data, **page.sections, "truncated": page.truncated, "paging": page.paging}
    return envelope.ok(
        request_id,
        data,
        evidence_refs=sorted(refs["evidence"]),
        unknown_refs=sorted(refs["unknown"]),
        conflict_refs=sorted(refs["conflict"]),
        warnings=list(answer.warnings),
        continuation=page.continuation,
    )


def _on_workspace(operation: str, run: Callable[[Workspace, dict[str, Any], Store], Answer]) -> Handler:
    """An operator on one workspace that needs no capability (a `_granted` one that ignores the grants)."""
    return _granted(operation, lambda ws, request, store, _grants: run(ws, request, store))


def _plain(operation: str, run: Callable[[dict[str, Any], Store], Answer]) -> Handler:
    def handler(
        request: dict[str, Any],
        *,
        request_id: str,
        store: str | Path | None,
        grants: Grants,
        kept: KeptResolutions | None,
    ) -> dict[str, Any]:
        effective_budget(request)
        the_store = Store.open(store)
        answer = run(request, the_store)
        return _respond(operation, answer, request, request_id, answer.version or "runtime")

    return handler


def _granted(operation: str, run: Callable[[Workspace, dict[str, Any], Store, Grants], Answer]) -> Handler:
    """An operator that needs a capability: the runtime's grants are handed to it."""
    return _loaded(operation, lambda ws, request, store, grants, _kept: run(ws, request, store, grants))


def _loaded(
    operation: str,
    run: Callable[[Workspace, dict[str, Any], Store, Grants, KeptResolutions | None], Answer],
) -> Handler:
    """An operator on a loaded workspace, handed the runtime's grants and the resolutions the calling
    process keeps (verification.rebuild replays its last)."""

    def handler(
        request: dict[str, Any],
        *,
        request_id: str,
        store: str | Path | None,
        grants: Grants,
        kept: KeptResolutions | None,
    ) -> dict[str, Any]:
        effective_budget(request)
        the_store = Store.open(store)
        ws = the_store.load(request["workspace_id"])
        return _respond(operation, run(ws, request, the_store, grants, kept), request, request_id, ws.version)

    return handler


def _deferred(module: str, function: str) -> Callable[..., Answer]:
    """`slotrelay.psmr.<module>.<function>`, imported on its first call.

    The change side (deltas, projection, validation, verification, test runs) imports libcst and the
    sandbox, about half a second that a server answering reads alone would pay at start for nothing;
    the analyses (pyflakes' checker, the import graph of a semantic diff) are not needed by the first
    reads an agent makes (search, describe, subgraph) either.
    """

    def run(*args: Any, **keywords: Any) -> Answer:
        operator: Callable[..., Answer] = getattr(
            importlib.import_module(f"slotrelay.psmr.{module}"), function
        )
        return operator(*args, **keywords)

    return run


def _operator_list(request: dict[str, Any], store: Store) -> Answer:
    if request.get("workspace_id"):
        store.load(request["workspace_id"])
    return queries.list_operators(request)


def _search(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    def motifs() -> list[dict[str, Any]]:
        from slotrelay.psmr.ops.analyses import motif_instances

        return motif_instances(ws, store)

    def findings() -> dict[str, list[dict[str, Any]]]:
        from slotrelay.psmr.ops.findings import all_findings

        return all_findings(ws, store)

    # A search asks for motifs or findings only when its kinds include them: their imports wait too.
    return queries.search(ws, request, motifs=motifs, findings=findings)


HANDLERS: dict[str, Handler] = {
    "workspace.describe": _on_workspace(
        "workspace.describe",
        lambda ws, r, s: queries.describe_workspace(ws, r, recorded=recorded_disagreements(ws, s)),
    ),
    "operator.list": _plain("operator.list", _operator_list),
    "operator.describe": _plain("operator.describe", lambda r, s: queries.describe_operator(r)),
    "query.search": _on_workspace("query.search", _search),
    "query.subgraph": _on_workspace(
        "query.subgraph",
        lambda ws, r, s: queries.subgraph(
            ws, r, infer=lambda w, dist: infer_slice(w, dist, s), recorded=recorded_disagreements(ws, s)
        ),
    ),
    "query.evidence": _on_workspace(
        "query.evidence",
        lambda ws, r, s: queries.evidence(ws, r, runtime=runtime_evidence(ws, s)),
    ),
    "query.unknowns": _on_workspace("query.unknowns", lambda ws, r, s: queries.unknowns(ws, r)),
    "query.conflicts": _on_workspace(
        "query.conflicts", lambda ws, r, s: queries.conflicts(ws, r, recorded=recorded_disagreements(ws, s))
    ),
    "analysis.impact": _on_workspace(
        "analysis.impact", lambda ws, r, s: _deferred("ops.analyses", "impact")(ws, r, store=s)
    ),
    "analysis.semantic_diff": _plain(
        "analysis.semantic_diff", lambda r, s: _deferred("ops.diff", "semantic_diff")(r, store=s)
    ),
    "analysis.findings": _on_workspace(
        "analysis.findings", lambda ws, r, s: _deferred("ops.analyses", "findings")(ws, r, store=s)
    ),
    "analysis.motifs": _on_workspace(
        "analysis.motifs", lambda ws, r, s: _deferred("ops.analyses", "motifs")(ws, r, store=s)
    ),
    "analysis.contracts": _on_workspace(
        "analysis.contracts", lambda ws, r, s: _deferred("ops.analyses", "contracts")(ws, r, store=s)
    ),
    "delta.propose": _on_workspace("delta.propose", _deferred("change.delta", "propose")),
    "delta.list": _on_workspace("delta.list", _deferred("change.delta", "list_deltas")),
    "delta.describe": _on_workspace("delta.describe", _deferred("change.delta", "describe")),
    "delta.validate": _on_workspace("delta.validate", _deferred("change.validation", "validate")),
    "projection.preview": _on_workspace("projection.preview", _deferred("change.projection", "preview")),
    "projection.apply": _granted("projection.apply", _deferred("change.projection", "apply")),
    "execution.run_tests": _granted("execution.run_tests", _deferred("change.execution", "run_tests")),
    "verification.rebuild": _loaded(
        "verification.rebuild",
        lambda ws, r, s, _grants, kept: _deferred("change.verification", "rebuild")(ws, r, s, kept=kept),
    ),
    "verification.roundtrip": _on_workspace(
        "verification.roundtrip", _deferred("change.verification", "roundtrip")
    ),
    "verification.review": _on_workspace("verification.review", _deferred("change.verification", "review")),
}
