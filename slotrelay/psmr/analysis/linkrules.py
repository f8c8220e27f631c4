"""The resolver's vocabulary: the values a ref denotes, the limits evaluation keeps to, and what it
knows of Python's builtins and standard library (which arguments they call, what they return).

`Values` is what the parts of evaluation below the evaluator (`slotrelay.psmr.analysis.evaluation`) ask of it:
the tables of the facts, its memo, and the values of refs, calls, elements and attributes.
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol

from slotrelay.psmr.analysis.facttables import LinkTables
from slotrelay.psmr.analysis.memo import CanonicalMemo

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
# How many calls deep a call is followed in its own context (see `CallContexts.apply`).
MAX_CONTEXT_DEPTH = 4
# How many parameters and attributes deep the functions of a callee with too many values are looked
# for (see `CallTargets.enumerated`): a command's callback is a decorator's parameter, passed on by another's.
MAX_ENUMERATION_DEPTH = 8
# How many containers frozen in a call context (`CallContexts.compute_in`) a value may hold one inside the
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
# The standard library's copying and pickling: what each returns of its argument (see `Evaluator.serialized`).
SERIALIZERS = frozenset({"copy.copy", "copy.deepcopy", "pickle.dumps", "pickle.loads"})
# Calls whose result is, for the calls it makes, their first argument: calling a partial calls the
# function it wraps; `update_wrapper` returns the wrapper it gave the wrapped one's metadata.
FIRST_ARGUMENT_STANDS = frozenset({("ext", "functools.partial"), ("ext", "functools.update_wrapper")})
# The descriptor method an attribute read or write runs.
DESCRIPTOR_DUNDERS = {"get": "__get__", "set": "__set__"}
# Builtins that iterate their first argument (see `CallTargets.iterated_arguments`).
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




class Values(Protocol):
    """The evaluation, as its parts (class hierarchy, narrowing, dunders, declared types, call
    contexts) call back into it."""

    strict: bool
    record: bool
    memo: CanonicalMemo[frozenset[Value]]
    tables: LinkTables
    scopes: dict[str, dict[str, Any]]
    bindings: dict[str, dict[str, list[Any]]]
    defs: dict[str, dict[str, Any]]
    dunder_names: set[str]

    def eval(self, ref: Any) -> frozenset[Value]: ...

    def call_result(self, value: Value) -> set[Value]: ...

    def elements(self, value: Value, key: Any = None) -> set[Value]: ...

    def attribute(self, value: Value, name: str) -> set[Value]: ...

    def builtin_result(self, name: str, args: Any) -> set[Value]: ...


def ordered(items: Any) -> list[Any]:
    """Values or refs in a fixed order, so that evaluation visits them (and cuts its cycles) the same
    way in every process, whatever the hash seed."""
    if len(items) < 2:
        # Nothing to order: spare the repr of the one item (most refs denote one value).
        return list(items)
    return sorted(items, key=repr)

