"""analysis.semantic_diff: ΔG between two workspaces, or between two git revisions of one root.

Each side is first reduced to a `Side`: its symbols, its call sites and its other edges, plain data
that a delta can also keep as the "before" of a change (`verification.roundtrip`). Then:

- symbols compare by semantic identity: added, removed, signature changed, body changed. A removed
  and an added symbol of the same kind whose definitions are equal but for the name (a digest of the
  definition's AST with the name left out) are one rename, not a removal and an addition. A class is
  changed only when its own text changed (bases, decorators, class-level statements), not when only
  one of its members did: the member is reported.
- call sites compare one by one, keyed by caller, callee and the site's evidence span relative to the
  caller's definition (so a line inserted above the caller moves nothing); a pair of functions keeps
  its other calls when one is removed. Sites of one caller and callee that only moved inside the
  caller are paired up and reported as moved.
- other edges and state accesses compare as (source, relation, target) triples, each with evidence.
- public-API breakages come from griffe, which loads both trees' packages; its ANSI colours are
  stripped from the explanation.
"""

from __future__ import annotations

import ast
import hashlib
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotrelay.psmr.errors import ExecutionFailed, InvalidQuery
from slotrelay.psmr.ops.queries import Answer
from slotrelay.psmr.ops.slicing import CODE_KINDS, edge_item
from slotrelay.psmr.workspace.build import artifact_text, build
from slotrelay.psmr.workspace.importgraph import import_base
from slotrelay.psmr.workspace.store import Store, Workspace

STRUCTURE = frozenset({"imports", "inherits", "decorates", "defines", "tests"})
STATE = frozenset({"reads_state", "writes_state"})
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SYMBOL_KEYS = ("kind", "artifact", "span", "signature", "body_hash", "evidence", "qualname")


@dataclass
class Side:
    """One side of a diff as plain data: symbols, call sites, other edges, and how to read a file.

    `sites` are `[caller, callee, artifact, relative span, evidence id]`; the span's lines count from
    the caller's first line. `source` returns a file's text on this side (None if gone).
    """

    name: str
    version: str
    symbols: dict[str, dict[str, Any]]
    sites: list[list[Any]]
    edges: dict[str, dict[str, Any]]
    source: Callable[[str], str | None] = field(repr=False, default=lambda artifact: None)
    # Parsed files by artifact (None: unreadable or not Python), so each file is parsed once per diff.
    trees: dict[str, ast.Module | None] = field(repr=False, default_factory=dict)

    def tree(self, artifact: str) -> ast.Module | None:
        """The parsed file on this side, or None."""
        if artifact not in self.trees:
            text = self.source(artifact)
            try:
                self.trees[artifact] = ast.parse(text) if text is not None else None
            except SyntaxError:
                self.trees[artifact] = None
        return self.trees[artifact]

    def to_json(self) -> dict[str, Any]:
        """The side as JSON (without its source reader)."""
        return {
            "name": self.name,
            "version": self.version,
            "symbols": self.symbols,
            "sites": self.sites,
            "edges": self.edges,
        }


def side_of(ws: Workspace, *, source: Callable[[str], str | None] | None = None) -> Side:
    """Reduce a workspace to a `Side`; files are read from its source root unless `source` is given."""
    graph = ws.graph
    symbols = {
        n: {k: d[k] for k in SYMBOL_KEYS if k in d}
        for n, d in graph.nodes(data=True)
        if d["kind"] in CODE_KINDS | {"state"}
    }
    sites: list[list[Any]] = []
    edges: dict[str, dict[str, Any]] = {}
    for u, v, k in graph.edges(keys=True):
        if k == "calls":
            start = (graph.nodes[u].get("span") or [1])[0]
            for ev in graph.edges[u, v, k]["evidence"]:
                record = ws.evidence.get(ev)
                if record is None:
                    continue
                s = record["span"]
                relative = [s["line"] - start, s["col"], s["end_line"] - start, s["end_col"]]
                sites.append([u, v, record["artifact"], relative, ev])
        elif k in STRUCTURE | STATE:
            edges[f"{u}\0{k}\0{v}"] = edge_item(ws, u, v, k)
    def read(artifact: str) -> str | None:
        return artifact_text(ws.source_root, artifact)

    return Side(ws.workspace_id, ws.version, symbols, sorted(sites), edges, source or read)


def side_from_json(data: dict[str, Any], source: Callable[[str], str | None]) -> Side:
    """A `Side` kept as JSON (a delta's before-image), reading files through `source`."""
    return Side(data["name"], data["version"], data["symbols"], data["sites"], data["edges"], source)


def _definition(side: Side, node: str, *, own: bool) -> str | None:
    """A digest of a definition's AST without its name; `own` also leaves out nested definitions."""
    data = side.symbols.get(node, {})
    tree = side.tree(data.get("artifact") or "") if data.get("span") else None
    if tree is None:
        return None
    line = data["span"][0]
    for item in ast.walk(tree):
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and item.lineno == line:
            parts = [ast.dump(d) for d in item.decorator_list]
            if isinstance(item, ast.ClassDef):
                parts += [ast.dump(b) for b in item.bases + item.keywords]
            else:
                parts += [ast.dump(item.args), ast.dump(item.returns) if item.returns else ""]
            body = item.body
            if own:
                body = [
                    s
                    for s in body
                    if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                ]
            parts += [ast.dump(s) for s in body]
            return hashlib.sha1("\n".join(parts).encode()).hexdigest()
    return None


def compare(old: Side, new: Side, *, renames: dict[str, str] | None = None) -> dict[str, list[Any]]:
    """ΔG between two sides (see the module docstring), as ordered sections.

    Parameters:
        old: the side before.
        new: the side after.
        renames: renames known from an intent (a delta's rename_symbol), taken as renames wherever the
            old identity is gone and the new one came, even if the definition's text changed too.

    Returns:
        Section name to items: symbols_added, symbols_removed, symbols_renamed, symbols_changed,
        call_sites_added, call_sites_removed, call_sites_moved, edges_added, edges_removed,
        state_accesses_added, state_accesses_removed.
    """
    a, b = old.symbols, new.symbols
    gone, came = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    renamed = _renamed(old, new, gone, came, renames or {})
    mapped = set(renamed.values())
    sections: dict[str, list[Any]] = {
        "symbols_added": [_symbol_item(new, n) for n in came if n not in mapped],
        "symbols_removed": [_symbol_item(old, n) for n in gone if n not in renamed],
        "symbols_renamed": [
            {"old": o, "new": n, "kind": b[n]["kind"], "evidence_refs": b[n].get("evidence", [])}
            for o, n in sorted(renamed.items())
        ],
        "symbols_changed": _symbols_changed(old, new, renamed),
    }
    sections.update(_sites(old, new, renamed))
    for name, relations in (("edges", STRUCTURE), ("state_accesses", STATE)):
        ea = {_rename_key(k, renamed): e for k, e in old.edges.items() if k.split("\0")[1] in relations}
        eb = {k: e for k, e in new.edges.items() if k.split("\0")[1] in relations}
        sections[f"{name}_added"] = [eb[k] for k in sorted(set(eb) - set(ea))]
        sections[f"{name}_removed"] = [ea[k] for k in sorted(set(ea) - set(eb))]
    return sections


def _renamed(
    old: Side, new: Side, gone: list[str], came: list[str], renames: dict[str, str]
) -> dict[str, str]:
    """Old identity to new for each symbol that was renamed: the intent's renames, then a definition
    gone and one come with the same shape (one match only), then the members of a renamed class."""
    a, b = old.symbols, new.symbols
    renamed = {o: n for o, n in renames.items() if o in gone and n in came}
    if gone and came:
        by_shape: dict[tuple[str, str], list[str]] = {}
        for n in came:
            digest = _definition(new, n, own=False) if b[n]["kind"] != "state" else None
            if digest:
                by_shape.setdefault((b[n]["kind"], digest), []).append(n)
        for n in gone:
            digest = _definition(old, n, own=False) if a[n]["kind"] != "state" else None
            match = by_shape.get((a[n]["kind"], digest or ""), [])
            if n not in renamed and len(match) == 1 and match[0] not in renamed.values():
                renamed[n] = match[0]
    for n in gone:
        for old_parent, new_parent in list(renamed.items()):
            if n.startswith(old_parent + ".") and n not in renamed:
                candidate = new_parent + n[len(old_parent) :]
                if candidate in came:
                    renamed[n] = candidate
    return renamed


def _symbol_item(side: Side, n: str) -> dict[str, Any]:
    d = side.symbols[n]
    return {
        "id": n,
        "kind": d["kind"],
        "artifact": d.get("artifact"),
        "evidence_refs": d.get("evidence", []),
    }


def _symbols_changed(old: Side, new: Side, renamed: dict[str, str]) -> list[dict[str, Any]]:
    """The symbols on both sides (by identity or renamed) whose signature or own body changed."""
    a, b = old.symbols, new.symbols
    changed = []
    pairs = [(n, n) for n in sorted(set(a) & set(b))] + sorted(renamed.items())
    for was, now in pairs:
        what = []
        if a[was].get("signature") != b[now].get("signature"):
            what.append("signature_changed")
        body = a[was].get("body_hash") != b[now].get("body_hash")
        if (
            body
            and (was == now or _renamed_body(old, new, was, now))
            and (a[was]["kind"] != "class" or _class_itself_changed(old, new, was, now))
        ):
            what.append("body_changed")
        if what:
            changed.append(
                {
                    "id": now,
                    "changes": what,
                    "old_signature": a[was].get("signature"),
                    "new_signature": b[now].get("signature"),
                    "evidence_refs": b[now].get("evidence", []),
                }
            )
    return changed


def _class_itself_changed(old: Side, new: Side, was: str, now: str) -> bool:
    before, after = _definition(old, was, own=True), _definition(new, now, own=True)
    # Without both texts the members cannot be told apart from the class: report the change.
    return before is None or after is None or before != after


def _renamed_body(old: Side, new: Side, was: str, now: str) -> bool:
    return _definition(old, was, own=False) != _definition(new, now, own=False)


def _rename_key(key: str, renamed: dict[str, str]) -> str:
    u, k, v = key.split("\0")
    return f"{renamed.get(u, u)}\0{k}\0{renamed.get(v, v)}"


def _sites(old: Side, new: Side, renamed: dict[str, str]) -> dict[str, list[Any]]:
    def keyed(sites: list[list[Any]], mapping: dict[str, str]) -> dict[tuple[Any, ...], list[Any]]:
        return {
            (mapping.get(u, u), mapping.get(v, v), art, tuple(span)): [u, v, art, span, ev]
            for u, v, art, span, ev in sites
        }

    before, after = keyed(old.sites, renamed), keyed(new.sites, {})
    removed = sorted(set(before) - set(after))
    added = sorted(set(after) - set(before))
    moved = []
    by_pair: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for key in added:
        by_pair.setdefault(key[:2], []).append(key)
    still_removed = []
    for key in removed:
        candidates = by_pair.get(key[:2])
        if candidates:
            other = candidates.pop(0)
            moved.append((key, other))
        else:
            still_removed.append(key)
    still_added = [k for keys in by_pair.values() for k in keys]

    def site(record: list[Any]) -> dict[str, Any]:
        u, v, art, span, ev = record
        return {"caller": u, "callee": v, "artifact": art, "relative_span": span, "evidence_refs": [ev]}

    return {
        "call_sites_added": [site(after[k]) for k in sorted(still_added)],
        "call_sites_removed": [site(before[k]) for k in still_removed],
        "call_sites_moved": [
            {**site(after[n]), "from_relative_span": before[o][3]} for o, n in sorted(moved)
        ],
    }


def _pair(request: dict[str, Any], store: Store) -> tuple[Workspace, Workspace]:
    if request.get("workspace_a") and request.get("workspace_b"):
        return store.load(request["workspace_a"]), store.load(request["workspace_b"])
    if request.get("workspace_id") and request.get("rev_a") and request.get("rev_b"):
        base = store.load(request["workspace_id"])
        sides = [
            build(base.root, rev=request[r], store=store.path)["workspace_id"] for r in ("rev_a", "rev_b")
        ]
        return store.load(sides[0]), store.load(sides[1])
    raise InvalidQuery(
        "analysis.semantic_diff needs workspace_a and workspace_b, or workspace_id with rev_a "
        "and rev_b (git revisions of that workspace's root)"
    )


def texts_of(ws: Workspace) -> dict[str, str]:
    """Every file of a workspace that can be read now, as the build reads it, by artifact."""
    return {a: text for a in ws.files if (text := artifact_text(ws.source_root, a)) is not None}


def api_breakages(
    old: tuple[dict[str, Any], dict[str, str]], new: tuple[dict[str, Any], dict[str, str]], *, name: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """griffe's breaking changes between the top-level packages both trees hold.

    griffe reads a private copy of the texts given, never the tree itself: what it sees is what the
    analysis read (regular files inside the root, `slotrelay.psmr.workspace.build.read_source`).

    Parameters:
        old: the old tree's files (artifact -> entry with `module`) and texts (artifact -> text).
        new: the same for the new tree.
        name: the name of the trees' root folder (a root that is a package is imported by it).

    Returns:
        The breakages (kind, title, object, old, new, explanation) and warnings.
    """
    import griffe

    warnings: list[str] = []
    out: list[dict[str, Any]] = []
    tops = sorted(
        {e["module"].split(".")[0] for e in old[0].values()}
        & {e["module"].split(".")[0] for e in new[0].values()}
    )
    with tempfile.TemporaryDirectory(prefix="psmr-griffe-") as folder:
        roots = []
        for side, (_, texts) in (("old", old), ("new", new)):
            root = Path(folder) / side / name
            for artifact, text in texts.items():
                (root / artifact).parent.mkdir(parents=True, exist_ok=True)
                (root / artifact).write_text(text, encoding="utf-8")
            roots.append(root)
        out = _breakages(griffe, tops, roots, warnings)
    return sorted(out, key=lambda b: (b["object"], b["kind"])), warnings


def _relative(text: str, roots: list[Path]) -> str:
    """`text` with the private copies' paths written relative to the tree's root."""
    for root in roots:
        text = text.replace(f"{root}/", "")
    return text


def _breakages(griffe: Any, tops: list[str], roots: list[Path], warnings: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for top in tops:
        try:
            before, after = (
                griffe.load(
                    top,
                    search_paths=[str(import_base(root))],
                    try_relative_path=False,
                    allow_inspection=False,
                    resolve_aliases=False,
                )
                for root in roots
            )
            for breakage in griffe.find_breaking_changes(before, after):
                out.append(
                    {
                        "kind": breakage.kind.name.lower(),
                        "title": breakage.kind.value,
                        "object": breakage.obj.path,
                        "old": str(breakage.old_value),
                        "new": str(breakage.new_value),
                        "explanation": _relative(_ANSI.sub("", breakage.explain()).strip(), roots),
                    }
                )
        except Exception as exc:  # noqa: BLE001 - griffe's own failure is reported, the rest of ΔG stands
            warnings.append(f"griffe could not compare {top} ({type(exc).__name__}: {exc})")
    return out


def semantic_diff(request: dict[str, Any], *, store: Store) -> Answer:
    """analysis.semantic_diff: the delta between two workspaces with evidence."""
    old, new = _pair(request, store)
    delta = compare(side_of(old), side_of(new))
    try:
        breakages, warnings = api_breakages(
            (old.files, texts_of(old)), (new.files, texts_of(new)), name=Path(new.source_root).name
        )
    except ImportError as exc:
        raise ExecutionFailed(f"griffe is not importable ({exc}); pip install griffe") from exc
    sections = [*delta.items(), ("api_breakages", breakages)]
    return Answer(
        version=f"{old.version}:{new.version}",
        sections=sections,
        warnings=warnings,
        data={
            "workspace_a": old.workspace_id,
            "workspace_b": new.workspace_id,
            "revision_a": old.commit,
            "revision_b": new.commit,
            "evidence_from": {"added": new.workspace_id, "removed": old.workspace_id},
            "counts": {name: len(items) for name, items in sections},
        },
    )
