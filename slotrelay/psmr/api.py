"""The PSMR API: one entry, `call`, answering every operator in the result envelope.

    call("query.subgraph", {"workspace_id": "ws_...", "anchor": {...}})

`call` checks the request against the operator's JSON Schema (`OPERATIONS`, through
`slotrelay.psmr.request_schema`), runs it, pages the
result to the request's budget, and always returns an envelope: a PSMR error becomes
`status: "error"` with one of the twelve codes and a message saying what to do instead; an error of no
PSMR type is logged with its traceback (logger `slotrelay.psmr`) and answered as EXECUTION_FAILED
with an incident id, never with its own text. It never raises on bad input. `build_workspace` and
`list_workspaces` create and enumerate the workspaces the operators read.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slotrelay.psmr import envelope, request_limits
from slotrelay.psmr.errors import (
    InvalidQuery,
    OperatorUnavailable,
    PsmrError,
    TypeMismatch,
)
from slotrelay.psmr.grants import READ_ONLY, Grants
from slotrelay.psmr.operators import OPERATIONS
from slotrelay.psmr.request_schema import RequestSchema
from slotrelay.validation_text import schema_problem

if TYPE_CHECKING:
    from slotrelay.psmr.analysis.buildbudget import BuildBudget
    from slotrelay.psmr.workspace.kept import KeptResolutions

__all__ = ["OPERATIONS", "Grants", "build_workspace", "call", "list_workspaces"]

logger = logging.getLogger(__name__)


@functools.cache
def _request_schema(operation: str) -> RequestSchema:
    return RequestSchema(OPERATIONS[operation]["input_schema"])


def _validate(operation: str, request: Any) -> None:
    if not isinstance(request, dict):
        raise TypeMismatch(f"the request of {operation} must be a JSON object, got {type(request).__name__}")
    schema = _request_schema(operation)
    request_limits.check(operation, schema.schema, request)
    violations = schema.violations(request)
    if not violations:
        return
    # Only a request that is wrong comes here, and jsonschema has just explained it.
    from jsonschema.exceptions import best_match

    error = best_match(violations)
    hint = f"see operator.describe {{'operator': '{operation}'}} for the request schema"
    message = f"{operation}: {schema_problem(error)}; {hint}"
    if error.validator == "type":
        raise TypeMismatch(message)
    raise InvalidQuery(message)


def _check_operation(operation: str) -> None:
    if operation not in OPERATIONS:
        raise OperatorUnavailable(
            f"no operator named {operation!r}; operator.list shows the {len(OPERATIONS)} offered"
        )


def call(
    operation: str,
    request: dict[str, Any],
    *,
    store: str | Path | None = None,
    grants: Grants = READ_ONLY,
    kept: KeptResolutions | None = None,
) -> dict[str, Any]:
    """Run one operator and answer in the `psmr-tool-result-0.1` envelope.

    Parameters:
        operation: an operator name from `OPERATIONS` (e.g. `query.subgraph`).
        request: the request object (see the operator's `input_schema`); may carry `budget` and
            `continuation_token`.
        store: the store folder (default: `slotrelay.psmr.workspace.store.default_store`, the one store in
            slotrelay's state folder).
        grants: the capabilities beyond reading (`source-write` roots, `process-execution`); none by
            default, so projection.apply and execution.run_tests answer CAPABILITY_DENIED.
        kept: the resolutions the calling process keeps (`slotrelay.psmr.workspace.kept`), which
            verification.rebuild replays; none by default (it then resolves in full).

    Returns:
        The envelope, `status` "ok" with `data`, or "error" with `error: {code, message}`.
    """
    from slotrelay.psmr.handlers import HANDLERS

    request_id = envelope.new_request_id()
    try:
        if not isinstance(operation, str):
            raise TypeMismatch("operation must be a string such as 'query.subgraph'")
        _check_operation(operation)
        _validate(operation, request)
        return HANDLERS[operation](request, request_id=request_id, store=store, grants=grants, kept=kept)
    except PsmrError as exc:
        return envelope.error(request_id, exc.code, exc.message, details=exc.details)
    except Exception:  # the API never raises: an internal fault is answered as EXECUTION_FAILED
        # The traceback goes to the log; the caller learns only the incident id to find it by.
        logger.exception("psmr operation %s failed unexpectedly (incident %s)", operation, request_id)
        return envelope.error(
            request_id,
            "EXECUTION_FAILED",
            f"{operation} failed with an internal error (incident {request_id}, logged as slotrelay.psmr); "
            "rebuild the workspace with `slotrelay psmr build` and retry, and report the incident if it "
            "persists",
        )


def build_workspace(
    path: str | Path,
    *,
    rev: str | None = None,
    store: str | Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    budget: BuildBudget | None = None,
    kept: KeptResolutions | None = None,
    persist: bool = False,
    later: Callable[[Callable[[], None]], None] | None = None,
) -> dict[str, Any]:
    """Build or incrementally update the workspace of a source tree (or one git revision of it).

    Parameters:
        path: the root to analyse (a package folder, a project folder, or a git checkout).
        rev: a git revision to analyse from its tree (through a worktree in the store) instead of
            the files on disk.
        store: the store folder (default: `slotrelay.psmr.workspace.store.default_store`).
        progress: called as `progress(done, total, file)` while files are analysed.
        budget: what resolving may cost (CPU seconds, memory, steps; default `BuildBudget()`, far
            above what real packages take); past it the call sites left are the unknown
            `budget_exceeded` and the workspace is written all the same.
        kept: the resolutions the calling process keeps (`slotrelay.psmr.workspace.kept.KeptResolutions`), for
            a long-lived process that updates the workspace again: the update replays the last
            resolution where the edit reaches. None (the default) keeps nothing in the process, and
            replays the resolution the store keeps of the workspace, if any (`persist`).
        persist: keep this build's resolution in the store for the next build's replay (the
            `slotrelay psmr build` command does), once the store already held a build of the workspace
            (see `slotrelay.psmr.workspace.replay`).
        later: given the write of that record instead of running it, for a caller that runs it after
            answering (the command does, in a child process, so that nobody waits for it).

    Returns:
        `{"workspace_id", "root", "store", "rev", "commit", "version", "files", "analysed",
        "reused", "removed", "dependents", "resolved_sites", "assembled_modules", "nodes", "edges",
        "unknowns", "conflicts", "budget_exceeded", "duration_s"}`; `budget_exceeded` is the limit
        passed (`cpu_s`, `memory_bytes`, `steps`) or None; `resolved_sites` counts the call sites resolved and
        `assembled_modules` the modules whose part of the graph was assembled, all of them unless the
        build was given the last resolution (`kept`).

    Raises:
        PsmrError: INVALID_QUERY for a missing root, EXECUTION_FAILED when git fails.
    """
    from slotrelay.psmr.workspace.build import build

    return build(
        path, rev=rev, store=store, progress=progress, budget=budget, kept=kept, persist=persist, later=later
    )


def list_workspaces(*, store: str | Path | None = None) -> list[dict[str, Any]]:
    """The workspaces in a store.

    Parameters:
        store: the store folder (default as in `call`).

    Returns:
        One `{"workspace_id", "root", "rev", "commit", "version", "files", "updated"}` per workspace,
        sorted by id.
    """
    from slotrelay.psmr.workspace.store import Store

    return Store.open(store).list()
