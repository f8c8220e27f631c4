"""The resolution the store keeps for a one-shot build (`slotrelay.psmr.workspace.replay`): it reads
back as the resolution it was, a build in another process replays it and answers what a full build
answers, and a record that is damaged, not sealed, or of another version is refused (the build
resolves in full and the log says why), never used."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import rich
from psmr_rebuild import SLOTRELAY, workspace_view

from slotrelay.psmr.analysis.extract import extract
from slotrelay.psmr.analysis.link import Linker
from slotrelay.psmr.analysis.record import ResolutionRecord
from slotrelay.psmr.workspace import replay
from slotrelay.psmr.workspace.build import build, discover, module_name
from slotrelay.psmr.workspace.kept import KeptResolutions, Resolved
from slotrelay.psmr.workspace.store import Store
from tests.support.psmr_trees import SHAPES, write_tree
from tests.support.waiting import wait_until

# Enough modules that adding a function nothing calls reaches few of the call sites (see
# `slotrelay.psmr.analysis.relink.MAX_AGAIN_SHARE`).
TREE = SHAPES | {f"app/util{i}.py": f"def h{i}(x):\n    return len(str(x))\n" for i in range(30)}
LEAF = "\n\ndef _leaf{n}():\n    return sorted([3, 1, 2])\n"
# A caller that passes a Square where only Circles flowed: `shape.area()` in describe now reaches
# Square.area too (an edit whose answer differs elsewhere than in the edited module).
FLOW = (
    "\n\nfrom app.report import describe\nfrom app.shapes import Square\n\n\n"
    "def _square():\n    return describe(Square())\n"
)
LOGGER = "slotrelay.psmr.workspace.build"


def _same(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two values differ in value or in type (a list read back as a tuple, a set as a frozenset)."""
    if type(a) is not type(b):
        return [f"{where}: {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys differ"]
        return [d for k in a for d in _same(a[k], b[k], f"{where}[{k!r}]")][:5]
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return [f"{where}: lengths differ"]
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in _same(x, y, f"{where}[{i}]")][:5]
    if isinstance(a, set | frozenset):
        if a != b:
            return [f"{where}: members differ"]
        return [d for x in a for y in b if x == y for d in _same(x, y, f"{where}{{{x!r}}}")][:5]
    if dataclasses.is_dataclass(a):
        return [
            d
            for f in dataclasses.fields(a)
            for d in _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
        ]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def _merged(table_of: Any) -> dict[Any, set[Any]]:
    merged: dict[Any, set[Any]] = {}
    for table in table_of.tables:
        for item, users in table.items():
            if users:
                merged.setdefault(item, set()).update(users)
    return merged


def _dumped(root: Path) -> tuple[dict[str, Any], ResolutionRecord, dict[str, str], dict[str, Any], bytes]:
    """The facts of the tree at `root`, its full resolution's record, the keys and manifest of a version
    "v1" of it, and that resolution as `replay.dump` stores it."""
    facts = {}
    for path in discover(root):
        module, is_package = module_name(root, path)
        facts[module] = extract(path.read_text(), module, is_package=is_package)
    linker = Linker(facts, record=True)
    linker.run()
    record = ResolutionRecord.of(linker)
    assert record is not None
    keys = {module: f"key-{module}" for module in facts}
    manifest = {"version": "v1", "files": {m: {"key": k, "module": m} for m, k in keys.items()}}
    return facts, record, keys, manifest, replay.dump(Resolved("v1", keys, record, None))


def test_a_stored_resolution_reads_back_as_the_resolution_it_was(tmp_path: Path) -> None:
    root = tmp_path / "rich"
    shutil.copytree(Path(rich.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    facts, record, keys, manifest, payload = _dumped(root)
    back = replay.load(payload, manifest, facts, keys, lambda key: None)
    assert back.version == "v1" and back.keys == keys and back.assembled is None
    again = back.record
    assert again is not None
    for field in dataclasses.fields(ResolutionRecord):
        if field.name in ("uses", "strict_uses", "tables"):
            continue
        assert _same(getattr(record, field.name), getattr(again, field.name), field.name) == []
    # Who used what, every table of it in one: walking it reaches what walking the tables reaches. Its
    # items are read back equal to what they were (a False in a key as the 0 it equals).
    fresh = replay.load(payload, manifest, facts, keys, lambda key: None).record
    assert fresh is not None
    for name in ("uses", "strict_uses"):
        # Found by the items the resolution holds, before any is read back.
        stored = getattr(fresh, name).tables[0]
        assert isinstance(stored, replay.StoredUses)
        for item, users in list(getattr(record, name).tables[0].items())[:5000]:
            assert stored.get(item, set()) >= users, (name, item)
        assert _merged(getattr(record, name)) == _merged(getattr(again, name)), name


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (("k", True, 1.0), ("k", 1, 1)),
        (
            ("k", False, frozenset({("a", 1), ("b", 2), "c"})),
            ("k", 0, frozenset({"c", ("b", 2), ("a", True)})),
        ),
        ((frozenset({frozenset({1, "x"}), 2.5}),), (frozenset({2.5, frozenset({"x", True})}),)),
    ],
)
def test_items_equal_to_each_other_have_the_same_canonical_bytes(one: Any, other: Any) -> None:
    assert one == other and replay.canonical(one) == replay.canonical(other)
    assert replay.canonical(one) != replay.canonical(("k", 2))


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _record_path(store: Path, summary: dict[str, Any]) -> Path:
    return store / replay.record_name(summary["workspace_id"])


@pytest.fixture
def iterated(tmp_path: Path) -> tuple[Path, Path, int]:
    """A tree built once, then edited and built again as `slotrelay psmr build` does (persisting):
    the second build resolved in full and left its resolution in the store. Also how many call
    sites a full resolution resolves."""
    root = write_tree(tmp_path / "tree", TREE)
    store = tmp_path / "store"
    first = build(root, store=store, persist=True)
    # The store held nothing of the workspace: the first build keeps no resolution.
    assert not _record_path(store, first).exists()
    _append(root / "app/util1.py", LEAF.format(n=1))
    second = build(root, store=store, persist=True)
    assert second["resolved_sites"] >= first["resolved_sites"]
    assert _record_path(store, second).exists()
    return root, store, second["resolved_sites"]


@pytest.mark.parametrize("edit", ["leaf", "flow"])
def test_a_one_shot_build_replays_the_stored_resolution_and_equals_a_full_build(
    iterated: tuple[Path, Path, int], tmp_path: Path, edit: str
) -> None:
    root, store, everything = iterated
    for n in (2, 3):
        # Each build runs as a new process's does: nothing kept in memory, only what the store holds.
        _append(root / f"app/util{n}.py", LEAF.format(n=n) if edit == "leaf" else FLOW)
        update = build(root, store=store, persist=True)
        assert update["analysed"] == 1
        assert update["resolved_sites"] < everything, update
        full_store = tmp_path / f"full{n}"
        full = build(root, store=full_store)
        assert update["version"] == full["version"]
        mine = workspace_view(store, update["workspace_id"])
        theirs = workspace_view(full_store, full["workspace_id"])
        for key, value in theirs.items():
            assert mine[key] == value, f"the one-shot update's {key} are not the full build's"


def test_a_damaged_record_is_refused_and_the_build_resolves_in_full(
    iterated: tuple[Path, Path, int], caplog: pytest.LogCaptureFixture
) -> None:
    root, store, everything = iterated
    summary = build(root, store=store)
    record = _record_path(store, summary)
    for n, damage in enumerate(("flip", "truncate"), start=2):
        data = bytearray(record.read_bytes())
        if damage == "flip":
            data[-10] ^= 0xFF
        else:
            del data[len(data) // 2 :]
        record.write_bytes(bytes(data))
        _append(root / f"app/util{n}.py", LEAF.format(n=n))
        with caplog.at_level(logging.INFO, logger=LOGGER):
            update = build(root, store=store)
        assert update["analysed"] == 1 and update["resolved_sites"] >= everything, (damage, update)
        assert "damaged or not sealed" in caplog.text, damage
        caplog.clear()


def test_a_record_of_another_version_is_not_replayed(
    iterated: tuple[Path, Path, int], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root, store, everything = iterated
    # Another facts version (a record written by another release of the analysis).
    payload = Store.open(store).read_record(replay.record_name(build(root, store=store)["workspace_id"]))
    assert payload is not None
    monkeypatch.setattr(replay, "FACTS_VERSION", "another")
    _append(root / "app/util2.py", LEAF.format(n=2))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        update = build(root, store=store, persist=True)
    assert update["resolved_sites"] >= everything and "facts another" not in caplog.text
    assert "is not replayed: a record of format" in caplog.text
    monkeypatch.undo()
    caplog.clear()
    # The record that build left is of its own facts version ("another"): refused now too.
    _append(root / "app/util3.py", LEAF.format(n=3))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert build(root, store=store)["resolved_sites"] >= everything
    assert "facts another" in caplog.text
    caplog.clear()
    # A record of an older version of the workspace: a build that keeps no record (an MCP server's,
    # with its own resolution kept) saved the workspace since.
    _append(root / "app/util4.py", LEAF.format(n=4))
    build(root, store=store, persist=True)
    _append(root / "app/util5.py", LEAF.format(n=5))
    build(root, store=store, kept=KeptResolutions())
    _append(root / "app/util6.py", LEAF.format(n=6))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert build(root, store=store)["resolved_sites"] >= everything
    assert "not the resolution of the stored workspace's version" in caplog.text


def test_the_command_keeps_the_resolution_after_answering_and_its_next_run_replays_it(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    store = tmp_path / "store"

    def command() -> dict[str, Any]:
        done = subprocess.run(
            [SLOTRELAY, "psmr", "build", str(root), "--store", str(store), "--json"],
            capture_output=True,
            check=True,
        )
        summary: dict[str, Any] = json.loads(done.stdout)
        return summary

    everything = command()["resolved_sites"]
    _append(root / "app/util1.py", LEAF.format(n=1))
    second = command()
    assert second["resolved_sites"] >= everything
    # The record is written by a child process after the command answered (renamed into place whole).
    wait_until(lambda: _record_path(store, second).exists(), timeout=60,
               what="the resolution the command keeps")
    _append(root / "app/util2.py", LEAF.format(n=2))
    assert command()["resolved_sites"] < everything


def _waiting_on(lock: Path) -> bool:
    """Whether a process waits for an flock on the file (a `->` line of /proc/locks names its inode)."""
    inode = f":{lock.stat().st_ino} "
    lines = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and inode in line for line in lines)


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads Linux's table of file locks")
def test_a_build_waits_for_the_record_another_is_writing(iterated: tuple[Path, Path, int]) -> None:
    root, store, everything = iterated
    # A build whose record is still to be written, as the command's child writes it after answering.
    pending: list[Any] = []
    _append(root / "app/util2.py", LEAF.format(n=2))
    summary = build(root, store=store, persist=True, later=pending.append)
    assert len(pending) == 1
    _append(root / "app/util3.py", LEAF.format(n=3))
    command = [SLOTRELAY, "psmr", "build", str(root), "--store", str(store), "--json"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        lock = store / "workspaces" / summary["workspace_id"] / replay.LOCK_FILE
        try:
            wait_until(lambda: _waiting_on(lock), timeout=60, what="the next build to wait for the record")
        finally:
            pending[0]()
        out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert json.loads(out)["resolved_sites"] < everything


def test_a_lock_file_that_is_not_a_file_is_not_waited_on(iterated: tuple[Path, Path, int]) -> None:
    root, store, everything = iterated
    workspace = build(root, store=store)["workspace_id"]
    lock = store / "workspaces" / workspace / replay.LOCK_FILE
    lock.unlink()
    os.mkfifo(lock)
    _append(root / "app/util2.py", LEAF.format(n=2))
    done: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: done.append(build(root, store=store, persist=True)), daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert done and done[0]["resolved_sites"] < everything, "the build waited on a FIFO in the store"


def test_a_part_changed_on_disk_since_the_manifest_is_written_again(iterated: tuple[Path, Path, int]) -> None:
    # A one-shot build assembles every part and keeps, unread, those whose content the manifest names
    # while their files are as the manifest noted them; a file changed since is not kept.
    root, store, _ = iterated
    workspace = build(root, store=store)["workspace_id"]
    manifest = Store.open(store).manifest(workspace)
    name = manifest["parts"]["app.util7"][0]
    part = store / "workspaces" / workspace / "parts" / name
    part.write_bytes(part.read_bytes() + b" ")
    _append(root / "app/util2.py", LEAF.format(n=2))
    build(root, store=store, persist=True)
    assert Store.open(store).load(workspace).nodes
    assert Store.open(store).manifest(workspace)["parts"]["app.util7"][0] == name


def test_items_whose_digests_collide_are_told_apart_by_their_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = {}
    for rel, text in TREE.items():
        module = rel[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        facts[module] = extract(text, module, is_package=rel.endswith("__init__.py"))
    linker = Linker(facts, record=True)
    linker.run()
    record = ResolutionRecord.of(linker)
    assert record is not None
    # Three digests for every item of the table: each lookup meets many others of its digest.
    monkeypatch.setattr(replay, "_hash", lambda key: len(key) % 3)
    keys = {module: f"key-{module}" for module in facts}
    manifest = {"version": "v1", "files": {m: {"key": k, "module": m} for m, k in keys.items()}}
    payload = replay.dump(Resolved("v1", keys, record, None))
    back = replay.load(payload, manifest, facts, keys, lambda key: None)
    assert back.record is not None
    stored = back.record.uses.tables[0]
    original = _merged(record.uses)
    assert len(original) > 100
    for item, users in original.items():
        assert stored.get(item) == users, item
    assert stored.get(("no such item",)) is None


def test_a_process_that_builds_again_before_writing_does_not_wait_on_itself(
    iterated: tuple[Path, Path, int],
) -> None:
    root, store, everything = iterated
    pending: list[Any] = []
    _append(root / "app/util2.py", LEAF.format(n=2))
    build(root, store=store, persist=True, later=pending.append)
    _append(root / "app/util3.py", LEAF.format(n=3))
    done: list[dict[str, Any]] = []
    worker = threading.Thread(
        target=lambda: done.append(build(root, store=store, persist=True, later=pending.append)), daemon=True
    )
    worker.start()
    worker.join(timeout=120)
    assert done, "the second build waited on its own process's lock"
    for write in pending:
        write()
    # The record written last is the second build's, the stored version: the next build replays it.
    _append(root / "app/util4.py", LEAF.format(n=4))
    assert build(root, store=store, persist=True)["resolved_sites"] < everything


def _sections(payload: bytes) -> list[bytes]:
    lengths = replay.LENGTHS.unpack_from(payload)
    ends = [replay.LENGTHS.size]
    for length in lengths:
        ends.append(ends[-1] + length)
    return [payload[start:end] for start, end in itertools.pairwise(ends)]


def _packed(sections: list[bytes]) -> bytes:
    return b"".join([replay.LENGTHS.pack(*map(len, sections)), *sections])


def test_a_sealed_record_that_does_not_read_back_is_refused(tmp_path: Path) -> None:
    """The seal says who wrote a record, not that it is whole: a payload this user's key sealed but
    that does not hold a record (cut sections, a table of users that does not match its items, a
    section without its fields) is refused, never read as a resolution."""
    import msgpack

    facts, _, keys, manifest, payload = _dumped(write_tree(tmp_path / "tree", SHAPES))
    assert replay.load(payload, manifest, facts, keys, lambda key: None).record is not None

    head, tuples, lists = _sections(payload)
    unpacked = msgpack.unpackb(tuples, strict_map_key=False, ext_hook=msgpack.ExtType)
    users = list(unpacked["uses"])
    users[5] = users[5][:-4]  # the last user of the last item cut off
    cut_users = msgpack.packb({**unpacked, "uses": users})
    damaged = {
        "an extra byte": payload + b"\x00",
        "a table of users cut": _packed([head, cut_users, lists]),
        "a section without its fields": _packed([head, msgpack.packb({}), lists]),
        "a section that is not MessagePack": _packed([head, b"\xc1" * 8, lists]),
    }
    for what, bad in damaged.items():
        with pytest.raises(replay.Refused) as refused:
            replay.load(bad, manifest, facts, keys, lambda key: None)
        assert "do not add up" in str(refused.value) or "does not read back" in str(refused.value), what
