"""The methods a statement calls without call syntax: protocol methods (`for`, `with`), a raised
class's constructor, a property's getter or setter, a descriptor's, an operator's dunder, a class
statement's metaclass, a key's `__hash__`, a module's `__getattr__` for an import."""

from __future__ import annotations

from typing import Any

from slotrelay.psmr.analysis.calltargets import CallTarget, CallTargets
from slotrelay.psmr.analysis.linkrules import (
    BUILTIN_EXCEPTIONS,
    DESCRIPTOR_DUNDERS,
    PROTOCOLS,
    Value,
    ordered,
)


class ImplicitCalls:
    """The implicit calls of the facts, resolved as call sites are (`calls`)."""

    def __init__(self, calls: CallTargets) -> None:
        self.calls = calls
        values = calls.values
        self.values = values
        self.hierarchy = values.hierarchy
        self.dunders = values.dunders
        self.strict = values.strict
        self.record = values.record
        self.memo = values.memo
        self.modules = values.modules
        self.scopes = values.scopes
        self.defs = values.defs
        self.bindings = values.bindings
        self.instance_attrs = values.instance_attrs
        self.property_names = values.property_names

    def implicit_targets(self, item: dict[str, Any]) -> list[CallTarget]:
        """The methods a statement calls without call syntax (see `extract`): protocol methods,
        a raised class's constructor, a property's getter or setter."""
        kind, ref = item["kind"], item["ref"]
        if kind in ("get", "set"):
            if self.record:
                self.memo.use(("property", item["name"]))
            hooks = (DESCRIPTOR_DUNDERS[kind],) + (("__getattr__",) if kind == "get" else ())
            if item["name"] not in self.property_names and not self.dunders.defines_dunder(hooks):
                return []
        if kind == "op" and not self.dunders.defines_dunder(self.dunders.operator_names(item["name"])):
            return []
        if kind == "import":
            return self.import_targets(item["ref"], item["name"])
        if kind == "key":
            return self.key_targets(item)
        resolution = self.calls.implicit_resolution(ref) if kind != "classdef" else "implicit"
        found: dict[str, CallTarget] = {}
        for value in ordered(self.values.eval(ref)):
            if kind in ("get", "set"):
                name = item["name"]
                method = self.property_of(value, name) or self.descriptor_of(value, name, kind)
                targets = [CallTarget(method, "method", resolution)] if method else []
                hook = self.calls.getattr_hook(value, name) if kind == "get" and not method else None
                if hook:
                    # Derived: an attribute set by name at run time (`setattr`) would hide it.
                    targets.append(CallTarget(hook, "method", "heuristic"))
                if value[0] == "inst" and not self.strict and not self.calls.constructed_here(ref):
                    # The property a subclass overrides it with, for a value declared as the base.
                    for sub in self.calls.live_subclasses(value[1]):
                        other = self.property_of(("inst", sub), item["name"])
                        if other and other != method:
                            targets.append(CallTarget(other, "method", "heuristic"))
            elif kind == "op":
                elementwise = item.get("elementwise", True)
                methods = self.dunders.operator_methods(
                    frozenset({value}), item["name"], elementwise=elementwise
                )
                targets = [CallTarget(m, "method", resolution) for m in methods]
                after = item.get("after")
                first: list[str] = []
                if after is not None:
                    first = self.dunders.operator_methods(self.values.eval(after[0]), after[1])
                if first:
                    # The left operand's dunder runs first; only its NotImplemented reaches this one
                    # (and where it is the same function, `a == b` of one class, the call is already its).
                    targets = [CallTarget(m, "method", "heuristic") for m in methods if m not in first]
                if not methods and value[0] == "inst" and not self.strict:
                    # A value declared as a base its subclasses give the dunder to: derived.
                    dispatched = self.calls.subclass_methods(value[1], item["name"])
                    targets = [CallTarget(m, "method", "heuristic") for m in dispatched]
            elif kind == "classdef":
                methods = self.class_statement_methods(value[1])
                targets = [CallTarget(m, "method", "implicit") for m in methods]
            elif kind == "raise":
                if value[0] == "builtin" and value[1] in BUILTIN_EXCEPTIONS:
                    targets = self.calls.value_targets(value, resolution)
                elif value[0] == "def" and self.defs.get(value[1], {}).get("kind") == "class":
                    targets = [t for t in self.calls.value_targets(value, resolution) if t.kind != "class"]
                else:
                    targets = []
            else:
                targets = self.calls.protocol_targets(value, *PROTOCOLS[kind], resolution)
            for target in targets:
                found.setdefault(target.target, target)
        return sorted(found.values(), key=lambda t: t.target)

    def key_targets(self, item: dict[str, Any]) -> list[CallTarget]:
        """A value used as a key: its `__hash__` where the container is a dict or set (not an
        instance of the tree, whose `__getitem__` decides), and its `__eq__`, which runs only where a
        key of the same hash is there (derived). Derived too where the container is unknown."""
        if not self.dunders.defines_dunder(("__hash__",)):
            return []
        containers = self.values.eval(item["receiver"]) if item["receiver"] is not None else frozenset()
        if any(v[0] in ("inst", "def", "super", "many") for v in containers):
            return []
        how = self.calls.implicit_resolution(item["ref"]) if containers else "heuristic"
        out = []
        for value in ordered(self.values.eval(item["ref"])):
            if value[0] != "inst":
                continue
            hashed = self.hierarchy.find_method(value[1], "__hash__")
            if hashed:
                out.append(CallTarget(hashed, "method", how))
                equal = self.hierarchy.find_method(value[1], "__eq__")
                if equal:
                    out.append(CallTarget(equal, "method", "heuristic"))
        return out

    def import_targets(self, ref: Any, names: Any) -> list[CallTarget]:
        """`from m import names`: m's module-level `__getattr__`, which Python asks for a name m does
        not bind (and, m being no package, for the `__path__` it looks up first)."""
        out = []
        for value in ordered(self.values.eval(ref)):
            if value[0] != "mod":
                continue
            module = value[1]
            hooks = [v[1] for v in ordered(self.values.module_attr(module, "__getattr__")) if v[0] == "def"]
            if not hooks:
                continue
            asked = not self.scopes.get(module, {}).get("package") or any(
                name not in self.bindings.get(module, {}) and f"{module}.{name}" not in self.modules
                for name in names
            )
            if asked:
                out += [CallTarget(h, "function", "implicit") for h in hooks]
        return out

    def class_statement_methods(self, cls: str) -> list[str]:
        """What a class statement runs of the tree: its metaclass's `__new__` and `__init__`, and the
        `__init_subclass__` next after the class in its MRO."""
        out = []
        meta = self.calls.metaclass(cls)
        if meta is not None:
            made = (self.hierarchy.find_method(meta, "__new__"), self.hierarchy.find_method(meta, "__init__"))
            out += [m for m in made if m]
        for klass in self.hierarchy.mro(cls)[1:]:
            if f"{klass}.__init_subclass__" in self.defs:
                out.append(f"{klass}.__init_subclass__")
                break
        return out

    def property_of(self, value: Value, name: str) -> str | None:
        """The property method `value.name` runs, if the attribute found along the MRO is one."""
        if value[0] not in ("inst", "super"):
            return None
        order = self.hierarchy.mro(value[1])[1:] if value[0] == "super" else self.hierarchy.mro(value[1])
        for klass in order:
            refs = self.bindings.get(klass, {}).get(name) or self.instance_attrs.get(klass, {}).get(name)
            if refs:
                props = [r[1] for r in refs if r[0] == "prop"]
                return props[0] if props else None
        return None

    def descriptor_of(self, value: Value, name: str, mode: str) -> str | None:
        """The descriptor method `value.name` runs (`__get__` for a read, `__set__` for a write) where
        the attribute its class's MRO finds is an instance of the tree's class defining it; a
        descriptor without `__set__` is hidden by an instance attribute of that name."""
        on_class = value[0] == "def" and mode == "get" and self.hierarchy.is_class(value)
        if not (on_class or value[0] == "inst"):
            return None
        cls, dunder = value[1], DESCRIPTOR_DUNDERS[mode]
        # An attribute the instance stores (not a field's declaration, `name: T = D()`).
        stored = value[0] == "inst" and any(
            r[0] != "typed"
            for k in self.hierarchy.mro(cls)
            for r in self.instance_attrs.get(k, {}).get(name, ())
        )
        for klass in self.hierarchy.mro(cls):
            refs = self.bindings.get(klass, {}).get(name)
            if not refs:
                continue
            for kind, subject in ordered({v for r in refs for v in self.values.eval(r)}):
                method = self.hierarchy.find_method(subject, dunder) if kind == "inst" else None
                if method and not (stored and not self.hierarchy.find_method(subject, "__set__")):
                    return method
            return None
        return None
