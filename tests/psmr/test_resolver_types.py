"""Resolution that reads the types the code states (issue 31), each case a tree built from strings.

An edge the code states (an annotation, a return type, a field) is confirmed; an edge that dispatch
over subclasses or overrides adds is heuristic (derived); nothing else is guessed.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.call_edges import built, call_statuses


def _edges(tmp_path: Path, files: dict[str, str] | str) -> dict[tuple[str, str], set[str]]:
    """(caller, callee) -> the statuses of the call evidence (a one-module tree `m` for a string)."""
    return call_statuses(built(tmp_path, files))


REG = """
class Reg:
    def fetch(self, key):
        return key


class Other:
    def fetch(self, key):
        return None

"""


def test_dataclass_attrs_namedtuple_and_pydantic_fields_type_their_attribute(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        REG
        + """
import dataclasses
from typing import NamedTuple, TypedDict

import attrs
import pydantic


@dataclasses.dataclass
class Plain:
    reg: Reg

    def lookup(self, key):
        return self.reg.fetch(key)


@attrs.define
class Attrs:
    reg: "Reg"

    def lookup(self, key):
        return self.reg.fetch(key)


class Pair(NamedTuple):
    reg: Reg


class Config(pydantic.BaseModel):
    reg: Reg


class Slots:
    reg: Reg

    def __init__(self):
        self.cache: Reg = make()

    def lookup(self, key):
        self.cache.fetch(key)
        return self.reg.fetch(key)


def make():
    return None


def use(pair: Pair, config: Config):
    pair.reg.fetch(1)
    config.reg.fetch(2)
""",
    )
    for caller in ("m.Plain.lookup", "m.Attrs.lookup", "m.Slots.lookup", "m.use"):
        assert edges[(caller, "m.Reg.fetch")] == {"confirmed"}, caller
        assert (caller, "m.Other.fetch") not in edges


def test_parameter_annotations_with_generics_optional_union_and_strings(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        REG
        + """
from typing import Annotated, Generic, Optional, TypeVar, Union

D = TypeVar("D")


class Registry(Generic[D]):
    def get(self, key):
        return key


def items(regs: list[Reg], by_name: dict[str, Reg], pair: tuple[Reg, Other]):
    for reg in regs:
        reg.fetch(1)
    by_name["a"].fetch(2)
    pair[1].fetch(3)


def maybe(a: Optional[Reg], b: Reg | None, c: Union[Reg, None], d: Annotated[Reg, "doc"], e: "Registry[D]"):
    a.fetch(1)
    b.fetch(2)
    c.fetch(3)
    d.fetch(4)
    e.get(5)
""",
    )
    assert edges[("m.items", "m.Reg.fetch")] == {"confirmed"}
    assert edges[("m.items", "m.Other.fetch")] == {"confirmed"}
    assert edges[("m.maybe", "m.Reg.fetch")] == {"confirmed"}
    assert edges[("m.maybe", "m.Registry.get")] == {"confirmed"}
    assert ("m.maybe", "m.Other.fetch") not in edges


def test_return_annotations_self_cast_and_properties_type_a_result(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """from typing import Self, cast


class Job:
    def run(self):
        return 1

    def copy(self) -> Self:
        return clone(self)

    @property
    def next(self) -> "Job":
        return lookup()

    @property
    def runner(self) -> "Runner":
        return lookup()


class Runner:
    def __call__(self):
        return 2


def clone(obj):
    return obj


def lookup():
    return None


def make() -> Job:
    return lookup()


def use(thing):
    make().run()
    make().copy().run()
    cast(Job, thing).run()
    cast("Job", thing).next.run()
    make().runner()
""",
    )
    assert edges[("m.use", "m.Job.run")] == {"confirmed"}
    assert edges[("m.use", "m.Job.copy")] == {"confirmed"}
    assert edges[("m.use", "m.Job.next")] == {"confirmed"}  # the property's getter
    assert edges[("m.use", "m.Runner.__call__")] == {"confirmed"}  # a property whose value is called


def test_overload_stubs_are_one_symbol_located_at_the_implementation(tmp_path: Path) -> None:
    ws = built(
        tmp_path,
        {
            "m.py": """from typing import overload


@overload
def item(value: int) -> "Integer": ...
@overload
def item(value: str) -> "String": ...
def item(value):
    if isinstance(value, int):
        return Integer()
    return String()


class Item:
    def as_string(self):
        return ""


class Integer(Item):
    def as_string(self):
        return "1"


class String(Item):
    def as_string(self):
        return "s"


def render():
    return item(3).as_string() + item("x").as_string()


def render_int():
    return item(3).as_string()
"""
        },
    )
    assert [c["kind"] for c in ws.conflicts.values()] == []
    node = ws.graph.nodes["semantic:m.item"]
    assert node["span"][0] == 8  # the implementation, not the first stub
    assert node["signature"] == "(value)"
    called = {
        t.removeprefix("semantic:")
        for _, t, k in ws.graph.out_edges("semantic:m.render_int", keys=True)
        if k == "calls"
    }
    # The int overload's return type: only Integer.as_string, not every as_string of the tree.
    assert "m.Integer.as_string" in called
    assert not called & {"m.String.as_string", "m.Item.as_string"}


def test_an_issubclass_guard_narrows_a_class_to_its_subclasses(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """class Field:
    def __init__(self):
        self.name = ""


class List(Field):
    def __init__(self):
        super().__init__()


class Unrelated:
    def __init__(self):
        self.x = 1


def build(c):
    if issubclass(c, Field):
        return c()
    return None


def isinst(x):
    if isinstance(x, Field) and x.name:
        return x.name
    return None


build(Unrelated)
build(List)
""",
    )
    assert ("m.build", "m.Unrelated.__init__") not in edges
    assert ("m.build", "m.List.__init__") in edges
    assert edges[("m.build", "m.List.__init__")] <= {"heuristic", "confirmed"}


def test_protocol_abstract_and_annotated_base_calls_reach_implementations_as_derived(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """import abc
from typing import Protocol


class Store(Protocol):
    def save(self, item): ...


class Disk:
    def save(self, item):
        return 1


class Base(abc.ABC):
    @abc.abstractmethod
    def load(self): ...

    def describe(self):
        return "base"

    def run(self):
        return self.describe()


class Impl(Base):
    def load(self):
        return 2

    def describe(self):
        return "impl"


def persist(store: Store, base: Base):
    store.save(1)
    base.load()
    base.describe()


def make() -> Base:
    return Impl()


def later():
    make().load()


persist(Disk(), Impl())
""",
    )
    assert edges[("m.persist", "m.Store.save")] == {"confirmed"}
    assert edges[("m.persist", "m.Base.load")] == {"confirmed"}
    assert edges[("m.persist", "m.Impl.load")] == {"heuristic"}
    assert edges[("m.persist", "m.Impl.describe")] == {"heuristic"}
    assert edges[("m.Base.run", "m.Impl.describe")] == {"heuristic"}
    assert ("m.later", "m.Impl.load") in edges
    assert "confirmed" not in edges[("m.persist", "m.Disk.save")]


def test_operators_and_protocols_call_the_receivers_dunders(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """class Vec:
    def __add__(self, other) -> "Vec":
        return Vec()

    def __or__(self, other) -> "Vec":
        return Vec()

    def __getitem__(self, key) -> "Cell":
        return Cell()

    def __setitem__(self, key, value):
        pass

    def __delitem__(self, key):
        pass

    def __len__(self):
        return 0

    def __contains__(self, item):
        return False

    def __eq__(self, other):
        return True

    def __lt__(self, other):
        return False

    def __str__(self):
        return "v"

    def __iter__(self):
        return iter([])

    def __neg__(self):
        return self

    def norm(self):
        return 1


class Cell:
    def value(self):
        return 0


def use(a: Vec, b: Vec):
    (a + b).norm()
    (a | b).norm()
    a[0].value()
    a[1] = 2
    del a[1]
    len(a)
    3 in a
    a == b
    a < b
    str(a)
    f"{a}"
    -a
    for _ in a:
        pass
    a += b
""",
    )
    for dunder in (
        "__add__",
        "__or__",
        "__getitem__",
        "__setitem__",
        "__delitem__",
        "__len__",
        "__contains__",
        "__eq__",
        "__lt__",
        "__str__",
        "__iter__",
        "__neg__",
    ):
        assert edges[("m.use", f"m.Vec.{dunder}")] == {"confirmed"}, dunder
    assert edges[("m.use", "m.Vec.norm")] == {"confirmed"}
    assert edges[("m.use", "m.Cell.value")] == {"confirmed"}


def test_subscripted_generic_bases_are_bases(tmp_path: Path) -> None:
    ws = built(
        tmp_path,
        {
            "m.py": """from typing import Generic, TypeVar

T = TypeVar("T")


class Field(Generic[T]):
    def __init__(self, default=None):
        self.default = default

    def clean(self, value):
        return value


class List(Field[list]):
    def clean(self, value):
        return super().clean(value)


def use():
    List().clean([])
"""
        },
    )
    inherits = {t for _, t, k in ws.graph.out_edges("semantic:m.List", keys=True) if k == "inherits"}
    assert "semantic:m.Field" in inherits
    assert ws.graph.nodes["semantic:m.List"]["mro"] == ["m.List", "m.Field"]
    called = {(s, t) for s, t, k in ws.graph.edges(keys=True) if k == "calls"}
    assert ("semantic:m.use", "semantic:m.Field.__init__") in called  # inherited __init__
    assert ("semantic:m.List.clean", "semantic:m.Field.clean") in called  # super()


def test_metaclass_runs_on_a_class_statement_and_new_on_a_constructor_call(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """class Meta(type):
    def __new__(mcs, name, bases, ns):
        return super().__new__(mcs, name, bases, ns)

    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)


class Model(metaclass=Meta):
    def __init_subclass__(cls, **kwargs):
        pass


class User(Model):
    def __new__(cls):
        return super().__new__(cls)


def make():
    return User()
""",
    )
    assert edges[("m", "m.Meta.__new__")] == {"confirmed"}
    assert edges[("m", "m.Meta.__init__")] == {"confirmed"}
    assert edges[("m", "m.Model.__init_subclass__")] == {"confirmed"}
    assert edges[("m.make", "m.User.__new__")] == {"confirmed"}


def test_pytest_fixtures_and_parametrize_values_reach_the_test(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/reg.py": REG,
            "tests/__init__.py": "",
            "tests/conftest.py": """import pytest

from pkg.reg import Reg


@pytest.fixture
def reg() -> Reg:
    return Reg()
""",
            "tests/test_reg.py": """import pytest

from pkg.reg import Other, Reg


@pytest.fixture
def other():
    yield Other()


def test_fetch(reg):
    assert reg.fetch(1) == 1


def test_other(other):
    assert other.fetch(1) is None


@pytest.mark.parametrize("value, n", [(Reg(), 1), pytest.param(Reg(), 2, id="two")])
def test_values(value, n):
    assert value.fetch(n) == n
""",
        },
    )
    assert edges[("tests.test_reg.test_fetch", "pkg.reg.Reg.fetch")] == {"confirmed"}
    assert ("tests.test_reg.test_fetch", "pkg.reg.Other.fetch") not in edges
    assert edges[("tests.test_reg.test_other", "pkg.reg.Other.fetch")] == {"confirmed"}
    assert ("tests.test_reg.test_values", "pkg.reg.Reg.fetch") in edges


def test_callables_in_map_filter_sorted_partial_and_dispatch_tables(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """import functools


def double(x):
    return x * 2


def keep(x):
    return True


def rank(x):
    return 0


def add(a, b):
    return a + b


def on_start():
    return 1


def on_stop():
    return 2


HANDLERS = {"start": on_start, "stop": on_stop}
STEPS = [double, keep]


def run(xs, event):
    list(map(double, xs))
    list(filter(keep, xs))
    sorted(xs, key=rank)
    functools.partial(add, 1)(2)
    HANDLERS[event]()
    for step in STEPS:
        step(1)
""",
    )
    for target in ("double", "keep", "rank", "add", "on_start", "on_stop"):
        assert ("m.run", f"m.{target}") in edges, target


def test_what_pytest_raises_caught_is_the_exception_named(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/errors.py": """class ParseError(Exception):
    @property
    def line(self):
        return 1

    def describe(self):
        return ""
""",
            "tests/__init__.py": "",
            "tests/test_errors.py": """import pytest

from pkg.errors import ParseError


def test_line():
    with pytest.raises(ParseError) as info:
        raise ParseError()
    assert info.value.line == 1
    assert info.value.describe() == ""
""",
        },
    )
    assert edges[("tests.test_errors.test_line", "pkg.errors.ParseError.line")] == {"confirmed"}
    assert edges[("tests.test_errors.test_line", "pkg.errors.ParseError.describe")] == {"confirmed"}


def test_a_decorator_wrapper_passes_its_argument_to_each_function_it_decorates(tmp_path: Path) -> None:
    # click's pass_context: more functions decorated than a value set holds, each still gets the context.
    decorated = "".join(
        f"\n\n@pass_context\ndef command_{i}(ctx):\n    return ctx.invoke({i})\n" for i in range(20)
    )
    edges = _edges(
        tmp_path,
        """import functools


class Context:
    def invoke(self, value):
        return value


def current() -> Context:
    return Context()


def pass_context(f):
    def new_func(*args, **kwargs):
        return f(current(), *args, **kwargs)

    return functools.update_wrapper(new_func, f)
"""
        + decorated,
    )
    for i in (0, 19):
        assert (f"m.command_{i}", "m.Context.invoke") in edges


def test_callbacks_stored_in_an_instance_attribute_are_called_later(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """def on_start():
    return 1


def on_stop():
    return 2


class Bus:
    def __init__(self):
        self.callbacks = []
        self.handlers = {}

    def subscribe(self, callback):
        self.callbacks.append(callback)

    def route(self, name, handler):
        self.handlers[name] = handler

    def fire(self, name):
        for callback in self.callbacks:
            callback()
        return self.handlers[name]()


bus = Bus()
bus.subscribe(on_start)
bus.route("stop", on_stop)
""",
    )
    assert ("m.Bus.fire", "m.on_start") in edges
    assert ("m.Bus.fire", "m.on_stop") in edges


def test_a_property_read_through_a_declared_base_reaches_the_overriding_properties(tmp_path: Path) -> None:
    edges = _edges(
        tmp_path,
        """class Item:
    @property
    def value(self):
        return self

    def is_dotted(self):
        return False


class Bool(Item):
    @property
    def value(self):
        return True


class Key:
    def is_dotted(self):
        return True


class Container:
    def __init__(self):
        self.body: list[tuple[Key, Item]] = []

    def values(self):
        return [item.value for _, item in self.body]

    def dotted(self):
        return [i for i, (k, _) in enumerate(self.body) if k.is_dotted()]


Bool()
Item()
""",
    )
    assert edges[("m.Container.values", "m.Item.value")] == {"confirmed"}
    assert edges[("m.Container.values", "m.Bool.value")] == {"heuristic"}
    assert ("m.Container.dotted", "m.Key.is_dotted") in edges
    assert ("m.Container.dotted", "m.Item.is_dotted") not in edges
