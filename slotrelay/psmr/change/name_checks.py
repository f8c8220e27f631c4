"""The checks of the names a delta takes away or takes up (part of delta.validate's graph_invariants).

- names_left: after a rename or a removal, every reference anywhere in the tree that still names the
  old name (`references.scan`): a call, an attribute, an import or a bare name in code, and apart,
  as a hint, a string or docstring. A bare name nothing binds and an import from the tree fail at
  run time: problems. An attribute of something (called or not) the analysis cannot resolve is a
  site to review, marked `likely_broken` when nothing in W~ and no builtin type carries the name,
  unless W~ resolves the call to another definition of that name (edit it, or accept it once
  checked: an attribute of an object outside the tree may carry the name too).
- shadowed_names: a rename to a name its scope already binds (`b` renamed to `len`): in the module
  and the modules importing it by name, or builtins, for a top-level definition; along the class
  hierarchy (bases and subclasses in the tree) for a method; in the enclosing function for a nested
  one. Each is a problem naming what would be shadowed.

Positions are reported as delta.propose and edit_reference take them: the line and byte column of the
file as it stands; a reference on a line the delta itself rewrote is given in the projected text and
says so (`in_projected_text`).
"""

from __future__ import annotations

import ast
import builtins
import difflib
from typing import Any

from slotrelay.psmr.change import delta as deltas
from slotrelay.psmr.change.references import bound_names, scan
from slotrelay.psmr.workspace.identity import qname, sid
from slotrelay.psmr.workspace.store import Workspace

# What a removed or renamed symbol could have been: a definition, not a module, lambda or state.
DEFINITION_KINDS = frozenset({"class", "function", "method", "test"})
BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_"))
# A method name that a builtin type has (`get`, `append`, `items`) is no proof of a broken reference.
_BUILTIN_TYPES = (object, type, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)
BUILTIN_ATTRIBUTES = frozenset().union(*(dir(kind) for kind in (*_BUILTIN_TYPES, BaseException)))


def _gone_names(old: Workspace, new: Workspace, renamed: dict[str, str]) -> dict[str, list[str]]:
    """The last names the delta takes away: of each definition W has and W~ no longer has, and the
    old name of each renamed one."""
    gone: dict[str, list[str]] = {}
    for node, data in old.graph.nodes(data=True):
        if data.get("kind") not in DEFINITION_KINDS:
            continue
        name = qname(node).rsplit(".", 1)[-1]
        now = deltas.renamed_to(renamed, node)
        if name.isidentifier() and (now not in new.graph or qname(now).rsplit(".", 1)[-1] != name):
            gone.setdefault(name, []).append(node)
    return gone


def _kept_lines(before: str, after: str) -> dict[int, int]:
    """Projected line -> original line, for the lines an edit left as they were (same columns)."""
    out: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(a=after.splitlines(), b=before.splitlines(), autojunk=False)
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal":
            out.update({i1 + k + 1: j1 + k + 1 for k in range(i2 - i1)})
    return out


def _defined_names(ws: Workspace) -> set[str]:
    """Every last name a definition or attribute of the workspace's tree carries."""
    return {
        qname(n).rsplit(".", 1)[-1]
        for n, d in ws.graph.nodes(data=True)
        if d.get("kind") in DEFINITION_KINDS | {"state"}
    }


def _resolved_calls(ws: Workspace, artifacts: set[str]) -> dict[tuple[str, int, int], set[str]]:
    """(artifact, line, column) -> the callees W~ resolves the call site there to."""
    out: dict[tuple[str, int, int], set[str]] = {}
    for _, callee, key, edge in ws.graph.edges(keys=True, data=True):
        if key != "calls":
            continue
        for ev in edge["evidence"]:
            record = ws.evidence.get(ev)
            if record is not None and record["artifact"] in artifacts:
                span = record["span"]
                out.setdefault((record["artifact"], span["line"], span["col"]), set()).add(callee)
    return out


def _tree_module(ws: Workspace, module: str | None) -> bool:
    """Whether a module is one of the tree, or a package above one of its modules."""
    return bool(module) and any(
        m == module or m.startswith(f"{module}.") for m in (entry["module"] for entry in ws.files.values())
    )


def _may_hold(old: Workspace, nodes: list[str], receiver: str) -> bool:
    """Whether an attribute taken from `receiver` (a module path from an import, with attributes after
    it, or VALUE) may be one of the gone definitions: always for a method (any object may be an
    instance); for a top-level function or class, only when the receiver is its module, which is how
    a module's definition is reached as an attribute."""
    for node in nodes:
        data = old.graph.nodes[node]
        module = data.get("module") or ""
        if data["qualname"].rsplit(".", 1)[0] != module or receiver == module:
            return True
    return False


def names_left(
    old: Workspace, new: Workspace, delta: dict[str, Any], sources: dict[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The references W~ still makes, anywhere in the tree, to a name the delta removes or renames.

    Returns:
        (problems, review, strings). A bare name, or a call of one, that the file does not bind, and
        an import of the name from a module of the tree, fail at run time: problems. An attribute of
        something, called or not (`self._registry.get_or_retrieve(...)`), is for review, the analysis
        cannot tell what it is: `likely_broken` when no definition of W~ and no builtin type carries
        the name; left out when W~ resolves the call to another definition of that name. A string or
        docstring naming it is listed apart, as a hint.
    """
    renamed = {r["old"]: r["new"] for r in delta["expected"]["symbols_renamed"]}
    gone = _gone_names(old, new, renamed)
    if not gone:
        return [], [], []
    defined = _defined_names(new)
    found = [
        reference
        for artifact, text in sorted(sources.items())
        for reference in scan(text, artifact, new.files[artifact]["module"], set(gone))
    ]
    resolved = _resolved_calls(new, {r.artifact for r in found if r.kind == "call"})
    kept_lines = {a: _kept_lines(f["original"], f["projected"]) for a, f in delta["files"].items()}
    problems: list[dict[str, Any]] = []
    review: list[dict[str, Any]] = []
    strings: list[dict[str, Any]] = []
    for reference in found:
        was = ", ".join(qname(n) for n in sorted(gone[reference.name]))
        item: dict[str, Any] = {
            "file": reference.artifact,
            "line": reference.line,
            "column": reference.col,
            "text": reference.text,
            "name": reference.name,
            "reference": reference.kind,
            "scope": sid(reference.scope),
        }
        if reference.artifact in kept_lines:
            line = kept_lines[reference.artifact].get(reference.line)
            item.update({"line": line} if line is not None else {"in_projected_text": True})
        callees = resolved.get((reference.artifact, reference.line, reference.col), set())
        if reference.kind == "string":
            strings.append({**item, "problem": f"a string names {reference.name} ({was} is gone)"})
        elif any(qname(c).rsplit(".", 1)[-1] == reference.name for c in callees):
            continue
        elif reference.kind == "import":
            if _tree_module(new, reference.source):
                problems.append(
                    {**item, "problem": f"imports {reference.name} from {reference.source}, which no longer "
                     f"defines it ({was} is removed or renamed): an ImportError"}
                )  # fmt: skip
        elif reference.receiver is not None and not _may_hold(old, gone[reference.name], reference.receiver):
            continue
        elif not reference.on_receiver:
            problems.append(
                {**item, "problem": f"still names {reference.name}, which the delta removes or renames "
                 f"({was}), and nothing binds it here: a NameError; edit it (edit_reference)"}
            )  # fmt: skip
        else:
            likely = reference.name not in defined and reference.name not in BUILTIN_ATTRIBUTES
            elsewhere = (
                "nothing else defines it, so it most likely meant that: edit it (edit_reference, or "
                "rename_symbol with include_unresolved)"
                if likely
                else "something else of that name still exists, so it may mean that"
            )
            review.append(
                {**item, "likely_broken": likely, "reason": f"an attribute named {reference.name}, which the "
                 f"delta takes from {was}; the analysis cannot tell what it is: {elsewhere}"}
            )  # fmt: skip
    return problems, review, strings


def _shadowing(node: str, new_name: str, where: str, shadowed: str) -> dict[str, Any]:
    return {
        "symbol": node,
        "new_name": new_name,
        "shadowed": shadowed,
        "problem": f"renaming {qname(node)} to {new_name} shadows {shadowed} in {where}; pick a name its "
        "scope does not bind",
    }


def shadowed_names(old: Workspace, delta: dict[str, Any]) -> list[dict[str, Any]]:
    """Renames whose new name is already bound where the renamed symbol is bound: in its module (and
    the modules importing it by name) or builtins for a top-level definition, along the class
    hierarchy for a method or nested class, in the enclosing function for a nested one."""
    problems = []
    for rename in delta["expected"]["symbols_renamed"]:
        node = rename["old"]
        if node not in old.graph:
            continue
        data = old.graph.nodes[node]
        old_name, new_name = qname(node).rsplit(".", 1)[-1], qname(rename["new"]).rsplit(".", 1)[-1]
        parent = sid(data["qualname"].rsplit(".", 1)[0])
        parent_kind = old.graph.nodes[parent]["kind"] if parent in old.graph else "module"
        if parent_kind == "class":
            problems += [
                _shadowing(node, new_name, f"the class hierarchy of {qname(parent)}", qname(other))
                for other in sorted(_hierarchy_members(old, parent))
                if qname(other).rsplit(".", 1)[-1] == new_name and other != node
            ]
            continue
        scopes = [(data["artifact"], parent_kind, parent)]
        scopes += [
            (e["file"], "module", sid(delta["files"][e["file"]]["module"]))
            for e in delta["edits"]
            if e["kind"] == "import" and e["file"] in delta["files"] and e["file"] != data["artifact"]
        ]
        for artifact, kind, scope in dict.fromkeys(scopes):
            bound = _scope_names(old, delta, artifact, kind, scope)
            if new_name in bound and new_name != old_name:
                problems.append(
                    _shadowing(
                        node, new_name, qname(scope), f"{qname(scope)}.{new_name} (line {bound[new_name]})"
                    )
                )
        if new_name in BUILTIN_NAMES:
            module = qname(sid(data.get("module") or qname(parent)))
            problems.append(
                _shadowing(
                    node, new_name, f"{module} and every module importing it", f"the builtin {new_name}"
                )
            )
    return problems


def _hierarchy_members(ws: Workspace, cls: str) -> set[str]:
    """The members of a class, of its bases in the tree and of its subclasses."""
    related = {cls}
    for relation_in in (False, True):
        frontier = [cls]
        while frontier:
            node = frontier.pop()
            edges = ws.graph.in_edges(node, keys=True) if relation_in else ws.graph.out_edges(node, keys=True)
            for u, v, key in edges:
                other = u if relation_in else v
                if key == "inherits" and other not in related and other in ws.graph:
                    related.add(other)
                    frontier.append(other)
    return {v for c in related for _, v, key in ws.graph.out_edges(c, keys=True) if key == "defines"}


def _scope_names(
    old: Workspace, delta: dict[str, Any], artifact: str, kind: str, scope: str
) -> dict[str, int]:
    """The names bound in a module or function scope of W, each with the first line binding it."""
    text = delta["files"][artifact]["original"] if artifact in delta["files"] else ""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    bound = bound_names(tree.body)
    if kind in ("function", "method", "test"):
        line = (old.graph.nodes[scope].get("span") or [0])[0]
        for item in ast.walk(tree):
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.lineno == line:
                arguments = [*item.args.posonlyargs, *item.args.args, *item.args.kwonlyargs]
                arguments += [a for a in (item.args.vararg, item.args.kwarg) if a is not None]
                bound = {**bound, **{a.arg: item.lineno for a in arguments}, **bound_names(item.body)}
    return bound
