"""The classes of a tree in order: each one's bases, MRO (C3), subclasses and methods found along it."""

from __future__ import annotations

from collections import defaultdict
from contextlib import suppress
from dataclasses import dataclass

from slotrelay.psmr.analysis.buildbudget import BudgetExceeded
from slotrelay.psmr.analysis.linkrules import MARKER_BASES, Value, Values


@dataclass(frozen=True)
class ClassHierarchy:
    """The MRO and the subclasses (every class of the tree with it in its MRO) of each class of a tree."""

    mro_of: dict[str, list[str]]
    subclasses_of: dict[str, list[str]]



class Hierarchy:
    """The class hierarchy as one evaluation (`values`) sees it: a base is what the ref naming it
    denotes. Each MRO is computed once; the subclasses are known once `build` has run."""

    def __init__(self, values: Values) -> None:
        self.values = values
        self.defs = values.defs
        self.tables = values.tables
        self.memo = values.memo
        self.record = values.record
        self._mro: dict[str, list[str]] = {}
        self._children: dict[str, list[str]] = defaultdict(list)

    def is_class(self, value: Value) -> bool:
        """Whether a value is a class of the tree."""
        return value[0] == "def" and self.defs.get(value[1], {}).get("kind") == "class"

    def method_bases(self, cls: str) -> list[str]:
        """The external bases of a class that can supply methods (typing/abc markers aside)."""
        return [b for b in self.external_bases(cls) if "." in b and not b.startswith(MARKER_BASES)]

    def build(self) -> None:
        """The MRO and the subclasses of every class, before any argument flows (class order fixed)."""
        classes = sorted(q for q, info in self.defs.items() if info["kind"] == "class")
        for cls in classes:
            with suppress(BudgetExceeded):
                self.mro(cls)
        for cls in classes:
            with suppress(BudgetExceeded):
                for base in self.class_bases(cls):
                    self._children[base].append(cls)

    def class_hierarchy(self) -> ClassHierarchy:
        """The MRO and the subclasses of every class of the tree; computed here first when no
        argument has flowed yet (a replay's linker does not `settle`: `slotrelay.psmr.analysis.relink`)."""
        if not self._mro:
            self.build()
        classes = sorted(q for q, info in self.tables.defs.items() if info["kind"] == "class")
        return ClassHierarchy(
            mro_of={cls: self._mro[cls] for cls in classes if cls in self._mro},
            subclasses_of={cls: self.subclasses(cls) for cls in classes},
        )

    def mro(self, cls: str) -> list[str]:
        """C3 linearisation over the classes of the tree (external bases end the walk)."""
        if self.record:
            self.memo.use(("mro", cls))
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
            for value in sorted(self.values.eval(base)):
                if (
                    value[0] == "def"
                    and self.defs.get(value[1], {}).get("kind") == "class"
                    and value[1] != cls
                ):
                    out.append(value[1])
        return out

    def subclasses(self, cls: str) -> list[str]:
        """Every class of the tree that has cls in its MRO, except cls."""
        if self.record:
            self.memo.use(("subclasses", cls))
        seen: list[str] = []
        stack = list(self._children.get(cls, []))
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.append(current)
                stack += self._children.get(current, [])
        return sorted(seen)

    def find_method(self, cls: str, name: str) -> str | None:
        for klass in self.mro(cls):
            if f"{klass}.{name}" in self.defs:
                return f"{klass}.{name}"
        return None

    def external_bases(self, cls: str) -> list[str]:
        out = []
        for klass in self.mro(cls):
            for base in self.defs.get(klass, {}).get("bases", []):
                values = self.values.eval(base)
                out += [v[1] for v in values if v[0] in ("ext", "builtin") and v[1] != "object"]
        return sorted(set(out))
