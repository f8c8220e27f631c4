"""Every relation of query.subgraph walked both ways, on a package written from strings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import build_workspace, call
from slotrelay.psmr.operators import INVERSE_RELATIONS, RELATIONS
from tests.support.psmr_trees import write_tree

ZOO = {
    "zoo/__init__.py": "",
    "zoo/base.py": """def logged(fn):
    return fn


class Animal:
    def __init__(self):
        self.fed = 0

    def speak(self):
        return "..."

    def feed(self):
        self.fed = self.fed + 1
        return self.speak()

    def hungry(self):
        return not self.fed
""",
    "zoo/dog.py": """from zoo.base import Animal, logged


class Dog(Animal):
    @logged
    def speak(self):
        return "woof"

    def reset(self):
        return None
""",
    "tests/test_dog.py": """from zoo.dog import Dog


def test_speak():
    assert Dog().speak()
""",
}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = write_tree(tmp_path_factory.mktemp("zoo"), ZOO)
    store = root.parent / f"{root.name}-store"
    return build_workspace(root, store=store)["workspace_id"], store


def slice_edges(zoo: tuple[str, Path], anchor: str, relations: list[str] | None, **extra: Any) -> set:
    ws, store = zoo
    request = {"workspace_id": ws, "anchor": {"kind": "symbol", "value": anchor}, "depth": 1, **extra}
    if relations is not None:
        request["relations"] = relations
    result = call("query.subgraph", request, store=store)
    assert result["status"] == "ok", result.get("error")
    return {
        (e["source"].removeprefix("semantic:"), e["relation"], e["target"].removeprefix("semantic:"))
        for e in result["data"]["edges"]
    }


# (relation, anchor, an edge the walk must return, shown forward)
WALKS = [
    ("defines", "zoo.dog.Dog", ("zoo.dog.Dog", "defines", "zoo.dog.Dog.reset")),
    ("defined_by", "zoo.dog.Dog.reset", ("zoo.dog.Dog", "defines", "zoo.dog.Dog.reset")),
    ("imports", "zoo.dog", ("zoo.dog", "imports", "zoo.base")),
    ("imported_by", "zoo.base", ("zoo.dog", "imports", "zoo.base")),
    ("calls", "zoo.base.Animal.feed", ("zoo.base.Animal.feed", "calls", "zoo.base.Animal.speak")),
    ("called_by", "zoo.base.Animal.speak", ("zoo.base.Animal.feed", "calls", "zoo.base.Animal.speak")),
    (
        "reads_state",
        "zoo.base.Animal.hungry",
        ("zoo.base.Animal.hungry", "reads_state", "zoo.base.Animal.fed"),
    ),
    ("read_by", "zoo.base.Animal.fed", ("zoo.base.Animal.hungry", "reads_state", "zoo.base.Animal.fed")),
    (
        "writes_state",
        "zoo.base.Animal.__init__",
        ("zoo.base.Animal.__init__", "writes_state", "zoo.base.Animal.fed"),
    ),
    (
        "written_by",
        "zoo.base.Animal.fed",
        ("zoo.base.Animal.__init__", "writes_state", "zoo.base.Animal.fed"),
    ),
    ("inherits", "zoo.dog.Dog", ("zoo.dog.Dog", "inherits", "zoo.base.Animal")),
    ("inherited_by", "zoo.base.Animal", ("zoo.dog.Dog", "inherits", "zoo.base.Animal")),
    ("overrides", "zoo.dog.Dog.speak", ("zoo.dog.Dog.speak", "overrides", "zoo.base.Animal.speak")),
    ("overridden_by", "zoo.base.Animal.speak", ("zoo.dog.Dog.speak", "overrides", "zoo.base.Animal.speak")),
    ("decorates", "zoo.base.logged", ("zoo.base.logged", "decorates", "zoo.dog.Dog.speak")),
    ("decorated_by", "zoo.dog.Dog.speak", ("zoo.base.logged", "decorates", "zoo.dog.Dog.speak")),
    ("tests", "tests.test_dog.test_speak", ("tests.test_dog.test_speak", "tests", "zoo.dog.Dog.speak")),
    ("tested_by", "zoo.dog.Dog.speak", ("tests.test_dog.test_speak", "tests", "zoo.dog.Dog.speak")),
]


def test_the_walks_cover_every_relation_both_ways() -> None:
    assert {w[0] for w in WALKS} == set(RELATIONS)
    assert set(RELATIONS) == set(INVERSE_RELATIONS) | set(INVERSE_RELATIONS.values())


@pytest.mark.parametrize(("relation", "anchor", "edge"), WALKS, ids=[w[0] for w in WALKS])
def test_each_relation_walks_its_way(
    zoo: tuple[str, Path], relation: str, anchor: str, edge: tuple[str, str, str]
) -> None:
    edges = slice_edges(zoo, anchor, [relation])
    assert edge in edges
    # Only edges of the relation followed, always shown forward.
    assert {e[1] for e in edges} == {edge[1]}


def test_a_slice_anchored_on_state_returns_its_readers_and_writers(zoo: tuple[str, Path]) -> None:
    ws, store = zoo
    result = call(
        "query.subgraph",
        {"workspace_id": ws, "anchor": {"kind": "state", "value": "zoo.base.Animal.fed"}, "depth": 1},
        store=store,
    )
    edges = {(e["source"], e["relation"]) for e in result["data"]["edges"]}
    assert edges == {
        ("semantic:zoo.base.Animal.__init__", "writes_state"),
        ("semantic:zoo.base.Animal.feed", "reads_state"),
        ("semantic:zoo.base.Animal.feed", "writes_state"),
        ("semantic:zoo.base.Animal.hungry", "reads_state"),
    }


def test_the_tests_reaching_a_function_from_its_side(zoo: tuple[str, Path]) -> None:
    # test_speak calls Dog.speak directly, and reaches Animal.speak through the override.
    assert slice_edges(zoo, "zoo.base.Animal.speak", ["overridden_by", "tested_by"], depth=2) >= {
        ("zoo.dog.Dog.speak", "overrides", "zoo.base.Animal.speak"),
        ("tests.test_dog.test_speak", "tests", "zoo.dog.Dog.speak"),
    }


def test_operator_describe_lists_every_relation(zoo: tuple[str, Path]) -> None:
    _, store = zoo
    described = call("operator.describe", {"operator": "query.subgraph"}, store=store)["data"]
    assert set(described["relations"]) == set(RELATIONS)
    assert described["input_schema"]["properties"]["relations"]["items"]["enum"] == list(RELATIONS)
    for name, inverse in INVERSE_RELATIONS.items():
        assert described["relations"][name]["inverse"] == inverse
        assert described["relations"][inverse] == {
            "walks": described["relations"][inverse]["walks"],
            "inverse": name,
            "edge_relation": name,
        }
