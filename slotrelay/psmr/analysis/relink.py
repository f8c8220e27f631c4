"""Resolve a tree again after an edit by replaying the resolver's rounds where the edit can reach.

A full resolution (`Linker.run`) is a fixed sequence: round after round, each call site binds its
arguments to the parameters of the callees it denotes under the parameters bound by the rounds before,
until a round binds nothing new; then each site, implicit call, class and state access is resolved
under the last parameters. The linker records who used what along the way: every fact it consulted
(a scope, a definition, a name bound in a scope, a class's MRO, ...), every parameter, every value,
and hands them over as a `ResolutionRecord` (`slotrelay.psmr.analysis.record`): all a replay reads of the
resolution before the edit.

After an edit, an evaluation can come out differently only if it used something the edit changed: a
fact of an edited module, or a parameter whose values differ, in that round, from what they were in the
same round before (a parameter that took another argument of the values it had changes nothing). So
the rounds are replayed in order. A site that used nothing changed binds
what it bound in that round before; the others, and the edited modules' own sites, are evaluated
again under the replay's parameters. Replaying round by round, rather than looking for a fixed point
from the previous parameters, keeps the answer the full resolution's: a site can bind less in a later
round than in an earlier one (a value set past the cap stops counting), so the answer depends on the
rounds' sequence, and the replay runs the same sequence. The last phase resolves again only the
sites, implicit calls, classes and modules' state whose resolution used something that changed. An
edit that reaches more than a few percent of the call sites is left to a full resolution, which then
costs no more. Tests compare the replay with a full resolution on each kind of edit.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

from slotrelay.psmr.analysis.link import MAX_ROUNDS, ClassHierarchy, Linker, LinkResult, ordered
from slotrelay.psmr.analysis.memo import FRAMES_PER_LEVEL, MAX_DEPTH
from slotrelay.psmr.analysis.record import FactTables, ResolutionRecord, Slot

# Past this share of the tree's call sites evaluated again in one round, a replay costs about what a
# full resolution does (the sites are evaluated from nothing, round after round): resolve in full.
MAX_AGAIN_SHARE = 0.05


class TooFar(Exception):
    """The edit reaches too much of the tree for a replay to pay (see `MAX_AGAIN_SHARE`)."""


def relink(old: ResolutionRecord, facts: dict[str, dict[str, Any]], changed: set[str]) -> Linker | None:
    """The linker of the edited tree, resolved, recording what the next edit replays from.

    Parameters:
        old: the record of the tree's resolution before the edit (`ResolutionRecord.of`).
        facts: every module's facts after the edit.
        changed: the modules whose facts differ.

    Returns:
        The new linker (its answer in `result`, what was resolved again in `resolved_sites`, its
        record in `ResolutionRecord.of`), or None when the edit added or removed a module, reaches
        too far (`MAX_AGAIN_SHARE`), or evaluation was cut for depth (the answer may then depend on
        the order of the questions): the caller resolves in full.
    """
    if set(facts) != old.modules:
        return None
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, MAX_DEPTH * FRAMES_PER_LEVEL))
    try:
        return _Replay(old, facts, changed).run()
    except TooFar:
        return None
    finally:
        sys.setrecursionlimit(limit)


class _Replay:
    """One replay: the old resolution's record, the live linker of the edited tree, and what the
    edit changed."""

    def __init__(self, old: ResolutionRecord, facts: dict[str, dict[str, Any]], changed: set[str]) -> None:
        self.old = old
        self.changed = changed
        self.live = Linker(facts, record=True)
        live = self.live
        self.facts_changed = _changed_facts(old, live.facts, live.tables, live.class_hierarchy(), changed)
        # The edited modules' sites that are new or differ from the site at the same place before:
        # evaluated afresh in every round. Their other sites are like any module's.
        self.own = _edited(old.facts, self.live.facts, changed, "calls")
        # What read no parameter and none of the changed facts is what it was (see `CanonicalMemo.keep`).
        self.live.memo.keep(old.param_free, but=old.uses.affected(self.facts_changed))

    def run(self) -> Linker | None:
        live = self.live
        params = self._replay_rounds()
        if live.memo.deep:
            return None
        live.param_free = live.memo.unread()
        strict = Linker(live.facts, strict=True, record=True, like=live)
        strict.memo.keep(live.param_free)
        strict.settle()
        live.strict_linker = strict
        sources = set(self.facts_changed)
        sources |= self._param_sources(params, self.old.round_params[-1], self.old.final_readers)
        constructs = _questions(self._reached(sources)[1], "@constructs")
        live.constructed_by = {
            key: self.old.constructed_by[key]
            for key in live.site_at
            if key not in self.own and key not in constructs
        }
        for key in sorted(constructs | self.own):
            if key in live.site_at:
                live.resolve_constructs(*key)
        live.constructed = set().union(*live.constructed_by.values())
        sources |= {("constructed", cls) for cls in live.constructed ^ self.old.constructed}
        flow, reached = self._reached(sources)
        live.result = self._resolve(reached)
        kept = {key: value for key, value in self.old.final_readers.items() if key not in flow}
        live.final_readers = kept | live.memo.readers()
        live.memo.inherit(self.old.uses)
        strict.memo.inherit(self.old.strict_uses)
        return live

    def _replay_rounds(self) -> dict[Slot, set[Any]]:
        """The rounds of argument flow, replayed (see the module docstring); the last parameters."""
        old, live = self.old, self.live
        params = live.params
        latest: dict[tuple[str, int], frozenset[tuple[Slot, Any]]] = {}
        # The sites whose latest bindings may be missing from the parameters: those asked in this
        # round before, and those evaluated again in an earlier round (their bindings then differ).
        unsettled: set[tuple[str, int]] = set()
        for number in range(MAX_ROUNDS):
            before = old.round_params[min(number, len(old.round_params) - 1)]
            values = old.round_readers[min(number, len(old.round_readers) - 1)]
            sources = self.facts_changed | self._param_sources(params, before, values)
            reached = old.uses.affected(sources)
            again = _questions(reached, "@site")
            self._check_reach(again)
            asked_before = old.rounds[number] if number < len(old.rounds) else {}
            latest.update(asked_before)
            unsettled |= asked_before.keys()
            bound: dict[tuple[str, int], frozenset[tuple[Slot, Any]]] = {}
            for key in sorted((again | self.own) & live.site_at.keys()):
                live.memo.begin(("@site", *key))
                bound[key] = live.flow_arguments(live.site_at[key])
                live.memo.end()
            for key in unsettled - self.own - again:
                pairs = latest[key]
                if key in asked_before:
                    bound[key] = pairs
                for slot, arg in pairs:
                    if arg not in params.get(slot, ()):
                        live.pending[slot].add(arg)
            unsettled &= again
            live.rounds.append(bound)
            kept = {key: value for key, value in values.items() if key not in reached}
            live.round_readers.append(kept | live.memo.readers())
            if not live.pending:
                break
            for slot, args in live.pending.items():
                params[slot] |= args
            live.round_params.append({slot: frozenset(args) for slot, args in params.items()})
            live.memo.invalidate(("@param", *slot) for slot in live.pending)
            live.pending.clear()
        return params

    def _param_sources(
        self, params: dict[Slot, set[Any]], before: dict[Slot, frozenset[Any]], values: dict[Any, Any]
    ) -> set[Any]:
        """What changed with the parameters whose arguments differ from the old ones (`before`): each
        key that reads one of them and has another value now than it had then (`values`).

        A parameter that took another argument of the same values changes nothing, and so does one
        that only gained arguments without values (a new function passing on its own parameter,
        which nothing calls yet): its readers are not evaluated again, which on a parameter in one
        of the tree's large cycles of argument flow would evaluate the whole cycle again.
        """
        out: set[Any] = set()
        none: frozenset[Any] = frozenset()
        for slot in _differing(params, before):
            now, then = params.get(slot, none), before.get(slot, none)
            # The rest ("*" and "**" collect the arguments themselves, not their values) changes nothing
            # only when no reader's value does.
            gained_nothing = then <= now and not any(self.live.eval(arg) for arg in ordered(now - then))
            if slot[1] not in ("*", "**") and gained_nothing:
                continue
            source = ("@param", *slot)
            for reader in self.old.uses.users_of(source):
                value = values.get(reader)
                if value is None:
                    out.add(source)
                elif self.live.memo.get(reader) != value:
                    out.add(reader)
        return out

    def _check_reach(self, sites: set[Any]) -> None:
        if len(sites) > MAX_AGAIN_SHARE * len(self.live.sites):
            raise TooFar

    def _reached(self, sources: set[Any]) -> tuple[set[Any], set[Any]]:
        """What used a source in the old resolution's flow records, and in those or its strict ones."""
        flow = self.old.uses.affected(sources)
        return flow, flow | self.old.strict_uses.affected(sources)

    def _resolve(self, reached: set[Any]) -> LinkResult:
        """The last phase: what used a changed source (`reached`, see `_reached`), and what the edited
        modules hold, resolved again."""
        old, live, changed = self.old.result, self.live, self.changed
        assert old is not None
        result = LinkResult()
        again = _questions(reached, "@final") | self.own
        self._check_reach(again)
        # The old answers, less those asked again; `again` holds the edited modules' items that are
        # new, differ or are gone (`_edited`), and only the items still there are resolved.
        result.targets, result.unresolved = dict(old.targets), dict(old.unresolved)
        live.resolved_sites = 0
        for key in sorted(again):
            result.targets.pop(key, None)
            result.unresolved.pop(key, None)
            if key in live.site_at:
                module, index = key
                live.resolve_site(module, index, result)
                live.resolved_sites += 1
        result.implicit = dict(old.implicit)
        edited_implicit = _edited(self.old.facts, live.facts, changed, "implicit")
        for key in sorted(_questions(reached, "@implicit") | edited_implicit):
            result.implicit.pop(key, None)
            module, index = key
            if index < len(live.facts.get(module, {}).get("implicit", ())):
                live.resolve_implicit(module, index, result)
        classes = _questions(reached, "@class") | {
            q for q, info in live.defs.items() if info["kind"] == "class" and info["module"] in changed
        }
        for qualname in sorted(q for q, info in live.defs.items() if info["kind"] == "class"):
            if qualname in classes or qualname not in old.mro:
                live.resolve_class(qualname, result)
            else:
                result.mro[qualname] = old.mro[qualname]
                result.bases[qualname] = old.bases[qualname]
                result.external_bases[qualname] = old.external_bases[qualname]
        modules = _questions(reached, "@state") | changed
        by_module: dict[str, list[tuple[str, str, str, str, int]]] = defaultdict(list)
        for access in old.state:
            by_module[access[3]].append(access)
        for module in sorted(live.facts):
            result.state += live.module_state(module) if module in modules else by_module[module]
        live.finish(result)
        return result


def _questions(reached: set[Any], tag: str) -> set[Any]:
    """The questions of one kind (`@final`, `@implicit`, ...) among what an edit reached, by what they
    ask about (a site or implicit call as (module, index), a class, a module)."""
    return {
        item[1] if len(item) == 2 else item[1:] for item in reached if type(item) is tuple and item[0] == tag
    }


def _edited(
    before_facts: dict[str, dict[str, Any]],
    after_facts: dict[str, dict[str, Any]],
    changed: set[str],
    kind: str,
) -> set[tuple[str, int]]:
    """The items of a kind (`calls`, `implicit`) of the edited modules that are new, gone, or differ
    (apart from where they are) from the item at the same place before."""
    out = set()
    for module in changed:
        before = before_facts.get(module, {}).get(kind, ())
        after = after_facts.get(module, {}).get(kind, ())
        for index in range(max(len(before), len(after))):
            if index >= min(len(before), len(after)) or _content(before[index]) != _content(after[index]):
                out.add((module, index))
    return out


def _content(item: dict[str, Any]) -> dict[str, Any]:
    """What a call site or implicit call says, apart from where it is."""
    return {k: v for k, v in item.items() if k != "span"}


def _differing(params: dict[Slot, Any], before: dict[Slot, Any]) -> set[Slot]:
    """The parameters whose arguments differ between two states of argument flow."""
    none: frozenset[Any] = frozenset()
    return {
        slot for slot in params.keys() | before.keys() if params.get(slot, none) != before.get(slot, none)
    }


def _changed_facts(
    old: ResolutionRecord,
    facts: dict[str, dict[str, Any]],
    tables: FactTables,
    hierarchy: ClassHierarchy,
    changed: set[str],
) -> set[Any]:
    """The facts (as the linkers record them: `("def", qualname)`, `("binding", scope, name)`, ...)
    that differ between the old resolution and the edited tree (its `facts`, their `tables` and its
    class `hierarchy`): the edited modules' own, and the class hierarchy and property names, which any
    module's edit can change."""
    before = old.tables
    out: set[Any] = set()
    for module in changed:
        for module_facts in (old.facts.get(module, {}), facts.get(module, {})):
            for scope in module_facts.get("scopes", {}):
                if before.scopes.get(scope) != tables.scopes.get(scope):
                    out.add(("scope", scope))
            for scope, names in module_facts.get("bindings", {}).items():
                then, now = before.bindings.get(scope, {}), tables.bindings.get(scope, {})
                out |= {("binding", scope, n) for n in names if then.get(n) != now.get(n)}
            for info in module_facts.get("defs", ()):
                name = info["qualname"]
                if before.defs.get(name) != tables.defs.get(name):
                    out.add(("def", name))
            for cls in module_facts.get("instance_attrs", {}):
                if before.instance_attrs.get(cls) != tables.instance_attrs.get(cls):
                    out.add(("instance_attrs", cls))
        if before.stars.get(module) != tables.stars.get(module):
            out.add(("stars", module))
        if before.exports.get(module) != tables.exports.get(module):
            out.add(("exports", module))
    # Every class of either tree is a key of its subclasses' table.
    for cls in old.hierarchy.subclasses_of.keys() | hierarchy.subclasses_of.keys():
        if old.hierarchy.mro_of.get(cls) != hierarchy.mro_of.get(cls):
            out.add(("mro", cls))
        if old.hierarchy.subclasses_of.get(cls, []) != hierarchy.subclasses_of.get(cls, []):
            out.add(("subclasses", cls))
    out |= {("property", name) for name in before.property_names ^ tables.property_names}
    out |= {("dunder", name) for name in before.dunder_names ^ tables.dunder_names}
    out |= {
        ("stores", n)
        for n in before.stores.keys() | tables.stores.keys()
        if before.stores.get(n) != tables.stores.get(n)
    }
    if before.metaclasses != tables.metaclasses:
        out.add(("metaclasses",))
    return out
