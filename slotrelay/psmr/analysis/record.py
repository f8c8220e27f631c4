"""What a resolution leaves for replaying it after an edit: the `ResolutionRecord` that `relink` reads.

A recording linker (`Linker(facts, record=True)`) notes, while it resolves, what each evaluation
consulted, what each round of argument flow bound, and the values of what read a parameter.
`ResolutionRecord.of(linker)` takes those notes over as one object: the tree it resolved (its facts
and their tables, its classes' hierarchy), its answer, and the records of who used what in its two
memos. A replay (`slotrelay.psmr.analysis.relink`) reads nothing else of the resolution before the edit, so
the linker itself (its memos' values, its strict twin, its caches) need not outlive it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from slotrelay.psmr.analysis.link import ClassHierarchy, Linker, LinkResult
from slotrelay.psmr.analysis.memo import Uses

# A parameter, as argument flow binds it: (function, parameter name or position).
Slot = tuple[str, Any]
# A call site or implicit call: (module, index).
Site = tuple[str, int]


class FactTables(Protocol):
    """The facts of every module of a tree as tables by name (see `slotrelay.psmr.analysis.facttables`), as
    far as a replay compares them before and after an edit."""

    scopes: dict[str, dict[str, Any]]
    bindings: dict[str, dict[str, list[Any]]]
    defs: dict[str, dict[str, Any]]
    instance_attrs: dict[str, dict[str, tuple[Any, ...]]]
    stars: dict[str, list[str]]
    exports: dict[str, list[str] | None]
    property_names: set[str]
    dunder_names: set[str]
    stores: dict[str, list[tuple[Any, Any]]]
    metaclasses: bool


@dataclass(frozen=True)
class ResolutionRecord:
    """One resolution of a tree, as a replay after an edit reads it (see the module docstring).

    Parameters:
        modules: every module of the tree, analysable or not.
        facts: the facts of the analysable modules.
        tables: those facts as tables by name.
        hierarchy: the classes' MRO and subclasses.
        result: the answer.
        param_free: the values that read no parameter (the same whatever flows).
        rounds: per round of argument flow, what each call site it asked bound.
        round_params: the parameters before each round (the first: none), and after the last.
        round_readers: per round, the values of the keys that read a parameter, as it left them.
        final_readers: the same, as the last phase (resolving each site) left them.
        constructed_by: the classes each call site constructs.
        constructed: the classes the tree constructs.
        uses: who used what in the resolution's memo, at any time (see `CanonicalMemo.uses`).
        strict_uses: the same in its strict twin's memo (which labels the edges certain).
    """

    modules: frozenset[str]
    facts: dict[str, dict[str, Any]]
    tables: FactTables
    hierarchy: ClassHierarchy
    result: LinkResult
    param_free: dict[Any, frozenset[Any]]
    rounds: list[dict[Site, frozenset[tuple[Slot, Any]]]]
    round_params: list[dict[Slot, frozenset[Any]]]
    round_readers: list[dict[Any, frozenset[Any]]]
    final_readers: dict[Any, frozenset[Any]]
    constructed_by: dict[Site, frozenset[str]]
    constructed: frozenset[str]
    uses: Uses
    strict_uses: Uses

    @classmethod
    def of(cls, linker: Linker) -> ResolutionRecord | None:
        """The record of a linker's resolution, once `run` (or a replay) has answered; None when it
        cannot be replayed: the linker did not record, or evaluation was cut for depth (values may
        then depend on the order of the questions)."""
        if not linker.record or linker.result is None or linker.memo.deep:
            return None
        return cls(
            modules=frozenset(linker.modules),
            facts=linker.facts,
            tables=linker.tables,
            hierarchy=linker.class_hierarchy(),
            result=linker.result,
            param_free=linker.param_free,
            rounds=linker.rounds,
            round_params=linker.round_params,
            round_readers=linker.round_readers,
            final_readers=linker.final_readers,
            constructed_by=linker.constructed_by,
            constructed=frozenset(linker.constructed),
            uses=linker.memo.uses(),
            strict_uses=linker.strict_linker.memo.uses(),
        )
