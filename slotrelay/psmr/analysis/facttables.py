"""The facts of every module of a tree as tables by name, as the resolver reads them: plain, or
recording each lookup as used by what the memo is evaluating (`Consulted`), and the bindings of a
name as seen from where it is used (`NameBindings`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from slotrelay.psmr.analysis.memo import CanonicalMemo


class Consulted(dict[Any, Any]):
    """One table of the tree's facts (scopes, definitions, ...) that records each lookup as used by
    what the memo is evaluating (as `CanonicalMemo.use` does, inlined: lookups are the resolver's
    most frequent step), so an edit finds every evaluation that consulted what it changed (see
    `slotrelay.psmr.analysis.relink`)."""

    def __init__(self, tag: str, memo: CanonicalMemo[Any], items: dict[Any, Any]) -> None:
        super().__init__(items)
        self.tag = tag
        self.frames = memo.frames
        self.users = memo.users

    def __getitem__(self, key: Any) -> Any:
        if self.frames:
            self.users[(self.tag, key)].add(self.frames[-1])
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        if self.frames:
            self.users[(self.tag, key)].add(self.frames[-1])
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        if self.frames:
            self.users[(self.tag, key)].add(self.frames[-1])
        return dict.__contains__(self, key)


class ConsultedNames(Consulted):
    """The names bound in one scope: a lookup is recorded as `("binding", scope, name)`."""

    def __init__(self, scope: str, memo: CanonicalMemo[Any], items: dict[str, Any]) -> None:
        super().__init__("binding", memo, items)
        self.scope = scope

    def __getitem__(self, name: Any) -> Any:
        if self.frames:
            self.users[("binding", self.scope, name)].add(self.frames[-1])
        return dict.__getitem__(self, name)

    def get(self, name: Any, default: Any = None) -> Any:
        if self.frames:
            self.users[("binding", self.scope, name)].add(self.frames[-1])
        return dict.get(self, name, default)

    def __contains__(self, name: object) -> bool:
        if self.frames:
            self.users[("binding", self.scope, name)].add(self.frames[-1])
        return dict.__contains__(self, name)


class LinkTables:
    """The facts of every module of a tree as tables by name, for a linker (and its strict twin) to read."""

    def __init__(self, facts: dict[str, dict[str, Any]]) -> None:
        self.scopes: dict[str, dict[str, Any]] = {}
        self.bindings: dict[str, dict[str, list[Any]]] = {}
        self.defs: dict[str, dict[str, Any]] = {}
        self.instance_attrs: dict[str, dict[str, tuple[Any, ...]]] = defaultdict(dict)
        self.stars: dict[str, list[str]] = {}
        self.exports: dict[str, list[str] | None] = {}
        # The fast pass hands over frozen refs (tuples), so they are used as they are.
        for module, f in facts.items():
            self.scopes.update(f["scopes"])
            self.bindings.update(f["bindings"])
            for d in f["defs"]:
                self.defs[d["qualname"]] = {**d, "module": module, "bases": d.get("bases", ())}
            for cls, attrs in f["instance_attrs"].items():
                for name, refs in attrs.items():
                    self.instance_attrs[cls][name] = self.instance_attrs[cls].get(name, ()) + refs
            self.stars.update(f["stars"])
            self.exports[module] = f["exports"]
        # `name.attr = value` anywhere in the tree, by attr (see `Evaluator.patched`).
        self.stores: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        for _, f in sorted(facts.items()):
            for base, attr, value in f.get("stores", ()):
                self.stores[attr].append((base, value))
        self.sites = [(m, i, s) for m, f in sorted(facts.items()) for i, s in enumerate(f["calls"])]
        self.site_at = {(m, i): s for m, i, s in self.sites}
        self.property_names = {
            name
            for names in self.bindings.values()
            for name, refs in names.items()
            if any(r[0] == "prop" for r in refs)
        }
        # The dunders some class of the tree defines (and a module's `__getattr__`), and whether one
        # declares a metaclass: an operator or a constructor looks further only then.
        self.dunder_names = {
            q.rsplit(".", 1)[1]
            for q, d in self.defs.items()
            if (d["kind"] == "method" and q.endswith("__") and q.rsplit(".", 1)[1].startswith("__"))
            or (d["kind"] == "function" and q.endswith(".__getattr__") and q.rsplit(".", 1)[0] in facts)
        }
        self.metaclasses = any("metaclass" in d for d in self.defs.values())


def cached(
    memo: CanonicalMemo[Any], record: bool, cache: dict[Any, Any], question: Any, compute: Callable[[], Any]
) -> Any:
    """A value computed once from the facts, kept in cache under its question: with `record`, what uses
    it is recorded as using the question, and the question as using the facts it consulted."""
    if not record:
        if question not in cache:
            cache[question] = compute()
        return cache[question]
    if question not in cache:
        memo.begin(question)
        try:
            cache[question] = compute()
        finally:
            memo.end()
    frames = memo.frames
    if frames:
        memo.users[question].add(frames[-1])
    return cache[question]


class NameBindings:
    """What a name is bound to, in the nearest scope that binds it from the scope of its use (cached:
    the bindings are fixed)."""

    def __init__(
        self,
        scopes: dict[str, dict[str, Any]],
        bindings: dict[str, dict[str, list[Any]]],
        memo: CanonicalMemo[Any],
        record: bool,
    ) -> None:
        self.scopes = scopes
        self.bindings = bindings
        self.memo = memo
        self.record = record
        self._binding_refs: dict[Any, tuple[Any, ...]] = {}
        self._binding_kinds: dict[Any, frozenset[str]] = {}

    def binding_scope(self, name_ref: Any) -> str | None:
        """The nearest scope that binds a name, from the scope of its use."""
        current: str | None = name_ref[1]
        while current is not None:
            if name_ref[2] in self.bindings.get(current, {}):
                return current
            current = self.scopes.get(current, {}).get("parent")
        return None

    def binding_refs(self, name_ref: Any) -> tuple[Any, ...]:
        """The refs a name is bound to in the nearest scope that binds it (cached: the bindings are
        fixed)."""
        refs: tuple[Any, ...] = cached(
            self.memo,
            self.record,
            self._binding_refs,
            ("@binding_refs", name_ref),
            lambda: self._find_binding_refs(name_ref),
        )
        return refs

    def _find_binding_refs(self, name_ref: Any) -> tuple[Any, ...]:
        current: str | None = name_ref[1]
        while current is not None:
            refs = self.bindings.get(current, {}).get(name_ref[2])
            if refs and current == name_ref[1] and len(name_ref) > 3:
                return tuple(refs[i] for i in name_ref[3] if i < len(refs))
            if refs:
                return tuple(refs)
            current = self.scopes.get(current, {}).get("parent")
        return ()

    def binding_kinds(self, name_ref: Any) -> frozenset[str]:
        """The kinds of ref a name is bound to (`imp`, `param`, `def`, ...), cached."""
        kinds: frozenset[str] = cached(
            self.memo,
            self.record,
            self._binding_kinds,
            ("@binding_kinds", name_ref),
            lambda: frozenset(r[0] for r in self.binding_refs(name_ref)),
        )
        return kinds
