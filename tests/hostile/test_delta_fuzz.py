"""Random delta operation lists and bodies, through the real handlers (`slotrelay.psmr.api.call`, which
the MCP server calls) on a temporary tree: propose, validate, preview and apply with the root granted.
Whatever is sent, the process lives (a parser crash would end it), every answer is an envelope with a
contract code and never an internal fault, and nothing is written outside the root.

Bounded to run in well under a minute: a tiny tree, restored after each example, and 30 examples
(`PSMR_FUZZ_EXAMPLES` to run more).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from slotrelay.psmr.api import Grants, build_workspace, call
from slotrelay.psmr.errors import ERROR_CODES

FILES = {
    "kit/__init__.py": "from .calc import add\n",
    "kit/calc.py": (
        '"""Sums."""\n\n\ndef add(a, b):\n    """Add."""\n    return a + b\n\n\n'
        "def twice(x):\n    return add(x, x)\n\n\n"
        "class Box:\n    def __init__(\n        self,\n        value,\n    ):\n        self.value = value\n\n"
        "    def get(self):\n        return self.value\n\n\n"
        "def unbox(box):\n    return box.get()\n"
    ),
    "kit/use.py": "from kit.calc import Box, twice\n\n\ndef run(n):\n    return twice(n) + Box(n).get()\n",
    "tests/test_calc.py": "from kit.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}
SYMBOLS = [
    "kit.calc.add", "kit.calc.twice", "kit.calc.Box", "kit.calc.Box.get", "kit.calc.Box.__init__",
    "kit.calc.unbox", "kit.use.run", "tests.test_calc.test_add", "kit.calc", "kit.nowhere",
]  # fmt: skip
NAMES = [
    "len",
    "add",
    "Box",
    "run",
    "fetch",
    "value",
    "get",
    "__init__",
    "x",
    "class",
    "9x",
    "a" * 300,
    "ñame",
]
FILES_NAMED = [*FILES, "kit/none.py", "../outside/sentinel.py", "/etc/hostname", "kit"]
CODE = [
    "return a - b\n",
    "x = 1\n\nreturn x\n",
    "import os\nos.system('touch /tmp/psmr-fuzz')\n",
    "return (\n",
    "def f(self):\n    return 1\n",
    "class C:\n    pass\n",
    "\x00",
    "return " + "(" * 300 + "1" + ")" * 300 + "\n",
    "return " + "[" * 5000 + "]" * 5000 + "\n",
    "return " + "-" * 3000 + "1\n",
    "    return 1\n  return 2\n",
    '"""doc"""\nreturn 2\n',
]
EXPRESSIONS = [
    "add",
    "box.get",
    "x if y else z",
    "(",
    "lambda: 1",
    "a, b",
    "kit.calc.add",
    "1 +",
    "self.value",
]


def _text(choices: list[str]) -> st.SearchStrategy[str]:
    # Mostly the names of the tree and code that means something, sometimes any text.
    known = st.sampled_from(choices)
    return st.one_of(known, known, known, known, st.text(max_size=40))


OPERATION = st.one_of(
    st.fixed_dictionaries(
        {"op": st.just("change_signature"), "target": _text(SYMBOLS),
         "parameters": _text(["a, b=1", "a, *, b", "self, value, extra=None", "(", "**k, a", "a -> int"])},
        optional={"parameter_map": st.dictionaries(
            _text(NAMES), st.one_of(st.fixed_dictionaries({"from": _text(NAMES)}),
                                    st.fixed_dictionaries({"value": _text(EXPRESSIONS)}),
                                    st.just({"drop": True})), max_size=3)},
    ),
    st.fixed_dictionaries({"op": st.just("replace_body"), "target": _text(SYMBOLS), "body": _text(CODE)}),
    st.fixed_dictionaries(
        {"op": st.just("rename_symbol"), "target": _text(SYMBOLS), "new_name": _text(NAMES)},
        optional={"include_unresolved": st.booleans()},
    ),
    st.fixed_dictionaries(
        {"op": st.just("add_symbol"), "module": _text(["kit.calc", "kit/use.py", "kit.nowhere", "tests"]),
         "source": _text(CODE)},
        optional={"after": _text(SYMBOLS), "parent": _text(SYMBOLS)},
    ),
    st.fixed_dictionaries(
        {"op": st.just("move_call_site"), "evidence_id": _text(["ev_0", "ev_ffffffffffff"]),
         "new_callee": _text(SYMBOLS)},
        optional={"expression": _text(EXPRESSIONS)},
    ),
    st.fixed_dictionaries(
        {"op": st.just("edit_reference"), "file": _text(FILES_NAMED), "line": st.integers(0, 30),
         "column": st.integers(0, 40), "name": _text(NAMES)},
        optional={"new_name": _text(NAMES), "expression": _text(EXPRESSIONS),
                  "arguments": _text(["x", "x, y=1", ")", "*a, **k", ""])},
    ),
)  # fmt: skip
# Anything at all in place of an operation, now and then.
JUNK = st.dictionaries(st.text(max_size=10), st.one_of(st.text(max_size=20), st.integers()), max_size=4)
REQUEST = st.fixed_dictionaries(
    {"operations": st.lists(st.one_of(*[OPERATION] * 9, JUNK), min_size=1, max_size=3)},
    optional={
        "constraints": st.lists(
            _text(["no_new_unknowns", "unchanged: kit.calc", "public_api_unchanged"]), max_size=2
        ),
        "scope_refs": st.lists(_text(SYMBOLS), max_size=2),
    },
)
EXAMPLES = int(os.environ.get("PSMR_FUZZ_EXAMPLES", "30"))


class Tree:
    """The tree under test (restored before each example), beside a folder that must stay untouched."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "proj"
        self.store = base / "store"
        self.outside = base / "outside"
        self.outside.mkdir()
        (self.outside / "sentinel.py").write_text("SECRET = 1\n")

    def restore(self) -> str:
        shutil.rmtree(self.root, ignore_errors=True)
        for name, text in FILES.items():
            (self.root / name).parent.mkdir(parents=True, exist_ok=True)
            (self.root / name).write_text(text)
        return str(build_workspace(self.root, store=self.store)["workspace_id"])

    def outside_state(self) -> dict[str, bytes]:
        """Every file under the base folder that is neither the root nor the store."""
        return {
            str(p.relative_to(self.base)): p.read_bytes()
            for p in sorted(self.base.rglob("*"))
            if p.is_file() and p.relative_to(self.base).parts[0] not in ("proj", "store")
        }


@pytest.fixture(scope="module")
def tree() -> Iterator[Tree]:
    with tempfile.TemporaryDirectory(prefix="psmr-fuzz-") as folder:
        yield Tree(Path(folder))


def _answered(operation: str, request: dict[str, Any], tree: Tree, **kwargs: Any) -> dict[str, Any]:
    answer = call(operation, request, store=tree.store, **kwargs)
    assert answer["status"] in ("ok", "error"), answer
    event(f"{operation}: {answer['error']['code'] if answer['status'] == 'error' else 'ok'}")
    if answer["status"] == "error":
        assert answer["error"]["code"] in ERROR_CODES, answer
        assert "internal error" not in answer["error"]["message"], (operation, request, answer)
    return answer


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(request=REQUEST, accept=st.booleans())
def test_random_deltas_never_crash_nor_write_outside_the_root(
    tree: Tree, request: dict[str, Any], accept: bool
) -> None:
    ws = tree.restore()
    before = tree.outside_state()
    proposed = _answered("delta.propose", {"workspace_id": ws, "intent": "fuzz", **request}, tree)
    if proposed["status"] == "ok":
        delta = {"workspace_id": ws, "delta_id": proposed["data"]["delta_id"]}
        validated = _answered("delta.validate", {**delta, "accept_review": accept}, tree)
        _answered("projection.preview", delta, tree)
        applied = _answered("projection.apply", delta, tree, grants=Grants.of(write_roots=[tree.root]))
        if validated["status"] == "ok" and validated["data"]["status"] == "validated":
            assert applied["status"] == "ok", applied
            for written in applied["data"]["files"]:
                assert (tree.root / written["file"]).resolve().is_relative_to(tree.root.resolve())
    assert tree.outside_state() == before
    assert not Path("/tmp/psmr-fuzz").exists()
