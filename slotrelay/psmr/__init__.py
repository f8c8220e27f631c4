"""PSMR: a persistent semantic workspace over Python code, queried and changed through one API.

Entry points: `slotrelay.psmr` (the names of `api`: `call`, `OPERATIONS`, `build_workspace`,
`list_workspaces`, `Grants`; and `PsmrError`, loaded on first use) and
`slotrelay.psmr.analysis.effects.effects` (a static screen of one code string, which the pen's callers hand
it). The flow of a build: `build` discovers files -> `extract` (fast pass per file, cached by content hash) ->
`link` (resolution across files) -> `graph` (MultiDiGraph with evidence, unknowns, conflicts) -> `store`.
Operators live in `queries`, `analyses`, `findings`, `diff` and `infer`; `budgets` pages every result.
The change half: `delta` (propose; `delta_ops` expands the typed operations, `rewrite` edits through
libcst, `callbinding` binds call sites), `validation`, `projection` (preview, apply), `execution`
(tests in the sandbox), `verification` (rebuild, roundtrip, review); `grants` holds the capabilities.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slotrelay.psmr.api import OPERATIONS, Grants, build_workspace, call, list_workspaces
    from slotrelay.psmr.errors import PsmrError

__all__ = ["OPERATIONS", "Grants", "PsmrError", "build_workspace", "call", "list_workspaces"]


def __getattr__(name: str) -> Any:
    # The names load on first use (PEP 562), as the pen's do: a caller of one part (the store, the
    # screen) does not pay for the API's JSON Schemas and every operator.
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{'errors' if name == 'PsmrError' else 'api'}"), name)
