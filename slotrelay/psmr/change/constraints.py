"""A delta's constraints: what the change must keep, each a statement delta.validate checks in W~.

    unchanged: <symbol, module or file>   nothing inside it changes (definitions; for a file, its text)
    signature_unchanged: <symbol>         the function keeps its name and its signature
    public_api_unchanged                  no public symbol is removed, renamed or given a new signature
    no_new_unknowns                       no touched file gets an unknown it did not have

delta.propose refuses any other text, and a symbol or file the workspace does not hold, with
INVALID_QUERY or OBJECT_NOT_FOUND naming the constraint: a constraint nobody can check would only
look kept.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from slotrelay.psmr.errors import InvalidQuery, ObjectNotFound
from slotrelay.psmr.ops.slicing import file_node, find_node, within
from slotrelay.psmr.workspace.identity import qname
from slotrelay.psmr.workspace.store import Workspace

# Each form, and whether it names a target after the colon.
FORMS: dict[str, bool] = {
    "unchanged": True,
    "signature_unchanged": True,
    "public_api_unchanged": False,
    "no_new_unknowns": False,
}


def parse(ws: Workspace, text: str, where: str) -> tuple[str, str | None]:
    """A constraint as (form, target), the target as a node identity or a file path.

    Raises:
        InvalidQuery: not one of the forms.
        ObjectNotFound: its symbol, module or file is not in the workspace.
    """
    form, colon, rest = text.partition(":")
    form, target = form.strip(), rest.strip()
    if form not in FORMS or FORMS[form] != bool(colon and target):
        raise InvalidQuery(
            f"{where}: {text!r} is not a constraint delta.validate can check; write one of "
            "'unchanged: <symbol, module or file>', 'signature_unchanged: <symbol>', "
            "'public_api_unchanged', 'no_new_unknowns'"
        )
    if not target:
        return form, None
    try:
        if form == "unchanged" and target.endswith(".py"):
            return form, ws.graph.nodes[file_node(ws, target)]["artifact"]
        return form, find_node(ws, target)
    except ObjectNotFound as exc:
        raise ObjectNotFound(f"{where}: {exc.message}") from exc


def _what(node: str, removed: set[str], renamed: dict[str, str]) -> str:
    return "is removed" if node in removed else "is renamed" if node in renamed else "changes"


def _public(node: str) -> bool:
    return not any(p.startswith("_") and not p.startswith("__") for p in qname(node).split("."))


def check(
    old: Workspace,
    delta: dict[str, Any],
    actual: dict[str, list[Any]],
    fresh_unknowns: Counter[tuple[str, str, str]],
) -> list[dict[str, Any]]:
    """The problems of each constraint of a delta, against the change W~ - W.

    Parameters:
        old: W.
        delta: the delta (its `constraints`, `files`).
        actual: `diff.compare` of W and W~.
        fresh_unknowns: the unknowns of the touched files W~ has and W had not, as (scope, reason,
            detail) counts.
    """
    changed = {i["id"]: i["changes"] for i in actual["symbols_changed"]}
    removed = {i["id"] for i in actual["symbols_removed"]}
    renamed = {r["old"]: r["new"] for r in actual["symbols_renamed"]}
    problems: list[dict[str, Any]] = []
    for index, text in enumerate(delta["constraints"]):
        form, target = parse(old, text, f"constraints[{index}]")
        broken: list[str] = []
        if form == "unchanged" and target is not None:
            if target in delta["files"]:
                entry = delta["files"][target]
                if entry["original"] != entry["projected"]:
                    broken.append(f"{target} changes")
            else:
                broken += [
                    f"{qname(n)} {_what(n, removed, renamed)}"
                    for n in sorted({*changed, *removed, *renamed})
                    if within(n, {target})
                ]
        elif form == "signature_unchanged" and target is not None:
            if target in renamed or target in removed:
                broken.append(f"{qname(target)} is {'renamed' if target in renamed else 'removed'}")
            elif "signature_changed" in changed.get(target, []):
                broken.append(f"the signature of {qname(target)} changes")
        elif form == "public_api_unchanged":
            broken += [f"{qname(n)} is removed" for n in sorted(removed) if _public(n)]
            broken += [f"{qname(n)} is renamed" for n in sorted(renamed) if _public(n)]
            broken += [
                f"the signature of {qname(n)} changes"
                for n, c in sorted(changed.items())
                if "signature_changed" in c and _public(n)
            ]
        elif form == "no_new_unknowns":
            broken += [
                f"{reason} in {qname(scope)}: {detail}" for (scope, reason, detail) in sorted(fresh_unknowns)
            ]
        problems += [{"constraint": text, "problem": b} for b in broken]
    return problems
