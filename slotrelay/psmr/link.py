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
    ("prop", q)    a property whose getter (and setter) is method q
    ("extinst", d) an instance of the external class d (a call of a capitalised external name)
    ("extm", d)    an attribute of an external class reached through an instance or an external base
    ("returns", r) a callable an annotation declares, whose call returns what ref r declares

Evaluation is memoised and flow-insensitive, except that a name in straight-line code denotes only
the bindings that reach it; arguments flow into parameters at call sites, which is iterated to a
fixpoint. Neither depends on the order of the questions: the memo cuts each cycle at its canonical
head (`memo.CanonicalMemo`), and each round of argument flow reads the parameters of the rounds
before it only (the next round asks again only the sites whose callee used a parameter that grew).
A decorator, and a function that returns (part of) its argument, is evaluated in each call's own
context (`apply`): its parameters denote that call's arguments only. A call site whose callee denotes
nothing is an unknown with a reason, never a guessed edge.

Certainty: an edge is labelled by how its callee was found (lexical, import, self_mro, constructor,
implicit), but only if it is also found with argument flow switched off (a second, strict linker);
an edge that needs a value to flow in through a parameter, an override in a subclass, or a guess
about an external class is `heuristic`. A target whose signature cannot take the call's arguments
is dropped: that call would raise TypeError, so it is not where the value flows.
"""

from __future__ import annotations

import builtins
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from slotrelay.psmr.buildbudget import REASON as BUDGET_REASON
from slotrelay.psmr.buildbudget import BudgetExceeded, BuildBudget
from slotrelay.psmr.memo import FRAMES_PER_LEVEL, MAX_DEPTH, CanonicalMemo
from slotrelay.psmr.typerefs import BUILTIN_DUNDERS, OPERATOR_FUNCTIONS

Value = tuple[str, Any]
BUILTIN_NAMES = frozenset(dir(builtins))
MAX_ROUNDS = 6
# A ref denoting more than this many values is too imprecise to draw edges from: it becomes
# the sentinel ("many", n), which every operation ignores and which makes the call site an unknown.
MAX_VALUES = 16
# A test parameter `@pytest.mark.parametrize` gives its values: each of them runs (pytest runs every
# row), so a long list of them is no imprecision; a name bound to them may denote this many.
MAX_ROWS = 64
# Past this many values a function's body returns, its return annotation answers instead.
MAX_PRECISE_RETURNS = 4
# How many calls deep a call is followed in its own context (see `Linker.apply`).
MAX_CONTEXT_DEPTH = 4
# How many parameters and attributes deep the functions of a callee with too many values are looked
# for (see `Linker.enumerated`): a command's callback is a decorator's parameter, passed on by another's.
MAX_ENUMERATION_DEPTH = 8
# How many containers frozen in a call context (`Linker._eval_in`) a value may hold one inside the
# other. A recursive function that returns a container of its arguments and merges into their
# elements (marshmallow's `merge_errors`: `return [errors1, errors2]`, `merge_errors(errors1[key],
# val)`) nests one more at each call level `apply` follows, each level holding every combination of
# the level below: a key of marshmallow's, written out, took 300 MB, and its build did not end.
MAX_FROZEN_NESTING = 2
# Which arguments a builtin, or a function of the standard library, calls: positional indexes, and
# keyword names (`max(xs, key=f)` calls f only; `dataclasses.asdict(x, dict_factory=f)` calls f).
CALLED_ARGUMENTS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "map": ((0,), ()),
    "filter": ((0,), ()),
    "sorted": ((), ("key",)),
    "min": ((), ("key",)),
    "max": ((), ("key",)),
    "dataclasses.asdict": ((), ("dict_factory",)),
    "dataclasses.astuple": ((), ("tuple_factory",)),
    "functools.reduce": ((0,), ()),
    "itertools.filterfalse": ((0,), ()),
    "itertools.takewhile": ((0,), ()),
    "itertools.dropwhile": ((0,), ()),
    "itertools.starmap": ((0,), ()),
}
# What the standard library's classes call on the object they wrap when they are made: a text stream
# asks its buffer whether it can read, write and seek, and where it is (CPython's `TextIOWrapper`).
WRAPPED_BUFFER_CALLS: dict[str, tuple[str, ...]] = {
    "io.TextIOWrapper": ("readable", "writable", "seekable", "tell"),
}
# The standard library's copying and pickling: what each returns of its argument (see `serialized`).
SERIALIZERS = frozenset({"copy.copy", "copy.deepcopy", "pickle.dumps", "pickle.loads"})
# Calls whose result is, for the calls it makes, their first argument: calling a partial calls the
# function it wraps; `update_wrapper` returns the wrapper it gave the wrapped one's metadata.
FIRST_ARGUMENT_STANDS = frozenset({("ext", "functools.partial"), ("ext", "functools.update_wrapper")})
# The descriptor method an attribute read or write runs.
DESCRIPTOR_DUNDERS = {"get": "__get__", "set": "__set__"}
# Builtins that iterate their first argument (see `Linker.iterated_arguments`).
ITERATING_BUILTINS = frozenset(
    {"list", "tuple", "set", "frozenset", "dict", "sorted", "sum", "any", "all", "min", "max", "enumerate"}
)
# Comparisons and hashing: a container (a tuple) runs its elements' own.
ORDERING_DUNDERS = ("__lt__", "__le__", "__gt__", "__ge__")
# What `functools.total_ordering` derives by negating the comparison defined alone.
OPPOSITE_ORDERING = {"__lt__": "__ge__", "__le__": "__gt__", "__gt__": "__le__", "__ge__": "__lt__"}
ELEMENTWISE_DUNDERS = frozenset({"__eq__", "__ne__", "__hash__", *ORDERING_DUNDERS})
# The comparison a builtin asks of the values it orders, then the reflected one.
ORDERED_BY = {"max": ("__gt__", "__lt__"), "min": ("__lt__", "__gt__"), "sorted": ("__lt__", "__gt__")}
# Methods of a container literal whose result holds its elements (or is it).
COLLECTION_METHODS = frozenset({"get", "pop", "setdefault", "values", "items", "copy"})
# Builtins whose result holds the elements of their first argument.
ELEMENT_BUILTINS = frozenset({"list", "tuple", "set", "frozenset", "sorted", "reversed", "filter", "iter"})
BUILTIN_EXCEPTIONS = frozenset(
    n
    for n in BUILTIN_NAMES
    if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException)
)
# Implicit calls: the protocol methods a statement calls on its subject (the second on the first's result).
PROTOCOLS = {
    "iter": ("__iter__", "__next__"),
    "aiter": ("__aiter__", "__anext__"),
    "with": ("__enter__", "__exit__"),
    "awith": ("__aenter__", "__aexit__"),
}
# Receivers whose value the code binds (an attribute, a call's or operator's result, an element).
ATTRIBUTE_KINDS = frozenset(
    {"attr", "call", "op", "typed", "cast", "annot", "sub", "iter", "rows", "narrow", "without", "unlike"}
)
# What a parameter's binding adds besides the arguments: what its annotation or pytest states.
STATED_KINDS = frozenset({"annot", "typed", "fixture"})
# External bases that add no methods a subclass would call (typing and abc machinery).
MARKER_BASES = ("typing.", "typing_extensions.", "abc.ABC", "abc.ABCMeta")
# The standard library's enumeration bases: the names their subclasses' bodies bind are members.
ENUM_BASES = frozenset(
    {"enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag", "enum.ReprEnum"}
)
RESOLVED_STATUS = {
    "lexical": "confirmed",
    "import": "confirmed",
    "self_mro": "confirmed",
    "constructor": "confirmed",
    "implicit": "confirmed",
    "annotation": "confirmed",
    "attribute": "confirmed",
    "fixture": "confirmed",
    "heuristic": "heuristic",
    "inference": "inferred",
}


@dataclass
class CallTarget:
    """One resolved callee of a call site."""

    target: str
    kind: str
    resolution: str


@dataclass(frozen=True)
class ClassHierarchy:
    """The MRO and the subclasses (every class of the tree with it in its MRO) of each class of a tree."""

    mro_of: dict[str, list[str]]
    subclasses_of: dict[str, list[str]]


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


class Consulted(dict[Any, Any]):
    """One table of the tree's facts (scopes, definitions, ...) that records each lookup as used by
    what the memo is evaluating (as `CanonicalMemo.use` does, inlined: lookups are the resolver's
    most frequent step), so an edit finds every evaluation that consulted what it changed (see
    `slotrelay.psmr.relink`)."""

    def __init__(self, tag: str, memo: CanonicalMemo[Any], items: dict[Any, Any]) -> None:
        super().__init__(items)
        self.tag = tag
        self.frames = memo.frames
        self.users = memo.users

    def __getitem__(self, key: Any) -> Any:
        if self.frames:
            self.users[(self.tag, key)].add(self.frames[-1])
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        if self.frames:
            self.users[(self.tag, key)].add(self.frames[-1])
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        if self.frames:
            self.users[(self.tag, key)].add(self.frames[-1])
        return dict.__contains__(self, key)


class ConsultedNames(Consulted):
    """The names bound in one scope: a lookup is recorded as `("binding", scope, name)`."""

    def __init__(self, scope: str, memo: CanonicalMemo[Any], items: dict[str, Any]) -> None:
        super().__init__("binding", memo, items)
        self.scope = scope

    def __getitem__(self, name: Any) -> Any:
        if self.frames:
            self.users[("binding", self.scope, name)].add(self.frames[-1])
        return dict.__getitem__(self, name)

    def get(self, name: Any, default: Any = None) -> Any:
        if self.frames:
            self.users[("binding", self.scope, name)].add(self.frames[-1])
        return dict.get(self, name, default)

    def __contains__(self, name: object) -> bool:
        if self.frames:
            self.users[("binding", self.scope, name)].add(self.frames[-1])
        return dict.__contains__(self, name)


class _Tables:
    """The facts of every module of a tree as tables by name, for a linker (and its strict twin) to read."""

    def __init__(self, facts: dict[str, dict[str, Any]]) -> None:
        self.scopes: dict[str, dict[str, Any]] = {}
        self.bindings: dict[str, dict[str, list[Any]]] = {}
        self.defs: dict[str, dict[str, Any]] = {}
        self.instance_attrs: dict[str, dict[str, tuple[Any, ...]]] = defaultdict(dict)
        self.stars: dict[str, list[str]] = {}
        self.exports: dict[str, list[str] | None] = {}
        # The fast pass hands over frozen refs (tuples), so they are used as they are.
        for module, f in facts.items():
            self.scopes.update(f["scopes"])
            self.bindings.update(f["bindings"])
            for d in f["defs"]:
                self.defs[d["qualname"]] = {**d, "module": module, "bases": d.get("bases", ())}
            for cls, attrs in f["instance_attrs"].items():
                for name, refs in attrs.items():
                    self.instance_attrs[cls][name] = self.instance_attrs[cls].get(name, ()) + refs
            self.stars.update(f["stars"])
            self.exports[module] = f["exports"]
        # `name.attr = value` anywhere in the tree, by attr (see `Linker.patched`).
        self.stores: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        for _, f in sorted(facts.items()):
            for base, attr, value in f.get("stores", ()):
                self.stores[attr].append((base, value))
        self.sites = [(m, i, s) for m, f in sorted(facts.items()) for i, s in enumerate(f["calls"])]
        self.site_at = {(m, i): s for m, i, s in self.sites}
        self.property_names = {
            name
            for names in self.bindings.values()
            for name, refs in names.items()
            if any(r[0] == "prop" for r in refs)
        }
        # The dunders some class of the tree defines (and a module's `__getattr__`), and whether one
        # declares a metaclass: an operator or a constructor looks further only then.
        self.dunder_names = {
            q.rsplit(".", 1)[1]
            for q, d in self.defs.items()
            if (d["kind"] == "method" and q.endswith("__") and q.rsplit(".", 1)[1].startswith("__"))
            or (d["kind"] == "function" and q.endswith(".__getattr__") and q.rsplit(".", 1)[0] in facts)
        }
        self.metaclasses = any("metaclass" in d for d in self.defs.values())


class Linker:
    """Resolve the facts of every module of one tree (module name -> facts).

    A strict linker lets no argument flow into parameters (only defaults): what it resolves is what
    the code says without a guess about the caller. A recording linker keeps what each evaluation
    consulted and what each round bound, so that an edit can be resolved by replaying it
    (`slotrelay.psmr.relink`).
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
        self.tables: _Tables = like.tables if like is not None else _Tables(self.facts)
        self.scopes = self.tables.scopes
        self.bindings = self.tables.bindings
        self.defs = self.tables.defs
        self.instance_attrs = self.tables.instance_attrs
        self.stars = self.tables.stars
        self.exports = self.tables.exports
        self.sites = self.tables.sites
        self.site_at = self.tables.site_at
        self.property_names = self.tables.property_names
        self.dunder_names = self.tables.dunder_names
        self.metaclasses = self.tables.metaclasses
        self.params: dict[tuple[str, Any], set[Any]] = defaultdict(set)
        # What this round of argument flow binds (see `settle`): read by the next round only.
        self.pending: dict[tuple[str, Any], set[Any]] = defaultdict(set)
        self.memo: CanonicalMemo[frozenset[Value]] = CanonicalMemo(
            self._compute, self._on_cycle, CycleHeads(self.budget.look)
        )
        self.memo.keep_past = record
        if record:
            # Each lookup in the facts is recorded as used by what is being evaluated (`Consulted`).
            self.scopes = Consulted("scope", self.memo, self.scopes)
            self.defs = Consulted("def", self.memo, self.defs)
            self.stars = Consulted("stars", self.memo, self.stars)
            self.exports = Consulted("exports", self.memo, self.exports)
            self.instance_attrs = Consulted("instance_attrs", self.memo, self.instance_attrs)
            # Every scope has its names' table, empty or not, so a lookup in a scope that binds
            # nothing yet is recorded too.
            self.bindings = {
                scope: ConsultedNames(scope, self.memo, self.bindings.get(scope, {}))
                for scope in {*self.scopes, *self.bindings}
            }
        # What each round of argument flow bound, per call site it asked, and the parameters before
        # each round (the first: none), for replaying the rounds after an edit (`relink`).
        self.rounds: list[dict[tuple[str, int], frozenset[tuple[tuple[str, Any], Any]]]] = []
        self.round_params: list[dict[tuple[str, Any], frozenset[Any]]] = [{}]
        # The values of the keys that read a parameter, as each round left them and as the last
        # phase did, for telling whether a parameter that took other arguments has other values.
        self.round_readers: list[dict[Any, frozenset[Value]]] = []
        self.final_readers: dict[Any, frozenset[Value]] = {}
        # The classes each call site constructs (see `_constructed`).
        self.constructed_by: dict[tuple[str, int], frozenset[str]] = {}
        # The linker that labels this one's edges certain (see `_run`); itself, for a strict one.
        self.strict_linker = self
        # The answer of `run` (or `relink`), and how many call sites it resolved (not kept from before).
        self.result: LinkResult | None = None
        self.resolved_sites = 0
        self._mro: dict[str, list[str]] = {}
        self._children: dict[str, list[str]] = defaultdict(list)
        # The classes the tree instantiates: see `settle`.
        self.constructed: set[str] = set()
        self._mentions: dict[Any, bool] = {}
        self._enumerated: dict[Any, frozenset[Value]] = {}
        self._binding_refs: dict[Any, tuple[Any, ...]] = {}
        self._binding_kinds: dict[Any, frozenset[str]] = {}
        self._state_targets: dict[Any, str | None] = {}
        self._abstract: dict[Any, bool] = {}
        # The values settled without reading a parameter (see `settle`), for the strict linker.
        self.param_free: dict[Any, frozenset[Value]] = {}

    # evaluation

    def eval(self, ref: Any) -> frozenset[Value]:
        """The values a frozen ref may denote (empty when unknown)."""
        if ref is None:
            return frozenset()
        return self.memo.get(ref)

    def _compute(self, key: Any) -> frozenset[Value]:
        self.budget.step()
        tag = key[0]
        if tag[0] != "@":
            result = frozenset(self._eval(key))
            if len(result) > MAX_VALUES and not (len(result) <= MAX_ROWS and self.parametrized(key)):
                return frozenset({("many", len(result))})
            return result
        if tag == "@modattr":
            return frozenset(self._module_attr(key[1], key[2]))
        if tag == "@apply":
            return self._apply(key)
        if tag == "@in":
            return frozenset(self._eval_in(key[1], _context_env(key[2]), key[3]))
        # "@name_in"
        return frozenset(self._name_in(key[1], _context_env(key[2]), key[3]))

    def _on_cycle(self, key: Any) -> frozenset[Value]:
        tag = key[0]
        if tag == "@apply":
            return frozenset(self.call_result(("def", key[1][0])))
        if tag == "@name_in":
            # A local bound in terms of itself (`x = x.parent`): its context-free values.
            return self.eval(key[1])
        return frozenset()

    def _eval(self, ref: Any) -> set[Value]:
        kind = ref[0]
        if kind == "name":
            return self.lookup(ref[1], ref[2], ref[3] if len(ref) > 3 else None)
        if kind == "attr":
            out: set[Value] = set()
            for value in ordered(self.eval(ref[1])):
                out |= self.attribute(value, ref[2])
            return out
        if kind == "attrs":
            out = set()
            completions = self.completions(ref[3])
            for value in ordered(self.eval(ref[1])):
                if completions is None and not ref[2]:
                    # `getattr(x, name)` with a name from outside could be any attribute: none is guessed.
                    names = []
                elif completions is None:
                    names = self.prefixed_names(value, ref[2])
                else:
                    names = [f"{ref[2]}{c}" for c in completions]
                for name in names:
                    out |= self.attribute(value, name)
            return out
        if kind == "call":
            out = set()
            for value in ordered(self.eval(ref[1])):
                if value[0] == "builtin":
                    out |= self.builtin_result(value[1], ref[2])
                elif value in FIRST_ARGUMENT_STANDS and ref[2]:
                    out |= self.eval(ref[2][0])
                elif value[0] == "ext" and value[1] in SERIALIZERS and ref[2]:
                    out |= self.serialized(value[1], ref[2][0])
                elif value[0] == "collm":
                    out |= self.collection_result(value[1], ref[2])
                elif value[0] == "returns":
                    out |= self.eval(value[1])
                elif value[0] == "def" and self.scopes.get(value[1], {}).get("overloads"):
                    out |= self.overload_result(value[1], ref[2], ref[3])
                elif value[0] == "def" and ref[1][0] == "attr" and self.returns_receiver(value[1]):
                    out |= self.result_on(value[1], self.eval(ref[1][1]))
                elif value[0] == "def" and self.returns_argument(value[1]):
                    # A function that returns (part of) its argument returns this call's argument.
                    args = [frozenset(self.eval(a)) for a in ref[2]]
                    kwargs = {k: frozenset(self.eval(v)) for k, v in ref[3]}
                    out |= self.apply(value[1], args, kwargs, 0, self.maybe_none(ref))
                else:
                    out |= self.call_result(value)
            if ref[1][0] == "attr" and ref[1][2] in ("__enter__", "__aenter__"):
                # Entering what `contextlib.contextmanager` made of a generator: what it yields.
                for value in ordered(self.eval(ref[1][1])):
                    out |= self.elements(value) if value[0] == "gen" else set()
            if ref[1][0] == "attr" and ref[1][2] == "__new__" and ref[2]:
                # `C.__new__(cls)` (object's, or `super().__new__(cls)`) makes an instance of cls.
                out |= {("inst", v[1]) for v in self.eval(ref[2][0]) if self.is_class(v)}
            return self.declared_call(self.eval(ref[1]), out)
        if kind in ("sub", "iter", "rows"):
            key = ref[2] if kind == "sub" and len(ref) > 2 else None
            out = set()
            for value in ordered(self.eval(ref[1])):
                if kind == "sub" and self.is_class(value):
                    out |= self.class_subscript(value[1])
                else:
                    out |= self.elements(value, key)
            return out
        if kind == "coll":
            return {("coll", ref)}
        if kind == "narrow":
            return self.narrow(self.eval(ref[1]), ref[2])
        if kind == "without":
            return self.without(self.eval(ref[1]), ref[2])
        if kind == "unlike":
            return self.unlike(self.eval(ref[1]), ref[2])
        if kind == "typed":
            return set(self.eval(ref[1]))
        if kind == "cast":
            stated = {v for v in self.eval(ref[1]) if v[0] in ("inst", "def")}
            return stated or set(self.eval(ref[2]))
        if kind == "op":
            return self.operator_result(ref[1])
        if kind == "narrowcls":
            return self.narrow_classes(self.eval(ref[1]), ref[2])
        if kind == "fixture":
            return self.fixture_value(ref[1], ref[2])
        if kind == "prop":
            return {("prop", ref[1])}
        if kind == "vals":
            return set(ref[1])
        if kind == "guard":
            return set(self.eval(ref[3]))
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
            if not self.strict:
                flowed: set[Value] = set()
                self.memo.read(("@param", ref[1], ref[2]))
                self.memo.read(("@param", ref[1], ref[3]))
                for arg in ordered(
                    self.params.get((ref[1], ref[2]), set()) | self.params.get((ref[1], ref[3]), set())
                ):
                    flowed |= self.eval(arg)
                # Only what the annotation admits can arrive (in code whose annotations hold).
                out |= self.admit(flowed, ref[5] if len(ref) > 5 else None)
            if ref[4] is not None:
                out |= self.eval(ref[4])
            return out
        if kind == "annot":
            out = set()
            for v in ordered(self.eval(ref[1])):
                if v[0] == "def" and self.defs.get(v[1], {}).get("kind") == "class":
                    out.add(("inst", v[1]))
                elif v[0] == "alias":
                    out |= self.eval(v[1])
            return out
        if kind == "alias":
            return {("alias", ref[1])}
        if kind == "returns":
            return {("returns", ref[1])}
        if kind == "kw":
            # A keyword a function's `**` parameter took, where it passes it on (`f(**kwargs)`).
            self.memo.read(("@param", ref[1], ref[2]))
            out = set()
            for arg in () if self.strict else ordered(self.params.get((ref[1], ref[2]), ())):
                out |= self.eval(arg)
            return out
        if kind == "varargs":
            self.memo.read(("@param", ref[1], "*"))
            extra = () if self.strict else tuple(ordered(self.params.get((ref[1], "*"), ())))
            return {("coll", ("coll", extra, (None,) * len(extra)))}
        if kind == "self":
            return {("inst", ref[1])}
        if kind == "cls":
            return {("def", ref[1])}
        if kind == "super":
            return {("super", ref[1])}
        return set()

    def parametrized(self, ref: Any) -> bool:
        """Whether a ref is a test parameter's `parametrize` values, or a name bound to them."""
        if ref[0] == "rows":
            return True
        return ref[0] == "name" and "rows" in self.binding_kinds(ref)

    def completions(self, rest: Any) -> list[str] | None:
        """The strings that complete an attribute name (`getattr(x, prefix + rest)`): rest's constant,
        or the constants the tree passes to the parameter rest is (none where it passes none: the
        names come from outside); None when rest may be anything else, so any name with the prefix."""
        if rest[0] == "const":
            return [str(rest[1])]
        if rest[0] == "name" and "rows" in self.binding_kinds(rest):
            # A test parameter: the strings `parametrize` lists for it, if it lists only constants (the
            # list of its rows then holds no ref).
            rows = [r[1] for r in self.binding_refs(rest) if r[0] == "rows"]
            constant = all(r[0] == "const" or (r[0] == "coll" and not r[1]) for r in rows)
            if self.binding_kinds(rest) <= {"param", "rows", "fixture"} and constant:
                return sorted({str(r[1]) for r in rows if r[0] == "const"})
            return None
        if rest[0] != "name" or self.binding_kinds(rest) != {"param"}:
            return None
        if self.strict:
            return []
        out: list[str] = []
        for param in self.binding_refs(rest):
            self.memo.read(("@param", param[1], param[2]))
            self.memo.read(("@param", param[1], param[3]))
            passed = self.params.get((param[1], param[2]), set())
            passed |= self.params.get((param[1], param[3]), set())
            if any(arg[0] != "const" for arg in passed):
                return None
            out += [str(arg[1]) for arg in passed]
        return sorted(set(out))

    def prefixed_names(self, value: Value, prefix: str) -> list[str]:
        """The names with this prefix that a class (along its MRO) or a module of the tree binds."""
        if value[0] == "mod":
            scopes = [value[1]]
        elif value[0] in ("inst", "def") and self.defs.get(value[1], {}).get("kind") == "class":
            scopes = self.mro(value[1])
        else:
            return []
        return sorted({n for scope in scopes for n in self.bindings.get(scope, {}) if n.startswith(prefix)})

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
                out |= self.admit({("inst", sub) for sub in self.subclasses(value[1])}, class_refs)
        return out | {("inst", c) for c in classes[0]}

    def without(self, values: frozenset[Value], sentinel_refs: Any) -> set[Value]:
        """The values that pass `value is not sentinel`: a sentinel that denotes one instance, and
        nothing else, is that one object (`missing = _Missing()`), so its class's instance is left out."""
        out = set(values)
        for ref in sentinel_refs:
            sentinel = self.eval(ref)
            if len(sentinel) == 1 and next(iter(sentinel))[0] == "inst":
                out -= sentinel
        return out

    def unlike(self, values: frozenset[Value], class_refs: Any) -> set[Value]:
        """The values that fail `isinstance(value, classes)`: less the instances of the tree's classes
        named and of their subclasses."""
        classes = self.checkable_classes(class_refs)
        if classes is None:
            return set(values)
        return {v for v in values if not (v[0] == "inst" and classes[0] & set(self.mro(v[1])))}

    def admit(self, values: set[Value] | frozenset[Value], class_refs: Any) -> set[Value]:
        """The values that can be instances of the classes (all of them when the classes are unknown)."""
        classes = None if class_refs is None else self.checkable_classes(class_refs)
        if classes is None:
            return set(values)
        tree, foreign = classes
        out = set()
        for value in values:
            if value[0] == "inst":
                if tree & set(self.mro(value[1])) or (foreign and self.external_bases(value[1])):
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
            values = self.eval(ref)
            if not values:
                return None
            for kind, subject in values:
                if kind == "def" and self.defs.get(subject, {}).get("kind") == "class":
                    if any(b.endswith(".Protocol") for b in self.external_bases(subject)):
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

    def with_declared(self, func: str, out: set[Value]) -> set[Value]:
        """What a call of func returns: what its body returns (`out`) and what its return annotation
        declares; past a few subclasses of the declared type in what the body returns, the body's
        answer is a guess of its own, and the declared type answers."""
        annotated = self.scopes.get(func, {}).get("annotated")
        if annotated is None:
            return out
        if len(out) > MAX_PRECISE_RETURNS or any(v[0] == "many" for v in out):
            stated = self.eval(annotated)
            bases = {v[1] for v in stated if v[0] == "inst"}
            if bases and all(v[0] == "many" or (v[0] == "inst" and bases & set(self.mro(v[1]))) for v in out):
                return set(stated)
        declared = self.declared(annotated, out)
        # A base the body returns (`-> Array` over `return value(raw)`, declared `-> Item`): the
        # annotation's subclass is the more precise.
        narrower = {v[1] for v in declared if v[0] == "inst"}
        out = {v for v in out if not (v[0] == "inst" and any(v[1] in self.mro(n)[1:] for n in narrower))}
        return out | declared

    def declared(self, annotated: Any, found: set[Value] | frozenset[Value] = frozenset()) -> set[Value]:
        """The values a return annotation declares, less the classes `found` already covers with a
        subclass (a body returning `Sub()` under `-> Base` returns a Sub)."""
        if annotated is None:
            return set()
        stated = self.eval(annotated)
        known = {v[1] for v in found if v[0] == "inst"}
        return {
            v
            for v in stated
            if not (v[0] == "inst" and any(v[1] in self.mro(k) for k in known))
        }

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
            for method in self.operator_methods(self.eval(receiver), names):
                out |= self.call_result(("def", method))
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
                elements = frozenset(self.elements(value))
                out += self.operator_methods(elements, names, depth + 1)
                if names[0] in ORDERING_DUNDERS:
                    # Elements are compared for equality first, to find the first that differ.
                    out += self.operator_methods(elements, ("__eq__",), depth + 1)
            elif value[0] == "def" and names[0] == "__getitem__" and self.is_class(value):
                method = self.find_method(value[1], "__class_getitem__")
                out += [method] if method else []
        return list(dict.fromkeys(out))

    def instance_operator(self, cls: str, names: Any) -> list[str]:
        """The first of the dunders named that cls defines, or, for a comparison `functools.total_ordering`
        derives, the comparison it derives it from and `__eq__`."""
        for name in names:
            method = self.find_method(cls, name)
            if method:
                return [method]
            if name in ORDERING_DUNDERS and self.total_ordering(cls):
                root = next(filter(None, (self.find_method(cls, n) for n in ORDERING_DUNDERS)), None)
                if root:
                    # The negation of the one defined (`__ge__` from `__lt__`) asks no equality.
                    opposite = OPPOSITE_ORDERING[root.rsplit(".", 1)[1]] == name
                    equal = None if opposite else self.find_method(cls, "__eq__")
                    return [m for m in (root, equal) if m]
        return []

    def total_ordering(self, cls: str) -> bool:
        """Whether a class of the tree (or one of its bases) is decorated `functools.total_ordering`."""
        return any(
            d.rsplit(".", 1)[-1] == "total_ordering"
            for klass in self.mro(cls)
            for d in self.defs.get(klass, {}).get("decorators", ())
        )

    def class_subscript(self, cls: str) -> set[Value]:
        """What `Cls[...]` denotes: an enum's member (an instance), else the class (a generic alias,
        called or read like the class)."""
        if any(b.startswith("enum.") for b in self.external_bases(cls)):
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

    def is_class(self, value: Value) -> bool:
        """Whether a value is a class of the tree."""
        return value[0] == "def" and self.defs.get(value[1], {}).get("kind") == "class"

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
            if (self.is_class(v) and tree & set(self.mro(v[1]))) or (foreign and v[0] != "def")
        }
        return out or {("def", c) for c in tree}

    def fixture_value(self, module: str, name: str) -> set[Value]:
        """What the pytest fixture `name` gives a test (or fixture) of module: the nearest fixture of
        that name (the module's own, then each conftest.py from the module's package up), called
        (for a generator fixture, what it yields)."""
        parts = module.split(".")
        conftests = [".".join([*parts[:cut], "conftest"]) for cut in range(len(parts) - 1, -1, -1)]
        for place in [module, *conftests]:
            if place not in self.modules:
                continue
            fixtures = [v for v in self.module_attr(place, name) if v[0] == "def" and self.is_fixture(v[1])]
            if fixtures:
                out: set[Value] = set()
                for fixture in ordered(fixtures):
                    for result in self.call_result(fixture):
                        out |= self.elements(result) if result[0] == "gen" else {result}
                return out
        return set()

    def is_fixture(self, func: str) -> bool:
        """Whether a function is decorated as a pytest fixture."""
        return any("fixture" in d for d in self.defs.get(func, {}).get("decorators", ()))

    def overload_result(self, func: str, args: Any, kwargs: Any) -> set[Value]:
        """What a call of an `@overload`ed function returns: the return types of the overloads the
        arguments can select (by their annotations), or of all of them and the implementation's
        when the arguments cannot tell them apart."""
        # Each overload: [its parameters, what it returns] (see `extract`). The first whose
        # annotations admit the arguments is the one called; one the arguments cannot tell may be.
        kept = []
        for params, returns in self.scopes[func]["overloads"]:
            fit = self.overload_fits(params, args, kwargs)
            if fit is not False:
                kept.append(returns)
            if fit:
                break
        out: set[Value] = set()
        for returns in kept:
            if returns is None:
                out |= self.call_result(("def", func))
                continue
            stated = self.eval(returns)
            out |= stated
            if any(v[0] == "returns" for v in stated):
                # The callable it declares is one the body makes (a decorator factory's inner
                # function): calling it calls that, and `declared_call` types its result.
                out |= {v for v in self.call_result(("def", func)) if v[0] == "def"}
            # A generator the body returns (`-> Iterator[T]` over `return other_generator(...)`):
            # iterating the result runs its body, which no annotation says.
            out |= {v for v in self.call_result(("def", func)) if v[0] == "gen"}
        return out or self.call_result(("def", func))

    def declared_call(self, callees: set[Value] | frozenset[Value], out: set[Value]) -> set[Value]:
        """A call's results where an annotation declares what the callable returns (`Callable[.., R]`
        beside the tree's function it is): of the instances found, those of R's classes and their
        subclasses; R itself where none is."""
        stated: set[Value] = set()
        for value in callees:
            if value[0] == "returns":
                stated |= self.eval(value[1])
        bases = {v[1] for v in stated if v[0] == "inst"}
        if not bases:
            return out
        kept = {v for v in out if v[0] == "inst" and bases & set(self.mro(v[1]))}
        return kept or stated

    def overload_fits(self, params: Any, args: Any, kwargs: Any) -> bool | None:
        """Whether an overload's annotations admit the arguments (None: no argument tells); False
        too when it cannot take them (too many, too few, an unknown keyword)."""
        verdict: bool | None = None
        positional = [p for p in params if p[0] >= 0]
        by_name = {p[1]: p for p in params if p[0] != -2}
        variadic = {p[0] for p in params if p[0] < -1}
        if len(args) > len(positional) and -2 not in variadic:
            return False
        if any(k not in by_name and -3 not in variadic for k, _ in kwargs):
            return False
        given_names = {p[1] for p in positional[: len(args)]} | {k for k, _ in kwargs}
        if any(p[3] and p[1] not in given_names for p in params):
            return False
        given = [(positional[i] if i < len(positional) else None, a) for i, a in enumerate(args)]
        given += [(by_name.get(k), a) for k, a in kwargs]
        told = True
        for param, arg in given:
            if param is None or param[2] == "any":
                continue
            kinds = self.argument_kinds(arg)
            if kinds is None:
                continue
            named = {v for r in param[2] or () for v in self.eval(r)}
            if ("builtin", "object") in named:
                verdict = True
                continue
            admitted = None if param[2] is None else self.checkable_classes(param[2])
            if admitted is None:
                # A known argument against an annotation this cannot judge (`Sequence[Any]`).
                told = False
                continue
            tree, _ = admitted
            outside = {v[1].rsplit(".", 1)[-1] for v in named if v[0] in ("builtin", "ext")}
            ok = any(
                (kind == "inst" and tree & set(self.mro(subject)))
                or (kind != "inst" and subject.rsplit(".", 1)[-1] in outside)
                for kind, subject in kinds
            )
            if not ok:
                return False
            verdict = True
        return verdict if told else None

    def argument_kinds(self, arg: Any) -> set[tuple[str, str]] | None:
        """What an argument is, as far as overloads tell them apart: instances of the tree's classes
        ("inst", class) and builtin constants ("builtin", "int"/"str"); None when not known."""
        if arg[0] == "const":
            return {("builtin", type(arg[1]).__name__)}
        if arg[0] == "call":
            # `date(2018, 7, 22)`: an instance of what an external name called makes.
            made = self.eval(arg[1])
            if made and all(v[0] == "ext" for v in made):
                return {("extinst", v[1]) for v in made}
        values = self.eval(arg)
        if not values or any(v[0] not in ("inst", "extinst") for v in values):
            return None
        return set(values)

    def builtin_result(self, name: str, args: Any) -> set[Value]:
        """What calling a builtin returns, where it is one of the tree's values: `next(it)`, `list(xs)`..."""
        if not args:
            return set()
        if name == "next":
            return {v for value in self.eval(args[0]) for v in self.elements(value)}
        if name in ELEMENT_BUILTINS:
            subject = args[1] if name == "filter" and len(args) > 1 else args[0]
            return {("coll", ("coll", (("iter", subject),), (None,)))}
        if name in ("enumerate", "zip"):
            # Tuples: (index, element) for enumerate, one element of each argument for zip.
            index = ("unk", "opaque_value")
            parts = [index, ("iter", args[0])] if name == "enumerate" else [("iter", a) for a in args]
            pair = ("coll", tuple(parts), tuple(range(len(parts))))
            return {("coll", ("coll", (pair,), (None,)))}
        if name in ("min", "max") and len(args) == 1:
            return {v for value in self.eval(args[0]) for v in self.elements(value)}
        if name in ("staticmethod", "classmethod"):
            return set(self.eval(args[0]))
        if name == "type" and len(args) == 1:
            return {("def", v[1]) for v in self.eval(args[0]) if v[0] == "inst"}
        return set()

    def returns_argument(self, func: str) -> bool:
        """Whether a function (not a method) returns something made of one of its parameters."""
        info = self.defs.get(func, {})
        return info.get("kind") in ("function", "lambda") and any(
            self.mentions_param(r, func) for r in self.scopes.get(func, {}).get("returns", ())
        )

    def mentions_param(self, ref: Any, func: str) -> bool:
        """Whether a ref's value may depend on the arguments of a call of func (cached)."""
        mentions: bool = self._cached(
            self._mentions, ("@mentions", ref, func), lambda: self._mentions_param(ref, func, 0)
        )
        return mentions

    def _cached(self, cache: dict[Any, Any], question: Any, compute: Callable[[], Any]) -> Any:
        """A value computed once from the facts, kept in cache under its question: what uses it is
        recorded as using the question, and the question as using the facts it consulted."""
        if not self.record:
            if question not in cache:
                cache[question] = compute()
            return cache[question]
        if question not in cache:
            self.memo.begin(question)
            try:
                cache[question] = compute()
            finally:
                self.memo.end()
        frames = self.memo.frames
        if frames:
            self.memo.users[question].add(frames[-1])
        return cache[question]

    def _mentions_param(self, ref: Any, func: str, depth: int) -> bool:
        if depth > 4 or not isinstance(ref, tuple) or not ref:
            return False
        kind: str = ref[0]
        if kind == "name":
            if self.binding_scope(ref) != func:
                return False
            return any(
                (r[0] == "param" and r[1] == func) or self._mentions_param(r, func, depth + 1)
                for r in self.binding_refs(ref)
            )
        if kind in ("attr", "sub", "iter", "narrow", "without", "unlike"):
            return self._mentions_param(ref[1], func, depth)
        if kind == "call":
            return (
                any(self._mentions_param(a, func, depth) for a in ref[2])
                or any(self._mentions_param(v, func, depth) for _, v in ref[3])
                or self._mentions_param(ref[1], func, depth)
            )
        if kind in ("coll", "union"):
            return any(self._mentions_param(r, func, depth) for r in ref[1])
        # A guard tests a parameter: whether its value is returned depends on the arguments.
        return kind == "guard"

    def returns_receiver(self, method: str) -> bool:
        """Whether a method returns its own `self`, `cls` or `cls(...)` (a fluent method, a factory)."""
        if self.defs.get(method, {}).get("kind") != "method":
            return False
        return any(self._receiver_return(r) for r in self.scopes.get(method, {}).get("returns", ()))

    def _receiver_return(self, ref: Any) -> str | None:
        # "self" for `return self`, "cls" for `return cls`, "new" for `return cls(...)`.
        if ref[0] == "name" and self.binding_kinds(ref) in ({"self"}, {"cls"}):
            return "self" if self.binding_kinds(ref) == {"self"} else "cls"
        if ref[0] == "call" and ref[1][0] == "name" and self.binding_kinds(ref[1]) == {"cls"}:
            return "new"
        return None

    def result_on(self, method: str, receivers: frozenset[Value]) -> set[Value]:
        """What a method that returns its receiver returns when called on these receivers: the
        subclass instance it was called on, not an instance of the class that defines it."""
        out: set[Value] = set()
        for ref in self.scopes.get(method, {}).get("returns", ()):
            kind = self._receiver_return(ref)
            if kind is None:
                out |= self.eval(ref)
                continue
            for value in receivers:
                if value[0] in ("inst", "super") and kind in ("self", "new"):
                    out.add(("inst", value[1]))
                elif value[0] == "def" and self.defs.get(value[1], {}).get("kind") == "class":
                    out.add(("inst", value[1]) if kind == "new" else value)
        return out or self.call_result(("def", method))

    def collection_result(self, method: tuple[Any, str], args: Any) -> set[Value]:
        """What a container literal's method returns: `d.get("k")` its element at k, `d.values()` it."""
        subject, name = method
        if name in ("get", "pop", "setdefault"):
            key = args[0][1] if args and args[0][0] == "const" else None
            return self.elements(("coll", subject), key)
        if name == "items":
            # (key, value) pairs: the keys are not modelled, the values are the container's.
            pair = ("coll", (("unk", "opaque_value"), ("iter", subject)), (0, 1))
            return {("coll", ("coll", (pair,), (None,)))}
        return {("coll", subject)}

    def lookup(self, scope: str, name: str, which: Any = None) -> set[Value]:
        """LEGB lookup of a name from a scope; class bodies are skipped from nested functions.

        `which`: the indexes of the scope's own bindings of the name that reach the use (all if None).
        """
        first = True
        current: str | None = scope
        while current is not None:
            info = self.scopes.get(current)
            if info is None:
                break
            if first or info["kind"] != "class":
                refs = self.bindings.get(current, {}).get(name)
                if refs and first and which is not None:
                    refs = [refs[i] for i in which if i < len(refs)]
                if refs:
                    out: set[Value] = set()
                    for r in refs:
                        out |= self.eval(r)
                    return out | self.patched(current, name) if info["kind"] == "module" else out
                if info["kind"] == "module":
                    starred = self.star_lookup(current, name)
                    if starred:
                        return starred
            first = False
            current = info["parent"]
        if name in BUILTIN_NAMES:
            return {("builtin", name)}
        return set()

    def patched(self, module: str, name: str) -> set[Value]:
        """What code elsewhere stores into a global of a module (`termui.visible_prompt_func = fake`,
        as a test harness patches it): while stored, the module's own reads of the name see it.
        Derived: the strict linker does not see it, since whether the store ran first is the run's."""
        if self.strict:
            return set()
        if self.record:
            self.memo.use(("stores", name))
        # An input of the run, like a parameter: what reads it is not the strict linker's too.
        self.memo.read(("@stores", module, name))
        out: set[Value] = set()
        for base, value in self.tables.stores.get(name, ()):
            if ("mod", module) in self.eval(base):
                out |= self.eval(value)
        return out

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
        return set(self.memo.get(("@modattr", module, name)))

    def _module_attr(self, module: str, name: str) -> set[Value]:
        # `from . import sub` in a package's __init__ binds sub to the submodule, not to itself.
        refs = [r for r in self.bindings.get(module, {}).get(name, ()) if r != ("from", module, name)]
        if refs:
            out: set[Value] = set()
            for r in refs:
                out |= self.eval(r)
            return out | self.patched(module, name)
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
        if kind == "extinst":
            return {("extm", f"{subject}.{name}")}
        if kind == "coll" and name in COLLECTION_METHODS:
            return {("collm", (subject, name))}
        if kind == "def" and self.defs.get(subject, {}).get("kind") == "class":
            return self.class_attr(subject, name, instance=False)
        if kind == "inst":
            found = self.class_attr(subject, name, instance=True)
            if not found and name in ORDERING_DUNDERS and self.total_ordering(subject):
                # The comparison `functools.total_ordering` adds runs the one it derives it from.
                return {("def", m) for m in self.instance_operator(subject, (name,))}
            return found or ({("def", subject)} if name == "__class__" else set())
        if kind == "super":
            return self.super_attr(subject, name)
        return set()

    def super_attr(self, cls: str, name: str) -> set[Value]:
        """`super().name` in class cls: the next definition after cls in cls's MRO (or object's)."""
        out = self.class_attr(cls, name, instance=True, after_self=True)
        if not out and not self.method_bases(cls) and hasattr(object, name):
            out = {("builtin", f"object.{name}")}
        return out

    def sibling_supers(self, cls: str, name: str) -> list[str]:
        """For `super().name()` in class cls, the methods the MRO of a subclass the tree instantiates
        puts next instead (diamond inheritance: Left's super() is Right in Both(Left, Right))."""
        out = []
        for sub in self.subclasses(cls):
            if not self.is_constructed(sub):
                continue
            order = self.mro(sub)
            for klass in order[order.index(cls) + 1 :]:
                if f"{klass}.{name}" in self.defs:
                    out.append(f"{klass}.{name}")
                    break
                if name in self.bindings.get(klass, {}):
                    break
        return sorted(set(out))

    def class_attr(self, cls: str, name: str, *, instance: bool, after_self: bool = False) -> set[Value]:
        """An attribute along the MRO; through an instance a property is its getter's result.

        Not found in the tree's classes, it is the attribute of the one external base (if one).
        """
        if not instance and name in self.enum_members(cls):
            return {("inst", cls)}
        order = self.mro(cls)
        for klass in order[1:] if after_self else order:
            out: set[Value] = set()
            for r in self.bindings.get(klass, {}).get(name, []):
                out |= self.eval(r)
            if instance:
                refs = self.instance_attrs.get(klass, {}).get(name, ())
                # A declared attribute (`self._body: list[...]`, a field) holds what it declares,
                # not every value stored in it along the way.
                declared: set[Value] = set()
                for r in refs:
                    if r[0] == "typed":
                        declared |= self.eval(r)
                for r in refs if not declared else ():
                    out |= self.eval(r)
                out |= declared
            if out:
                props = {v for v in out if v[0] == "prop"}
                if instance and props:
                    out -= props
                    for prop in props:
                        out |= self.call_result(("def", prop[1]))
                return out
        bases = self.method_bases(cls)
        return {("extm", f"{bases[0]}.{name}")} if len(bases) == 1 else set()

    def enum_members(self, cls: str) -> list[str]:
        """The members of an Enum subclass: the names its own body binds, but for `_`-prefixed ones
        and descriptors (its methods and properties)."""
        bound = self.bindings.get(cls, {})
        if not bound or not ENUM_BASES.intersection(self.external_bases(cls)):
            return []
        return [
            name
            for name, refs in bound.items()
            if not name.startswith("_")
            and not any(v[0] in ("def", "prop") for r in refs for v in self.eval(r))
        ]

    def method_bases(self, cls: str) -> list[str]:
        """The external bases of a class that can supply methods (typing/abc markers aside)."""
        return [b for b in self.external_bases(cls) if "." in b and not b.startswith(MARKER_BASES)]

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
            return self.with_declared(subject, out)
        if kind == "inst":
            out = set()
            for method in self.class_attr(subject, "__call__", instance=True):
                out |= self.call_result(method)
            return out
        if kind == "ext" and subject.rsplit(".", 1)[-1][:1].isupper():
            # A capitalised external name is taken for a class: its call makes an instance.
            return {("extinst", subject)}
        return set()

    def elements(self, value: Value, key: Any = None) -> set[Value]:
        """What iterating (or indexing, at a constant key if given) a value yields."""
        kind, subject = value
        out: set[Value] = set()
        if kind == "coll":
            refs, keys = subject[1], subject[2] if len(subject) > 2 else (None,) * len(subject[1])
            for r, k in zip(refs, keys, strict=False):
                if key is None or k is None or k == key:
                    out |= self.eval(r)
        elif kind == "gen":
            for r in self.scopes.get(subject, {}).get("yields", []):
                out |= self.eval(r)
        elif kind == "def" and self.enum_members(subject):
            # Iterating an Enum subclass yields its members.
            out.add(("inst", subject))
        elif kind == "inst":
            for iterator in self.protocol_results(subject, "__iter__"):
                if iterator[0] == "inst":
                    out |= self.protocol_results(iterator[1], "__next__")
                else:
                    out |= self.elements(iterator)
            out |= self.protocol_results(subject, "__getitem__")
        return out

    def protocol_results(self, cls: str, method: str) -> set[Value]:
        """What calling a protocol method of the tree's class returns (nothing for an external one)."""
        out: set[Value] = set()
        for found in self.class_attr(cls, method, instance=True):
            out |= self.call_result(found)
        return out

    def decorated(self, ref: Any) -> set[Value]:
        """What a decorated definition's name denotes: the decorators' results, innermost first.

        Each decorator is applied to this definition alone (`apply`), so one that hands back what it is
        given (a registry, rich's @auto) gives back this definition, not every one it decorates.
        """
        values = self.eval(ref[2])
        for deco in reversed(ref[1]):
            applied: set[Value] = set()
            decorators = self.eval_in(deco, {}, 0)
            for d in decorators:
                if d[0] == "def" and self.defs.get(d[1], {}).get("kind") != "class":
                    applied |= self.apply(d[1], [values], {}, 0)
                elif d[0] == "def":
                    # A class used as decorator wraps the function in an instance; the function
                    # itself stays reachable, so keep both.
                    applied |= {("inst", d[1]), *values}
                elif d[0] == "returns":
                    # A decorator its factory's annotation types (`-> Callable[[F], Group]`).
                    applied |= self.eval(d[1])
            if applied:
                values = frozenset(self.declared_call(decorators, applied))
        return set(values)

    def apply(
        self,
        func: str,
        args: list[frozenset[Value]],
        kwargs: dict[str, frozenset[Value]],
        depth: int,
        unset: frozenset[int | str] = frozenset(),
    ) -> set[Value]:
        """What calling the tree's function `func` with these argument values returns, in this call's
        context alone (its parameters bound to these values only), a few calls deep. `unset`: the
        arguments (by index or keyword) that may be None besides their values (see `maybe_none`)."""
        scope = self.scopes.get(func, {})
        if scope.get("generator"):
            return {("gen", func)}
        context = (func, tuple(args), tuple(sorted(kwargs.items())), unset)
        if depth > MAX_CONTEXT_DEPTH:
            return self.call_result(("def", func))
        return set(self.memo.get(("@apply", context, depth)))

    def _apply(self, key: Any) -> frozenset[Value]:
        context, depth = key[1], key[2]
        env = _context_env(context)
        out: set[Value] = set()
        for r in self.scopes.get(context[0], {}).get("returns", []):
            out |= self.eval_in(r, env, depth)
        return frozenset(self.with_declared(context[0], out))

    def eval_in(self, ref: Any, env: dict[str, Any], depth: int) -> set[Value]:
        """A ref's values inside one call context (see `apply`): names of the context function's
        parameters denote its arguments, calls of the tree's functions are applied in turn."""
        if ref is None:
            return set()
        if not env:
            return self._eval_in(ref, env, depth)
        if not self.mentions_param(ref, env["func"]):
            # Nothing in it depends on the call's arguments: its values are the same everywhere.
            return set(self.eval(ref))
        return set(self.memo.get(("@in", ref, env["key"], depth)))

    def _eval_in(self, ref: Any, env: dict[str, Any], depth: int) -> set[Value]:
        kind = ref[0]
        if kind == "name" and env and self.binding_scope(ref) == env["func"]:
            return set(self.memo.get(("@name_in", ref, env["key"], depth)))
        if kind in ("attr", "sub", "iter") and env:
            element_key = ref[2] if kind == "sub" and len(ref) > 2 else None
            out = set()
            for value in self.eval_in(ref[1], env, depth):
                out |= self.attribute(value, ref[2]) if kind == "attr" else self.elements(value, element_key)
            return out
        if kind == "coll" and env:
            # The elements as they are in this context, frozen into the container.
            refs = tuple(("vals", _frozen(self.eval_in(r, env, depth))) for r in ref[1])
            return {("coll", ("coll", refs, ref[2]))}
        if kind == "union":
            return {v for part in ref[1] for v in self.eval_in(part, env, depth)}
        if kind == "guard":
            # `if name is None: return ...` does not return when the call gave name a value.
            given = self.argument_given(env, ref[1]) if env else None
            return set() if given is not None and given == ref[2] else self.eval_in(ref[3], env, depth)
        if kind == "call":
            callees = self.eval_in(ref[1], env, depth)
            args = [frozenset(self.eval_in(a, env, depth)) for a in ref[2]]
            kwargs = {k: frozenset(self.eval_in(v, env, depth)) for k, v in ref[3]}
            out = set()
            for value in callees:
                if value[0] == "def" and self.scopes.get(value[1], {}).get("overloads"):
                    # The overloads its arguments select say what it returns, as out of context.
                    out |= self.overload_result(value[1], ref[2], ref[3])
                elif value[0] == "def" and self.defs.get(value[1], {}).get("kind") in ("function", "lambda"):
                    out |= self.apply(value[1], args, kwargs, depth + 1, self.maybe_none(ref))
                elif value[0] == "returns":
                    out |= self.eval(value[1])
                elif value in FIRST_ARGUMENT_STANDS and args:
                    out |= args[0]
                elif value[0] == "builtin":
                    out |= self.builtin_result(value[1], ref[2])
                else:
                    out |= self.call_result(value)
            return self.declared_call(callees, out)
        return set(self.eval(ref))

    def _name_in(self, ref: Any, env: dict[str, Any], depth: int) -> set[Value]:
        # A name of the context function: its parameters are this call's arguments.
        out: set[Value] = set()
        for r in self.binding_refs(ref):
            if r[0] == "param" and r[1] == env["func"]:
                index, name, default = r[2], r[3], r[4]
                if 0 <= index < len(env["args"]):
                    out |= env["args"][index]
                elif name in env["kwargs"]:
                    out |= env["kwargs"][name]
                elif default is not None:
                    out |= self.eval(default)
            elif r[0] not in STATED_KINDS:
                out |= self.eval_in(r, env, depth)
        return out

    def argument_given(self, env: dict[str, Any], name: str) -> bool | None:
        """Whether a call context gives parameter `name` a value (True) or leaves it None (False);
        None when it cannot tell (not a parameter, or a default other than None)."""
        func = self.defs.get(env["func"], {})
        accepts = func.get("accepts")
        if accepts is None or name not in func.get("params", []):
            return None
        positional = accepts["positional"]
        # An argument whose values are unknown (empty), or that may be None besides them, tells nothing.
        if name in positional and positional.index(name) < len(env["args"]):
            index = positional.index(name)
            return True if env["args"][index] and index not in env["unset"] else None
        if name in env["kwargs"]:
            return True if env["kwargs"][name] and name not in env["unset"] else None
        return False if name in accepts.get("none_defaults", []) else None

    def maybe_none(self, call: Any) -> frozenset[int | str]:
        """The arguments of a call ref (by index or keyword) that may be None whatever values they
        have: a parameter of the caller whose default is None (a call that leaves it out passes None
        on, as in `if prereleases is None: prereleases = ...` where the rebinding may be None too)."""
        out: set[int | str] = set()
        for slot, arg in [*enumerate(call[2]), *call[3]]:
            if arg[0] == "name" and any(
                r[0] == "param"
                and r[3] in self.defs.get(r[1], {}).get("accepts", {}).get("none_defaults", ())
                for r in self.binding_refs(arg)
            ):
                out.add(slot)
        return frozenset(out)

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
            for value in self.eval(site["callee"])
            if value[0] == "def" and self.defs.get(value[1], {}).get("kind") == "class"
        )

    def settle(self) -> None:
        """Flow arguments into parameters, round after round, until nothing new flows (or MAX_ROUNDS);
        the memo left is the final round's. Then the classes the tree instantiates (which evaluation
        never reads, only `targets`).

        Each round reads the parameters the rounds before it bound and binds into `pending`, so a
        call site sees the same parameters whichever site came first.
        """
        self._hierarchy()
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
            # What no parameter flowed into, the strict linker evaluates alike (see `_run`).
            self.param_free = self.memo.unread()
        if not self.strict:
            self.constructed = self._constructed()

    def _hierarchy(self) -> None:
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
        argument has flowed yet (a replay's linker does not `settle`: `slotrelay.psmr.relink`)."""
        if not self._mro:
            self._hierarchy()
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
        # A receiver the code binds to instances of several classes whose methods of that name differ:
        # which one runs is a guess.
        several = callee[0] == "attr" and len(self.method_owners(callee[1], callee[2])) > 1
        if resolution in ("attribute", "constructor", "annotation") and several:
            resolution = "heuristic"
        # A decorator site calls the decorator (or what `@factory(...)` returned for this site alone).
        values = self.eval_in(callee, {}, 0) if site.get("decorates") else self.eval(callee)
        for value in ordered(values):
            offset = self.bound_offset(callee, value)
            for target in self.value_targets(value, resolution):
                if self.fits(target, site, offset):
                    found.setdefault(target.target, target)
            if value[0] == "builtin":
                # The builtin calls what it is given (`map(f, xs)`, `sorted(xs, key=f)`), nothing else,
                # and the dunder of its argument it stands for (`len(x)`: x.__len__).
                for arg in ordered(self.called_arguments(value[1], site)):
                    for v in ordered(self.eval(arg)):
                        for target in self.value_targets(v, "lexical") if v[0] in ("def", "builtin") else []:
                            found.setdefault(target.target, target)
                for subject in self.iterated_arguments(value[1], site):
                    # `list(xs)`, `enumerate(xs)`: iterating xs (a generator's body runs from here).
                    how = self.implicit_resolution(subject)
                    for v in ordered(self.eval(subject)):
                        for target in self.protocol_targets(v, "__iter__", "__next__", how):
                            found.setdefault(target.target, target)
                names = BUILTIN_DUNDERS.get(value[1])
                if names and site["args"] and self.defines_dunder(names):
                    subject = site["args"][0]
                    how = self.implicit_resolution(subject)
                    for method in self.operator_methods(self.eval(subject), names):
                        found.setdefault(method, CallTarget(method, "method", how))
                for target in self.ordering_targets(value[1], site):
                    found.setdefault(target.target, target)
            elif value[0] in ("ext", "extm") and value[1].removesuffix(".__init__") in WRAPPED_BUFFER_CALLS:
                for target in self.wrapped_buffer_targets(value[1].removesuffix(".__init__"), site):
                    found.setdefault(target.target, target)
            elif value[0] == "ext" and value[1] in CALLED_ARGUMENTS:
                for arg in ordered(self.called_arguments(value[1], site)):
                    for v in ordered(self.eval(arg)):
                        for target in self.value_targets(v, "lexical") if v[0] == "def" else []:
                            found.setdefault(target.target, target)
            elif value[0] == "ext" and value[1] in SERIALIZERS and site["args"]:
                for target in self.serializer_methods(value[1], site["args"][0]):
                    found.setdefault(target.target, target)
            elif value[0] == "ext" and value[1].startswith("operator."):
                function = value[1].removeprefix("operator.")
                for target in self.operator_function_targets(function, site, resolution):
                    found.setdefault(target.target, target)
        if not self.strict and any(v[0] == "many" for v in values):
            # Too many values to carry (every command's stored callback): each argument that flows
            # into the parameters and attributes the callee reads denotes its functions alone.
            for value in ordered(self.enumerated(callee)):
                for target in self.value_targets(value, "heuristic"):
                    found.setdefault(target.target, target)
        if callee[0] == "attr":
            # `x.m()` where x's class (and x) binds no m: Python asks the class's `__getattr__` for it
            # (derived, as for a read: `setattr` may have stored m).
            for value in ordered(self.eval(callee[1])):
                hook = self.getattr_hook(value, callee[2]) if value[0] == "inst" else None
                if hook is not None:
                    found.setdefault(hook, CallTarget(hook, "method", "heuristic"))
        if not self.strict:
            dispatched = self.dispatched(callee, found)
            if dispatched and callee[0] in ("attr", "name"):
                # Where an override may run instead, which of them runs depends on the receiver's
                # class at run time: the method the declared class finds is a guess too.
                read = {callee[2]} if callee[0] == "attr" else {n for _, n in self.bound_reads(callee)}
                for name, target in list(found.items()):
                    overridden = target.kind == "method" and name.rsplit(".", 1)[-1] in read
                    if overridden and not self.is_abstract(name):
                        found[name] = CallTarget(name, "method", "heuristic")
            for method in dispatched:
                found.setdefault(method, CallTarget(method, "method", "heuristic"))
        return sorted(found.values(), key=lambda t: t.target)

    def dispatched(self, callee: Any, found: dict[str, CallTarget]) -> list[str]:
        """The methods a call may reach through dispatch, beyond what its receiver denotes: a
        sibling's for `super().m()`, the overrides in subclasses for `self.m()`, a receiver its
        annotation declares, or a method that is abstract (a Protocol's, an ABC's, a stub); for
        `c()` where `issubclass(c, C)` holds, the constructors of C's subclasses."""
        if callee[0] == "narrowcls":
            out = []
            for value in ordered(self.eval(callee)):
                if value[0] == "def":
                    for sub in self.subclasses(value[1]):
                        made = self.value_targets(("def", sub), "heuristic")
                        out += [t.target for t in made if t.kind == "method"]
            return sorted(set(out) - found.keys())
        if callee[0] == "name":
            # `report = e.show; report()` runs what `e.show()` would.
            return sorted({m for r, n in self.bound_reads(callee) for m in self.overrides(r, n, found)})
        if callee[0] != "attr":
            return []
        if callee[1][0] == "super":
            return self.sibling_supers(callee[1][1], callee[2])
        return self.overrides(callee[1], callee[2], found)

    def bound_reads(self, name_ref: Any) -> list[tuple[Any, str]]:
        """The attribute reads (receiver, name) a called name is bound to: `report = e.show`, or an
        element of a literal tuple unpacked into it (`report, code = e.show, e.code`)."""
        out = []
        for ref in self.binding_refs(name_ref):
            while ref[0] == "sub" and ref[1][0] == "coll" and isinstance(ref[2], int) and ref[2] in ref[1][2]:
                ref = ref[1][1][ref[1][2].index(ref[2])]
            if ref[0] == "attr" and ref[1][0] != "super":
                out.append((ref[1], ref[2]))
        return out

    def implicit_resolution(self, receiver: Any) -> str:
        """How a call without call syntax on a receiver is resolved: `implicit`, or `heuristic` where
        the receiver is a guess (a parameter) or denotes instances of several classes; a container
        literal is as sure as its least sure element."""
        if receiver[0] == "coll":
            sure = all(self.implicit_resolution(r) == "implicit" for r in receiver[1])
            return "implicit" if sure else "heuristic"
        if self.resolution(("attr", receiver, "")) == "heuristic" or len(self.receiver_classes(receiver)) > 1:
            return "heuristic"
        return "implicit"

    def receiver_classes(self, receiver: Any) -> set[Any]:
        """The classes (or modules) a receiver's values belong to, for telling one from several; a
        container literal, each generator and too many values to tell count as a class of their own
        (`return missing` on one path and a list on another: which `len` runs depends on the data)."""
        values = self.eval(receiver)
        classes = {v[1] for v in values if v[0] in ("inst", "def", "super", "mod", "extinst")}
        classes |= {v for v in values if v[0] == "gen"}
        return classes | {(v[0],) for v in values if v[0] in ("coll", "many")}

    def method_owners(self, receiver: Any, name: str) -> set[Any]:
        """What an attribute call on the receiver runs, per class of its values: the method their MRO
        finds (one for a class and a subclass that inherits it), else the class or module itself. An
        abstract method is a declaration its implementations answer for: it is none of them."""
        out: set[Any] = set()
        for kind, subject in self.eval(receiver):
            if kind in ("inst", "def"):
                method = self.find_method(subject, name)
                if method is None or not self.is_abstract(method):
                    out.add(method or subject)
            elif kind in ("super", "mod", "extinst"):
                out.add(subject)
            elif kind in ("coll", "many"):
                out.add((kind,))
            elif kind == "gen":
                out.add((kind, subject))
        return out

    def wrapped_buffer_targets(self, cls: str, site: dict[str, Any]) -> list[CallTarget]:
        """`TextIOWrapper(buffer)` (or a subclass's `super().__init__(buffer)`): the methods of the
        buffer it calls (WRAPPED_BUFFER_CALLS), or the `__getattr__` the buffer's class answers a
        missing one with. Derived: which of them run depends on what the buffer answers."""
        buffer = site["args"][0] if site["args"] else site["kwargs"].get("buffer")
        out = []
        for value in ordered(self.eval(buffer)) if buffer is not None else []:
            if value[0] != "inst":
                continue
            for name in WRAPPED_BUFFER_CALLS[cls]:
                method = self.find_method(value[1], name) or self.getattr_hook(value, name)
                if method is not None:
                    out.append(CallTarget(method, "method", "heuristic"))
        return out

    @staticmethod
    def called_arguments(builtin: str, site: dict[str, Any]) -> list[Any]:
        """The arguments a builtin (or a function of CALLED_ARGUMENTS) calls: `map(f, xs)` and
        `filter(f, xs)` call f, `max(xs, key=f)` f."""
        if builtin == "iter":
            # iter(f, sentinel) calls f until it returns the sentinel; iter(xs) calls nothing given.
            return [site["args"][0]] if len(site["args"]) == 2 else []
        indexes, keywords = CALLED_ARGUMENTS.get(builtin, ((), ()))
        return [site["args"][i] for i in indexes if i < len(site["args"])] + [
            site["kwargs"][k] for k in keywords if k in site["kwargs"]
        ]

    def ordering_targets(self, builtin: str, site: dict[str, Any]) -> list[CallTarget]:
        """`max(a, b)`, `min(xs)`, `sorted(xs)` without a key: the comparisons of the values compared
        (max asks `>`, min and sorted `<`, each falling back on the reflected one)."""
        names = ORDERED_BY.get(builtin)
        args = site["args"]
        if names is None or not args or "key" in site["kwargs"] or not self.defines_dunder(ORDERING_DUNDERS):
            return []
        compared = args if len(args) > 1 and builtin != "sorted" else [("iter", args[0])]
        out = []
        for subject in compared:
            how = self.implicit_resolution(subject)
            values = frozenset(v for v in self.eval(subject) if v[0] == "inst")
            out += [CallTarget(m, "method", how) for m in self.operator_methods(values, names)]
        return out

    def operator_function_targets(self, name: str, site: dict[str, Any], resolution: str) -> list[CallTarget]:
        """`operator.lt(a, b)` (or a parameter given `operator.lt`) is `a < b`: a's `__lt__`, then b's
        reflected `__gt__`; derived where the function is a value flowed in through a parameter."""
        names = OPERATOR_FUNCTIONS.get(name)
        if names is None:
            return []
        out = []
        for subject, dunders in zip(site["args"], names, strict=False):
            if not dunders or not self.defines_dunder(self.operator_names(dunders)):
                continue
            how = "heuristic" if resolution == "heuristic" else self.implicit_resolution(subject)
            out += [CallTarget(m, "method", how) for m in self.operator_methods(self.eval(subject), dunders)]
        return out

    @staticmethod
    def iterated_arguments(builtin: str, site: dict[str, Any]) -> list[Any]:
        """The arguments a builtin iterates: `list(xs)`, `sorted(xs)`, `enumerate(xs)`, `zip(a, b)`,
        `map(f, xs)` (the lazy ones are nearly always consumed where they are made)."""
        args = site["args"]
        if builtin in ("zip",):
            return list(args)
        if builtin in ("map", "filter"):
            return list(args[1:])
        return list(args[:1]) if builtin in ITERATING_BUILTINS else []

    def bound_offset(self, callee: Any, value: Value) -> int | None:
        """How many leading parameters the call binds itself (self or cls); None when it cannot tell."""
        if value[0] != "def":
            return None
        info = self.defs.get(value[1], {})
        decorators = info.get("decorators", [])
        if info.get("kind") == "class" or "classmethod" in decorators:
            return 1
        if info.get("kind") != "method" or "staticmethod" in decorators:
            return 0
        if callee[0] != "attr":
            return None
        receivers = {v[0] for v in self.eval(callee[1])}
        if receivers <= {"inst", "super"}:
            return 1
        return 0 if receivers == {"def"} else None

    def fits(self, target: CallTarget, site: dict[str, Any], offset: int | None) -> bool:
        """False when the target's signature cannot take the site's arguments (the call would raise)."""
        info = self.defs.get(target.target, {})
        accepts = info.get("accepts")
        decorators = [d for d in info.get("decorators", []) if d not in ("classmethod", "staticmethod")]
        if accepts is None or offset is None or decorators or site.get("unpacks"):
            # A decorator may replace the signature; unpacked arguments have no count.
            return True
        positional = accepts["positional"][offset:]
        if not accepts["varargs"] and len(site["args"]) > len(positional):
            return False
        return accepts["varkw"] or all(k in accepts["keywords"] for k in site["kwargs"])

    def overrides(self, receiver: Any, name: str, found: dict[str, CallTarget]) -> list[str]:
        """The methods that replace (or supply) m in subclasses of the receiver's class, for
        `self.m()` and any receiver whose class the code does not fix (a parameter, an annotation,
        an attribute, a call's result, an element); for an instance the code constructs
        (`x = Cls(); x.m()`), only those that supply an m its class lacks, or that implement an
        abstract one.

        Only subclasses the tree instantiates count; a hierarchy the tree never instantiates (a
        library's, instantiated by its users) dispatches to every override.
        """
        classes = {v[1] for v in self.eval(receiver) if v[0] == "inst"}
        if self.constructed_here(receiver) and not any(self.is_abstract(t.target) for t in found.values()):
            classes = {c for c in classes if not self.class_attr(c, name, instance=True)}
        out = set()
        for cls in sorted(classes):
            out |= set(self.subclass_methods(cls, (name,)))
        return sorted(out - found.keys())

    def constructed_here(self, receiver: Any) -> bool:
        """Whether a receiver is a name bound only to constructor calls of the tree's classes."""
        if receiver[0] != "name" or self.binding_kinds(receiver) != {"call"}:
            return False
        return all(
            any(self.is_class(v) for v in self.eval(r[1])) for r in self.binding_refs(receiver)
        )

    def live_subclasses(self, cls: str) -> list[str]:
        """The subclasses of cls the tree instantiates, or all of them when it instantiates none."""
        subs = self.subclasses(cls)
        live = [s for s in subs if self.is_constructed(s)]
        return live if live or self.is_constructed(cls) else subs

    def subclass_methods(self, cls: str, names: Any) -> list[str]:
        """The first of the named methods each subclass of cls has (of those the tree instantiates,
        or of all when it instantiates none)."""
        out = []
        for sub in self.live_subclasses(cls):
            method = next(filter(None, (self.find_method(sub, n) for n in names)), None)
            if method:
                out.append(method)
        return out

    def is_abstract(self, method: str) -> bool:
        """Whether a method only declares what subclasses implement: `@abstractmethod`, a stub body
        (`...`, `pass`, `raise NotImplementedError`), or a method of a Protocol (cached)."""
        abstract: bool = self._cached(
            self._abstract, ("@abstract", method), lambda: self._is_abstract(method)
        )
        return abstract

    def _is_abstract(self, method: str) -> bool:
        info = self.defs.get(method, {})
        if info.get("kind") != "method":
            return False
        if info.get("stub") or any(d.endswith("abstractmethod") for d in info.get("decorators", [])):
            return True
        owner = info.get("parent", "")
        return any(b.endswith(".Protocol") for b in self.external_bases(owner))

    def is_constructed(self, cls: str) -> bool:
        """Whether the tree instantiates a class somewhere (known once argument flow has settled)."""
        if self.record:
            self.memo.use(("constructed", cls))
        return cls in self.constructed

    def implicit_targets(self, item: dict[str, Any]) -> list[CallTarget]:
        """The methods a statement calls without call syntax (see `extract`): protocol methods,
        a raised class's constructor, a property's getter or setter."""
        kind, ref = item["kind"], item["ref"]
        if kind in ("get", "set"):
            if self.record:
                self.memo.use(("property", item["name"]))
            hooks = (DESCRIPTOR_DUNDERS[kind],) + (("__getattr__",) if kind == "get" else ())
            if item["name"] not in self.property_names and not self.defines_dunder(hooks):
                return []
        if kind == "op" and not self.defines_dunder(self.operator_names(item["name"])):
            return []
        if kind == "import":
            return self.import_targets(item["ref"], item["name"])
        if kind == "key":
            return self.key_targets(item)
        resolution = self.implicit_resolution(ref) if kind != "classdef" else "implicit"
        found: dict[str, CallTarget] = {}
        for value in ordered(self.eval(ref)):
            if kind in ("get", "set"):
                name = item["name"]
                method = self.property_of(value, name) or self.descriptor_of(value, name, kind)
                targets = [CallTarget(method, "method", resolution)] if method else []
                hook = self.getattr_hook(value, name) if kind == "get" and not method else None
                if hook:
                    # Derived: an attribute set by name at run time (`setattr`) would hide it.
                    targets.append(CallTarget(hook, "method", "heuristic"))
                if value[0] == "inst" and not self.strict and not self.constructed_here(ref):
                    # The property a subclass overrides it with, for a value declared as the base.
                    for sub in self.live_subclasses(value[1]):
                        other = self.property_of(("inst", sub), item["name"])
                        if other and other != method:
                            targets.append(CallTarget(other, "method", "heuristic"))
            elif kind == "op":
                elementwise = item.get("elementwise", True)
                methods = self.operator_methods(frozenset({value}), item["name"], elementwise=elementwise)
                targets = [CallTarget(m, "method", resolution) for m in methods]
                after = item.get("after")
                first = self.operator_methods(self.eval(after[0]), after[1]) if after is not None else ()
                if first:
                    # The left operand's dunder runs first; only its NotImplemented reaches this one
                    # (and where it is the same function, `a == b` of one class, the call is already its).
                    targets = [CallTarget(m, "method", "heuristic") for m in methods if m not in first]
                if not methods and value[0] == "inst" and not self.strict:
                    # A value declared as a base its subclasses give the dunder to: derived.
                    dispatched = self.subclass_methods(value[1], item["name"])
                    targets = [CallTarget(m, "method", "heuristic") for m in dispatched]
            elif kind == "classdef":
                methods = self.class_statement_methods(value[1])
                targets = [CallTarget(m, "method", "implicit") for m in methods]
            elif kind == "raise":
                if value[0] == "builtin" and value[1] in BUILTIN_EXCEPTIONS:
                    targets = self.value_targets(value, resolution)
                elif value[0] == "def" and self.defs.get(value[1], {}).get("kind") == "class":
                    targets = [t for t in self.value_targets(value, resolution) if t.kind != "class"]
                else:
                    targets = []
            else:
                targets = self.protocol_targets(value, *PROTOCOLS[kind], resolution)
            for target in targets:
                found.setdefault(target.target, target)
        return sorted(found.values(), key=lambda t: t.target)

    def key_targets(self, item: dict[str, Any]) -> list[CallTarget]:
        """A value used as a key: its `__hash__` where the container is a dict or set (not an
        instance of the tree, whose `__getitem__` decides), and its `__eq__`, which runs only where a
        key of the same hash is there (derived). Derived too where the container is unknown."""
        if not self.defines_dunder(("__hash__",)):
            return []
        containers = self.eval(item["receiver"]) if item["receiver"] is not None else frozenset()
        if any(v[0] in ("inst", "def", "super", "many") for v in containers):
            return []
        how = self.implicit_resolution(item["ref"]) if containers else "heuristic"
        out = []
        for value in ordered(self.eval(item["ref"])):
            if value[0] != "inst":
                continue
            hashed = self.find_method(value[1], "__hash__")
            if hashed:
                out.append(CallTarget(hashed, "method", how))
                equal = self.find_method(value[1], "__eq__")
                if equal:
                    out.append(CallTarget(equal, "method", "heuristic"))
        return out

    def import_targets(self, ref: Any, names: Any) -> list[CallTarget]:
        """`from m import names`: m's module-level `__getattr__`, which Python asks for a name m does
        not bind (and, m being no package, for the `__path__` it looks up first)."""
        out = []
        for value in ordered(self.eval(ref)):
            if value[0] != "mod":
                continue
            module = value[1]
            hooks = [v[1] for v in ordered(self.module_attr(module, "__getattr__")) if v[0] == "def"]
            if not hooks:
                continue
            asked = not self.scopes.get(module, {}).get("package") or any(
                name not in self.bindings.get(module, {}) and f"{module}.{name}" not in self.modules
                for name in names
            )
            if asked:
                out += [CallTarget(h, "function", "implicit") for h in hooks]
        return out

    def metaclass(self, cls: str) -> str | None:
        """The tree's class that is cls's metaclass (declared on cls or a base), if any."""
        if self.record:
            self.memo.use(("metaclasses",))
        if not self.metaclasses:
            return None
        for klass in self.mro(cls):
            ref = self.defs.get(klass, {}).get("metaclass")
            if ref is not None:
                found = [v[1] for v in ordered(self.eval(ref)) if self.is_class(v)]
                return found[0] if found else None
        return None

    def class_statement_methods(self, cls: str) -> list[str]:
        """What a class statement runs of the tree: its metaclass's `__new__` and `__init__`, and the
        `__init_subclass__` next after the class in its MRO."""
        out = []
        meta = self.metaclass(cls)
        if meta is not None:
            out += [m for m in (self.find_method(meta, "__new__"), self.find_method(meta, "__init__")) if m]
        for klass in self.mro(cls)[1:]:
            if f"{klass}.__init_subclass__" in self.defs:
                out.append(f"{klass}.__init_subclass__")
                break
        return out

    def protocol_targets(self, value: Value, first: str, second: str, resolution: str) -> list[CallTarget]:
        """`for`/`with` on an instance: its first protocol method, then the second (for `for`, on the
        iterator the first returned). Iterating or entering a generator runs its function's body, from
        here."""
        iterates = first in ("__iter__", "__aiter__")
        if value[0] == "gen":
            # Entering a generator is entering what `contextlib.contextmanager` made of its function
            # (a bare generator has no `__enter__`): the body runs up to its `yield` from here.
            return [CallTarget(value[1], self.defs.get(value[1], {}).get("kind", "function"), resolution)]
        if value[0] != "inst":
            return []
        out = []
        method = self.find_method(value[1], first)
        if method:
            out.append(CallTarget(method, "method", resolution))
        if iterates:
            made = self.call_result(("def", method)) if method else set()
            subjects = [v[1] for v in ordered(made) if v[0] == "inst"]
            for made_value in ordered(made):
                if made_value[0] == "gen":
                    out += self.protocol_targets(made_value, first, second, resolution)
        else:
            subjects = [value[1]]
        for subject in subjects:
            follow = self.find_method(subject, second)
            if follow:
                out.append(CallTarget(follow, "method", resolution))
        return out

    def property_of(self, value: Value, name: str) -> str | None:
        """The property method `value.name` runs, if the attribute found along the MRO is one."""
        if value[0] not in ("inst", "super"):
            return None
        order = self.mro(value[1])[1:] if value[0] == "super" else self.mro(value[1])
        for klass in order:
            refs = self.bindings.get(klass, {}).get(name) or self.instance_attrs.get(klass, {}).get(name)
            if refs:
                props = [r[1] for r in refs if r[0] == "prop"]
                return props[0] if props else None
        return None

    def serialized(self, function: str, arg: Any) -> set[Value]:
        """What copying or pickling returns: a copy is of its argument's class, `pickle.dumps(x)`
        the bytes of x's instances (`("pickled", cls)`), and `pickle.loads` of those bytes their class's
        instance again (bytes read from anywhere else are of no class the code states)."""
        values = self.eval(arg)
        if function == "pickle.loads":
            return {("inst", v[1]) for v in values if v[0] == "pickled"}
        kind = "pickled" if function == "pickle.dumps" else "inst"
        return {(kind, v[1]) for v in values if v[0] == "inst"}

    def serializer_methods(self, function: str, arg: Any) -> list[CallTarget]:
        """The methods copying or pickling runs of the tree's classes (the `copy` and `pickle` modules'
        protocol): `__copy__`/`__deepcopy__` where defined, else the object is reduced
        (`__reduce_ex__`, `__reduce__`, `__getstate__`) and, for a copy or `pickle.loads`, rebuilt: the
        callable the reduction names (a class is constructed) or `__new__`, then `__setstate__`."""
        how = self.implicit_resolution(arg)
        values = self.eval(arg)
        if function == "pickle.loads":
            declared = sorted({v[1] for v in values if v[0] == "pickled"})
        else:
            declared = sorted({v[1] for v in values if v[0] == "inst"})
        # A value declared as a base may be any subclass the tree instantiates: which class's protocol
        # runs is then a guess.
        subclasses = []
        if not self.constructed_here(arg):
            subclasses = [s for c in declared for s in self.live_subclasses(c) if s not in declared]
        if subclasses:
            how = "heuristic"
        out: list[str] = []
        for cls in dict.fromkeys(declared + subclasses):
            own = {"copy.copy": "__copy__", "copy.deepcopy": "__deepcopy__"}.get(function)
            method = self.find_method(cls, own) if own else None
            if method:
                out.append(method)
                continue
            reducers = (self.find_method(cls, n) for n in ("__reduce_ex__", "__reduce__"))
            reduce = next(filter(None, reducers), None)
            if function != "pickle.loads":
                out += [m for m in (reduce, self.find_method(cls, "__getstate__")) if m]
            if function == "pickle.dumps":
                continue
            if reduce is None:
                out += [m for m in (self.find_method(cls, "__new__"),) if m]
            else:
                owner = reduce.rsplit(".", 1)[0]
                for result in ordered(self.call_result(("def", reduce))):
                    for made in ordered(self.elements(result, 0)):
                        # `self.__class__` in the base's reduction is the class being copied.
                        made = ("def", cls) if made == ("def", owner) else made
                        out += [t.target for t in self.value_targets(made, how) if t.kind == "method"]
            out += [m for m in (self.find_method(cls, "__setstate__"),) if m]
        return [CallTarget(m, "method", how) for m in dict.fromkeys(out)]

    def getattr_hook(self, value: Value, name: str) -> str | None:
        """The `__getattr__` an instance's read of `name` asks, where neither the instance's stored
        attributes nor its class's MRO (all of the tree's, no external base) bind the name; and a
        module's (PEP 562) where the module binds no such name and has no such submodule."""
        if name.startswith("__") and name.endswith("__"):
            return None
        if value[0] == "mod":
            module = value[1]
            bound = name in self.bindings.get(module, {}) or f"{module}.{name}" in self.modules
            if bound or self.star_lookup(module, name):
                return None
            hooks = [v[1] for v in ordered(self.module_attr(module, "__getattr__")) if v[0] == "def"]
            return hooks[0] if hooks else None
        if value[0] != "inst":
            return None
        cls = value[1]
        hook = self.find_method(cls, "__getattr__")
        if hook is None or self.method_bases(cls) or self.class_attr(cls, name, instance=True):
            return None
        stored = any(self.instance_attrs.get(k, {}).get(name) for k in self.mro(cls))
        return None if stored else hook

    def descriptor_of(self, value: Value, name: str, mode: str) -> str | None:
        """The descriptor method `value.name` runs (`__get__` for a read, `__set__` for a write) where
        the attribute its class's MRO finds is an instance of the tree's class defining it; a
        descriptor without `__set__` is hidden by an instance attribute of that name."""
        on_class = value[0] == "def" and mode == "get" and self.is_class(value)
        if not (on_class or value[0] == "inst"):
            return None
        cls, dunder = value[1], DESCRIPTOR_DUNDERS[mode]
        # An attribute the instance stores (not a field's declaration, `name: T = D()`).
        stored = value[0] == "inst" and any(
            r[0] != "typed" for k in self.mro(cls) for r in self.instance_attrs.get(k, {}).get(name, ())
        )
        for klass in self.mro(cls):
            refs = self.bindings.get(klass, {}).get(name)
            if not refs:
                continue
            for kind, subject in ordered({v for r in refs for v in self.eval(r)}):
                method = self.find_method(subject, dunder) if kind == "inst" else None
                if method and not (stored and not self.find_method(subject, "__set__")):
                    return method
            return None
        return None

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

    def value_targets(self, value: Value, resolution: str) -> list[CallTarget]:
        kind, subject = value
        if kind == "def":
            info = self.defs.get(subject)
            if info is None:
                return []
            if info["kind"] == "class":
                # A class abc refuses to instantiate raises TypeError before it is made: only a call
                # whose class is a guess (a subclass at run time) constructs anything.
                how = "heuristic" if self.is_abstract_class(subject) else "constructor"
                out = [CallTarget(subject, "class", how)]
                # A metaclass's __call__ runs the construction, __new__ makes the instance, __init__
                # sets it up.
                meta = self.metaclass(subject)
                called = self.find_method(meta, "__call__") if meta else None
                made = self.find_method(subject, "__new__")
                for method in (called, made, self.find_method(subject, "__init__")):
                    if method:
                        out.append(CallTarget(method, "method", how))
                return out
            return [CallTarget(subject, info["kind"], resolution)]
        if kind == "inst":
            method = self.find_method(subject, "__call__")
            return [CallTarget(method, "method", resolution)] if method else []
        if kind == "builtin":
            return [CallTarget(f"<builtin>.{subject}", "builtin", "lexical")]
        if kind == "ext":
            return [CallTarget(subject, "external", "import")]
        if kind == "extm":
            # A method of an external class: the class was guessed from a name or a base.
            return [CallTarget(subject, "external", "heuristic")]
        return []

    def is_abstract_class(self, cls: str) -> bool:
        """Whether abc refuses to instantiate cls: its metaclass is `abc.ABCMeta` (declared, or through
        `abc.ABC`) and a name its MRO binds first is an `@abstractmethod`."""
        mro = self.mro(cls)
        abc_meta = "abc.ABC" in self.external_bases(cls) or any(
            ("ext", "abc.ABCMeta") in self.eval(self.defs.get(klass, {}).get("metaclass")) for klass in mro
        )
        if not abc_meta:
            return False
        for klass in mro:
            for name in self.defs.get(klass, {}).get("abstract", ()):
                first = next((k for k in mro if name in self.bindings.get(k, {})), None)
                if first == klass:
                    return True
        return False

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
            if "typed" in first:
                return "annotation"
            if "fixture" in first:
                return "fixture"
            if first & {"param", "attrs"}:
                # Bound to a value flowed in, or to an attribute whose name is computed: a guess.
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
                if "typed" in first:
                    return "annotation"
                if "fixture" in first:
                    return "fixture"
                if "call" in first:
                    return "constructor"
                if first & {"def", "deco"}:
                    return "lexical"
                return "attribute" if first and first <= ATTRIBUTE_KINDS else "heuristic"
            # An attribute of an attribute, of a call's or an operator's result, of an element: what
            # the code binds there (certain when the strict linker finds it too, and the receiver is
            # of one class).
            return "attribute" if base[0] in ATTRIBUTE_KINDS else "heuristic"
        return "heuristic"

    def binding_scope(self, name_ref: Any) -> str | None:
        """The nearest scope that binds a name, from the scope of its use."""
        current: str | None = name_ref[1]
        while current is not None:
            if name_ref[2] in self.bindings.get(current, {}):
                return current
            current = self.scopes.get(current, {}).get("parent")
        return None

    def binding_refs(self, name_ref: Any) -> tuple[Any, ...]:
        """The refs a name is bound to in the nearest scope that binds it (cached: the bindings are
        fixed)."""
        refs: tuple[Any, ...] = self._cached(
            self._binding_refs, ("@binding_refs", name_ref), lambda: self._find_binding_refs(name_ref)
        )
        return refs

    def _find_binding_refs(self, name_ref: Any) -> tuple[Any, ...]:
        current: str | None = name_ref[1]
        while current is not None:
            refs = self.bindings.get(current, {}).get(name_ref[2])
            if refs and current == name_ref[1] and len(name_ref) > 3:
                return tuple(refs[i] for i in name_ref[3] if i < len(refs))
            if refs:
                return tuple(refs)
            current = self.scopes.get(current, {}).get("parent")
        return ()

    def binding_kinds(self, name_ref: Any) -> frozenset[str]:
        """The kinds of ref a name is bound to (`imp`, `param`, `def`, ...), cached."""
        kinds: frozenset[str] = self._cached(
            self._binding_kinds,
            ("@binding_kinds", name_ref),
            lambda: frozenset(r[0] for r in self.binding_refs(name_ref)),
        )
        return kinds

    def unknown_reason(self, callee: Any) -> str:
        """Why a callee denotes nothing: a reason code for the unknown."""
        kind = callee[0]
        if kind == "unk":
            return str(callee[1])
        if kind == "name":
            kinds = self.binding_kinds(callee)
            if not kinds:
                return "unresolved_name"
            if "param" in kinds and kinds <= {"param", "unk", *STATED_KINDS}:
                return "parameter_call"
            if kinds == {"varargs"}:
                return "variadic_parameter"
            if kinds == {"unk"}:
                # Bound only to what the fast pass refused to model: say why (e.g. variadic_parameter).
                return str(self.binding_refs(callee)[0][1])
            if kinds <= {"sub", "iter", "rows"}:
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
        if kind == "attrs":
            return "dynamic_getattr"
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

    def flow_arguments(self, site: dict[str, Any]) -> frozenset[tuple[tuple[str, Any], Any]]:
        """Bind a call site's arguments to the parameters of its callees (into `pending`).

        Returns:
            Every (parameter, argument) it binds, bound before or not.
        """
        bound: list[tuple[tuple[str, Any], Any]] = []
        callee = site["callee"]
        bound_offset = (
            1 if callee[0] == "attr" and any(v[0] in ("inst", "super") for v in self.eval(callee[1])) else 0
        )
        values = self.eval_in(callee, {}, 0) if site.get("decorates") else self.eval(callee)
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
                func, offset = self.find_method(value[1], "__init__") or "", 1
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

    def enumerated(self, ref: Any) -> frozenset[Value]:
        """The tree's functions a ref that denotes too many values to carry (`("many", n)`) may call:
        through the parameters and instance attributes it reads, each argument the tree passes them
        evaluated alone (a few levels deep), the functions among its values (cached)."""
        found: frozenset[Value] = self._cached(
            self._enumerated, ("@enumerated", ref), lambda: frozenset(self._enumerate(ref, 0, {}))
        )
        return found

    def _enumerate(self, ref: Any, depth: int, seen: dict[Any, int]) -> set[Value]:
        # A ref is expanded again only when reached nearer than before (its arguments then go deeper).
        if seen.get(ref, MAX_ENUMERATION_DEPTH + 1) <= depth or not isinstance(ref, tuple) or not ref:
            return set()
        seen[ref] = depth
        values = self.eval(ref)
        out = {v for v in values if v[0] == "def" and self.defs.get(v[1], {}).get("kind") != "class"}
        if not any(v[0] == "many" for v in values) or depth >= MAX_ENUMERATION_DEPTH:
            return out
        if ref[0] == "kw":
            self.memo.read(("@param", ref[1], ref[2]))
            for arg in ordered(self.params.get((ref[1], ref[2]), ())):
                out |= self._enumerate(arg, depth + 1, seen)
        elif ref[0] == "name":
            for r in self.binding_refs(ref):
                if r[0] == "param":
                    self.memo.read(("@param", r[1], r[2]))
                    self.memo.read(("@param", r[1], r[3]))
                    passed = self.params.get((r[1], r[2]), set()) | self.params.get((r[1], r[3]), set())
                    for arg in ordered(passed):
                        out |= self._enumerate(arg, depth + 1, seen)
                else:
                    out |= self._enumerate(r, depth + 1, seen)
        elif ref[0] == "attr":
            for value in ordered(self.eval(ref[1])):
                for klass in self.mro(value[1]) if value[0] == "inst" else []:
                    for r in self.instance_attrs.get(klass, {}).get(ref[2], ()):
                        out |= self._enumerate(r, depth + 1, seen)
        elif ref[0] == "cast":
            out |= self._enumerate(ref[2], depth + 1, seen)
        elif ref[0] in ("narrow", "without", "unlike", "typed"):
            out |= self._enumerate(ref[1], depth + 1, seen)
        return out

    def spread_keywords(self, site: dict[str, Any]) -> list[tuple[str, Any]]:
        """The keywords a call's `**kwargs` passes on: those the function whose `**` parameter it is
        was given (by name: `("kw", function, name)`), and those stored in it by a constant key
        (`kwargs.setdefault("callback", show_help)`, `kwargs["callback"] = f`)."""
        out: list[tuple[str, Any]] = []
        for spread in site.get("spread", ()):
            for r in self.binding_refs(spread) if spread[0] == "name" else ():
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
        if callee[0] != "name" or self.binding_kinds(callee) != {"param"} or self.strict:
            return frozenset()
        out: set[Value] = set()
        for ref in self.binding_refs(callee):
            self.memo.read(("@param", ref[1], ref[2]))
            self.memo.read(("@param", ref[1], ref[3]))
            passed = self.params.get((ref[1], ref[2]), set()) | self.params.get((ref[1], ref[3]), set())
            for arg in ordered(passed):
                out |= {v for v in self.eval(arg) if v[0] == "def"}
        return frozenset(out)

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
                targets = self.targets(site)
                if targets:
                    result.targets[(module, index)] = _certain(targets, self.strict_linker.targets(site))
                else:
                    result.unresolved[(module, index)] = self.unknown_reason(site["callee"])
            except BudgetExceeded:
                result.targets.pop((module, index), None)
                result.unresolved[(module, index)] = BUDGET_REASON

    def resolve_implicit(self, module: str, index: int, result: LinkResult) -> None:
        """One implicit call (question `("@implicit", module, index)`)."""
        item = self.facts[module]["implicit"][index]
        with self._question(("@implicit", module, index)), suppress(BudgetExceeded):
            targets = self.implicit_targets(item)
            if targets:
                result.implicit[(module, index)] = _certain(
                    targets, self.strict_linker.implicit_targets(item)
                )

    def resolve_class(self, qualname: str, result: LinkResult) -> None:
        """A class's MRO, bases in the tree and external bases (question `("@class", qualname)`)."""
        with self._question(("@class", qualname)):
            result.mro[qualname], result.bases[qualname] = [qualname], []
            with suppress(BudgetExceeded):
                result.mro[qualname] = self.mro(qualname)
                result.bases[qualname] = self.class_bases(qualname)
                result.external_bases[qualname] = self.external_bases(qualname)

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
        target: str | None = self._cached(
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
        base = self.eval(ref[1])
        for kind, subject in ordered(base):
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


def ordered(items: Any) -> list[Any]:
    """Values or refs in a fixed order, so that evaluation visits them (and cuts its cycles) the same
    way in every process, whatever the hash seed."""
    if len(items) < 2:
        # Nothing to order: spare the repr of the one item (most refs denote one value).
        return list(items)
    return sorted(items, key=repr)


def _frozen(values: set[Value]) -> frozenset[Value]:
    """The element values a container frozen in a call context holds: more than MAX_VALUES, or
    containers nested past MAX_FROZEN_NESTING, are too imprecise to draw edges from and become the
    sentinel ("many", n), as a ref's values do."""
    kept = {value for value in values if _nesting(value) < MAX_FROZEN_NESTING}
    if len(kept) > MAX_VALUES:
        return frozenset({("many", len(values))})
    if len(kept) < len(values):
        kept.add(("many", len(values) - len(kept)))
    return frozenset(kept)


def _nesting(value: Value) -> int:
    """How many containers frozen in a call context a value is, one inside the other."""
    if value[0] != "coll" or value[1][0] != "coll":
        return 0
    return 1 + max((_nesting(v) for ref in value[1][1] if ref[0] == "vals" for v in ref[1]), default=0)


def _certain(targets: list[CallTarget], strict: list[CallTarget]) -> list[CallTarget]:
    """The targets, each one the strict linker does not find (it needs argument flow) made heuristic."""
    sure = {t.target for t in strict}
    return [t if t.target in sure else CallTarget(t.target, t.kind, "heuristic") for t in targets]


def _context_env(context: tuple[Any, ...]) -> dict[str, Any]:
    """The environment of a call context (see `Linker.apply`) from its key."""
    return {
        "func": context[0],
        "args": list(context[1]),
        "kwargs": dict(context[2]),
        "unset": context[3],
        "key": context,
    }


class CycleHeads:
    """The head of a cycle of memo keys: the least by repr, the same in every process.

    A key holding a set is written with the set sorted (a set's repr follows the hash seed), which
    is slow; keys without a set, nearly all, come first. Both texts are kept per key: the same keys
    meet again in later components (a component entered away from its head, each round of argument
    flow), and equal keys have equal texts (the resolver's keys hold no 1 where another holds True).
    """

    def __init__(self, look: Callable[[], None] = lambda: None) -> None:
        # Called before each key is written out: the build's budget (`BuildBudget.look`), since a
        # key's text is as large as the values it holds.
        self._look = look
        self._texts: dict[Any, str] = {}
        # repr(key), or None for a key holding a set.
        self._plain: dict[Any, str | None] = {}
        # A frozenset sorted (see `_sorted_sets`): the same argument values recur in many keys.
        self._sets: dict[frozenset[Any], tuple[Any, ...]] = {}

    def __call__(self, keys: list[Any]) -> Any:
        groups = _by_tag(keys)
        for group in groups:
            plain = [(text, key) for key in group if (text := self._plain_text(key)) is not None]
            if plain:
                return min(plain, key=itemgetter(0))[1]
        return min(groups[0], key=self._text)

    def _plain_text(self, key: Any) -> str | None:
        try:
            return self._plain[key]
        except KeyError:
            self._look()
            text = repr(key)
            found = self._plain[key] = None if "{" in text else text
            return found

    def _text(self, key: Any) -> str:
        text = self._texts.get(key)
        if text is None:
            self._look()
            text = self._texts[key] = repr(_sorted_sets(key, self._sets))
        return text


def _by_tag(keys: list[Any]) -> list[list[Any]]:
    """The keys grouped by their tag (first item), least tag first, each group in the keys' order.

    A key's text starts with its tag's, `('tag', ...`, so keys of different tags compare as their
    tags do, followed by the closing quote: the least text is in the first group that has a key of
    that kind of text. One group of all the keys when one is not a tuple with a plain tag.
    """
    tagged: dict[str, list[Any]] = {}
    for key in keys:
        tag = key[0] if type(key) is tuple and key else None
        if type(tag) is not str or repr(tag) != f"'{tag}'":
            return [keys]
        tagged.setdefault(tag + "'", []).append(key)
    return [tagged[tag] for tag in sorted(tagged)]


def _sorted_sets(item: Any, sets: dict[frozenset[Any], tuple[Any, ...]]) -> Any:
    """The item with each set (and dict) in it written as a tuple of its sorted parts; the frozensets
    done are kept in `sets`."""
    if isinstance(item, tuple):
        return tuple(_sorted_sets(part, sets) for part in item)
    if isinstance(item, frozenset):
        done = sets.get(item)
        if done is None:
            done = sets[item] = ("<set>", *sorted((_sorted_sets(part, sets) for part in item), key=repr))
        return done
    if isinstance(item, set):
        return ("<set>", *sorted((_sorted_sets(part, sets) for part in item), key=repr))
    if isinstance(item, dict):
        return ("<dict>", *sorted(((k, _sorted_sets(v, sets)) for k, v in item.items()), key=repr))
    return item
