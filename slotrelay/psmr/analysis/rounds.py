"""Argument flow: the arguments of each call site bound to its callees' parameters, round after
round, until nothing new flows (or MAX_ROUNDS).

Each round reads the parameters the rounds before it bound (`Evaluator.params`) and binds into
`pending`, so a call site sees the same parameters whichever site came first; the next round asks
again only the sites whose callee used a parameter that grew (the memo's records of who read what).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from slotrelay.psmr.analysis.buildbudget import BudgetExceeded
from slotrelay.psmr.analysis.evaluation import Evaluator
from slotrelay.psmr.analysis.linkrules import MAX_ROUNDS, Value, ordered


class ArgumentFlow:
    """The rounds of argument flow of one evaluation (`values`), and, recording, what each bound."""

    def __init__(self, values: Evaluator) -> None:
        self.values = values
        self.names = values.names
        self.hierarchy = values.hierarchy
        self.contexts = values.contexts
        self.strict = values.strict
        self.record = values.record
        self.memo = values.memo
        self.params = values.params
        self.defs = values.defs
        self.sites = values.tables.sites
        self.site_at = values.tables.site_at
        # What this round binds (see `settle`): read by the next round only.
        self.pending: dict[tuple[str, Any], set[Any]] = defaultdict(set)
        # What each round bound, per call site it asked, and the parameters before each round (the
        # first: none), for replaying the rounds after an edit (`slotrelay.psmr.analysis.relink`).
        self.rounds: list[dict[tuple[str, int], frozenset[tuple[tuple[str, Any], Any]]]] = []
        self.round_params: list[dict[tuple[str, Any], frozenset[Any]]] = [{}]
        # The values of the keys that read a parameter, as each round left them.
        self.round_readers: list[dict[Any, frozenset[Value]]] = []
        # The values settled without reading a parameter, for the strict linker (`Linker._run`).
        self.param_free: dict[Any, frozenset[Value]] = {}

    def settle(self) -> None:
        """Flow arguments into parameters, round after round, until nothing new flows (or MAX_ROUNDS);
        the memo left is the final round's. Then the classes the tree instantiates (which evaluation
        never reads, only `targets`).

        Each round reads the parameters the rounds before it bound and binds into `pending`, so a
        call site sees the same parameters whichever site came first.
        """
        self.hierarchy.build()
        # A round asks again only the sites whose callee used a parameter that grew (see `memo`).
        asked = [(module, index) for module, index, _ in self.sites]
        for _ in range(MAX_ROUNDS if not self.strict else 0):
            bound = {}
            try:
                for key in asked:
                    self.memo.begin(("@site", *key))
                    try:
                        bound[key] = self.flow_arguments(self.site_at[key])
                    finally:
                        self.memo.end()
            except BudgetExceeded:
                # Argument flow stops with the rounds done: the sites resolve under their parameters.
                self.pending.clear()
                break
            if self.record:
                self.rounds.append(bound)
                self.round_readers.append(self.memo.readers())
            if not self.pending:
                break
            for slot, args in self.pending.items():
                self.params[slot] |= args
            if self.record:
                self.round_params.append({slot: frozenset(args) for slot, args in self.params.items()})
            used = self.memo.invalidate(("@param", *slot) for slot in self.pending)
            asked = sorted(item[1:] for item in used if type(item) is tuple and item[0] == "@site")
            self.pending.clear()
        if not self.strict and not self.memo.deep:
            # What no parameter flowed into, the strict linker evaluates alike (see `Linker._run`).
            self.param_free = self.memo.unread()

    def flow_arguments(self, site: dict[str, Any]) -> frozenset[tuple[tuple[str, Any], Any]]:
        """Bind a call site's arguments to the parameters of its callees (into `pending`).

        Returns:
            Every (parameter, argument) it binds, bound before or not.
        """
        bound: list[tuple[tuple[str, Any], Any]] = []
        callee = site["callee"]
        receivers = self.values.eval(callee[1]) if callee[0] == "attr" else frozenset()
        bound_offset = 1 if any(v[0] in ("inst", "super") for v in receivers) else 0
        values = self.contexts.eval_in(callee, {}, 0) if site.get("decorates") else self.values.eval(callee)
        if any(v[0] == "many" for v in values):
            values = self.passed_functions(callee)
        for value in values:
            if value[0] != "def":
                continue
            info = self.defs.get(value[1])
            if info is None:
                continue
            func, offset = value[1], bound_offset
            if info["kind"] == "class":
                func, offset = self.hierarchy.find_method(value[1], "__init__") or "", 1
                if not func:
                    continue
            elif info["kind"] == "method" and any(
                d in ("classmethod",) for d in self.defs[func].get("decorators", [])
            ):
                offset = 1
            accepts = self.defs.get(func, {}).get("accepts")
            named = len(accepts["positional"]) if accepts and accepts["varargs"] else None
            for index, arg in enumerate(site["args"]):
                bound.append(((func, index + offset), arg))
                if named is not None and index + offset >= named:
                    bound.append(((func, "*"), arg))
            keywords = [*site["kwargs"].items(), *self.spread_keywords(site)]
            for name, arg in keywords:
                bound.append(((func, name), arg))
                if accepts and accepts["varkw"] and name not in accepts["keywords"]:
                    # A keyword its `**` parameter takes: passed on where it spreads it.
                    bound.append(((func, "**"), ("kw", func, name)))
        for slot, arg in bound:
            if arg not in self.params.get(slot, ()):
                self.pending[slot].add(arg)
        return frozenset(bound)

    def spread_keywords(self, site: dict[str, Any]) -> list[tuple[str, Any]]:
        """The keywords a call's `**kwargs` passes on: those the function whose `**` parameter it is
        was given (by name: `("kw", function, name)`), and those stored in it by a constant key
        (`kwargs.setdefault("callback", show_help)`, `kwargs["callback"] = f`)."""
        out: list[tuple[str, Any]] = []
        for spread in site.get("spread", ()):
            for r in self.names.binding_refs(spread) if spread[0] == "name" else ():
                if r[0] == "unk" and len(r) > 2:
                    self.memo.read(("@param", r[2], "**"))
                    out += [(kw[2], kw) for kw in ordered(self.params.get((r[2], "**"), ()))]
                elif r[0] == "coll":
                    stored = zip(r[1], r[2], strict=False)
                    out += [(key, value) for value, key in stored if isinstance(key, str)]
        return out

    def passed_functions(self, callee: Any) -> frozenset[Value]:
        """A callee too imprecise to resolve (`("many", n)`) that is a parameter: the functions passed
        to it, each of which the call reaches (a decorator's wrapper calling the function decorated,
        for each function it decorates)."""
        if callee[0] != "name" or self.names.binding_kinds(callee) != {"param"} or self.strict:
            return frozenset()
        out: set[Value] = set()
        for ref in self.names.binding_refs(callee):
            self.memo.read(("@param", ref[1], ref[2]))
            self.memo.read(("@param", ref[1], ref[3]))
            passed = self.params.get((ref[1], ref[2]), set()) | self.params.get((ref[1], ref[3]), set())
            for arg in ordered(passed):
                out |= {v for v in self.values.eval(arg) if v[0] == "def"}
        return frozenset(out)
