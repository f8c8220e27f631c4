"""The resolver's wrong-edge cases, each built from a string: the edge is absent, or at most heuristic.

A confirmed edge is one the code makes on its own; an edge that needs a value to flow in through a
parameter, an override in a subclass or a guess about an external class is heuristic.
"""

from __future__ import annotations

from pathlib import Path

from slotrelay.psmr.api import call
from slotrelay.psmr.workspace.build import build
from tests.support.call_edges import built, call_statuses
from tests.support.psmr_trees import write_tree


def _statuses(tmp_path: Path, source: str) -> dict[tuple[str, str], set[str]]:
    """(caller, callee) -> the statuses of the call evidence, for a one-module tree `m`."""
    return call_statuses(built(tmp_path, source))


def test_classmethod_lru_cache_parse_of_another_class_is_not_a_recursion(tmp_path: Path) -> None:
    # An identity class decorator on both classes used to merge them: Color.parse also meant Style.parse.
    edges = _statuses(
        tmp_path,
        """from functools import lru_cache


def auto(cls):
    return cls


@auto
class Color:
    @classmethod
    @lru_cache(maxsize=64)
    def parse(cls, text):
        return cls()


@auto
class Style:
    @classmethod
    @lru_cache(maxsize=64)
    def parse(cls, text):
        Color.parse(text)
        return Style()
""",
    )
    assert edges[("m.Style.parse", "m.Color.parse")] == {"confirmed"}
    assert ("m.Style.parse", "m.Style.parse") not in edges
    assert ("m.Style.parse", "m.Color") not in edges


def test_min_and_max_call_only_their_key(tmp_path: Path) -> None:
    edges = _statuses(
        tmp_path,
        """def low():
    return 1


def high():
    return 2


def rank(fn):
    return 0


def pick():
    max([low, high], key=rank)
    min(low, high, key=rank)
    return sorted([low], key=rank)
""",
    )
    assert edges[("m.pick", "m.rank")] == {"confirmed"}
    assert ("m.pick", "m.low") not in edges and ("m.pick", "m.high") not in edges


def test_argument_flow_adds_only_types_that_can_arrive_and_never_confirmed(tmp_path: Path) -> None:
    edges = _statuses(
        tmp_path,
        """class Node:
    def render(self, max_width=80):
        return ""


class Console:
    def render(self, renderable, options):
        return []


class Layout:
    def render(self, console, options):
        return []


class Style:
    def render(self, text, *, color_system):
        return text


def traverse(obj):
    return Node()


def pretty_repr(obj, max_width=80):
    if isinstance(obj, Node):
        node = obj
    else:
        node = traverse(obj)
    return node.render(max_width=max_width)


def draw(target, thing):
    return target.render(thing, {})


def parse(text: str):
    return text.split()


class Splitter:
    def split(self):
        return []


pretty_repr(Console())
pretty_repr(Layout())
pretty_repr(Style())
draw(Console(), 1)
parse(Splitter())
""",
    )
    assert edges[("m.pretty_repr", "m.Node.render")] == {"confirmed"}
    for impossible in ("m.Console.render", "m.Layout.render", "m.Style.render"):
        assert ("m.pretty_repr", impossible) not in edges
    # The only way draw reaches Console.render is an argument: heuristic, not confirmed.
    assert edges[("m.draw", "m.Console.render")] == {"heuristic"}
    # `text: str` admits no Splitter.
    assert ("m.parse", "m.Splitter.split") not in edges


def test_overrides_and_external_classes_are_heuristic(tmp_path: Path) -> None:
    edges = _statuses(
        tmp_path,
        """import argparse

from ext_lib import Widget


class Job:
    def run(self):
        return self.execute()


class Backup(Job):
    def execute(self):
        return 1


class Panel(Widget):
    def draw(self):
        return self.refresh()


def options():
    parser = argparse.ArgumentParser()
    return parser.parse_args()


Backup().run()
Panel().draw()
""",
    )
    assert edges[("m.Job.run", "m.Backup.execute")] == {"heuristic"}
    assert edges[("m.Panel.draw", "ext_lib.Widget.refresh")] == {"heuristic"}
    assert edges[("m.options", "argparse.ArgumentParser.parse_args")] == {"heuristic"}
    assert edges[("m.options", "argparse.ArgumentParser")] == {"confirmed"}


def test_dynamic_calls_are_unknowns_not_edges(tmp_path: Path) -> None:
    ws = built(
        tmp_path,
        {
            "m.py": """class Handlers:
    def on_start(self):
        return 1

    def on_stop(self):
        return 2


def dispatch(event):
    return getattr(Handlers(), "on_" + event)()


def run(code):
    return eval(code)
"""
        },
    )
    called = {t for _, t, k in ws.graph.out_edges("semantic:m.dispatch", keys=True) if k == "calls"}
    assert called == {"semantic:<builtin>.getattr", "semantic:m.Handlers"}  # the constructor, no handler
    reasons = {(u["scope"], u["reason"]) for u in ws.unknowns.values()}
    assert ("semantic:m.dispatch", "dynamic_getattr") in reasons
    assert ("semantic:m.run", "dynamic_eval") in reasons


def test_implicit_calls_are_edges_with_their_statement(tmp_path: Path) -> None:
    ws = built(
        tmp_path,
        {
            "m.py": """class Gauge:
    def __init__(self):
        self._value = 0

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, new):
        self._value = new

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return iter([self._value])


class Broken(Exception):
    def __init__(self):
        self.reason = "broken"


def use():
    gauge = Gauge()
    gauge.value = 2
    with gauge:
        for _ in gauge:
            pass
    if gauge.value > 3:
        raise Broken
"""
        },
    )
    abouts = {}
    statuses = set()
    for _, target, key, data in ws.graph.out_edges("semantic:m.use", keys=True, data=True):
        if key == "calls":
            abouts[target.removeprefix("semantic:")] = sorted(
                ws.evidence[e]["about"] for e in data["evidence"]
            )
            statuses |= {ws.evidence[e]["status"] for e in data["evidence"]}
    assert abouts["m.Gauge.value"] == [
        "m.use calls m.Gauge.value (property read)",
        "m.use calls m.Gauge.value (property write)",
    ]
    assert abouts["m.Gauge.__enter__"] == ["m.use calls m.Gauge.__enter__ (with)"]
    assert abouts["m.Gauge.__exit__"] == ["m.use calls m.Gauge.__exit__ (with)"]
    assert abouts["m.Gauge.__iter__"] == ["m.use calls m.Gauge.__iter__ (for)"]
    assert abouts["m.Broken.__init__"] == ["m.use calls m.Broken.__init__ (raise)"]
    assert statuses == {"confirmed"}  # gauge is bound to a constructor call: nothing is guessed


def test_property_pairs_and_overloads_are_not_conflicts(tmp_path: Path) -> None:
    ws = built(
        tmp_path,
        {
            "m.py": """import sys
from typing import overload


class Box:
    @property
    def size(self):
        return 1

    @size.setter
    def size(self, value):
        pass

    @size.deleter
    def size(self):
        pass


@overload
def fit(x: int) -> int: ...
@overload
def fit(x: str) -> str: ...
def fit(x):
    return x


if sys.platform == "win32":
    def home():
        return "C:"
else:
    def home():
        return "/"
"""
        },
    )
    assert [(c["kind"], c["subject"]) for c in ws.conflicts.values()] == [
        ("duplicate_definition", "semantic:m.home")
    ]


def test_a_guessed_external_method_agrees_with_jedi_through_a_reexport(tmp_path: Path) -> None:
    # The fast pass names json.JSONDecoder.decode by its import path, jedi by its definition
    # (json.decoder.JSONDecoder.decode): the same method, so no passes_disagree conflict.
    root = write_tree(
        tmp_path / "tree",
        {
            "m.py": "import json\n\n\ndef decode(text):\n    decoder = json.JSONDecoder()\n    return "
                    "decoder.decode(text)\n"
        },
    )
    ws = build(root, store=tmp_path / "store")["workspace_id"]
    answer = call(
        "query.subgraph",
        {
            "workspace_id": ws,
            "anchor": {"kind": "symbol", "value": "m.decode"},
            "depth": 1,
            "infer": True,
            "include_evidence": True,
        },
        store=tmp_path / "store",
    )["data"]
    guessed = [e for e in answer["edges"] if e["target"] == "semantic:json.JSONDecoder.decode"]
    assert [e["status"] for e in guessed] == ["heuristic"]
    assert answer["conflicts"] == []


def test_overload_return_types_pick_the_as_string_of_the_item_made(tmp_path: Path) -> None:
    # `item(value).as_string()` linked every as_string of the package: the body returns every kind of
    # item, but the overloads say which one a date, an int or a str makes (the first that admits it).
    edges = _statuses(
        tmp_path,
        """from datetime import date
from typing import overload


class Item:
    def as_string(self):
        return ""


class Integer(Item):
    def as_string(self):
        return "1"


class Date(Item):
    def as_string(self):
        return "d"


class String(Item):
    def as_string(self):
        return "s"


@overload
def item(value: bool) -> Item: ...
@overload
def item(value: int) -> Integer: ...
@overload
def item(value: date) -> Date: ...
@overload
def item(value: str) -> String: ...
@overload
def item(value: object) -> Item: ...
def item(value):
    if isinstance(value, int):
        return Integer()
    if isinstance(value, date):
        return Date()
    return String()


def render_date():
    made = item(date(2018, 7, 22))
    return made.as_string()


def render_int():
    return item(3).as_string()
""",
    )
    assert edges[("m.render_date", "m.Date.as_string")] == {"confirmed"}
    assert edges[("m.render_int", "m.Integer.as_string")] == {"confirmed"}
    for wrong in ("m.Item.as_string", "m.String.as_string", "m.Integer.as_string"):
        assert ("m.render_date", wrong) not in edges
    assert ("m.render_int", "m.Date.as_string") not in edges


def test_an_issubclass_guard_keeps_unrelated_classes_out(tmp_path: Path) -> None:
    # `c()` under `issubclass(c, Field)` linked to the __init__ of every class passed in.
    edges = _statuses(
        tmp_path,
        """class Field:
    def __init__(self):
        self.name = ""


class Nested(Field):
    def __init__(self):
        super().__init__()


class Schema:
    def __init__(self):
        self.fields = {}


def resolve(c):
    if issubclass(c, Field):
        return c()
    return c


resolve(Schema)
resolve(Nested)
""",
    )
    assert ("m.resolve", "m.Schema.__init__") not in edges
    assert ("m.resolve", "m.Nested.__init__") in edges


def test_a_declared_attribute_holds_what_it_declares_not_everything_stored_in_it(tmp_path: Path) -> None:
    # `self._body: list[Item]`, appended to from a parameter that many kinds of values flow into:
    # its elements are Items, not every class whose instances reach the parameter.
    edges = _statuses(
        tmp_path,
        """class Item:
    def render(self):
        return ""


class Other:
    def render(self):
        return "other"


class Body:
    def __init__(self):
        self._body: list[Item] = []

    def add(self, thing):
        self._body.append(thing)

    def render(self):
        return [item.render() for item in self._body]


body = Body()
body.add(Item())
body.add(Other())
""",
    )
    assert edges[("m.Body.render", "m.Item.render")] == {"confirmed"}
    assert ("m.Body.render", "m.Other.render") not in edges


def test_the_key_of_setdefault_is_not_stored_as_a_value(tmp_path: Path) -> None:
    edges = _statuses(
        tmp_path,
        """class Key:
    def __iter__(self):
        return iter([])


class Index:
    def __init__(self):
        self.tables = {}

    def add(self, key, position):
        positions = self.tables.setdefault(key, [])
        if position not in positions:
            positions.append(position)


Index().add(Key(), 1)
""",
    )
    assert ("m.Index.add", "m.Key.__iter__") not in edges


def test_a_method_named_like_a_list_method_stores_nothing_in_its_receiver(tmp_path: Path) -> None:
    # `list.append` takes one argument, `set.add` one, `dict.setdefault` two: a call with other
    # arguments is the method of some other class, which decides itself what the receiver holds.
    ws = built(
        tmp_path,
        {
            "m.py": """class Key:
    def __eq__(self, other):
        return True


class Document:
    def __init__(self):
        self.items = []

    def append(self, key, value):
        self.items.append((key, value))

    def __eq__(self, other):
        return False


def parse():
    body = Document()
    body.append(Key(), 1)
    return body


def check():
    return parse() == {"a": 1}


def listed():
    keys = []
    keys.append(Key())
    return keys == [1]
"""
        },
    )
    called = {t for _, t, k in ws.graph.out_edges("semantic:m.check", keys=True) if k == "calls"}
    assert "semantic:m.Document.__eq__" in called
    assert "semantic:m.Key.__eq__" not in called
    # A list's append stores its argument: comparing the list compares it.
    listed = {t for _, t, k in ws.graph.out_edges("semantic:m.listed", keys=True) if k == "calls"}
    assert "semantic:m.Key.__eq__" in listed


def test_a_sentinel_tested_by_identity_stays_out_of_what_flows_on(tmp_path: Path) -> None:
    # `x is missing` is true of that one object only (the language reference: `is` tests identity),
    # so past `if value is missing: continue`, and inside `if value is not missing:`, value is not
    # it. marshmallow's `missing = _Missing()` is never stored in a dumped dict.
    edges = _statuses(
        tmp_path,
        """class _Missing:
    def __bool__(self):
        return False

    def __len__(self):
        return 0


missing = _Missing()


class Node:
    def __len__(self):
        return 1

    def visit(self):
        for child in [Node(), self]:
            if child is self:
                continue
            len(child)


def get(obj, key):
    if key in obj:
        return obj[key]
    return missing


def dump(obj):
    ret = {}
    for key in ("a", "b"):
        value = get(obj, key)
        if value is missing:
            continue
        ret[key] = value
    return ret


def load(obj):
    ret = {}
    value = get(obj, "a")
    if value is not missing:
        ret["a"] = value
    return ret


def check():
    assert dump({"a": 1})["a"]
    assert len(load({"a": [1]})["a"]) == 1

""",
    )
    assert ("m.check", "m._Missing.__bool__") not in edges
    assert ("m.check", "m._Missing.__len__") not in edges
    # `child is self` tests one instance of many: the other Nodes still flow on.
    assert edges[("m.Node.visit", "m.Node.__len__")] == {"confirmed"}


def test_a_decorator_factory_typed_by_its_overloads_makes_what_they_declare(tmp_path: Path) -> None:
    # click's `@click.group()`: the overload that takes no argument declares
    # `Callable[[F], Group]`, so what the decorator makes is a Group, whose own parse_args runs;
    # the body's `command(name, cls)` would make a Command or a Group.
    edges = _statuses(
        tmp_path,
        """import typing as t


class Command:
    def __init__(self, callback):
        self.callback = callback

    def parse_args(self, args):
        return args


class Group(Command):
    def parse_args(self, args):
        return super().parse_args(args)


def command(name=None, cls=None):
    if cls is None:
        cls = Command

    def decorator(f):
        return cls(f)

    if callable(name):
        return decorator(name)
    return decorator


@t.overload
def group(name: t.Callable[..., t.Any]) -> Group: ...
@t.overload
def group(name: str | None = None) -> t.Callable[[t.Callable[..., t.Any]], Group]: ...
def group(name=None):
    if callable(name):
        return command(cls=Group)(name)
    return command(name, Group)


def use():
    @group()
    def cli():
        pass

    cli.parse_args([])
""",
    )
    assert edges[("m.use", "m.Group.parse_args")] == {"confirmed"}
    assert ("m.use", "m.Command.parse_args") not in edges
    # Decorating still calls the function the factory's body returns.
    assert ("m.use", "m.command.decorator") in edges


def test_in_on_a_list_compares_and_hashes_nothing(tmp_path: Path) -> None:
    # `x in seq` on a list or tuple compares x with each element (`any(x is e or x == e for e in
    # seq)`, the language reference); only a set's or dict's `in` hashes x.
    edges = _statuses(
        tmp_path,
        """class Tag:
    def __hash__(self):
        return 1

    def __eq__(self, other):
        return True


def tags():
    yield Tag()


def listed():
    result = list(tags())
    assert Tag() in result
    assert Tag() in [Tag()]
    return Tag() in sorted(tags())


def hashed():
    return Tag() in set(tags())
""",
    )
    assert ("m.listed", "m.Tag.__hash__") not in edges
    assert ("m.listed", "m.Tag.__eq__") in edges
    assert edges[("m.hashed", "m.Tag.__hash__")] == {"confirmed"}


def test_a_set_made_of_a_set_hashes_nothing_again(tmp_path: Path) -> None:
    # `frozenset(s)` of a set or dict takes the hashes s stored with its elements (CPython's
    # set_update_internal); only another iterable's elements are hashed.
    edges = _statuses(
        tmp_path,
        """class Tag:
    def __hash__(self):
        return 1


def tags():
    yield Tag()


def copied(given: set[Tag], pairs: dict[Tag, int]):
    return frozenset(given), set(pairs), frozenset({1}), set(frozenset())


def hashed():
    return frozenset(tags())


copied(set(tags()), {})
""",
    )
    assert ("m.copied", "m.Tag.__hash__") not in edges
    assert edges[("m.hashed", "m.Tag.__hash__")] == {"confirmed"}


def test_a_dunder_on_a_value_that_is_a_sentinel_or_a_list_depends_on_the_data(tmp_path: Path) -> None:
    # `serialize` returns the `missing` sentinel on one path and a list on the other: which `len` runs
    # depends on the object given, so the sentinel's `__len__` is derived, never confirmed.
    edges = _statuses(
        tmp_path,
        """class _Missing:
    def __len__(self):
        return 0


missing = _Missing()


def get_value(obj, key, default=missing):
    return getattr(obj, key, default)


class Field:
    def __init__(self, dump_default=missing):
        self.dump_default = dump_default

    def serialize(self, attr, obj):
        value = get_value(obj, attr)
        if value is missing:
            value = self.dump_default
        if value is missing:
            return value
        return self._serialize(value)

    def _serialize(self, value):
        if value is None:
            return None
        return [v for v in value]


def use(obj):
    result = Field().serialize("ints", obj)
    return len(result)


class Box:
    def __init__(self, value=missing):
        self.value = value

    def get(self):
        return self.value


def passed():
    # Without the argument flowing in, only the sentinel is seen: the list arrives by argument.
    return len(Box([1, 2]).get())


def always():
    return len(missing)
""",
    )
    assert edges[("m.use", "m._Missing.__len__")] == {"heuristic"}
    assert edges[("m.passed", "m._Missing.__len__")] == {"heuristic"}
    assert edges[("m.always", "m._Missing.__len__")] == {"confirmed"}


def test_an_isinstance_check_on_a_declared_base_admits_its_subclasses_that_pass(tmp_path: Path) -> None:
    # `lookup` returns a proxy or an Item; `isinstance(owner, dict)` holds for the proxy and for
    # Item's dict subclasses: which `__getitem__` runs depends on the data.
    edges = _statuses(
        tmp_path,
        """class Item:
    pass


class Table(Item, dict):
    def __getitem__(self, key):
        return 1


class Proxy(dict):
    def __getitem__(self, key):
        return 2


def lookup(key, found) -> Item | Proxy:
    if isinstance(found, tuple):
        return Proxy()
    return found


def use(found):
    owner = lookup("owner", found)
    assert isinstance(owner, dict)
    return owner["name"]
""",
    )
    assert edges[("m.use", "m.Proxy.__getitem__")] == {"heuristic"}
    assert edges[("m.use", "m.Table.__getitem__")] == {"heuristic"}


def test_a_method_a_subclass_overrides_is_derived_through_a_declared_base(tmp_path: Path) -> None:
    edges = _statuses(
        tmp_path,
        """class Formatter:
    def write(self, text):
        return text

    def indent(self):
        return 2


class Fancy(Formatter):
    def write(self, text):
        return "*" + text


def render(formatter: Formatter):
    formatter.write("x")
    formatter.indent()


def unused(formatter: Formatter):
    formatter.write("y")


def main():
    render(Formatter())
    render(Fancy())
""",
    )
    assert edges[("m.render", "m.Formatter.write")] == {"heuristic"}
    assert edges[("m.render", "m.Fancy.write")] == {"heuristic"}
    assert edges[("m.unused", "m.Formatter.write")] == {"heuristic"}
    # Every class the receiver may hold finds the same `indent`.
    assert edges[("m.render", "m.Formatter.indent")] == {"confirmed"}


def test_a_class_abc_refuses_to_instantiate_is_not_a_confirmed_construction(tmp_path: Path) -> None:
    edges = _statuses(
        tmp_path,
        """import abc
from abc import ABC, abstractmethod


class Field:
    def __init__(self, name=None):
        self.name = name


class Mapping(Field, metaclass=abc.ABCMeta):
    @property
    @abc.abstractmethod
    def mapping_type(self):
        ...

    def __init__(self, keys=None):
        super().__init__()


class Dict(Mapping):
    mapping_type = dict


class Base(ABC):
    @abstractmethod
    def run(self):
        ...

    def __init__(self):
        pass


class Impl(Base):
    def run(self):
        return 1


def refused():
    Mapping()
    Base()


def made():
    Dict()
    Impl()
""",
    )
    for callee in ("m.Mapping", "m.Mapping.__init__", "m.Base", "m.Base.__init__"):
        assert edges[("m.refused", callee)] == {"heuristic"}, callee
    for callee in ("m.Dict", "m.Mapping.__init__", "m.Impl", "m.Base.__init__"):
        assert edges[("m.made", callee)] == {"confirmed"}, callee


def test_the_else_branch_of_an_isinstance_check_excludes_its_classes(tmp_path: Path) -> None:
    edges = _statuses(
        tmp_path,
        """class Text:
    def render(self):
        return "t"


class Group:
    def render(self):
        return "g"


def show(item: Text | Group):
    if isinstance(item, Text):
        return 1
    else:
        return item.render()


def main():
    show(Text())
    show(Group())
""",
    )
    assert ("m.show", "m.Text.render") not in edges
    assert edges[("m.show", "m.Group.render")] == {"confirmed"}


def test_a_dunder_on_a_sentinel_or_too_many_values_to_tell_is_derived(tmp_path: Path) -> None:
    # Without argument flow only the default sentinel is seen; with it, more values than the resolver
    # tells apart: which `__len__` runs depends on what was passed.
    classes = "".join(f"class C{i}:\n    pass\n\n\n" for i in range(20))
    made = "".join(f"    Box(C{i}())\n" for i in range(20))
    edges = _statuses(
        tmp_path,
        f"""class _Missing:
    def __len__(self):
        return 0


missing = _Missing()


{classes}class Box:
    def __init__(self, value=missing):
        self.value = value

    def get(self):
        if self.value is missing:
            return missing
        return self.value


def fill():
{made}

def size():
    return len(Box().get())
""",
    )
    assert edges[("m.size", "m._Missing.__len__")] == {"heuristic"}


def test_iterating_what_may_be_either_of_two_generators_runs_one_of_them(tmp_path: Path) -> None:
    edges = _statuses(
        tmp_path,
        """def fast(items):
    yield from items


def slow(items):
    for item in items:
        yield item


def pick(items, quick=True):
    if quick:
        return fast(items)
    return slow(items)


def use():
    return list(pick([1]))
""",
    )
    assert edges[("m.use", "m.fast")] == {"heuristic"}
    assert edges[("m.use", "m.slow")] == {"heuristic"}
