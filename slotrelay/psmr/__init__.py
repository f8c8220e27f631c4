"""PSMR: a persistent semantic workspace over Python code, queried and changed through one API.

Entry points: `slotrelay.psmr` (the names of `api`: `call`, `OPERATIONS`, `build_workspace`,
`list_workspaces`, `Grants`; and `PsmrError`, loaded on first use) and
`slotrelay.psmr.analysis.effects.effects` (a static screen of one code string, which the pen's callers
hand it).

Four rooms, each importing only the rooms under it (pyproject.toml's contract "PSMR's rooms"):

    change/     a delta proposed (delta, delta_ops, rewrite), validated (validation), previewed and
                applied (projection), its tests run (execution), verified (verification)
    ops/        the operators over a built workspace: queries, slicing, analyses, findings, diff, infer,
                overview; budgets pages every result
    workspace/  a build: files discovered, their facts, resolved, assembled (graph, parts, importgraph)
                and saved in the sealed store (store, sealed); watch keeps one up to date
    analysis/   the fast pass over one file (extract, cached by content hash), the resolution across
                files (link, memo, relink), call binding, and what a callee does to the world (effects)

At the root: the one API (api, handlers), a request bounded and checked (request_limits,
request_schema), and what every room speaks: the operators' catalog (operators), grants, the result
envelope and the errors.
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
