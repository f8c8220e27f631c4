"""Assemble the workspace graph (a networkx MultiDiGraph) from facts and their resolution.

Nodes are keyed by semantic identity (`semantic:pkg.mod.func`) and carry `kind` (module, class,
function, method, lambda, test, state, external, builtin), `qualname`, `artifact`, `span`.
Edges are keyed by relation (defines, imports, calls, reads_state, writes_state, inherits, decorates,
tests) and carry the evidence ids of every site supporting them. `called_by` is `calls` read backwards.
Evidence, unknowns and conflicts are records beside the graph, addressed by stable ids derived from
what they say, so the same tree always yields the same ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slotrelay.psmr.analysis.extract import is_overload
from slotrelay.psmr.analysis.link import RESOLVED_STATUS, CallTarget, LinkResult
from slotrelay.psmr.workspace.identity import qname, sid, stable_id
from slotrelay.psmr.workspace.parts import OUTSIDE_KINDS, Assembly, ModulePart, merge

# The identities live in `identity` (what reads a stored workspace names nodes without the resolver);
# they stay importable from here for the assembler's own callers.
__all__ = ["Assembled", "GraphAssembler", "ModuleLink", "qname", "sid", "stable_id"]


@dataclass(frozen=True)
class ModuleLink:
    """A module's share of the resolution: all its part of the graph depends on besides its facts."""

    # Per call site, its targets, or the reason it is an unknown.
    calls: tuple[list[CallTarget] | str, ...]
    implicit: tuple[list[CallTarget], ...]
    state: tuple[tuple[str, str, str, str, int], ...]
    # Per class: its bases in the tree, bases outside it, and its MRO.
    classes: tuple[tuple[str, list[str], list[str], list[str]], ...]
    decorates: tuple[tuple[str, str, str, int], ...]
    reexports: tuple[tuple[str, str, str], ...]
    imports: tuple[tuple[str, str, int, str], ...]


@dataclass
class Assembled:
    """Each module's part of the graph and what it was assembled from: the next update assembles
    again only the modules whose facts, path or share of the resolution changed."""

    revision: str | None
    facts: dict[str, dict[str, Any]]
    paths: dict[str, str]
    links: dict[str, ModuleLink]
    parts: dict[str, ModulePart]
    # The modules whose parts were taken from the previous assembly.
    reused: set[str]


class GraphAssembler:
    """Builds each module's `ModulePart` from per-file facts, their paths, the link result and the
    revision (see `slotrelay.psmr.workspace.parts`)."""

    def __init__(self, facts: dict[str, dict[str, Any]], paths: dict[str, str], revision: str | None) -> None:
        self.facts = facts
        self.paths = paths
        self.revision = revision
        self.out = ModulePart()
        self._prefixes: set[str] | None = None

    def build(self, link: LinkResult, import_edges: list[tuple[str, str, int, str]]) -> Assembly:
        """The whole graph, assembled from nothing."""
        return merge(self.assemble(link, import_edges).parts.values())

    def assemble(
        self,
        link: LinkResult,
        import_edges: list[tuple[str, str, int, str]],
        previous: Assembled | None = None,
    ) -> Assembled:
        """Each module's part: `previous`'s where the module's facts (the same object), path and share
        of the resolution are unchanged (and so is the set of modules, which tells inside from
        outside), assembled again elsewhere."""
        links = _module_links(self.facts, link, import_edges)
        if previous is not None and (
            previous.revision != self.revision or previous.facts.keys() != self.facts.keys()
        ):
            previous = None
        parts: dict[str, ModulePart] = {}
        reused = set()
        for module, facts in sorted(self.facts.items()):
            if (
                previous is not None
                and previous.facts[module] is facts
                and previous.paths.get(module) == self.paths.get(module)
                and previous.links[module] == links[module]
            ):
                parts[module] = previous.parts[module]
                reused.add(module)
            else:
                parts[module] = self._part(module, facts, links[module])
        return Assembled(self.revision, dict(self.facts), dict(self.paths), links, parts, reused)

    def _part(self, module: str, facts: dict[str, Any], link: ModuleLink) -> ModulePart:
        """One module's definitions, state, calls, classes, decorators, imports and unknowns."""
        self.out = ModulePart()
        self._module(module, facts)
        if not facts.get("syntax_error"):
            self._calls(module, facts, link)
        self._state(module, link)
        self._classes(module, link)
        self._decorators(module, link)
        self._imports(link)
        self._reexports(link)
        return self.out

    def evidence(
        self,
        module: str,
        span: list[int],
        resolution: str,
        *,
        about: str,
        authority: str = "static:ast",
        status: str | None = None,
    ) -> str:
        """Record one piece of evidence and return its id."""
        record = self._evidence(module, span, resolution, about=about, authority=authority, status=status)
        self.out.evidence[record["id"]] = record
        return str(record["id"])

    def _evidence(
        self,
        module: str,
        span: list[int],
        resolution: str,
        *,
        about: str,
        authority: str = "static:ast",
        status: str | None = None,
    ) -> dict[str, Any]:
        """One piece of evidence, not yet recorded (see `evidence`)."""
        artifact = self.paths.get(module, module)
        return {
            "id": stable_id("ev", about, artifact, span, resolution),
            "about": about,
            "artifact": artifact,
            "revision": self.revision,
            "span": {"line": span[0], "col": span[1], "end_line": span[2], "end_col": span[3]},
            "resolution": resolution,
            "authority": authority,
            "status": status or RESOLVED_STATUS.get(resolution, "confirmed"),
        }

    def node(self, qualname: str, kind: str, **attrs: Any) -> str:
        """A node the module defines."""
        node = sid(qualname)
        if node not in self.out.nodes:
            self.out.nodes[node] = {"kind": kind, "qualname": qualname, **attrs}
        return node

    def ref(self, qualname: str, kind: str) -> str:
        """A node outside the tree (external, builtin), unless the module defines it."""
        node = sid(qualname)
        if node not in self.out.nodes and node not in self.out.refs:
            self.out.refs[node] = {"kind": kind, "qualname": qualname}
        return node

    def edge(self, source: str, target: str, relation: str, ev: str) -> None:
        data = self.out.edges.get((source, target, relation))
        if data is None:
            self.out.edges[source, target, relation] = {"relation": relation, "evidence": [ev]}
        elif ev not in data["evidence"]:
            data["evidence"].append(ev)

    def unknown(self, module: str, scope: str, reason: str, span: list[int], detail: str) -> str:
        artifact = self.paths.get(module, module)
        uid = stable_id("unk", scope, reason, artifact, span)
        self.out.unknowns[uid] = {
            "id": uid,
            "reason": reason,
            "scope": sid(scope),
            "artifact": artifact,
            "span": {"line": span[0], "col": span[1], "end_line": span[2], "end_col": span[3]},
            "detail": detail,
        }
        return uid

    def conflict(self, kind: str, subject: str, detail: str, evidence: list[str]) -> str:
        cid = stable_id("cf", kind, subject, tuple(evidence))
        self.out.conflicts[cid] = {
            "id": cid,
            "kind": kind,
            "subject": sid(subject),
            "detail": detail,
            "evidence_refs": evidence,
            "status": "open",
        }
        return cid

    def _module(self, module: str, facts: dict[str, Any]) -> None:
        artifact = self.paths.get(module, module)
        span = [1, 0, facts["lines"], 0]
        ev = self.evidence(module, span, "lexical", about=f"defines {module}")
        self.node(
            module,
            "module",
            artifact=artifact,
            span=span,
            evidence=[ev],
            lines=facts["lines"],
            doc=None if facts.get("syntax_error") else facts["scopes"][module].get("doc"),
        )
        if facts.get("syntax_error"):
            err = facts["syntax_error"]
            self.unknown(module, module, err.get("reason", "syntax_error"), err["span"], err["message"])
            return
        seen: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for d in facts["defs"]:
            q = d["qualname"]
            ev = self.evidence(module, d["span"], "lexical", about=f"defines {q}")
            seen.setdefault(q, []).append((ev, d))
        # A name's node is its first definition, or for `@overload` stubs the implementation.
        primary = {
            q: next((f for f in found if not _is_overload(f[1])), found[0]) for q, found in seen.items()
        }
        for q, (ev, d) in primary.items():
            kind = "test" if d.get("is_test") else d["kind"]
            attrs = {
                k: d[k]
                for k in ("signature", "params", "body_hash", "asserts", "raises", "decorators", "is_async")
                if k in d
            }
            self.node(
                q,
                kind,
                artifact=artifact,
                span=d["span"],
                evidence=[ev],
                lines=d["span"][2] - d["span"][0] + 1,
                doc=facts["scopes"].get(q, {}).get("doc"),
                module=module,
                **attrs,
            )
        for q, found in seen.items():
            for ev, d in found:
                self.edge(sid(d["parent"]), sid(q), "defines", ev)
        for q, found in seen.items():
            if len(found) > 1 and not _one_definition([d for _, d in found]):
                self.conflict(
                    "duplicate_definition",
                    q,
                    f"{q} is defined {len(found)} times (conditional or "
                    "repeated definitions); which one runs depends on control flow",
                    [ev for ev, _ in found],
                )
        self._state_nodes(module, facts)
        for item in facts["unknowns"]:
            self.unknown(module, item["scope"], item["reason"], item["span"], item["detail"])
        for item in facts["imports"]:
            if not self._is_internal(item["module"]):
                self.unknown(
                    module,
                    item["scope"],
                    "external_module",
                    item["span"],
                    f"{item['module']} is outside the analysed tree; its behaviour is not modelled",
                )

    def _is_internal(self, module: str) -> bool:
        # Internal: a module of the tree, a package above one, or something inside one.
        if self._prefixes is None:
            self._prefixes = {
                ".".join(m.split(".")[:i]) for m in self.facts for i in range(1, m.count(".") + 2)
            }
        parts = module.split(".")
        return module in self._prefixes or any(
            ".".join(parts[:i]) in self.facts for i in range(1, len(parts))
        )

    def _state_nodes(self, module: str, facts: dict[str, Any]) -> None:
        artifact = self.paths.get(module, module)
        class_scopes = [q for q, s in facts["scopes"].items() if s["kind"] == "class"]
        for scope, subkind in [(module, "module_global")] + [(c, "class_attribute") for c in class_scopes]:
            for name, refs in sorted(facts["bindings"].get(scope, {}).items()):
                if any(r[0] in ("def", "deco", "imp", "from") for r in refs):
                    continue
                self.node(f"{scope}.{name}", "state", subkind=subkind, artifact=artifact, module=module)
        for cls, attrs in sorted(facts["instance_attrs"].items()):
            for name in sorted(attrs):
                self.node(
                    f"{cls}.{name}", "state", subkind="instance_attribute", artifact=artifact, module=module
                )

    def _calls(self, module: str, facts: dict[str, Any], link: ModuleLink) -> None:
        for site, targets in zip(facts["calls"], link.calls, strict=True):
            caller = sid(site["scope"])
            if isinstance(targets, str):
                self.unknown(module, site["scope"], targets, site["span"], _describe(site["callee"]))
                continue
            for t in targets:
                node = self.ref(t.target, t.kind) if t.kind in OUTSIDE_KINDS else sid(t.target)
                ev = self.evidence(
                    module, site["span"], t.resolution, about=f"{site['scope']} calls {t.target}"
                )
                self.edge(caller, node, "calls", ev)
        # Calls without call syntax (for, with, raise, property access): an edge where resolved, never an
        # unknown (most loops and attribute reads run no code of the tree).
        for item, targets in zip(facts.get("implicit", ()), link.implicit, strict=True):
            for t in targets:
                node = self.ref(t.target, "builtin") if t.kind == "builtin" else sid(t.target)
                ev = self.evidence(
                    module,
                    item["span"],
                    t.resolution,
                    about=f"{item['scope']} calls {t.target} ({_IMPLICIT_ABOUT[item['kind']]})",
                )
                self.edge(sid(item["scope"]), node, "calls", ev)

    def _state(self, module: str, link: ModuleLink) -> None:
        # An edge only to a node of the graph: settled when the parts are merged.
        for scope, mode, target, _, index in link.state:
            access = self.facts[module]["state"][index]
            about = f"{scope} {mode}s {target}"
            record = self._evidence(module, access["span"], "lexical", about=about)
            relation = "writes_state" if mode == "write" else "reads_state"
            self.out.state.append((sid(scope), sid(target), relation, record))

    def _classes(self, module: str, link: ModuleLink) -> None:
        for cls, bases, external_bases, mro in link.classes:
            data = self.out.nodes[sid(cls)]
            span = data["span"]
            for base in bases:
                ev = self.evidence(module, span, "lexical", about=f"{cls} inherits {base}")
                self.edge(sid(cls), sid(base), "inherits", ev)
            for base in external_bases:
                node = self.ref(base, "builtin" if "." not in base else "external")
                ev = self.evidence(module, span, "import", about=f"{cls} inherits {base}")
                self.edge(sid(cls), node, "inherits", ev)
            data["mro"] = mro

    def _decorators(self, module: str, link: ModuleLink) -> None:
        for decorator, decorated, _, index in link.decorates:
            site = self.facts[module]["calls"][index]
            ev = self.evidence(module, site["span"], "lexical", about=f"{decorator} decorates {decorated}")
            self.edge(sid(decorator), sid(decorated), "decorates", ev)

    def _imports(self, link: ModuleLink) -> None:
        # Edges to an imported module of the tree, or to an external node made for it when the parts merge.
        for importer, imported, line, authority in link.imports:
            ev = self.evidence(
                importer,
                [line, 0, line, 0],
                "import",
                about=f"{importer} imports {imported}",
                authority=authority,
            )
            self.out.imports.append((sid(importer), sid(imported), imported, ev))

    def _reexports(self, link: ModuleLink) -> None:
        for module, name, kind in link.reexports:
            self.conflict(
                kind,
                f"{module}.{name}",
                f"{module} both defines and imports {name}; the later binding shadows the other",
                [],
            )


def _module_links(
    facts: dict[str, dict[str, Any]], link: LinkResult, import_edges: list[tuple[str, str, int, str]]
) -> dict[str, ModuleLink]:
    """Each module's share of the resolution and of the import edges."""
    grouped: dict[str, dict[str, list[Any]]] = {
        m: {"state": [], "decorates": [], "reexports": [], "imports": []} for m in facts
    }
    for access in link.state:
        grouped[access[3]]["state"].append(access)
    for decoration in link.decorates:
        grouped[decoration[2]]["decorates"].append(decoration)
    for reexport in link.reexports:
        grouped[reexport[0]]["reexports"].append(reexport)
    for edge in import_edges:
        grouped[edge[0]]["imports"].append(edge)
    out = {}
    for module, f in facts.items():
        targets, unresolved, implicit = link.targets, link.unresolved, link.implicit
        calls = () if f.get("syntax_error") else f["calls"]
        classes = (
            [d["qualname"] for d in f.get("defs", ()) if d["kind"] == "class"]
            if not f.get("syntax_error")
            else []
        )
        shares = grouped[module]
        out[module] = ModuleLink(
            calls=tuple(
                targets.get((module, i)) or unresolved.get((module, i), "untyped_value")
                for i in range(len(calls))
            ),
            implicit=tuple(implicit.get((module, i), []) for i in range(len(f.get("implicit", ())))),
            state=tuple(shares["state"]),
            classes=tuple(
                (c, link.bases[c], link.external_bases.get(c, []), link.mro.get(c, [c]))
                for c in sorted(set(classes))
                if c in link.bases
            ),
            decorates=tuple(shares["decorates"]),
            reexports=tuple(shares["reexports"]),
            imports=tuple(shares["imports"]),
        )
    return out


def _is_overload(definition: dict[str, Any]) -> bool:
    return is_overload(definition.get("decorators", []))


def _one_definition(defs: list[dict[str, Any]]) -> bool:
    """True when several definitions of one name make one object: a property and its setter/deleter
    (`@x.setter` extends the property `@property` made), or `@overload` stubs before their implementation."""
    name = defs[0]["qualname"].rsplit(".", 1)[-1]
    decorators = [d.get("decorators", []) for d in defs]
    accessors = {f"{name}.setter", f"{name}.getter", f"{name}.deleter"}
    if any(d in ("property", "functools.cached_property", "cached_property") for d in decorators[0]) and all(
        set(later) & accessors for later in decorators[1:]
    ):
        return True
    implementations = [d for d in defs if not _is_overload(d)]
    return len(implementations) <= 1 and len(implementations) < len(defs)


_IMPLICIT_ABOUT = {
    "iter": "for",
    "aiter": "async for",
    "with": "with",
    "awith": "async with",
    "raise": "raise",
    "get": "property read",
    "set": "property write",
    "op": "operator",
    "classdef": "class statement",
    "import": "from-import",
    "key": "key",
}


def _describe(ref: Any) -> str:
    match ref:
        case ["name", _, name, *_]:
            return str(name)
        case ["attr", base, name]:
            return f"{_describe(base)}.{name}"
        case ["attrs", base, prefix, _]:
            return f"{_describe(base)}.{prefix}*"
        case ["call", callee, *_]:
            return f"{_describe(callee)}()"
        case ["sub", base] | ["iter", base] | ["rows", base]:
            return f"{_describe(base)}[...]"
        case ["unk", reason]:
            return f"<{reason}>"
        case ["super", _]:
            return "super()"
        case _:
            return f"<{ref[0]}>" if isinstance(ref, list) and ref else "<expression>"
