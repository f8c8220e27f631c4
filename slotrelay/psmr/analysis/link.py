"""The resolver: resolves the call sites, implicit calls, state accesses and classes of every file's
facts across the whole tree.

`Linker` runs a resolution and records its answer (`LinkResult`). Its parts, each one object:

- the evaluation of refs to values (`slotrelay.psmr.analysis.evaluation.Evaluator`, with its parts: the class
  hierarchy, narrowing, dunders, declared types, call contexts; its vocabulary in `linkrules`);
- the rounds of argument flow into parameters, iterated to a fixpoint (`slotrelay.psmr.analysis.rounds`);
- the targets of call sites (`slotrelay.psmr.analysis.calltargets`) and of implicit calls
  (`slotrelay.psmr.analysis.implicitcalls`).

A call site whose callee denotes nothing is an unknown with a reason, never a guessed edge.

Certainty: an edge is labelled by how its callee was found (lexical, import, self_mro, constructor,
implicit), but only if it is also found with argument flow switched off (a second, strict linker);
an edge that needs a value to flow in through a parameter, an override in a subclass, or a guess
about an external class is `heuristic`. A target whose signature cannot take the call's arguments
is dropped: that call would raise TypeError, so it is not where the value flows.

A recording linker keeps what each evaluation consulted and what each round bound, so that an edit
can be resolved by replaying it (`slotrelay.psmr.analysis.record`, `slotrelay.psmr.analysis.relink`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from slotrelay.psmr.analysis.buildbudget import REASON as BUDGET_REASON
from slotrelay.psmr.analysis.buildbudget import BudgetExceeded, BuildBudget
from slotrelay.psmr.analysis.calltargets import CallTarget, CallTargets
from slotrelay.psmr.analysis.evaluation import Evaluator
from slotrelay.psmr.analysis.facttables import LinkTables, cached
from slotrelay.psmr.analysis.hierarchy import ClassHierarchy
from slotrelay.psmr.analysis.implicitcalls import ImplicitCalls
from slotrelay.psmr.analysis.linkrules import MAX_ROUNDS, RESOLVED_STATUS, Value, ordered
from slotrelay.psmr.analysis.memo import FRAMES_PER_LEVEL, MAX_DEPTH
from slotrelay.psmr.analysis.rounds import ArgumentFlow

__all__ = [
    "MAX_ROUNDS",
    "RESOLVED_STATUS",
    "CallTarget",
    "ClassHierarchy",
    "LinkResult",
    "Linker",
    "ordered",
]


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
    implicit: dict[tuple[str, int], list[CallTarget]] = field(default_factory=dict)


class Linker:
    """Resolve the facts of every module of one tree (module name -> facts).

    A strict linker lets no argument flow into parameters (only defaults): what it resolves is what
    the code says without a guess about the caller. A recording linker keeps what each evaluation
    consulted and what each round bound, so that an edit can be resolved by replaying it
    (`slotrelay.psmr.analysis.relink`).
    """

    def __init__(
        self,
        facts: dict[str, dict[str, Any]],
        *,
        strict: bool = False,
        record: bool = False,
        like: Linker | None = None,
        budget: BuildBudget | None = None,
    ) -> None:
        """`like`: a linker of the same facts, whose tables of them this one shares (they are read only)
        and whose budget it spends; `budget`: what resolving may cost (none: no limit)."""
        self.strict = strict
        if budget is None:
            budget = like.budget if like is not None else BuildBudget(cpu_s=None, memory_bytes=None)
        self.budget: BuildBudget = budget
        # Whether to keep the records an edit is replayed from (`relink`): what each evaluation
        # consulted, what each round bound. They add about a third to the time.
        self.record = record
        self.facts = {m: f for m, f in facts.items() if not f.get("syntax_error")}
        self.modules = set(facts)
        self.tables: LinkTables = like.tables if like is not None else LinkTables(self.facts)
        self.values = Evaluator(self.modules, self.tables, strict=strict, record=record, budget=budget)
        self.hierarchy = self.values.hierarchy
        self.flow = ArgumentFlow(self.values)
        self.calls = CallTargets(self.values)
        self.implicit = ImplicitCalls(self.calls)
        self.memo = self.values.memo
        self.params = self.values.params
        self.scopes = self.values.scopes
        self.bindings = self.values.bindings
        self.defs = self.values.defs
        self.instance_attrs = self.values.instance_attrs
        self.sites = self.tables.sites
        self.site_at = self.tables.site_at
        # The values of the keys that read a parameter as the last phase left them (see `rounds`).
        self.final_readers: dict[Any, frozenset[Value]] = {}
        # The classes each call site constructs (see `_constructed`).
        self.constructed_by: dict[tuple[str, int], frozenset[str]] = {}
        # The linker that labels this one's edges certain (see `_run`); itself, for a strict one.
        self.strict_linker = self
        # The answer of `run` (or `relink`), and how many call sites it resolved (not kept from before).
        self.result: LinkResult | None = None
        self.resolved_sites = 0
        self._state_targets: dict[Any, str | None] = {}

    # What argument flow bound and read, as a replay (`relink`) and its record read it.

    @property
    def pending(self) -> dict[tuple[str, Any], set[Any]]:
        return self.flow.pending

    @property
    def rounds(self) -> list[dict[tuple[str, int], frozenset[tuple[tuple[str, Any], Any]]]]:
        return self.flow.rounds

    @property
    def round_params(self) -> list[dict[tuple[str, Any], frozenset[Any]]]:
        return self.flow.round_params

    @property
    def round_readers(self) -> list[dict[Any, frozenset[Value]]]:
        return self.flow.round_readers

    @property
    def param_free(self) -> dict[Any, frozenset[Value]]:
        return self.flow.param_free

    @param_free.setter
    def param_free(self, values: dict[Any, frozenset[Value]]) -> None:
        self.flow.param_free = values

    @property
    def constructed(self) -> set[str]:
        """The classes the tree instantiates (known once argument flow has settled)."""
        return self.calls.constructed

    @constructed.setter
    def constructed(self, classes: set[str]) -> None:
        self.calls.constructed = classes

    def eval(self, ref: Any) -> frozenset[Value]:
        """The values a frozen ref may denote (empty when unknown)."""
        return self.values.eval(ref)

    def flow_arguments(self, site: dict[str, Any]) -> frozenset[tuple[tuple[str, Any], Any]]:
        """Bind a call site's arguments to its callees' parameters (see `ArgumentFlow.flow_arguments`)."""
        return self.flow.flow_arguments(site)

    def class_hierarchy(self) -> ClassHierarchy:
        """The MRO and the subclasses of every class of the tree (see `Hierarchy.class_hierarchy`)."""
        return self.hierarchy.class_hierarchy()

    def settle(self) -> None:
        """Flow arguments into parameters until nothing new flows (`ArgumentFlow.settle`); then the
        classes the tree instantiates (which evaluation never reads, only the call targets)."""
        self.flow.settle()
        if not self.strict:
            self.constructed = self._constructed()

    def _constructed(self) -> set[str]:
        # Computed once evaluation has settled, never in the middle of one, so that no result depends
        # on which ref was evaluated first.
        for module, index, _ in self.sites:
            self.resolve_constructs(module, index)
        return set().union(*self.constructed_by.values())

    def resolve_constructs(self, module: str, index: int) -> None:
        """The classes one call site constructs, into `constructed_by` (question
        `("@constructs", module, index)`)."""
        with self._question(("@constructs", module, index)), suppress(BudgetExceeded):
            self.constructed_by[(module, index)] = self.constructs(self.site_at[(module, index)])

    def constructs(self, site: dict[str, Any]) -> frozenset[str]:
        """The classes of the tree a call site's callee may be."""
        return frozenset(
            value[1]
            for value in self.values.eval(site["callee"])
            if value[0] == "def" and self.defs.get(value[1], {}).get("kind") == "class"
        )

    def close(self) -> None:
        """Let go of the resolution (`Evaluator.close`) once its answer is taken: `result` stays.
        Unusable after; not for a linker whose record is kept (the record shares its memo)."""
        for linker in (self.strict_linker, self):
            if "values" in vars(linker):
                linker.values.close()
            result = linker.result
            vars(linker).clear()
            linker.result = result

    def run(self) -> LinkResult:
        """Resolve every call site, implicit call, state access and class of the tree."""
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, MAX_DEPTH * FRAMES_PER_LEVEL))
        try:
            return self._run()
        finally:
            sys.setrecursionlimit(limit)

    def _run(self) -> LinkResult:
        self.settle()
        strict = Linker(self.facts, strict=True, record=self.record, like=self)
        # A value that read no parameter is what the strict linker computes too: evaluation differs
        # between the two only where it reads one. Not after a key was cut for depth (MAX_DEPTH),
        # whose value may depend on the order of the questions, and then on which were asked.
        strict.memo.keep(self.param_free)
        strict.settle()
        self.strict_linker = strict
        result = LinkResult()
        for module, index, _ in self.sites:
            self.resolve_site(module, index, result)
        for module, f in sorted(self.facts.items()):
            for index in range(len(f.get("implicit", ()))):
                self.resolve_implicit(module, index, result)
        for qualname in sorted(q for q, info in self.defs.items() if info["kind"] == "class"):
            self.resolve_class(qualname, result)
        for module in sorted(self.facts):
            result.state += self.module_state(module)
        self.finish(result)
        if self.record:
            self.final_readers = self.memo.readers()
        self.result = result
        self.resolved_sites = len(self.sites)
        return result

    def resolve_site(self, module: str, index: int, result: LinkResult) -> None:
        """One call site's targets (certain where the strict linker finds them too), or its unknown;
        asked as the question `("@final", module, index)` of both linkers' memos."""
        site = self.site_at[(module, index)]
        with self._question(("@final", module, index)):
            try:
                targets = self.calls.targets(site)
                if targets:
                    strict = self.strict_linker.calls.targets(site)
                    result.targets[(module, index)] = _certain(targets, strict)
                else:
                    result.unresolved[(module, index)] = self.calls.unknown_reason(site["callee"])
            except BudgetExceeded:
                result.targets.pop((module, index), None)
                result.unresolved[(module, index)] = BUDGET_REASON

    def resolve_implicit(self, module: str, index: int, result: LinkResult) -> None:
        """One implicit call (question `("@implicit", module, index)`)."""
        item = self.facts[module]["implicit"][index]
        with self._question(("@implicit", module, index)), suppress(BudgetExceeded):
            targets = self.implicit.implicit_targets(item)
            if targets:
                result.implicit[(module, index)] = _certain(
                    targets, self.strict_linker.implicit.implicit_targets(item)
                )

    def resolve_class(self, qualname: str, result: LinkResult) -> None:
        """A class's MRO, bases in the tree and external bases (question `("@class", qualname)`)."""
        with self._question(("@class", qualname)):
            result.mro[qualname], result.bases[qualname] = [qualname], []
            with suppress(BudgetExceeded):
                result.mro[qualname] = self.hierarchy.mro(qualname)
                result.bases[qualname] = self.hierarchy.class_bases(qualname)
                result.external_bases[qualname] = self.hierarchy.external_bases(qualname)

    def module_state(self, module: str) -> list[tuple[str, str, str, str, int]]:
        """The state one module's reads and writes touch (question `("@state", module)`)."""
        out = []
        with self._question(("@state", module)):
            for index, access in enumerate(self.facts[module]["state"]):
                with suppress(BudgetExceeded):
                    target = self.state_target(access)
                    if target:
                        out.append((access["scope"], access["mode"], target, module, index))
        return out

    def finish(self, result: LinkResult) -> None:
        """What follows from the sites resolved and the facts alone: decorations and re-exports."""
        result.decorates = []
        for module, index, site in self.sites:
            decorated = site.get("decorates")
            if decorated:
                for target in result.targets.get((module, index), []):
                    if target.kind in ("function", "method", "class"):
                        result.decorates.append((target.target, decorated, module, index))
        result.reexports = []
        for module, f in sorted(self.facts.items()):
            for name, refs in sorted(f["bindings"].get(module, {}).items()):
                kinds = {r[0] for r in refs}
                if kinds & {"def", "deco"} and kinds & {"from", "imp"}:
                    result.reexports.append((module, name, "import_shadows_definition"))

    @contextmanager
    def _question(self, question: Any) -> Iterator[None]:
        """Record what this linker and its strict one use as used by the question (for `relink`)."""
        if not self.record:
            yield
            return
        self.memo.begin(question)
        self.strict_linker.memo.begin(question)
        try:
            yield
        finally:
            self.strict_linker.memo.end()
            self.memo.end()

    def state_target(self, access: dict[str, Any]) -> str | None:
        """The state node a read or write touches: a module global or a class/instance attribute.

        Cached per ref (and whether the name is declared global): asked once evaluation has settled.
        """
        target: str | None = cached(
            self.memo,
            self.record,
            self._state_targets,
            ("@state_target", access["ref"], access["global"]),
            lambda: self._state_target(access),
        )
        return target

    def _state_target(self, access: dict[str, Any]) -> str | None:
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
        base = self.values.eval(ref[1])
        for kind, subject in ordered(base):
            if kind in ("inst", "def") and self.defs.get(subject, {}).get("kind") == "class":
                for klass in self.hierarchy.mro(subject):
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


def _certain(targets: list[CallTarget], strict: list[CallTarget]) -> list[CallTarget]:
    """The targets, each one the strict linker does not find (it needs argument flow) made heuristic."""
    sure = {t.target for t in strict}
    return [t if t.target in sure else CallTarget(t.target, t.kind, "heuristic") for t in targets]

