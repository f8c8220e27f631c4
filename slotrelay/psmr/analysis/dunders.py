"""The dunders an operator, a comparison or a subscript runs on the values it is given."""

from __future__ import annotations

from typing import Any

from slotrelay.psmr.analysis.hierarchy import Hierarchy
from slotrelay.psmr.analysis.linkrules import (
    ELEMENTWISE_DUNDERS,
    OPPOSITE_ORDERING,
    ORDERING_DUNDERS,
    Value,
    Values,
    ordered,
)


class Dunders:
    """The operator methods of the tree's classes, as one evaluation denotes the operands."""

    def __init__(self, values: Values, hierarchy: Hierarchy) -> None:
        self.values = values
        self.hierarchy = hierarchy
        self.defs = values.defs
        self.dunder_names = values.dunder_names
        self.memo = values.memo
        self.record = values.record

    def defines_dunder(self, names: Any) -> bool:
        """Whether some class of the tree defines one of these dunders (recorded as used)."""
        if self.record:
            for name in names:
                self.memo.use(("dunder", name))
        return any(name in self.dunder_names for name in names)

    def operator_result(self, operands: Any) -> set[Value]:
        """What an operator returns: what the dunder of the first operand whose class has one returns."""
        for receiver, names in operands:
            if not self.defines_dunder(names):
                continue
            out: set[Value] = set()
            for method in self.operator_methods(self.values.eval(receiver), names):
                out |= self.values.call_result(("def", method))
            if out:
                return out
        return set()

    def operator_methods(
        self, values: frozenset[Value], names: Any, depth: int = 0, *, elementwise: bool = True
    ) -> list[str]:
        """For the instances among values, the first of the dunders named their class defines (with
        `functools.total_ordering`, the comparisons it makes of the one defined); for a container
        compared or hashed, its elements' (a tuple compares and hashes element by element, unless
        `elementwise` is off: compared with an empty one, no element is); for a
        class subscripted, its `__class_getitem__`."""
        out = []
        for value in ordered(values):
            if value[0] == "inst":
                out += self.instance_operator(value[1], names)
            elif value[0] == "coll" and names[0] in ELEMENTWISE_DUNDERS and depth < 2 and elementwise:
                elements = frozenset(self.values.elements(value))
                out += self.operator_methods(elements, names, depth + 1)
                if names[0] in ORDERING_DUNDERS:
                    # Elements are compared for equality first, to find the first that differ.
                    out += self.operator_methods(elements, ("__eq__",), depth + 1)
            elif value[0] == "def" and names[0] == "__getitem__" and self.hierarchy.is_class(value):
                method = self.hierarchy.find_method(value[1], "__class_getitem__")
                out += [method] if method else []
        return list(dict.fromkeys(out))

    def instance_operator(self, cls: str, names: Any) -> list[str]:
        """The first of the dunders named that cls defines, or, for a comparison `functools.total_ordering`
        derives, the comparison it derives it from and `__eq__`."""
        for name in names:
            method = self.hierarchy.find_method(cls, name)
            if method:
                return [method]
            if name in ORDERING_DUNDERS and self.total_ordering(cls):
                defined = (self.hierarchy.find_method(cls, n) for n in ORDERING_DUNDERS)
                root = next(filter(None, defined), None)
                if root:
                    # The negation of the one defined (`__ge__` from `__lt__`) asks no equality.
                    opposite = OPPOSITE_ORDERING[root.rsplit(".", 1)[1]] == name
                    equal = None if opposite else self.hierarchy.find_method(cls, "__eq__")
                    return [m for m in (root, equal) if m]
        return []

    def total_ordering(self, cls: str) -> bool:
        """Whether a class of the tree (or one of its bases) is decorated `functools.total_ordering`."""
        return any(
            d.rsplit(".", 1)[-1] == "total_ordering"
            for klass in self.hierarchy.mro(cls)
            for d in self.defs.get(klass, {}).get("decorators", ())
        )

    def class_subscript(self, cls: str) -> set[Value]:
        """What `Cls[...]` denotes: an enum's member (an instance), else the class (a generic alias,
        called or read like the class)."""
        if any(b.startswith("enum.") for b in self.hierarchy.external_bases(cls)):
            return {("inst", cls)}
        return {("def", cls)}

    def operator_names(self, names: Any) -> tuple[str, ...]:
        """The dunders an operator may run: those named, `__class_getitem__` for a subscript, and
        for a comparison those `functools.total_ordering` derives it from."""
        if names[0] == "__getitem__":
            return (*names, "__class_getitem__")
        if names[0] in ORDERING_DUNDERS:
            return (*names, *ORDERING_DUNDERS)
        return tuple(names)
