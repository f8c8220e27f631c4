"""Calls Python makes on the code's behalf, which the runtime-edge benchmark saw and the resolver missed
(`bench/psmr_runtime_edges.py`), each case a tree built from strings.

A generator's body runs where it is iterated; `from m import x` asks a module `__getattr__`; a
container compared, hashed or sorted calls its elements' dunders; a descriptor's `__get__` runs on a
read; copying and pickling call the copy and pickle protocols.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.call_edges import built, call_statuses


def _edges(tmp_path: Path, files: dict[str, str] | str) -> dict[tuple[str, str], set[str]]:
    """(caller, callee) -> the statuses of the call evidence (a one-module tree `m` for a string)."""
    return call_statuses(built(tmp_path, files))


def test_a_generator_runs_where_it_is_iterated(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """def numbers():
    yield 1


def words():
    yield "a"


def letters():
    yield from words()


def source():
    return numbers()


class Bar:
    def generator(self):
        yield 1

    def __iter__(self):
        return self.generator()


def loop():
    for n in source():
        print(n)


def listed():
    return list(source())


def counted():
    for i, n in enumerate(source()):
        print(i, n)


def joined():
    return ", ".join(letters())


def bar():
    for _ in Bar():
        pass
    return list(Bar())
""",
    )
    for caller in ("m.loop", "m.listed", "m.counted"):
        assert edges[(caller, "m.numbers")] == {"confirmed"}, caller
    assert ("m.source", "m.numbers") in edges  # the call that makes the generator stays an edge
    assert edges[("m.joined", "m.letters")] == {"confirmed"}
    assert edges[("m.letters", "m.words")] == {"confirmed"}
    assert edges[("m.bar", "m.Bar.__iter__")] == {"confirmed"}
    assert edges[("m.bar", "m.Bar.generator")] == {"confirmed"}


def test_from_import_asks_a_module_getattr(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        {
            "pkg/__init__.py": "from .core import Command\nfrom .core import old_name\n",
            "pkg/core.py": """class Command:
    pass


def __getattr__(name):
    if name == "old_name":
        return Command
    raise AttributeError(name)
""",
            "pkg/plain.py": "class Thing:\n    pass\n",
            "pkg/user.py": """import typing as t

from .plain import Thing

if t.TYPE_CHECKING:
    from .core import Command


def late():
    from .core import old_name
    return old_name
""",
        },
    )
    # Importing from a module (not a package) looks up its __path__ first: the module's __getattr__.
    assert edges[("pkg", "pkg.core.__getattr__")] == {"confirmed"}
    assert edges[("pkg.user.late", "pkg.core.__getattr__")] == {"confirmed"}
    # An import under `if TYPE_CHECKING:` never runs.
    assert not any(callee.endswith("__getattr__") for caller, callee in edges if caller == "pkg.user")


def test_containers_compared_hashed_or_ordered_call_their_elements_dunders(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """import functools
from typing import TYPE_CHECKING


@functools.total_ordering
class Low:
    def __lt__(self, other):
        return True

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 1


class Up:
    def __eq__(self, other):
        return True


if TYPE_CHECKING:
    Interval = tuple[Low, Up]


class Range:
    _bounds: tuple[Interval, ...]

    def __init__(self, low: Low, up: Up):
        self.low = low
        self.up = up

    def __eq__(self, other):
        return self._bounds == other._bounds

    def __hash__(self):
        return hash((self.low, self.up))

    def empty(self):
        return self._bounds == ()


def highest(a: Low, b: Low):
    return max(a, b)


def greater(a: Low, b: Low):
    return a > b
""",
    )
    assert edges[("m.Range.__eq__", "m.Low.__eq__")] == {"confirmed"}
    # Compared with an empty tuple, a tuple compares none of its elements.
    assert ("m.Range.empty", "m.Low.__eq__") not in edges
    assert edges[("m.Range.__eq__", "m.Up.__eq__")] == {"confirmed"}
    assert edges[("m.Range.__hash__", "m.Low.__hash__")] == {"confirmed"}
    # total_ordering makes __gt__ of __lt__ and __eq__.
    assert edges[("m.highest", "m.Low.__lt__")] == {"confirmed"}
    assert edges[("m.highest", "m.Low.__eq__")] == {"confirmed"}
    # a's derived __gt__ runs Low.__lt__; b's reflected __lt__ (only if that returned NotImplemented) is
    # the same function at the same site: one confirmed call, not a guess beside it.
    assert edges[("m.greater", "m.Low.__lt__")] == {"confirmed"}
    assert ("m.greater", "m.Up.__eq__") not in edges


def test_an_instance_used_as_a_key_is_hashed(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """class Key:
    def __hash__(self):
        return 1

    def __eq__(self, other):
        return True


class Table:
    def __init__(self):
        self._map: dict[Key, int] = {}

    def __getitem__(self, key):
        return 1

    def find(self, key: Key):
        if key in self._map:
            return self._map[key]
        return self._map.get(key)

    def own(self, key: Key, other: "Table"):
        return other[key]
""",
    )
    assert edges[("m.Table.find", "m.Key.__hash__")] == {"confirmed"}
    # __eq__ runs only where another key of the same hash is there: derived.
    assert edges[("m.Table.find", "m.Key.__eq__")] == {"heuristic"}
    # A container of the tree decides what its __getitem__ does with the key.
    assert ("m.Table.own", "m.Key.__hash__") not in edges


def test_a_subscripted_class_is_the_class(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """from typing import Generic, TypeVar

T = TypeVar("T")


class Context(Generic[T]):
    def __init__(self, value):
        self.value = value

    @classmethod
    def get(cls):
        return None


class Param(Generic[T]):
    def __class_getitem__(cls, item):
        return super().__class_getitem__(item)


class IntParam(Param[int]):
    pass


def use():
    with_value = Context[dict]({"a": 1})
    Context[dict].get()
    return with_value
""",
    )
    assert edges[("m.use", "m.Context.__init__")] == {"confirmed"}
    assert edges[("m.use", "m.Context.get")] == {"confirmed"}
    assert edges[("m", "m.Param.__class_getitem__")] == {"confirmed"}


def test_getattr_with_a_constant_prefix_reaches_the_methods_it_may_name(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """class Validator:
    def __init__(self, name):
        self.name = name

    def _process_name(self, value):
        return value

    def _process_version(self, value):
        return value

    def other(self, value):
        return value

    def get(self, value):
        converter = getattr(self, f"_process_{self.name}")
        return converter(value)


class Handlers:
    def on_start(self):
        return 1

    def on_stop(self):
        return 2


def dispatch(event):
    return getattr(Handlers(), "on_" + event)()


dispatch("start")
""",
    )
    assert edges[("m.Validator.get", "m.Validator._process_name")] == {"heuristic"}
    assert edges[("m.Validator.get", "m.Validator._process_version")] == {"heuristic"}
    assert ("m.Validator.get", "m.Validator.other") not in edges
    # The argument names the method exactly.
    assert ("m.dispatch", "m.Handlers.on_start") in edges
    assert ("m.dispatch", "m.Handlers.on_stop") not in edges


def test_an_overloaded_function_returning_a_generator_runs_it_where_iterated(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """from typing import Iterator, overload


def produce(items):
    yield from items


class Range:
    @overload
    def filter(self, items: list[str]) -> Iterator[str]: ...
    @overload
    def filter(self, items: list[int]) -> Iterator[int]: ...
    def filter(self, items):
        return produce(items)


def use(r: Range):
    return list(r.filter(["a"]))
""",
    )
    assert edges[("m.use", "m.produce")] == {"confirmed"}


def test_pytest_raises_with_match_formats_the_exception(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/errors.py": """class Problem(Exception):
    def __str__(self):
        return "problem"


class Other(Exception):
    def __str__(self):
        return "other"
""",
            "tests/__init__.py": "",
            "tests/test_errors.py": """import pytest

from pkg.errors import Other, Problem


def fail():
    raise Problem()


def test_match():
    with pytest.raises(Problem, match="prob"):
        fail()


def test_exconly():
    with pytest.raises(Other) as info:
        fail()
    assert info.exconly() == "other"


def test_plain():
    with pytest.raises(Problem):
        fail()
""",
        },
    )
    assert edges[("tests.test_errors.test_match", "pkg.errors.Problem.__str__")] == {"confirmed"}
    assert edges[("tests.test_errors.test_exconly", "pkg.errors.Other.__str__")] == {"confirmed"}
    assert ("tests.test_errors.test_plain", "pkg.errors.Problem.__str__") not in edges


def test_comparisons_try_the_reflected_dunder_and_truth_tests_call_bool_or_len(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """class Version:
    def __lt__(self, other):
        return NotImplemented


class Boundary:
    def __gt__(self, other):
        return True


class Bag:
    def __len__(self):
        return 0


class Flag:
    def __bool__(self):
        return False


def compare(a: Version, b: Boundary):
    return a < b


def compare_plain(n: int, b: Boundary):
    return n < b


def truth(bag: Bag, flag: Flag):
    if bag:
        return 1
    while not flag:
        return 2
    return bag and flag
""",
    )
    assert edges[("m.compare", "m.Version.__lt__")] == {"confirmed"}
    # Only Version.__lt__ returning NotImplemented reaches Boundary.__gt__; an int's always does.
    assert edges[("m.compare", "m.Boundary.__gt__")] == {"heuristic"}
    assert edges[("m.compare_plain", "m.Boundary.__gt__")] == {"confirmed"}
    assert edges[("m.truth", "m.Bag.__len__")] == {"confirmed"}
    assert edges[("m.truth", "m.Flag.__bool__")] == {"confirmed"}


def test_set_and_dict_literals_and_set_hash_their_elements(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """class Tag:
    def __hash__(self):
        return 1

    def __eq__(self, other):
        return True


def literal(a: Tag, b: Tag):
    return {a, b}


def keys(a: Tag):
    return {a: 1}


def made(tags: list[Tag]):
    return frozenset(tags)
""",
    )
    for caller in ("m.literal", "m.keys", "m.made"):
        assert edges[(caller, "m.Tag.__hash__")] == {"confirmed"}, caller


def test_a_return_annotation_runs_class_getitem_only_where_annotations_are_evaluated(tmp_path: Path) -> None:
    # A def evaluates its return annotation, unless `from __future__ import annotations` keeps it a
    # string (the language reference, "Function definitions").
    param = """class Param:
    def __class_getitem__(cls, item):
        return cls
"""
    edges = _edges(
        tmp_path,
        {
            "param.py": param,
            "now.py": "from param import Param\n\n\ndef pick() -> Param[int]:\n    return Param()\n",
            "later.py": "from __future__ import annotations\n\nfrom param import Param\n\n\n"
            "def pick() -> Param[int]:\n    return Param()\n",
        },
    )
    assert edges[("now", "param.Param.__class_getitem__")] == {"confirmed"}
    assert ("later", "param.Param.__class_getitem__") not in edges


def test_the_operator_modules_functions_are_the_operators(tmp_path: Path) -> None:
    # `operator.lt(a, b)` is `a < b` (the operator module's documentation), also where a test is
    # handed the function by `parametrize`.
    edges = _edges(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/version.py": """class Version:
    def __eq__(self, other):
        return True

    def __lt__(self, other):
        return False

    def __add__(self, other):
        return self
""",
            "tests/__init__.py": "",
            "tests/test_version.py": """import operator

import pytest

from pkg.version import Version


def test_direct():
    assert operator.lt(Version(), Version()) is False
    assert operator.add(Version(), Version())


@pytest.mark.parametrize("op", [operator.eq, operator.ne])
def test_given(op):
    assert op(Version(), Version())
""",
        },
    )
    assert edges[("tests.test_version.test_direct", "pkg.version.Version.__lt__")] == {"confirmed"}
    assert edges[("tests.test_version.test_direct", "pkg.version.Version.__add__")] == {"confirmed"}
    assert ("tests.test_version.test_direct", "pkg.version.Version.__eq__") not in edges
    # parametrize states the values the test is given: as sure as a fixture.
    assert edges[("tests.test_version.test_given", "pkg.version.Version.__eq__")] == {"confirmed"}


def test_a_slice_is_the_sequence_not_an_element(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """class Group:
    def __iter__(self):
        return iter([])


class Array:
    def __init__(self, groups: list[Group]):
        self.groups = groups

    def last(self):
        return next(g for g in self.groups[::-1])

    def flat(self):
        return [x for g in self.groups[1:] for x in g]
""",
    )
    assert ("m.Array.last", "m.Group.__iter__") not in edges
    assert edges[("m.Array.flat", "m.Group.__iter__")] == {"confirmed"}


def test_every_class_a_long_parametrize_list_names_is_constructed_by_the_test(tmp_path: Path) -> None:
    # pytest runs the test once per value listed: twenty classes are twenty calls, not an imprecise
    # value (a list kept in another module, as test suites keep theirs).
    init = "    def __init__(self, allow_none=False):\n        pass\n\n\n"
    classes = "".join(f"class F{i}:\n{init}" for i in range(20))
    edges = _edges(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/fields.py": classes,
            "tests/__init__.py": "",
            "tests/base.py": "from pkg import fields\n\nALL_FIELDS = ["
            + ", ".join(f"fields.F{i}" for i in range(20))
            + "]\n",
            "tests/test_fields.py": """import pytest

from tests.base import ALL_FIELDS


@pytest.mark.parametrize("field_class", ALL_FIELDS)
def test_allow_none(field_class):
    field_class(allow_none=True)
""",
        },
    )
    for i in range(20):
        assert edges[("tests.test_fields.test_allow_none", f"pkg.fields.F{i}.__init__")] == {"confirmed"}


def test_reading_an_attribute_a_descriptor_holds_runs_its_get(tmp_path: Path) -> None:
    # The data model: a class attribute whose value's class defines `__get__` is a descriptor; a read
    # through the instance or the class calls it, unless (without `__set__`) the instance stores its own.
    edges = _edges(
        tmp_path,
        """from typing import Generic, TypeVar

T = TypeVar("T")


class Validator(Generic[T]):
    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, instance, owner) -> T:
        return instance._raw[self.name]


class Plain:
    def __get__(self, instance, owner):
        return 1


class Metadata:
    name: Validator[str] = Validator()
    version = Validator()
    hidden = Plain()

    def __init__(self):
        self._raw = {}
        self.hidden = 2

    def write(self):
        return self.name, self.hidden


def read(meta: Metadata):
    return meta.version


def on_class():
    return Metadata.name
""",
    )
    assert edges[("m.Metadata.write", "m.Validator.__get__")] == {"confirmed"}
    assert edges[("m.read", "m.Validator.__get__")] == {"confirmed"}
    assert edges[("m.on_class", "m.Validator.__get__")] == {"confirmed"}
    assert ("m.Metadata.write", "m.Plain.__get__") not in edges


def test_a_comparison_total_ordering_adds_read_as_an_attribute_runs_the_one_defined(tmp_path: Path) -> None:
    # `functools.total_ordering` fills in `__ge__` from `__lt__` (and `__eq__`): the bound method kept
    # to be called later runs those.
    edges = _edges(
        tmp_path,
        """import functools


@functools.total_ordering
class Boundary:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v == other

    def __lt__(self, other):
        return self.v < other


def bound(version: Boundary):
    below = version.__ge__
    return below(1)
""",
    )
    assert edges[("m.bound", "m.Boundary.__lt__")] == {"confirmed"}
    # `__ge__` is `not self < other`: no equality is asked.
    assert ("m.bound", "m.Boundary.__eq__") not in edges


def test_an_overloaded_function_returning_a_generator_runs_it_when_iterated(tmp_path: Path) -> None:
    # The overloads declare `Iterator[...]`; the implementation returns a generator function's call,
    # whose body runs where the result is iterated.
    edges = _edges(
        tmp_path,
        """from collections.abc import Iterable, Iterator
from typing import overload


def filter_by_ranges(items):
    for item in items:
        yield item


class Range:
    @overload
    def filter(self, items: Iterable[str]) -> Iterator[str]: ...

    @overload
    def filter(self, items: Iterable[int], key: int) -> Iterator[int]: ...

    def filter(self, items, key=None):
        return filter_by_ranges(items)


def use():
    return list(Range().filter(["a"]))
""",
    )
    assert edges[("m.use", "m.filter_by_ranges")] == {"confirmed"}


def test_new_called_with_a_class_makes_an_instance_of_it(tmp_path: Path) -> None:
    # `object.__new__(cls)` returns an instance of cls (the data model's `__new__`), and `__new__`
    # takes the class as its first parameter.
    edges = _edges(
        tmp_path,
        """class Version:
    def __setstate__(self, state):
        self._version = state


class Key:
    def __new__(cls, name):
        self = super().__new__(cls)
        self.setup(name)
        return self

    def setup(self, name):
        self.name = name


def restore():
    v = Version.__new__(Version)
    v.__setstate__({})
""",
    )
    assert edges[("m.restore", "m.Version.__setstate__")] == {"confirmed"}
    assert edges[("m.Key.__new__", "m.Key.setup")] == {"confirmed"}


def test_copying_and_pickling_run_the_protocol_methods_of_the_class(tmp_path: Path) -> None:
    # The `copy` and `pickle` modules' protocol: `__copy__` where defined, else reduce
    # (`__reduce_ex__`, `__getstate__`) and rebuild (the callable the reduction names, `__setstate__`);
    # what `pickle.loads` gives back of `pickle.dumps(x)` is of x's class.
    edges = _edges(
        tmp_path,
        """import copy
import pickle


class Item:
    def __init__(self, value):
        self.value = value

    def __reduce_ex__(self, protocol):
        return self.__class__, (self.value,)

    def as_string(self):
        return str(self.value)


class Version:
    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.state = state


class Doc:
    def __copy__(self):
        return Doc()


def round_trip():
    s = pickle.dumps(Item(12))
    assert pickle.loads(s).as_string() == "12"


def dumped():
    return pickle.dumps(Version())


def copies():
    copy.copy(Doc())
    copy.deepcopy(Version())


def from_bytes(data):
    return pickle.loads(data)
""",
    )
    for callee in ("m.Item.__reduce_ex__", "m.Item.as_string", "m.Item.__init__"):
        assert edges[("m.round_trip", callee)] == {"confirmed"}, callee
    assert edges[("m.dumped", "m.Version.__getstate__")] == {"confirmed"}
    assert ("m.dumped", "m.Version.__setstate__") not in edges
    assert edges[("m.copies", "m.Doc.__copy__")] == {"confirmed"}
    assert edges[("m.copies", "m.Version.__setstate__")] == {"confirmed"}
    assert not any(caller == "m.from_bytes" and callee.startswith("m.") for caller, callee in edges)


def test_copying_a_value_declared_as_a_base_runs_one_of_its_subclasses_protocols(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """import copy


class Item:
    def __init__(self, value):
        self.value = value

    def __reduce_ex__(self, protocol):
        return self.__class__, (self.value,)

    def copy(self):
        return copy.copy(self)


class Table(Item):
    def __copy__(self):
        return Table(self.value)


class Integer(Item):
    def __init__(self, value):
        super().__init__(value)


def make():
    return Table(1), Integer(2)
""",
    )
    # `self` may be a Table (its `__copy__`) or an Integer (reduced and rebuilt as an Integer).
    assert edges[("m.Item.copy", "m.Table.__copy__")] == {"heuristic"}
    assert edges[("m.Item.copy", "m.Integer.__init__")] == {"heuristic"}
    assert edges[("m.Item.copy", "m.Item.__reduce_ex__")] == {"heuristic"}


def test_a_bound_method_read_then_called_reaches_the_overrides(tmp_path: Path) -> None:
    # `report = e.show` binds the method the object's class finds at run time; calling it later runs
    # a subclass's override as `e.show()` would (derived: the exception's class decides).
    edges = _edges(
        tmp_path,
        """class Problem(Exception):
    def show(self):
        print("problem")


class UsageProblem(Problem):
    def show(self):
        print("usage")


class Quiet(Problem):
    pass


def run(n):
    if n:
        raise UsageProblem()
    raise Quiet()


def main(n):
    report = None
    try:
        run(n)
    except Problem as e:
        report, code = e.show, 1
    if report is not None:
        report()


def made_here():
    p = Problem()
    shown = p.show
    shown()
""",
    )
    assert edges[("m.main", "m.UsageProblem.show")] == {"heuristic"}
    assert edges[("m.main", "m.Problem.show")] == {"heuristic"}
    # A Problem the code constructs runs Problem's own method.
    assert edges[("m.made_here", "m.Problem.show")] == {"confirmed"}
    assert ("m.made_here", "m.UsageProblem.show") not in edges


def test_a_member_of_an_enum_is_an_instance_of_its_class(tmp_path: Path) -> None:
    # The data model: the names an Enum subclass's body binds (other than its methods) become
    # instances of that class, and iterating the class yields them.
    edges = _edges(
        tmp_path,
        """import copy
from enum import Enum


class Marker(Enum):
    FIRST = object()
    SECOND = object()

    def __repr__(self):
        return self.name

    def __copy__(self):
        return self

    def describe(self):
        return "marker"


FIRST = Marker.FIRST


def show():
    return repr(FIRST)


def described():
    return Marker.SECOND.describe()


def duplicated():
    return [copy.copy(m) for m in Marker]


class Plain:
    LIMIT = object()

    def __repr__(self):
        return "plain"


def plain():
    return repr(Plain.LIMIT)
""",
    )
    assert edges[("m.show", "m.Marker.__repr__")] == {"confirmed"}
    assert edges[("m.described", "m.Marker.describe")] == {"confirmed"}
    assert edges[("m.duplicated", "m.Marker.__copy__")] == {"confirmed"}
    assert ("m.plain", "m.Plain.__repr__") not in edges


def test_entering_what_a_contextmanager_function_returned_runs_its_body(tmp_path: Path) -> None:
    # `contextlib.contextmanager` turns a generator function into one whose call makes a context
    # manager: its body runs up to `yield` where the `with` statement enters it, wherever it was made.
    edges = _edges(
        tmp_path,
        """import contextlib


@contextlib.contextmanager
def opened(path):
    yield path


def pager(path):
    return opened(path)


def use():
    with pager("x") as f:
        print(f)


@contextlib.asynccontextmanager
async def session():
    yield 1


def make():
    return session()


async def use_async():
    async with make() as s:
        print(s)
""",
    )
    assert edges[("m.use", "m.opened")] == {"confirmed"}
    assert edges[("m.use_async", "m.session")] == {"confirmed"}


def test_with_as_binds_what_a_contextmanager_function_yields(tmp_path: Path) -> None:
    # `with cm as x` binds what `cm.__enter__()` returns: for what `contextlib.contextmanager` made,
    # the value the generator yields (a `typing.cast` to a library type leaves the value as it is).
    edges = _edges(
        tmp_path,
        """import contextlib
import typing as t


class Writer:
    def write(self, text):
        return len(text)


@contextlib.contextmanager
def opened() -> t.Iterator[t.TextIO]:
    writer = Writer()
    yield t.cast(t.TextIO, writer)


def pager() -> t.ContextManager[t.TextIO]:
    return opened()


def use():
    with pager() as f:
        f.write("x")
""",
    )
    assert edges[("m.use", "m.Writer.write")] == {"confirmed"}


def test_update_wrapper_returns_the_wrapper(tmp_path: Path) -> None:
    # `functools.update_wrapper(wrapper, wrapped)` copies wrapped's metadata onto wrapper and returns
    # wrapper: a decorator that returns it replaces the function with its nested one.
    edges = _edges(
        tmp_path,
        """import functools
from functools import update_wrapper


def pass_state(f):
    def new_func(*args, **kwargs):
        return f("state", *args, **kwargs)

    return update_wrapper(new_func, f)


def logged(f):
    def inner(*args):
        return f(*args)

    return functools.update_wrapper(inner, f)


@pass_state
def command(state, x):
    return x


@logged
def other(x):
    return x


def invoke(callback, *args):
    return callback(*args)


def main():
    return invoke(command, 1)


def direct():
    return other(2)
""",
    )
    assert edges[("m.direct", "m.logged.inner")] == {"confirmed"}
    # Through a parameter, what flows in is derived, the decorated function as any other.
    assert edges[("m.invoke", "m.pass_state.new_func")] == {"heuristic"}
    assert ("m.invoke", "m.command") not in edges


def test_reading_an_attribute_a_class_lacks_asks_its_getattr(tmp_path: Path) -> None:
    # The data model: `__getattr__` is called when the normal lookup (the instance, its class's MRO)
    # finds no attribute of that name. Derived: an attribute set by name at run time hides it.
    edges = _edges(
        tmp_path,
        """class Item:
    def __init__(self, value, **extra):
        self.value = value
        self._info = extra

    def __getattr__(self, name):
        return self._info.get(name)


def read():
    item = Item("x", kind="file")
    return item.kind, item.value
""",
    )
    assert edges[("m.read", "m.Item.__getattr__")] == {"heuristic"}
    assert ("m.Item.__init__", "m.Item.__getattr__") not in edges


def test_a_none_guard_is_kept_where_the_argument_may_still_be_none(tmp_path: Path) -> None:
    # `if pre is None: return buffered(items)` runs for a caller whose own `pre=None` it passes on
    # (whatever else its callers pass it), even after `if pre is None: pre = policy()` (policy may
    # answer None too); a caller that passes a value of its own skips it.
    edges = _edges(
        tmp_path,
        """def policy(flag) -> bool | None:
    return flag


def buffered(items):
    for item in items:
        yield item


def picked(items, pre):
    if pre is None:
        return buffered(items)
    return iter(items)


class Spec:
    def select(self, items, pre=None):
        if pre is None:
            pre = policy(pre)
        return picked(items, pre)


class Strict:
    pass


def given(items):
    return picked(items, Strict())


def run():
    return list(Spec().select([1, 2]))


def run_given():
    return list(given([1, 2]))


def run_strict():
    return list(Spec().select([1, 2], Strict()))
""",
    )
    assert edges[("m.run", "m.buffered")] == {"heuristic"}
    assert ("m.run_given", "m.buffered") not in edges


def test_getattr_by_a_parametrized_name_reaches_the_methods_the_rows_name(tmp_path: Path) -> None:
    # pytest runs the test once per row, so `getattr(spec, method)` reads each method the rows name;
    # a name that comes from outside (no row, no constant passed) is no guess at every attribute.
    edges = _edges(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/spec.py": """class Spec:
    def is_subset(self, other):
        return True

    def is_superset(self, other):
        return True

    def unrelated(self):
        return None


def by_name(spec, name):
    return getattr(spec, name)
""",
            "tests/__init__.py": "",
            "tests/test_spec.py": """import pytest

from pkg.spec import Spec


@pytest.mark.parametrize("method", ["is_subset", "is_superset"])
def test_relations(method):
    getattr(Spec(), method)(Spec())
""",
        },
    )
    assert ("tests.test_spec.test_relations", "pkg.spec.Spec.is_subset") in edges
    assert ("tests.test_spec.test_relations", "pkg.spec.Spec.is_superset") in edges
    assert ("tests.test_spec.test_relations", "pkg.spec.Spec.unrelated") not in edges
    assert not [
        callee for caller, callee in edges if caller == "pkg.spec.by_name" and callee.startswith("pkg.")
    ]


def test_dataclasses_asdict_calls_its_dict_factory(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """import dataclasses
from functools import reduce


def factory(pairs):
    return dict(pairs)


def add(a, b):
    return a + b


@dataclasses.dataclass
class Point:
    x: int

    def to_dict(self):
        return dataclasses.asdict(self, dict_factory=factory)


def total(xs):
    return reduce(add, xs)
""",
    )
    assert edges[("m.Point.to_dict", "m.factory")] == {"confirmed"}
    assert edges[("m.total", "m.add")] == {"confirmed"}


def test_reading_a_name_a_module_does_not_bind_asks_its_getattr(tmp_path: Path) -> None:
    # PEP 562: `module.name` calls the module's `__getattr__` only where the module binds no such name.
    edges = _edges(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/lazy.py": """VERSION = "1"


def __getattr__(name):
    raise AttributeError(name)
""",
            "pkg/use.py": """from pkg import lazy


def missing():
    return lazy.old_name


def present():
    return lazy.VERSION
""",
        },
    )
    assert edges[("pkg.use.missing", "pkg.lazy.__getattr__")] == {"heuristic"}
    assert ("pkg.use.present", "pkg.lazy.__getattr__") not in edges


def test_a_text_wrapper_asks_its_buffer_what_it_can_do(tmp_path: Path) -> None:
    # io.TextIOWrapper(buffer) calls buffer.readable(), writable(), seekable() and tell() as it is
    # made; a method the buffer's class lacks goes to its `__getattr__`.
    edges = _edges(
        tmp_path,
        """import io


class Fixup:
    def __init__(self, stream):
        self._stream = stream

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def readable(self):
        return True

    def writable(self):
        return False

    def seekable(self):
        return False


class Wrapper(io.TextIOWrapper):
    def __init__(self, stream):
        super().__init__(Fixup(stream), "utf-8")


def wrap(stream):
    return io.TextIOWrapper(Fixup(stream))
""",
    )
    for caller in ("m.Wrapper.__init__", "m.wrap"):
        for method in ("readable", "writable", "seekable", "__getattr__"):
            assert edges[(caller, f"m.Fixup.{method}")] == {"heuristic"}, (caller, method)


def test_calling_a_method_a_class_lacks_asks_its_getattr(tmp_path: Path) -> None:
    # `f.read()` on a proxy that defines no `read` looks it up through `__getattr__` first.
    edges = _edges(
        tmp_path,
        """class KeepOpen:
    def __init__(self, file):
        self._file = file

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def close(self):
        return None


def use(file):
    with KeepOpen(file) as f:
        f.read()


def close(file):
    KeepOpen(file).close()
""",
    )
    assert edges[("m.use", "m.KeepOpen.__getattr__")] == {"heuristic"}
    assert ("m.close", "m.KeepOpen.__getattr__") not in edges


def test_a_global_patched_from_another_module_is_what_its_module_calls(tmp_path: Path) -> None:
    # A test harness stores its fakes into a module's globals (`termui.prompt_func = fake`); the
    # module's own calls of the name, and calls through the module's attribute, then reach the fake
    # (derived: only while it is stored).
    edges = _edges(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/termui.py": """def prompt_func(text):
    return input(text)


def strip(text):
    return text


def prompt(text):
    return prompt_func(text)
""",
            "pkg/echo.py": """from pkg import termui


def echo(text):
    return termui.strip(text)
""",
            "pkg/testing.py": """from pkg import termui


def fake_prompt(text):
    return text


def fake_strip(text):
    return text


def local_store(box):
    box.prompt_func = fake_strip


def isolate():
    old = termui.prompt_func
    termui.prompt_func = fake_prompt
    termui.strip = fake_strip
    return old
""",
        },
    )
    assert edges[("pkg.termui.prompt", "pkg.termui.prompt_func")] == {"confirmed"}
    assert edges[("pkg.termui.prompt", "pkg.testing.fake_prompt")] == {"heuristic"}
    assert edges[("pkg.echo.echo", "pkg.testing.fake_strip")] == {"heuristic"}
    assert ("pkg.termui.prompt", "pkg.testing.fake_strip") not in edges


def test_a_stored_callback_reaches_every_function_stored_past_the_value_cap(tmp_path: Path) -> None:
    # A command keeps the function its decorator was given; invoking any command calls it. With more
    # commands than the resolver carries values (16), each stored function is still reached, however
    # many decorators passed it on (a group's `command()` hands it to the module's).
    commands = "".join(
        f"""

@group.command()
def command_{i}():
    return {i}
"""
        for i in range(20)
    )
    edges = _edges(
        tmp_path,
        """import functools


class Command:
    def __init__(self, callback):
        self.callback = callback

    def invoke(self, ctx: "Context"):
        return ctx.invoke(self.callback)


class Context:
    def invoke(self, callback):
        return callback()


def command():
    def decorator(f):
        return Command(f)

    return decorator


def make(f):
    return command()(f)


class Group:
    def command(self):
        def decorator(f):
            return make(f)

        return decorator


group = Group()


def pass_context(f):
    def new_func(*args):
        return f(Context(), *args)

    return functools.update_wrapper(new_func, f)


@group.command()
@pass_context
def with_context(ctx):
    return ctx
"""
        + commands,
    )
    assert edges[("m.Context.invoke", "m.pass_context.new_func")] == {"heuristic"}
    for i in (0, 19):
        assert edges[("m.Context.invoke", f"m.command_{i}")] == {"heuristic"}


def test_keywords_passed_on_through_kwargs_reach_the_parameter_that_names_them(tmp_path: Path) -> None:
    # `help_option(**kwargs)` stores its callback in kwargs and passes kwargs on to `option`, which
    # passes its own `**attrs` on to the class, whose `__init__` passes them on to its base: the
    # base's `callback` parameter is what the caller stored.
    edges = _edges(
        tmp_path,
        """class Parameter:
    def __init__(self, decls, callback=None, **extra):
        self.callback = callback

    def process(self, value):
        if self.callback is not None:
            return self.callback(self, value)
        return value


class Option(Parameter):
    def __init__(self, decls, flag=False, **attrs):
        super().__init__(decls, **attrs)


def option(*decls, cls=None, **attrs):
    if cls is None:
        cls = Option

    def decorator(f):
        f.params = [cls(decls, **attrs)]
        return f

    return decorator


def help_option(*decls, **kwargs):
    def show_help(param, value):
        return value

    kwargs.setdefault("callback", show_help)
    return option(*decls, **kwargs)


def version_option(*decls, **kwargs):
    def show_version(param, value):
        return value

    kwargs["callback"] = show_version
    return option(*decls, **kwargs)


def check(param, value):
    return value


def untouched(param, value):
    return value


option("-x", callback=check)
""",
    )
    for callback in ("m.help_option.show_help", "m.version_option.show_version", "m.check"):
        assert edges[("m.Parameter.process", callback)] == {"heuristic"}, callback
    assert ("m.Parameter.process", "m.untouched") not in edges
