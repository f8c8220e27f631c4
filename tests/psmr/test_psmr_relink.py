"""Replaying a resolution after an edit (`relink`) answers what resolving the edited tree from nothing
answers, for each kind of edit an agent makes, on a real package (rich) and one edit after another."""

from __future__ import annotations

import dataclasses
import gc
import shutil
import weakref
from pathlib import Path

import pytest
import rich

from slotrelay.psmr.analysis import relink as relink_module
from slotrelay.psmr.analysis.extract import extract
from slotrelay.psmr.analysis.link import Linker, LinkResult
from slotrelay.psmr.analysis.record import ResolutionRecord
from slotrelay.psmr.analysis.relink import relink
from slotrelay.psmr.workspace.build import discover, module_name
from tests.support.psmr_trees import SHAPES

# Each edit: the file, the text replaced (None: appended), the new text.
EDITS = {
    "new_function": (
        "text.py",
        None,
        "\n\ndef _joined(parts):\n    return Text(' ').join(Text(p) for p in parts)\n",
    ),
    "new_method": (
        "console.py",
        "    def print(\n",
        "    def _note(self, text):\n        self.print(text, style='dim')\n\n    def print(\n",
    ),
    "new_subclass_override": (
        "style.py",
        None,
        "\n\nclass _Quiet(Style):\n    def _add(self, style):\n        return self\n\n\n_Quiet().copy()\n",
    ),
    "body_change": ("cells.py", "    return sum(", "    return 0 + sum("),
    "argument_flow": (
        "segment.py",
        None,
        "\n\ndef _split(console):\n    return list(Segment.split_lines([], 1))\n",
    ),
    "changed_import": (
        "markup.py",
        "from .text import Span, Text",
        "from .text import Span\nfrom .text import Text as Text",
    ),
    "removed_function": (
        "pretty.py",
        "def install(",
        "def _install_gone(*args, **kwargs):\n    pass\n\n\ndef _unused(",
    ),
    "syntax_error": ("bar.py", None, "\n\ndef broken(:\n"),
    # A dunder no class defined before: every `<` of the tree may now call it.
    "new_dunder": (
        "containers.py",
        "    def __repr__(self) -> str:\n",
        (
            "    def __lt__(self, other: object) -> bool:\n        return False\n\n"
            "    def __repr__(self) -> str:\n"
        ),
    ),
    # A field whose annotation types what its methods call, and an operator on it.
    "annotated_field": (
        "segment.py",
        None,
        (
            "\n\nclass _Held:\n    segment: Segment\n\n    def text_of(self) -> str:\n"
            "        return self.segment.text + str(self.segment.cell_length)\n"
        ),
    ),
}


def _facts(root: Path) -> dict[str, dict]:
    facts = {}
    for path in discover(root):
        module, is_package = module_name(root, path)
        facts[module] = extract(path.read_text(), module, is_package=is_package)
    return facts


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("relink") / "rich"
    shutil.copytree(Path(rich.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _differences(replayed: LinkResult, full: LinkResult) -> list[str]:
    out = []
    for field in dataclasses.fields(LinkResult):
        mine, theirs = getattr(replayed, field.name), getattr(full, field.name)
        if isinstance(mine, dict):
            keys = sorted({*mine, *theirs}, key=repr)
            out += [f"{field.name} {k}" for k in keys if repr(mine.get(k)) != repr(theirs.get(k))]
        elif mine != theirs:
            out.append(f"{field.name} (in order)")
    return out


def test_a_replayed_resolution_equals_a_full_one_edit_after_edit(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # However far an edit reaches, the replay must give the full answer: the usual limit on its reach
    # (past which the build resolves in full instead) is lifted.
    monkeypatch.setattr(relink_module, "MAX_AGAIN_SHARE", 1.0)
    facts = _facts(tree)
    linker = Linker(facts, record=True)
    linker.run()
    for name, (rel, old, new) in EDITS.items():
        path = tree / rel
        text = path.read_text()
        assert old is None or old in text, f"{rel} no longer holds {old!r}: pick another edit for {name}"
        path.write_text(text + new if old is None else text.replace(old, new, 1))
        module = module_name(tree, path)[0]
        facts = {**facts, module: extract(path.read_text(), module, is_package=False)}
        record = ResolutionRecord.of(linker)
        assert record is not None, name
        replayed = relink(record, facts, {module})
        assert replayed is not None and replayed.result is not None, name
        full = Linker(facts).run()
        assert _differences(replayed.result, full) == [], name
        assert replayed.resolved_sites < len(replayed.sites), name
        linker = replayed


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict], Linker]:
    """An unedited copy of the package, its facts and its recorded resolution, resolved once for the
    tests below: they edit only the facts they pass to `relink`, which reads the record and changes
    nothing in it (test_a_replayed_resolution_equals_a_full_one_edit_after_edit edits `tree`)."""
    root = tmp_path_factory.mktemp("relink-unedited") / "rich"
    shutil.copytree(Path(rich.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    facts = _facts(root)
    linker = Linker(facts, record=True)
    linker.run()
    return root, facts, linker


def test_an_edit_that_reaches_far_is_resolved_in_full(
    resolved: tuple[Path, dict[str, dict], Linker], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A new method of Console that calls its print: what flows into Console.print's parameters
    # reaches far past the share of call sites a replay is worth (MAX_AGAIN_SHARE).
    tree, facts, linker = resolved
    rel, old, new = EDITS["new_method"]
    path = tree / rel
    module = module_name(tree, path)[0]
    edited = {**facts, module: extract(path.read_text().replace(old, new, 1), module, is_package=False)}
    record = ResolutionRecord.of(linker)
    assert record is not None
    assert relink(record, edited, {module}) is None
    monkeypatch.setattr(relink_module, "MAX_AGAIN_SHARE", 1.0)
    assert relink(record, edited, {module}) is not None


def test_an_edit_that_adds_a_module_is_resolved_in_full(
    resolved: tuple[Path, dict[str, dict], Linker],
) -> None:
    _, facts, linker = resolved
    added = {**facts, "rich._added": extract("def f():\n    return 1\n", "rich._added", is_package=False)}
    record = ResolutionRecord.of(linker)
    assert record is not None
    assert relink(record, added, {"rich._added"}) is None


# The shapes tree by module (its package's `__init__` is empty).
SHAPES_BY_MODULE = {rel[: -len(".py")].replace("/", "."): text for rel, text in SHAPES.items() if text}
RELAY = "from app.shapes import Square\n\n\ndef relay(thing):\n    return describe(thing)\n"


@pytest.mark.parametrize(
    ("added", "reaches_square"),
    [
        # A new caller that passes on its own parameter, which nothing calls yet: no value flows.
        ("def relay(thing):\n    return describe(thing)\n", False),
        # One that passes a Square: `shape.area()` in describe now reaches Square.area too.
        ("from app.shapes import Square\n\n\ndef run_square():\n    return describe(Square())\n", True),
        # One that passes on a parameter its own caller gives a Square.
        (f"{RELAY}\n\ndef start():\n    return relay(Square())\n", True),
    ],
)
def test_arguments_a_new_caller_passes_reach_the_callee_only_when_they_have_values(
    added: str, reaches_square: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relink_module, "MAX_AGAIN_SHARE", 1.0)
    facts = {module: extract(text, module, is_package=False) for module, text in SHAPES_BY_MODULE.items()}
    linker = Linker(facts, record=True)
    linker.run()
    edited = {
        **facts,
        "app.main": extract(f"{SHAPES_BY_MODULE['app.main']}\n\n{added}", "app.main", is_package=False),
    }
    record = ResolutionRecord.of(linker)
    assert record is not None
    replayed = relink(record, edited, {"app.main"})
    assert replayed is not None and replayed.result is not None
    full = Linker(edited).run()
    assert _differences(replayed.result, full) == []
    area = next(
        key for key, site in enumerate(edited["app.report"]["calls"]) if "area" in repr(site["callee"])
    )
    targets = {call.target for call in full.targets[("app.report", area)]}
    assert ("app.shapes.Square.area" in targets) is reaches_square, targets


def test_a_replay_reads_the_record_alone_the_linker_that_made_it_can_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What a process keeps of a resolution is its record: the linker (its memos' values, its strict
    # twin, its caches) is collected, and the replay from the record still equals a full resolution.
    monkeypatch.setattr(relink_module, "MAX_AGAIN_SHARE", 1.0)
    facts = {module: extract(text, module, is_package=False) for module, text in SHAPES_BY_MODULE.items()}
    linker = Linker(facts, record=True)
    linker.run()
    record = ResolutionRecord.of(linker)
    assert record is not None
    gone = weakref.ref(linker)
    del linker
    gc.collect()
    assert gone() is None
    edited = {
        **facts,
        "app.main": extract(f"{SHAPES_BY_MODULE['app.main']}\n\n{RELAY}", "app.main", is_package=False),
    }
    replayed = relink(record, edited, {"app.main"})
    assert replayed is not None and replayed.result is not None
    assert _differences(replayed.result, Linker(edited).run()) == []
    # The replay leaves a record of its own, which the next edit replays from.
    assert ResolutionRecord.of(replayed) is not None


def test_a_resolution_that_did_not_record_leaves_no_record() -> None:
    facts = {module: extract(text, module, is_package=False) for module, text in SHAPES_BY_MODULE.items()}
    linker = Linker(facts)
    assert ResolutionRecord.of(linker) is None
    linker.run()
    assert ResolutionRecord.of(linker) is None
