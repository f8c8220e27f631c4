"""Assemble the workspace graph (a networkx MultiDiGraph) from facts and their resolution.

Nodes are keyed by semantic identity (`semantic:pkg.mod.func`) and carry `kind` (module, class,
function, method, lambda, test, state, external, builtin), `qualname`, `artifact`, `span`.
Edges are keyed by relation (defines, imports, calls, reads_state, writes_state, inherits, decorates,
tests) and carry the evidence ids of every site supporting them. `called_by` is `calls` read backwards.
Evidence, unknowns and conflicts are records beside the graph, addressed by stable ids derived from
what they say, so the same tree always yields the same ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from slotrelay.psmr.link import RESOLVED_STATUS, LinkResult

PREFIX = "semantic:"


def sid(qualname: str) -> str:
    """The semantic identity of a qualified name."""
    return qualname if qualname.startswith(PREFIX) else PREFIX + qualname


def qname(identity: str) -> str:
    """The qualified name of a semantic identity (or of a bare dotted name)."""
    return identity.removeprefix(PREFIX)


def stable_id(prefix: str, *parts: Any) -> str:
    """`prefix_` and 12 hex digits of a digest of the parts."""
    return f"{prefix}_{hashlib.sha1(repr(parts).encode()).hexdigest()[:12]}"


@dataclass
class Assembly:
    """The graph with its evidence, unknown and conflict records."""

    graph: nx.MultiDiGraph[Any] = field(default_factory=nx.MultiDiGraph)  # as Workspace.graph
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    unknowns: dict[str, dict[str, Any]] = field(default_factory=dict)
    conflicts: dict[str, dict[str, Any]] = field(default_factory=dict)


class GraphAssembler:
    """Builds an `Assembly` from per-file facts, their paths, the link result and the revision."""

    def __init__(self, facts: dict[str, dict[str, Any]], paths: dict[str, str], revision: str | None) -> None:
        self.facts = facts
        self.paths = paths
        self.revision = revision
        self.out = Assembly()
        self._prefixes: set[str] | None = None

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
        artifact = self.paths.get(module, module)
        ev = stable_id("ev", about, artifact, span, resolution)
        self.out.evidence[ev] = {
            "id": ev,
            "about": about,
            "artifact": artifact,
            "revision": self.revision,
            "span": {"line": span[0], "col": span[1], "end_line": span[2], "end_col": span[3]},
            "resolution": resolution,
            "authority": authority,
            "status": status or RESOLVED_STATUS.get(resolution, "confirmed"),
        }
        return ev

    def node(self, qualname: str, kind: str, **attrs: Any) -> str:
        node = sid(qualname)
        if node not in self.out.graph:
            self.out.graph.add_node(node, kind=kind, qualname=qualname, **attrs)
        return node

    def edge(self, source: str, target: str, relation: str, ev: str, **attrs: Any) -> None:
        graph = self.out.graph
        if graph.has_edge(source, target, key=relation):
            data = graph.edges[source, target, relation]
            if ev not in data["evidence"]:
                data["evidence"].append(ev)
            return
        graph.add_edge(source, target, key=relation, relation=relation, evidence=[ev], **attrs)

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

    def build(self, link: LinkResult, import_edges: list[tuple[str, str, int, str]]) -> Assembly:
        """Add modules, definitions, state, calls, imports, inheritance, decoration, tests and unknowns."""
        for module, facts in sorted(self.facts.items()):
            self._module(module, facts)
        for module, facts in sorted(self.facts.items()):
            if not facts.get("syntax_error"):
                self._calls(module, facts, link)
        self._state(link)
        self._classes(link)
        self._decorators(link)
        self._imports(import_edges)
        self._tests()
        self._reexports(link)
        return self.out

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
            kind = "test" if d.get("is_test") else d["kind"]
            attrs = {
                k: d[k]
                for k in ("signature", "params", "body_hash", "asserts", "raises", "decorators", "is_async")
                if k in d
            }
            node = self.node(
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
            self.edge(sid(d["parent"]), node, "defines", ev)
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

    def _calls(self, module: str, facts: dict[str, Any], link: LinkResult) -> None:
        for index, site in enumerate(facts["calls"]):
            caller = sid(site["scope"])
            targets = link.targets.get((module, index))
            if not targets:
                reason = link.unresolved.get((module, index), "untyped_value")
                self.unknown(module, site["scope"], reason, site["span"], _describe(site["callee"]))
                continue
            for t in targets:
                if t.kind == "external":
                    node = self.node(t.target, "external")
                elif t.kind == "builtin":
                    node = self.node(t.target, "builtin")
                else:
                    node = sid(t.target)
                ev = self.evidence(
                    module, site["span"], t.resolution, about=f"{site['scope']} calls {t.target}"
                )
                self.edge(caller, node, "calls", ev)
        # Calls without call syntax (for, with, raise, property access): an edge where resolved, never an
        # unknown (most loops and attribute reads run no code of the tree).
        for index, item in enumerate(facts.get("implicit", ())):
            for t in link.implicit.get((module, index), []):
                node = self.node(t.target, "builtin") if t.kind == "builtin" else sid(t.target)
                ev = self.evidence(
                    module,
                    item["span"],
                    t.resolution,
                    about=f"{item['scope']} calls {t.target} ({_IMPLICIT_ABOUT[item['kind']]})",
                )
                self.edge(sid(item["scope"]), node, "calls", ev)

    def _state(self, link: LinkResult) -> None:
        for scope, mode, target, module, index in link.state:
            if sid(target) not in self.out.graph:
                continue
            access = self.facts[module]["state"][index]
            ev = self.evidence(module, access["span"], "lexical", about=f"{scope} {mode}s {target}")
            self.edge(sid(scope), sid(target), "writes_state" if mode == "write" else "reads_state", ev)

    def _classes(self, link: LinkResult) -> None:
        for cls, bases in sorted(link.bases.items()):
            module = self.out.graph.nodes[sid(cls)].get("module", "")
            span = self.out.graph.nodes[sid(cls)]["span"]
            for base in bases:
                ev = self.evidence(module, span, "lexical", about=f"{cls} inherits {base}")
                self.edge(sid(cls), sid(base), "inherits", ev)
            for base in link.external_bases.get(cls, []):
                node = self.node(base, "builtin" if "." not in base else "external")
                ev = self.evidence(module, span, "import", about=f"{cls} inherits {base}")
                self.edge(sid(cls), node, "inherits", ev)
            self.out.graph.nodes[sid(cls)]["mro"] = link.mro.get(cls, [cls])

    def _decorators(self, link: LinkResult) -> None:
        for decorator, decorated, module, index in link.decorates:
            site = self.facts[module]["calls"][index]
            ev = self.evidence(module, site["span"], "lexical", about=f"{decorator} decorates {decorated}")
            self.edge(sid(decorator), sid(decorated), "decorates", ev)

    def _imports(self, import_edges: list[tuple[str, str, int, str]]) -> None:
        for importer, imported, line, authority in import_edges:
            node = sid(imported) if sid(imported) in self.out.graph else self.node(imported, "external")
            ev = self.evidence(
                importer,
                [line, 0, line, 0],
                "import",
                about=f"{importer} imports {imported}",
                authority=authority,
            )
            self.edge(sid(importer), node, "imports", ev)

    def _tests(self) -> None:
        graph = self.out.graph
        for node, data in list(graph.nodes(data=True)):
            if data.get("kind") != "test":
                continue
            for _, target, key, edge in list(graph.out_edges(node, keys=True, data=True)):
                if key == "calls" and graph.nodes[target].get("kind") not in ("external", "builtin"):
                    self.edge(node, target, "tests", edge["evidence"][0])

    def _reexports(self, link: LinkResult) -> None:
        for module, name, kind in link.reexports:
            self.conflict(
                kind,
                f"{module}.{name}",
                f"{module} both defines and imports {name}; the later binding shadows the other",
                [],
            )


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
    implementations = [ds for ds in decorators if not {"overload", "typing.overload"} & set(ds)]
    return len(implementations) <= 1 and len(implementations) < len(defs)


_IMPLICIT_ABOUT = {
    "iter": "for",
    "aiter": "async for",
    "with": "with",
    "awith": "async with",
    "raise": "raise",
    "get": "property read",
    "set": "property write",
}


def _describe(ref: Any) -> str:
    match ref:
        case ["name", _, name, *_]:
            return str(name)
        case ["attr", base, name]:
            return f"{_describe(base)}.{name}"
        case ["call", callee, *_]:
            return f"{_describe(callee)}()"
        case ["sub", base] | ["iter", base]:
            return f"{_describe(base)}[...]"
        case ["unk", reason]:
            return f"<{reason}>"
        case ["super", _]:
            return "super()"
        case _:
            return f"<{ref[0]}>" if isinstance(ref, list) and ref else "<expression>"
