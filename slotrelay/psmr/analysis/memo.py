"""A memo for a recursive evaluation whose results do not depend on the order of the questions.

The resolver evaluates keys (refs, module attributes, calls in context) that call each other and
may form cycles. A cycle has to be cut somewhere (the key met again gives a stand-in value), and
which key is cut decides the values of the whole cycle. A plain memo cuts each cycle where the first
question happened to enter it, so what a call site resolves to depends on which sites were asked
before it, and an update that asks fewer questions could not equal a full rebuild.

`CanonicalMemo` finds the strongly connected components of the keys as it evaluates them (Tarjan's
algorithm, on the evaluation's own recursion) and keeps a component's values only when it was
entered at its canonical head, the least member in a fixed order. Entered elsewhere, the component
is evaluated again from its head. So every kept value is the one evaluating that key alone gives,
whatever was asked before; a component costs at most a few evaluations instead of one.

The memo also records who asked for what: which key (or question, see `begin`) used each key, and
each input (`read`). When inputs change, `invalidate` drops exactly the values that used them, and
says which questions to ask again; every value kept is still the one a fresh evaluation gives.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

V = TypeVar("V")
# Past this many keys computed one inside the other, a key gets its stand-in value, as on a cycle:
# a guard against pathological chains (a generated module of 10,000 chained assignments), where the
# value then depends on the order again. Real trees stay far below it (networkx: 222).
MAX_DEPTH = 2000
# How many tables of records taken over from other memos `Uses.affected` walks before they are merged.
MAX_INHERITED = 8
# The Python frames one level of evaluation may take (the resolver's recursion goes through a few
# functions per key), for the recursion limit a deep evaluation needs.
FRAMES_PER_LEVEL = 12


class CanonicalMemo(Generic[V]):
    """Values of keys, each computed once per canonical entry (see the module docstring).

    Parameters:
        compute: the value of a key; it asks `get` for the keys it needs.
        on_cycle: the stand-in value of a key asked again while it is being computed.
        head: the canonical head among a component's keys, the same in every process whatever
            order they come in.
    """

    def __init__(
        self,
        compute: Callable[[Any], V],
        on_cycle: Callable[[Any], V],
        head: Callable[[list[Any]], Any],
    ) -> None:
        self.compute = compute
        self.on_cycle = on_cycle
        self.head = head
        self.done: dict[Hashable, V] = {}
        # Tarjan's state: keys being computed or finished in a component still open, their stack
        # positions, the values of the finished ones, and the low link of each key being computed.
        self._stack: list[Hashable] = []
        self._index: dict[Hashable, int] = {}
        self._partial: dict[Hashable, V] = {}
        self._lows: list[int] = []
        # What is being computed, innermost last (a question at the bottom), and who used each key.
        self.frames: list[Hashable] = []
        self.users: defaultdict[Hashable, set[Hashable]] = defaultdict(set)
        # Who used what before a value was dropped (see `invalidate`): an evaluation of an earlier
        # round of the same computation read what it recorded then (see `Uses.affected`).
        self._past: defaultdict[Hashable, set[Hashable]] = defaultdict(set)
        # Whether `invalidate` keeps who used a dropped value (for `Uses.affected`).
        self.keep_past = False
        # The records of memos this one took over (see `inherit`), newest first.
        self._inherited: list[Mapping[Hashable, set[Hashable]]] = []
        # The inputs read (see `unread`).
        self._sources: set[Hashable] = set()
        # Whether a key got its stand-in value for depth (see MAX_DEPTH): values may then depend on
        # the order of the questions.
        self.deep = False

    def begin(self, question: Hashable) -> None:
        """Start a question: the keys it uses are recorded as used by it (see `invalidate`)."""
        self.frames.append(question)

    def end(self) -> None:
        """End the question `begin` started."""
        self.frames.pop()

    def read(self, source: Hashable) -> None:
        """Record that what is being computed read an input (a source that may change)."""
        if self.frames:
            self.users[source].add(self.frames[-1])
            self._sources.add(source)

    def readers(self) -> dict[Hashable, V]:
        """The values kept of the keys that read an input directly (not through another key)."""
        done = self.done
        return {
            key: done[key] for source in self._sources for key in self.users.get(source, ()) if key in done
        }

    def use(self, item: Hashable) -> None:
        """Record that what is being computed used something the memo does not compute: a fact,
        fixed while the computation runs (not an input for `invalidate` or `unread`) but found by
        `Uses.affected` when it changes between two, or a cache entry computed as a question (`begin`)."""
        if self.frames:
            self.users[item].add(self.frames[-1])

    def unread(self) -> dict[Hashable, V]:
        """The values kept that read no input, directly or through other keys: the same whatever the
        inputs are, as another memo of the same computation with other inputs computes them."""
        unread = dict(self.done)
        for key in self._used_by(self._sources):
            unread.pop(key, None)
        return unread

    def keep(self, values: dict[Hashable, V], *, but: Iterable[Hashable] = ()) -> None:
        """Take values as computed (`unread` values of another memo of the same computation), except
        those of the keys `but` names, which are left without a value."""
        self.done.update(values)
        for key in but:
            self.done.pop(key, None)

    def invalidate(self, sources: Iterable[Hashable]) -> set[Hashable]:
        """Drop every value that used one of these inputs, directly or through other keys.

        Returns:
            The questions (see `begin`) that used one of them.
        """
        seen = self._used_by(sources)
        for item in seen:
            self.done.pop(item, None)
            users = self.users.pop(item, None)
            if users and self.keep_past:
                self._past[item] |= users
        return seen

    def uses(self) -> Uses:
        """Who used what at any time: this memo's records, those of values dropped since, and those
        it inherited. The tables are shared, not copied."""
        return Uses((self.users, self._past, *self._inherited))

    def inherit(self, other: Uses) -> None:
        """Take another memo's records of who used what (all of them, as past ones): the records of
        a computation this one repeats in part (see `slotrelay.psmr.analysis.relink`).

        The other memo's tables are shared, not copied. Past a few generations the small ones (each
        replay's own records) are merged into one, so that `Uses.affected` keeps to a few tables; the
        large ones (a full computation's) are left as they are, since copying them would cost a
        replay more than the replay itself.
        """
        tables = list(other.tables)
        if len(tables) > MAX_INHERITED:
            largest = max(map(len, tables))
            small = [table for table in tables if len(table) * 10 < largest]
            if len(small) < 2:
                small = tables
            merged: defaultdict[Hashable, set[Hashable]] = defaultdict(set)
            for table in small:
                for item, users in table.items():
                    merged[item] |= users
            tables = [merged, *(table for table in tables if all(table is not s for s in small))]
        self._inherited = tables

    def _used_by(self, sources: Iterable[Hashable]) -> set[Hashable]:
        """The sources and everything that used one of them (as recorded now), directly or through
        other keys."""
        return _reach(sources, (self.users,))

    def get(self, key: Hashable) -> V:
        """The value of key (computed, or kept from before)."""
        if self.frames:
            self.users[key].add(self.frames[-1])
        value = self.done.get(key)
        if value is not None:
            return value
        index = self._index.get(key)
        if index is not None:
            # On the stack: part of the component being computed.
            self._lows[-1] = min(self._lows[-1], index)
            return self._partial[key] if key in self._partial else self.on_cycle(key)
        if len(self._lows) >= MAX_DEPTH:
            self.deep = True
            return self.on_cycle(key)
        return self._solve(key)

    def _solve(self, key: Hashable) -> V:
        """Compute key (Tarjan's visit); keep its component's values when key is its canonical head."""
        stack = self._stack
        lows = self._lows
        frames = self.frames
        position = len(stack)
        stack.append(key)
        self._index[key] = position
        lows.append(position)
        frames.append(key)
        try:
            value = self.compute(key)
        except BaseException:
            frames.pop()
            for member in stack[position:]:
                self._index.pop(member, None)
                self._partial.pop(member, None)
            del stack[position:]
            lows.pop()
            raise
        frames.pop()
        low = lows.pop()
        if lows and low < lows[-1]:
            lows[-1] = low
        if low < position:
            # Not the root of its component: the root decides what is kept.
            self._partial[key] = value
            return value
        if len(stack) == position + 1:
            # A component of one key: nothing was cut for it, its value is kept.
            stack.pop()
            del self._index[key]
            self.done[key] = value
            return value
        members = stack[position:]
        del stack[position:]
        component = {member: self._partial.pop(member) for member in members[1:]}
        component[key] = value
        for member in members:
            del self._index[member]
        head = self.head(list(component))
        if head == key:
            self.done.update(component)
            return value
        # Entered away from its head: evaluate it from there. When the head's evaluation meets a key
        # being computed below, the component is still open and both stay on the stack.
        self.get(head)
        return self.get(key)


class Uses:
    """Who used what in a computation (see `CanonicalMemo.uses`): tables of item -> its users.

    Parameters:
        tables: the tables, as a memo holds them (its own, its past ones, those it inherited), or as
            the store reads them back (`slotrelay.psmr.workspace.replay`: a mapping that makes each
            item's set of users when asked).
    """

    def __init__(self, tables: tuple[Mapping[Hashable, set[Hashable]], ...]) -> None:
        self.tables = tables

    def affected(self, sources: Iterable[Hashable]) -> set[Hashable]:
        """The sources and everything that used one of them, directly or through other keys."""
        return _reach(sources, self.tables)

    def users_of(self, item: Hashable) -> set[Hashable]:
        """Who used an item directly (as `affected` counts them)."""
        out: set[Hashable] = set()
        for table in self.tables:
            out |= table.get(item, set())
        return out


def _reach(sources: Iterable[Hashable], tables: Iterable[Mapping[Hashable, set[Hashable]]]) -> set[Hashable]:
    """The sources and everything that used one of them in the tables, directly or through others."""
    tables = tuple(tables)
    seen: set[Hashable] = set()
    stack = list(sources)
    while stack:
        item = stack.pop()
        if item not in seen:
            seen.add(item)
            for table in tables:
                stack += table.get(item, ())
    return seen
