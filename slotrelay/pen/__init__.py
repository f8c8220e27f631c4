"""The magic pen (MPP-001): an intent becomes code from a code model, runs in the sandbox, is
audited, and is erased, kept or shared to the module registry for review.

    write(request, root=..., model=...)   the request in, the output out, the persona's decision applied
    decide(root, pen_id, action)          a person's final action on a completed pen
    review(root, pen_id, verdict)         registry review of a shared pen
    verify_audit(root)                    check the hash-chained audit log

Module map: models (the contract), terms (its enums), intent_screen (the intent), model_client +
codegen (the code model), code_screen (the generated code), writer (the steps, in order), run (one
call as it goes, and its outcome) and steps (how each step is run), policy + suggest (decisions), states
(the state machine), ids, store (folders), manifest (for a share), registry (review), reports (what a
person reads, as Markdown), node (the chain executor), api (the names above). The audit log is
`slotrelay.audit_log`, shared with PSMR.

The names come from `api` on first use (PEP 562): `terms`, `steps` and `reports` import nothing heavy,
so the CLI builds its choices from `terms`, and the Prefect shell installs its step runner and shows
the pen's reports, without loading the pen (its screens, the model client and the sandbox).
"""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slotrelay.pen.api import (
        AuditReport,
        ModelSettings,
        PenAction,
        PenError,
        PenOutcome,
        PenOutput,
        PenRequest,
        ReviewOutcome,
        Verdict,
        decide,
        parse_request,
        review,
        verify_audit,
        write,
    )

# The same names as `api.__all__` (tests/test_public_api.py holds both to this list), spelled out here
# so that reading them does not load the pen.
__all__ = [
    "AuditReport",
    "ModelSettings",
    "PenAction",
    "PenError",
    "PenOutcome",
    "PenOutput",
    "PenRequest",
    "ReviewOutcome",
    "Verdict",
    "decide",
    "parse_request",
    "review",
    "verify_audit",
    "write",
]


def __getattr__(name: str) -> Any:
    # `from slotrelay.pen import store` asks here first when `store` is not loaded yet: a submodule
    # is not an api name, so the import system is left to load it (loading api could be circular).
    if find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.api"), name)
