"""What a check narrows a value to: `isinstance`, `issubclass`, `is not sentinel`, and what an
annotation admits."""

from __future__ import annotations

import builtins
from typing import Any

from slotrelay.psmr.analysis.hierarchy import Hierarchy
from slotrelay.psmr.analysis.linkrules import Value, Values, ordered


class Narrowing:
    """The values that pass (or fail) a check against classes, as one evaluation denotes them."""

    def __init__(self, values: Values, hierarchy: Hierarchy) -> None:
        self.values = values
        self.hierarchy = hierarchy
        self.defs = values.defs

    def narrow(self, values: frozenset[Value], class_refs: Any) -> set[Value]:
        """The values that pass `isinstance(value, classes)`, and instances of the tree's classes named."""
        classes = self.checkable_classes(class_refs)
        if classes is None:
            return set(values)
        out = self.admit(values, class_refs)
        for value in ordered(values - out):
            if value[0] == "inst":
                # An instance of a base the check rejects may be one of its subclasses the check admits
                # (`item: Item`, then `isinstance(item, dict)` holds for Item's dict subclasses).
                out |= self.admit({("inst", sub) for sub in self.hierarchy.subclasses(value[1])}, class_refs)
        return out | {("inst", c) for c in classes[0]}

    def without(self, values: frozenset[Value], sentinel_refs: Any) -> set[Value]:
        """The values that pass `value is not sentinel`: a sentinel that denotes one instance, and
        nothing else, is that one object (`missing = _Missing()`), so its class's instance is left out."""
        out = set(values)
        for ref in sentinel_refs:
            sentinel = self.values.eval(ref)
            if len(sentinel) == 1 and next(iter(sentinel))[0] == "inst":
                out -= sentinel
        return out

    def unlike(self, values: frozenset[Value], class_refs: Any) -> set[Value]:
        """The values that fail `isinstance(value, classes)`: less the instances of the tree's classes
        named and of their subclasses."""
        classes = self.checkable_classes(class_refs)
        if classes is None:
            return set(values)
        return {v for v in values if not (v[0] == "inst" and classes[0] & set(self.hierarchy.mro(v[1])))}

    def admit(self, values: set[Value] | frozenset[Value], class_refs: Any) -> set[Value]:
        """The values that can be instances of the classes (all of them when the classes are unknown)."""
        classes = None if class_refs is None else self.checkable_classes(class_refs)
        if classes is None:
            return set(values)
        tree, foreign = classes
        out = set()
        for value in values:
            if value[0] == "inst":
                if tree & set(self.hierarchy.mro(value[1])) or (
                    foreign and self.hierarchy.external_bases(value[1])
                ):
                    out.add(value)
            elif foreign:
                # Not an instance of the tree's classes: only a class outside the tree can admit it.
                out.add(value)
        return out

    def checkable_classes(self, class_refs: Any) -> tuple[set[str], bool] | None:
        """The tree's classes and whether a foreign class is among them, or None when an isinstance
        check against them cannot be judged here (a Protocol, typing's forms, an unresolved name)."""
        tree: set[str] = set()
        foreign = False
        for ref in class_refs:
            values = self.values.eval(ref)
            if not values:
                return None
            for kind, subject in values:
                if kind == "def" and self.defs.get(subject, {}).get("kind") == "class":
                    if any(b.endswith(".Protocol") for b in self.hierarchy.external_bases(subject)):
                        return None
                    tree.add(subject)
                elif kind == "builtin" and isinstance(getattr(builtins, subject, None), type):
                    if subject == "object":
                        return None
                    foreign = True
                elif kind == "ext" and not subject.startswith(
                    ("typing.", "typing_extensions.", "collections.abc.")
                ):
                    foreign = True
                else:
                    return None
        return tree, foreign

    def narrow_classes(self, values: frozenset[Value], class_refs: Any) -> set[Value]:
        """The classes that pass `issubclass(value, classes)`; the tree's classes named when none of
        the values is known to."""
        classes = self.checkable_classes(class_refs)
        if classes is None:
            return set(values)
        tree, foreign = classes
        out = {
            v
            for v in values
            if (self.hierarchy.is_class(v) and tree & set(self.hierarchy.mro(v[1])))
            or (foreign and v[0] != "def")
        }
        return out or {("def", c) for c in tree}
