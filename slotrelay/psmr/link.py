"""The resolver: evaluates the refs of every file's facts across the whole tree.

Values a ref can denote:

    ("def", q)     a function, method, lambda or class defined in the tree
    ("inst", q)    an instance of class q
    ("mod", m)     a module of the tree
    ("ext", d)     something outside the tree, by import path (`requests.get`)
    ("builtin", n) a builtin
    ("coll", k)    a container literal (k indexes its element refs)
    ("gen", q)     the generator a call to generator function q returns
    ("super", q)   `super()` inside class q

Evaluation is flow-insensitive and memoised; arguments flow into parameters at call sites, which
is iterated to a fixpoint. A call site whose callee denotes nothing is an unknown with a reason,
never a guessed edge.
"""

from __future__ import annotations

import builtins
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

Value = tuple[str, Any]
BUILTIN_NAMES = frozenset(dir(builtins))
MAX_ROUNDS = 6
# Past this many nested evaluations a chain is cut (value unknown), which keeps deep flows finite.
MAX_DEPTH = 120
# A ref denoting more than this many values is too imprecise to draw edges from: it becomes
# the sentinel ("many", n), which every operation ignores and which makes the call site an unknown.
MAX_VALUES = 16
HIGHER_ORDER_BUILTINS = frozenset({"map", "filter", "sorted", "min", "max", "iter"})
RESOLVED_STATUS = {
    "lexical": "confirmed",
    "import": "confirmed",
    "self_mro": "confirmed",
    "constructor": "confirmed",
    "heuristic": "heuristic",
    "inference": "inferred",
}


@dataclass
class CallTarget:
    """One resolved callee of a call site."""

    target: str
    kind: str
    resolution: str


@dataclass
class LinkResult:
    """Per call site (module, index) its targets, or its unknown reason; plus state accesses."""

    targets: dict[tuple[str, int], list[CallTarget]] = field(default_factory=dict)
    unresolved: dict[tuple[str, int], str] = field(default_factory=dict)
    state: list[tuple[str, str, str, str, int]] = field(default_factory=list)
    mro: dict[str, list[str]] = field(default_factory=dict)
    bases: dict[str, list[str]] = field(default_factory=dict)
    external_bases: dict[str, list[str]] = field(default_factory=dict)
    decorates: list[tuple[str, str, str, int]] = field(default_factory=list)
    reexports: list[tuple[str, str, str]] = field(default_factory=list)


class Linker:
    """Resolve the facts of every module of one tree (module name -> facts)."""

    def __init__(self, facts: dict[str, dict[str, Any]]) -> None:
        self.facts = {m: f for m, f in facts.items() if not f.get("syntax_error")}
        self.modules = set(facts)
        self.scopes: dict[str, dict[str, Any]] = {}
        self.bindings: dict[str, dict[str, list[Any]]] = {}
        self.defs: dict[str, dict[str, Any]] = {}
        self.instance_attrs: dict[str, dict[str, tuple[Any, ...]]] = defaultdict(dict)
        self.stars: dict[str, list[str]] = {}
        self.exports: dict[str, list[str] | None] = {}
        # The fast pass hands over frozen refs (tuples), so they are used as they are.
        for module, f in self.facts.items():
            self.scopes.update(f["scopes"])
            self.bindings.update(f["bindings"])
            for d in f["defs"]:
                self.defs[d["qualname"]] = {**d, "module": module, "bases": d.get("bases", ())}
            for cls, attrs in f["instance_attrs"].items():
                for name, refs in attrs.items():
                    self.instance_attrs[cls][name] = self.instance_attrs[cls].get(name, ()) + refs
            self.stars.update(f["stars"])
            self.exports[module] = f["exports"]
        self.sites = [(m, i, s) for m, f in sorted(self.facts.items()) for i, s in enumerate(f["calls"])]
        self.module_memo: dict[tuple[str, str], frozenset[Value]] = {}
        self.colls: dict[Any, list[Any]] = {}
        self.params: dict[tuple[str, Any], set[Any]] = defaultdict(set)
        self.memo: dict[Any, frozenset[Value]] = {}
        self.active: set[Any] = set()
        self._mro: dict[str, list[str]] = {}
        self._children: dict[str, list[str]] | None = None

    # evaluation

    def eval(self, ref: Any) -> frozenset[Value]:
        """The values a frozen ref may denote (empty when unknown)."""
        if ref is None:
            return frozenset()
        cached = self.memo.get(ref)
        if cached is not None:
            return cached
        if ref in self.active or len(self.active) >= MAX_DEPTH:
            return frozenset()
        self.active.add(ref)
        try:
            result = frozenset(self._eval(ref))
            if len(result) > MAX_VALUES:
                result = frozenset({("many", len(result))})
        finally:
            self.active.discard(ref)
        self.memo[ref] = result
        return result

    def _eval(self, ref: Any) -> set[Value]:
        kind = ref[0]
        if kind == "name":
            return self.lookup(ref[1], ref[2])
        if kind == "attr":
            out: set[Value] = set()
            for value in self.eval(ref[1]):
                out |= self.attribute(value, ref[2])
            return out
        if kind == "call":
            out = set()
            for value in self.eval(ref[1]):
                out |= self.call_result(value)
            return out
        if kind in ("sub", "iter"):
            out = set()
            for value in self.eval(ref[1]):
                out |= self.elements(value)
            return out
        if kind == "coll":
            self.colls[ref] = list(ref[1])
            return {("coll", ref)}
        if kind == "union":
            out = set()
            for part in ref[1]:
                out |= self.eval(part)
            return out
        if kind == "def":
            return {("def", ref[1])}
        if kind == "deco":
            return self.decorated(ref)
        if kind == "imp":
            return self.import_value(ref[1])
        if kind == "from":
            return self.from_value(ref[1], ref[2])
        if kind == "param":
            out = set()
            for arg in self.params.get((ref[1], ref[2]), set()) | self.params.get((ref[1], ref[3]), set()):
                out |= self.eval(arg)
            if ref[4] is not None:
                out |= self.eval(ref[4])
            return out
        if kind == "annot":
            return {
                ("inst", v[1])
                for v in self.eval(ref[1])
                if v[0] == "def" and self.defs.get(v[1], {}).get("kind") == "class"
            }
        if kind == "self":
            return {("inst", ref[1])}
        if kind == "cls":
            return {("def", ref[1])}
        if kind == "super":
            return {("super", ref[1])}
        return set()

    def lookup(self, scope: str, name: str) -> set[Value]:
        """LEGB lookup of a name from a scope; class bodies are skipped from nested functions."""
        first = True
        current: str | None = scope
        while current is not None:
            info = self.scopes.get(current)
            if info is None:
                break
            if first or info["kind"] != "class":
                refs = self.bindings.get(current, {}).get(name)
                if refs:
                    out: set[Value] = set()
                    for r in refs:
                        out |= self.eval(r)
                    return out
                if info["kind"] == "module":
                    starred = self.star_lookup(current, name)
                    if starred:
                        return starred
            first = False
            current = info["parent"]
        if name in BUILTIN_NAMES:
            return {("builtin", name)}
        return set()

    def star_lookup(self, module: str, name: str) -> set[Value]:
        out: set[Value] = set()
        for source in self.stars.get(module, []):
            if source not in self.modules:
                out.add(("ext", f"{source}.{name}"))
                continue
            exported = self.exports.get(source)
            if (exported is None and not name.startswith("_")) or (exported and name in exported):
                out |= self.module_attr(source, name)
        return out

    def module_attr(self, module: str, name: str) -> set[Value]:
        """What `module.name` denotes: its binding, a submodule, or a star import's export."""
        key = (module, name)
        cached = self.module_memo.get(key)
        if cached is None:
            # Marked empty while computed, so cyclic star imports end.
            self.module_memo[key] = frozenset()
            cached = self.module_memo[key] = frozenset(self._module_attr(module, name))
        return set(cached)

    def _module_attr(self, module: str, name: str) -> set[Value]:
        refs = self.bindings.get(module, {}).get(name)
        if refs:
            out: set[Value] = set()
            for r in refs:
                out |= self.eval(r)
            return out
        if f"{module}.{name}" in self.modules:
            return {("mod", f"{module}.{name}")}
        return self.star_lookup(module, name)

    def import_value(self, dotted: str) -> set[Value]:
        if dotted in self.modules:
            return {("mod", dotted)}
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            head = ".".join(parts[:cut])
            if head in self.modules:
                values = {("mod", head)}
                for attr in parts[cut:]:
                    values = {v for value in values for v in self.attribute(value, attr)}
                return values
        return {("ext", dotted)}

    def from_value(self, module: str, name: str) -> set[Value]:
        if module in self.modules:
            return self.module_attr(module, name)
        if f"{module}.{name}" in self.modules:
            return {("mod", f"{module}.{name}")}
        head = self.import_value(module)
        if head and all(v[0] == "ext" for v in head):
            return {("ext", f"{module}.{name}")}
        return {v for value in head for v in self.attribute(value, name)}

    def attribute(self, value: Value, name: str) -> set[Value]:
        kind, subject = value
        if kind == "mod":
            return self.module_attr(subject, name)
        if kind == "ext":
            return {("ext", f"{subject}.{name}")}
        if kind == "def" and self.defs.get(subject, {}).get("kind") == "class":
            return self.class_attr(subject, name, instance=False)
        if kind == "inst":
            return self.class_attr(subject, name, instance=True)
        if kind == "super":
            return self.class_attr(subject, name, instance=True, after_self=True)
        return set()

    def class_attr(self, cls: str, name: str, *, instance: bool, after_self: bool = False) -> set[Value]:
        order = self.mro(cls)
        for klass in order[1:] if after_self else order:
            out: set[Value] = set()
            for r in self.bindings.get(klass, {}).get(name, []):
                out |= self.eval(r)
            if instance:
                for r in self.instance_attrs.get(klass, {}).get(name, []):
                    out |= self.eval(r)
            if out:
                return out
        return set()

    def call_result(self, value: Value) -> set[Value]:
        kind, subject = value
        if kind == "def":
            info = self.defs.get(subject)
            if info is None:
                return set()
            if info["kind"] == "class":
                return {("inst", subject)}
            scope = self.scopes.get(subject, {})
            if scope.get("generator"):
                return {("gen", subject)}
            out: set[Value] = set()
            for r in scope.get("returns", []):
                out |= self.eval(r)
            return out
        if kind == "inst":
            out = set()
            for method in self.class_attr(subject, "__call__", instance=True):
                out |= self.call_result(method)
            return out
        return set()

    def elements(self, value: Value) -> set[Value]:
        kind, subject = value
        out: set[Value] = set()
        if kind == "coll":
            for r in self.colls.get(subject, subject[1]):
                out |= self.eval(r)
        elif kind == "gen":
            for r in self.scopes.get(subject, {}).get("yields", []):
                out |= self.eval(r)
        elif kind == "inst":
            for method in self.class_attr(subject, "__iter__", instance=True):
                out |= self.call_result(method)
            for method in self.class_attr(subject, "__getitem__", instance=True):
                out |= self.call_result(method)
        return out

    def decorated(self, ref: Any) -> set[Value]:
        values = self.eval(ref[2])
        for deco in reversed(ref[1]):
            applied: set[Value] = set()
            for d in self.eval(deco):
                if d[0] == "def" and self.defs.get(d[1], {}).get("kind") != "class":
                    applied |= self.call_result(d)
                elif d[0] == "def":
                    # A class used as decorator wraps the function in an instance; the function
                    # itself stays reachable, so keep both.
                    applied |= {("inst", d[1]), *values}
            if applied:
                values = frozenset(applied)
        return set(values)

    def mro(self, cls: str) -> list[str]:
        """C3 linearisation over the classes of the tree (external bases end the walk)."""
        if cls in self._mro:
            return self._mro[cls]
        self._mro[cls] = [cls]
        bases = self.class_bases(cls)
        seqs = [list(self.mro(b)) for b in bases] + [list(bases)]
        result = [cls]
        while True:
            seqs = [s for s in seqs if s]
            if not seqs:
                break
            for seq in seqs:
                head = seq[0]
                if not any(head in s[1:] for s in seqs):
                    break
            else:
                # Inconsistent hierarchy: fall back to depth-first order rather than fail.
                result += [c for s in seqs for c in s if c not in result]
                break
            result.append(head)
            for s in seqs:
                if s and s[0] == head:
                    s.pop(0)
        self._mro[cls] = result
        return result

    def class_bases(self, cls: str) -> list[str]:
        out = []
        for base in self.defs.get(cls, {}).get("bases", []):
            for value in sorted(self.eval(base)):
                if (
                    value[0] == "def"
                    and self.defs.get(value[1], {}).get("kind") == "class"
                    and value[1] != cls
                ):
                    out.append(value[1])
        return out

    # call sites

    def targets(self, site: dict[str, Any]) -> list[CallTarget]:
        """The resolved callees of one call site, with how each was resolved."""
        callee = site["callee"]
        found: dict[str, CallTarget] = {}
        resolution = self.resolution(callee)
        for value in sorted(self.eval(callee), key=repr):
            for target in self.value_targets(value, resolution):
                found.setdefault(target.target, target)
            if value[0] == "builtin" and value[1] in HIGHER_ORDER_BUILTINS:
                # The builtin calls what it is given (`map(f, xs)`, `sorted(xs, key=f)`).
                for arg in [*site["args"], *site["kwargs"].values()]:
                    for v in sorted(self.eval(arg), key=repr):
                        for target in self.value_targets(v, "lexical") if v[0] in ("def", "builtin") else []:
                            found.setdefault(target.target, target)
            if value[0] == "def" and callee[0] == "attr":
                for override in self.overrides(callee[1], value[1]):
                    found.setdefault(override, CallTarget(override, "method", "heuristic"))
        return sorted(found.values(), key=lambda t: t.target)

    def overrides(self, receiver: Any, method: str) -> list[str]:
        """For `self.m()`, the methods that replace m in subclasses of self's class (dynamic dispatch)."""
        if receiver[0] != "name" or self.binding_kinds(receiver) != {"self"}:
            return []
        classes = {v[1] for v in self.eval(receiver) if v[0] == "inst"}
        name = method.rsplit(".", 1)[-1]
        out = set()
        for cls in classes:
            for sub in self.subclasses(cls):
                found = self.find_method(sub, name)
                if found and found != method:
                    out.add(found)
        return sorted(out)

    def subclasses(self, cls: str) -> list[str]:
        """Every class of the tree that has cls in its MRO, except cls."""
        if self._children is None:
            self._children = defaultdict(list)
            for qualname, info in self.defs.items():
                if info["kind"] == "class":
                    for base in self.class_bases(qualname):
                        self._children[base].append(qualname)
        seen: list[str] = []
        stack = list(self._children.get(cls, []))
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.append(current)
                stack += self._children.get(current, [])
        return sorted(seen)

    def value_targets(self, value: Value, resolution: str) -> list[CallTarget]:
        kind, subject = value
        if kind == "def":
            info = self.defs.get(subject)
            if info is None:
                return []
            if info["kind"] == "class":
                init = self.find_method(subject, "__init__")
                out = [CallTarget(subject, "class", "constructor")]
                if init:
                    out.append(CallTarget(init, "method", "constructor"))
                return out
            return [CallTarget(subject, info["kind"], resolution)]
        if kind == "inst":
            method = self.find_method(subject, "__call__")
            return [CallTarget(method, "method", resolution)] if method else []
        if kind == "builtin":
            return [CallTarget(f"<builtin>.{subject}", "builtin", "lexical")]
        if kind == "ext":
            return [CallTarget(subject, "external", "import")]
        return []

    def find_method(self, cls: str, name: str) -> str | None:
        for klass in self.mro(cls):
            if f"{klass}.{name}" in self.defs:
                return f"{klass}.{name}"
        return None

    def resolution(self, callee: Any) -> str:
        """How a callee ref is resolved: lexical, import, self_mro, constructor or heuristic."""
        kind = callee[0]
        if kind == "name":
            first = self.binding_kinds(callee)
            if first & {"imp", "from"}:
                return "import"
            if "param" in first:
                return "heuristic"
            if "call" in first:
                return "constructor"
            return "lexical"
        if kind == "attr":
            base = callee[1]
            if base[0] in ("super", "self", "cls"):
                return "self_mro"
            if base[0] == "name":
                first = self.binding_kinds(base)
                if first & {"self", "cls"}:
                    return "self_mro"
                if first & {"imp", "from"}:
                    return "import"
                if "call" in first:
                    return "constructor"
                if first & {"def", "deco"}:
                    return "lexical"
            return "heuristic"
        return "heuristic"

    def binding_refs(self, name_ref: Any) -> tuple[Any, ...]:
        """The refs a name is bound to in the nearest scope that binds it."""
        current: str | None = name_ref[1]
        while current is not None:
            refs = self.bindings.get(current, {}).get(name_ref[2])
            if refs:
                return tuple(refs)
            current = self.scopes.get(current, {}).get("parent")
        return ()

    def binding_kinds(self, name_ref: Any) -> set[str]:
        """The kinds of ref a name is bound to (`imp`, `param`, `def`, ...)."""
        return {r[0] for r in self.binding_refs(name_ref)}

    def unknown_reason(self, callee: Any) -> str:
        """Why a callee denotes nothing: a reason code for the unknown."""
        kind = callee[0]
        if kind == "unk":
            return callee[1]
        if kind == "name":
            kinds = self.binding_kinds(callee)
            if not kinds:
                return "unresolved_name"
            if "param" in kinds and kinds <= {"param", "unk", "annot"}:
                return "parameter_call"
            if kinds == {"unk"}:
                # Bound only to what the fast pass refused to model: say why (e.g. variadic_parameter).
                return self.binding_refs(callee)[0][1]
            if kinds <= {"sub", "iter"}:
                return "container_element"
            if kinds == {"call"}:
                return "call_result"
            return "untyped_value"
        if kind == "attr":
            base = self.eval(callee[1])
            if not base:
                return "untyped_receiver"
            classes = [v[1] for v in base if v[0] in ("inst", "def", "super")]
            if any(self.external_bases(c) for c in classes):
                return "external_base_class"
            if all(v[0] in ("coll", "builtin", "gen") for v in base):
                return "builtin_receiver"
            return "attribute_not_found"
        if any(v[0] == "many" for v in self.eval(callee)):
            return "ambiguous_target"
        if kind == "call":
            return "call_result"
        if kind in ("sub", "iter"):
            return "container_element"
        return "untyped_value"

    def external_bases(self, cls: str) -> list[str]:
        out = []
        for klass in self.mro(cls):
            for base in self.defs.get(klass, {}).get("bases", []):
                out += [v[1] for v in self.eval(base) if v[0] in ("ext", "builtin") and v[1] != "object"]
        return sorted(set(out))

    def flow_arguments(self, site: dict[str, Any]) -> bool:
        """Bind a call site's arguments to the parameters of its callees; True if anything was new."""
        callee = site["callee"]
        grew = False
        bound_offset = (
            1 if callee[0] == "attr" and any(v[0] in ("inst", "super") for v in self.eval(callee[1])) else 0
        )
        for value in self.eval(callee):
            if value[0] != "def":
                continue
            info = self.defs.get(value[1])
            if info is None:
                continue
            func, offset = value[1], bound_offset
            if info["kind"] == "class":
                func, offset = self.find_method(value[1], "__init__") or "", 1
                if not func:
                    continue
            elif info["kind"] == "method" and any(
                d in ("classmethod",) for d in self.defs[func].get("decorators", [])
            ):
                offset = 1
            for index, arg in enumerate(site["args"]):
                grew |= self._bind(func, index + offset, arg)
            for name, arg in site["kwargs"].items():
                grew |= self._bind(func, name, arg)
        return grew

    def _bind(self, func: str, key: Any, arg: Any) -> bool:
        slot = self.params[(func, key)]
        if arg in slot:
            return False
        slot.add(arg)
        return True

    def run(self) -> LinkResult:
        """Resolve every call site, state access and class of the tree."""
        sites = self.sites
        for _ in range(MAX_ROUNDS):
            grew = False
            for _m, _i, site in sites:
                grew |= self.flow_arguments(site)
            if not grew:
                # Nothing new flowed: this round's memo is the fixpoint's, keep it for the targets.
                break
            self.memo.clear()
            self.module_memo.clear()
        result = LinkResult()
        for module, index, site in sites:
            targets = self.targets(site)
            if targets:
                result.targets[(module, index)] = targets
            else:
                result.unresolved[(module, index)] = self.unknown_reason(site["callee"])
        for qualname, info in sorted(self.defs.items()):
            if info["kind"] == "class":
                result.mro[qualname] = self.mro(qualname)
                result.bases[qualname] = self.class_bases(qualname)
                result.external_bases[qualname] = self.external_bases(qualname)
        self._link_state(result)
        self._link_decorators(result)
        self._link_reexports(result)
        return result

    def _link_state(self, result: LinkResult) -> None:
        for module, f in sorted(self.facts.items()):
            for index, access in enumerate(f["state"]):
                target = self.state_target(access)
                if target:
                    result.state.append((access["scope"], access["mode"], target, module, index))

    def state_target(self, access: dict[str, Any]) -> str | None:
        """The state node a read or write touches: a module global or a class/instance attribute."""
        ref = access["ref"]
        if ref[0] == "name":
            scope, name = ref[1], ref[2]
            if access["global"]:
                scope = self.module_of(scope)
            current: str | None = scope
            while current is not None:
                info = self.scopes.get(current, {})
                refs = self.bindings.get(current, {}).get(name)
                if refs and (current == scope or info.get("kind") != "class"):
                    if info.get("kind") == "module" and self.is_state_binding(refs):
                        return f"{current}.{name}"
                    return None
                current = info.get("parent")
            return None
        base = self.eval(ref[1])
        for kind, subject in sorted(base, key=repr):
            if kind in ("inst", "def") and self.defs.get(subject, {}).get("kind") == "class":
                for klass in self.mro(subject):
                    if ref[2] in self.instance_attrs.get(klass, {}):
                        return f"{klass}.{ref[2]}"
                    refs = self.bindings.get(klass, {}).get(ref[2])
                    if refs:
                        return f"{klass}.{ref[2]}" if self.is_state_binding(refs) else None
            if kind == "mod":
                refs = self.bindings.get(subject, {}).get(ref[2])
                if refs and self.is_state_binding(refs):
                    return f"{subject}.{ref[2]}"
        return None

    @staticmethod
    def is_state_binding(refs: list[Any]) -> bool:
        return not any(r[0] in ("def", "deco", "imp", "from") for r in refs)

    def module_of(self, scope: str) -> str:
        current = scope
        while self.scopes.get(current, {}).get("parent"):
            current = self.scopes[current]["parent"]
        return current

    def _link_decorators(self, result: LinkResult) -> None:
        for module, f in sorted(self.facts.items()):
            for index, site in enumerate(f["calls"]):
                if not site.get("decorator"):
                    continue
                decorated = site["args"][0][1] if site["args"] else None
                for target in result.targets.get((module, index), []):
                    if decorated and target.kind in ("function", "method", "class"):
                        result.decorates.append((target.target, decorated, module, index))

    def _link_reexports(self, result: LinkResult) -> None:
        for module, f in sorted(self.facts.items()):
            for name, refs in sorted(f["bindings"].get(module, {}).items()):
                kinds = {r[0] for r in refs}
                if kinds & {"def", "deco"} and kinds & {"from", "imp"}:
                    result.reexports.append((module, name, "import_shadows_definition"))
