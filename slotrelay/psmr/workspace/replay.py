"""A workspace's last resolution kept in the store, so that a one-shot build in a new process replays it.

A long-lived process keeps its last resolution in memory (`slotrelay.psmr.workspace.kept`); a
`slotrelay psmr build` is a new process each time, so the same `Resolved` is written to the store
beside the workspace's manifest and read back by the next build, which replays it where the edit
reaches (`relink`) instead of resolving the whole tree again. One concept in two places: `dump` turns
a `Resolved` into the record's payload, `load` a payload back into a `Resolved` (without the graph's
parts, which the build then assembles from the facts).

    <store>/workspaces/<ws_id>/resolution.msgpack

The record is sealed like every record of the store (`slotrelay.psmr.workspace.sealed`: an HMAC under
this user's key over its name and payload) and is data only, MessagePack, never pickle. It is used
only when its seal checks, its format and facts version are this code's, and it is the resolution of
the workspace the manifest describes (the same version, every file's content key the same); anything
else is refused with a reason and the build resolves in full: a refused record never gives a wrong
answer, only a slower build.

What is stored is the record `relink` reads less what the build has anyway: the facts and their tables
are not stored (the facts are the store's, by the content keys the record names; the tables are
rebuilt from them). Its values are tuples of strings and numbers (refs, values, memo keys), so each
section is unpacked in C with every array a tuple, and the sets are made from those tuples; the few
lists a replay compares as lists (MROs, call targets) live in sections unpacked with lists. Who used
what (`Uses`, the largest part: on networkx a million items and four million uses) is never read
whole: each distinct item is stored as its canonical bytes, found by a binary search on their sorted
64-bit digests, and only the items a replay walks to are read back (`StoredUses`).
"""

from __future__ import annotations

import bisect
import fcntl
import hashlib
import itertools
import os
import stat
import struct
import sys
import threading
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgpack

from slotrelay import fsio
from slotrelay.psmr.analysis.calltargets import CallTarget
from slotrelay.psmr.analysis.facts_version import FACTS_VERSION
from slotrelay.psmr.analysis.hierarchy import ClassHierarchy
from slotrelay.psmr.analysis.link import LinkResult
from slotrelay.psmr.analysis.memo import Uses
from slotrelay.psmr.analysis.record import ResolutionRecord
from slotrelay.psmr.workspace.kept import Resolved

FORMAT = "psmr-replay-1"
# The content key the build gives a module it could not analyse (`build._facts`): no facts are stored.
UNANALYSED = "unanalysed:"
FROZENSET_EXT = 2
# A record starts with the lengths of its head and of its two sections.
LENGTHS = struct.Struct("<QQQ")
# How the tables of users are written: 32-bit words in this machine's byte order.
WORDS = f"{array('I').itemsize * 8}-bit {sys.byteorder}"


def record_name(workspace_id: str) -> str:
    """The record's path inside its store."""
    return f"workspaces/{workspace_id}/resolution.msgpack"


# The workspaces (store folder, workspace id) whose record this process has yet to write.
_WRITING: set[tuple[str, str]] = set()
_WRITING_GUARD = threading.Lock()
LOCK_FILE = "resolution.lock"


class WriteLock:
    """Held from the end of a build until its record is written (an exclusive `flock` on the
    workspace's `resolution.lock`): the next build waits for the record rather than resolve in full.
    The command writes in a child process, which inherits the lock and releases it when done (or
    when it dies); its parent ends meanwhile. A process that already has a write of the workspace to
    run (a caller of `build(later=...)` building again first) takes no second lock, which would wait
    on its own first one forever: the later write of the two replaces the other, and a record not of
    the stored version is refused when read."""

    def __init__(self, store: Path, workspace_id: str) -> None:
        self._key = (str(store), workspace_id)
        self._fd: int | None = None
        with _WRITING_GUARD:
            self._owner = self._key not in _WRITING
            _WRITING.add(self._key)
        if not self._owner:
            return
        with fsio.open_dir(store, f"workspaces/{workspace_id}", create=True) as folder:
            self._fd = _open_lock(folder, os.O_RDWR | os.O_CREAT)
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX)

    def release(self) -> None:
        """Let the next build read the record."""
        if self._owner:
            with _WRITING_GUARD:
                _WRITING.discard(self._key)
            self._owner = False
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def wait_for_writer(store: Path, workspace_id: str) -> None:
    """Wait until no process is writing the workspace's record (see `WriteLock`). Not when this
    process is to write it itself (its caller runs the write later): that would never end."""
    with _WRITING_GUARD:
        if (str(store), workspace_id) in _WRITING:
            return
    try:
        with fsio.open_dir(store, f"workspaces/{workspace_id}") as folder:
            fd = _open_lock(folder, os.O_RDONLY)
    except (OSError, ValueError):
        return
    if fd is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


def _open_lock(folder: fsio.CheckedDir, flags: int) -> int | None:
    """The lock file opened in the workspace's folder, or None when it is not a regular file (the store
    is not trusted: a FIFO put there is neither waited on to open nor locked)."""
    try:
        fd = os.open(LOCK_FILE, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600, dir_fd=folder.fd)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


class Refused(Exception):
    """A stored resolution that cannot be replayed; the message says why."""


def dump(resolved: Resolved) -> bytes:
    """The payload of a resolution kept in the store.

    Raises:
        ValueError: the resolution has no record to replay.
    """
    record = resolved.record
    if record is None:
        raise ValueError("a resolution without a record cannot be replayed")
    result = record.result
    tuples = {
        "modules": sorted(record.modules),
        "param_free": _table(record.param_free),
        "rounds": [_table(r) for r in record.rounds],
        "round_params": [_table(r) for r in record.round_params],
        "round_readers": [_table(r) for r in record.round_readers],
        "final_readers": _table(record.final_readers),
        "constructed_by": _table(record.constructed_by),
        "constructed": sorted(record.constructed),
        "unresolved": [list(result.unresolved), list(result.unresolved.values())],
        "state": result.state,
        "decorates": result.decorates,
        "reexports": result.reexports,
        "uses": _uses(record.uses),
        "strict_uses": _uses(record.strict_uses),
    }
    lists = {
        "mro_of": record.hierarchy.mro_of,
        "subclasses_of": record.hierarchy.subclasses_of,
        "mro": result.mro,
        "bases": result.bases,
        "external_bases": result.external_bases,
        "targets": _targets(result.targets),
        "implicit": _targets(result.implicit),
    }
    head = {
        "format": FORMAT,
        "words": WORDS,
        "facts_version": FACTS_VERSION,
        "version": resolved.version,
        "keys": resolved.keys,
    }
    # The lengths of the head and of the two sections, then each as it is: reading them copies nothing.
    parts = [msgpack.packb(head), msgpack.packb(tuples, default=_frozenset_ext), msgpack.packb(lists)]
    return b"".join([LENGTHS.pack(*map(len, parts)), *parts])


def load(
    payload: bytes,
    manifest: dict[str, Any],
    facts: dict[str, dict[str, Any]],
    keys: dict[str, str],
    stored_facts: Callable[[str], dict[str, Any] | None],
) -> Resolved:
    """The resolution a payload holds, as a replay reads it.

    Parameters:
        payload: the record's payload (its seal already checked).
        manifest: the workspace's manifest: the record must be the resolution of its version.
        facts: every module's facts now (the build's), by module.
        keys: the content key of each module's facts now.
        stored_facts: the facts the store holds under a content key, or None: the facts before the
            edit of the modules it changed, which the record names only by key.

    Raises:
        Refused: the payload is not a record of this format and facts version, not the manifest's
            resolution, or names facts the store no longer holds.
    """
    try:
        lengths = LENGTHS.unpack_from(payload)
        if LENGTHS.size + sum(lengths) != len(payload):
            raise Refused("its sections do not add up to its length")
        view = memoryview(payload)
        ends = list(itertools.accumulate(lengths, initial=LENGTHS.size))
        head_blob, tuples_blob, lists_blob = (view[start:end] for start, end in itertools.pairwise(ends))
        head = msgpack.unpackb(head_blob)
        made = (head.get("format"), head.get("facts_version"), head.get("words"))
        if made != (FORMAT, FACTS_VERSION, WORDS):
            raise Refused("a record of format {}, facts {}, {} words".format(*made))
        then: dict[str, str] = head["keys"]
        if head.get("version") != manifest.get("version") or any(
            then.get(entry["module"]) != entry["key"] for entry in manifest["files"].values()
        ):
            raise Refused("it is not the resolution of the stored workspace's version")
        before = _facts_before(then, facts, keys, stored_facts)
        tuples = _unpack_tuples(tuples_blob)
        lists = msgpack.unpackb(lists_blob, strict_map_key=False)
        record = _record(tuples, lists, before)
    except Refused:
        raise
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        struct.error,
        msgpack.UnpackException,
    ) as exc:
        raise Refused(f"it does not read back as a record ({type(exc).__name__})") from exc
    return Resolved(head["version"], dict(then), record, None)


def _facts_before(
    then: dict[str, str],
    facts: dict[str, dict[str, Any]],
    keys: dict[str, str],
    stored_facts: Callable[[str], dict[str, Any] | None],
) -> dict[str, dict[str, Any]]:
    """The analysable facts the record was resolved from: the build's where the content key is the
    same, else the store's (a module that could not be analysed then had no facts to resolve)."""
    out = {}
    for module, key in then.items():
        if keys.get(module) == key:
            out[module] = facts[module]
        elif not key.startswith(UNANALYSED):
            found = stored_facts(key)
            if found is None:
                raise Refused(f"the facts of {module} it was resolved from are no longer stored")
            out[module] = found
    return {module: f for module, f in out.items() if not f.get("syntax_error")}


def _record(
    tuples: dict[str, Any], lists: dict[str, Any], facts: dict[str, dict[str, Any]]
) -> ResolutionRecord:
    from slotrelay.psmr.analysis.facttables import LinkTables

    result = LinkResult(
        targets=_targets_back(lists["targets"]),
        unresolved=dict(zip(*tuples["unresolved"], strict=True)),
        state=list(tuples["state"]),
        mro=lists["mro"],
        bases=lists["bases"],
        external_bases=lists["external_bases"],
        decorates=list(tuples["decorates"]),
        reexports=list(tuples["reexports"]),
        implicit=_targets_back(lists["implicit"]),
    )
    return ResolutionRecord(
        modules=frozenset(tuples["modules"]),
        facts=facts,
        tables=LinkTables(facts),
        hierarchy=ClassHierarchy(mro_of=lists["mro_of"], subclasses_of=lists["subclasses_of"]),
        result=result,
        param_free=_table_back(tuples["param_free"]),
        rounds=[_table_back(r) for r in tuples["rounds"]],
        round_params=[_table_back(r) for r in tuples["round_params"]],
        round_readers=[_table_back(r) for r in tuples["round_readers"]],
        final_readers=_table_back(tuples["final_readers"]),
        constructed_by=_table_back(tuples["constructed_by"]),
        constructed=frozenset(tuples["constructed"]),
        uses=_uses_back(tuples["uses"]),
        strict_uses=_uses_back(tuples["strict_uses"]),
    )


def _frozenset_ext(value: Any) -> msgpack.ExtType:
    """A set inside a value or key (a memo key holding the values it was asked in), as an extension
    type: rare enough that only these cost a Python call when read back."""
    if type(value) is frozenset:
        return msgpack.ExtType(FROZENSET_EXT, msgpack.packb(list(value), default=_frozenset_ext))
    raise TypeError(f"cannot store a {type(value).__name__} in a resolution record")


def _unpack_tuples(blob: bytes | memoryview) -> Any:
    """A section packed with `_frozenset_ext`, every array read back as a tuple."""
    return msgpack.unpackb(blob, use_list=False, strict_map_key=False, ext_hook=_frozenset_back)


def _frozenset_back(code: int, data: bytes) -> Any:
    if code != FROZENSET_EXT:
        raise ValueError(f"unknown MessagePack extension {code}")
    return frozenset(_unpack_tuples(data))


def _table(table: Mapping[Any, Iterable[Any]]) -> list[list[Any]]:
    """A table of key -> set as its keys and its sets' members (in the set's order: a set read back
    is the same set whatever order it is built in)."""
    return [list(table), [list(members) for members in table.values()]]


def _table_back(packed: tuple[tuple[Any, ...], tuple[tuple[Any, ...], ...]]) -> dict[Any, frozenset[Any]]:
    keys, members = packed
    return dict(zip(keys, map(frozenset, members), strict=True))


def _targets(table: dict[tuple[str, int], list[CallTarget]]) -> list[list[Any]]:
    return [
        [list(key) for key in table],
        [[[t.target, t.kind, t.resolution] for t in targets] for targets in table.values()],
    ]


def _targets_back(packed: list[list[Any]]) -> dict[tuple[str, int], list[CallTarget]]:
    keys, targets = packed
    return {
        (key[0], key[1]): [CallTarget(*t) for t in found] for key, found in zip(keys, targets, strict=True)
    }


def _uses(uses: Uses) -> list[Any]:
    """Who used what, every table of it in one (a walk over the union of the tables reaches what a
    walk over them reaches): each distinct item by its canonical bytes (`canonical`), then where each
    one's users start in the list of users, and that list, both as numbers of items (native 32-bit
    words). A table read back from a record is taken over as its bytes, without reading its items."""
    number: dict[bytes, int] = {}
    users_of: dict[int, set[int]] = {}
    known: dict[Hashable, bytes] = {}

    def key(item: Hashable) -> int:
        packed = known.get(item)
        if packed is None:
            packed = known[item] = canonical(item)
        return number.setdefault(packed, len(number))

    for table in uses.tables:
        if isinstance(table, StoredUses):
            stored = [number.setdefault(table.key_at(at), len(number)) for at in range(table.count)]
            for at, numbers in table.numbered():
                users_of.setdefault(stored[at], set()).update(stored[user] for user in numbers)
            continue
        for item, users in table.items():
            if users:
                users_of.setdefault(key(item), set()).update(map(key, users))
    starts, targets = array("I", [0]), array("I")
    for at in range(len(number)):
        targets.extend(sorted(users_of.get(at, ())))
        starts.append(len(targets))
    keys = list(number)
    offsets = array("Q", [0])
    offsets.extend(itertools.accumulate(map(len, keys)))
    hashes = sorted(zip(map(_hash, keys), itertools.count()))
    return [
        array("Q", (h for h, _ in hashes)).tobytes(),
        array("I", (at for _, at in hashes)).tobytes(),
        offsets.tobytes(),
        b"".join(keys),
        starts.tobytes(),
        targets.tobytes(),
    ]


def _hash(key: bytes) -> int:
    """A 64-bit digest of an item's canonical bytes, by which the record's table finds it."""
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


def canonical(item: Any) -> bytes:
    """The bytes of an item (a memo key, a question, a fact: tuples of strings, numbers and sets) that
    every item equal to it has too: sets with their members in the order of their bytes, and a bool or
    an integral float as the int it equals (`True == 1`, so a key holding either is the same key)."""
    packed: bytes = msgpack.packb(item, default=_canonical_set)
    # A bool or a float packs to one of these bytes (which a string or a number may hold too).
    if any(marker in packed for marker in _BOOL_OR_FLOAT):
        packed = msgpack.packb(_as_int_where_equal(item), default=_canonical_set)
    return packed


_BOOL_OR_FLOAT = (b"\xc2", b"\xc3", b"\xca", b"\xcb")


def _canonical_set(value: Any) -> msgpack.ExtType:
    if type(value) is frozenset:
        members = sorted(map(canonical, value))
        header: bytes = msgpack.Packer().pack_array_header(len(members))
        return msgpack.ExtType(FROZENSET_EXT, header + b"".join(members))
    raise TypeError(f"cannot store a {type(value).__name__} in a resolution record")


def _as_int_where_equal(value: Any) -> Any:
    kind = type(value)
    if kind is tuple:
        return tuple(map(_as_int_where_equal, value))
    if kind is frozenset:
        return frozenset(map(_as_int_where_equal, value))
    if kind is bool or (kind is float and value.is_integer() and abs(value) < 2**63):
        return int(value)
    return value


class StoredUses(Mapping[Hashable, set[Hashable]]):
    """Who used what as the record holds it (see `_uses`), read without reading its items: an item is
    found by the digest of its canonical bytes (a binary search in the sorted digests, then its bytes
    compared), and only the users a replay asks for are read back (a replay asks for few of the
    hundreds of thousands of items of a large tree). An item read back is its canonical form, equal
    to the item it was (a bool as the int it equals)."""

    def __init__(self, packed: tuple[Any, ...]) -> None:
        hashes, order, offsets, blob, starts, targets = packed
        if type(blob) is not bytes:
            raise ValueError("the items of the table of users are not bytes")
        self._hashes, self._order, self._offsets = array("Q"), array("I"), array("Q")
        self._starts, self._targets = array("I"), array("I")
        for words, data in (
            (self._hashes, hashes),
            (self._order, order),
            (self._offsets, offsets),
            (self._starts, starts),
            (self._targets, targets),
        ):
            words.frombytes(data)
        self._blob = blob
        count = self.count = len(self._order)
        if not (len(self._hashes) == count and len(self._offsets) == len(self._starts) == count + 1):
            raise ValueError("the table of users does not match its items")
        if self._offsets[-1] != len(blob) or self._starts[-1] != len(self._targets):
            raise ValueError("the table of users does not match its items")
        if count and (max(self._order) >= count or (self._targets and max(self._targets) >= count)):
            raise ValueError("a user is not an item of the table")
        # The items read back, and the number of each item asked about or read back.
        self._items: dict[int, Hashable] = {}
        self._known: dict[Hashable, int] = {}

    def key_at(self, at: int) -> bytes:
        """The canonical bytes of the item numbered `at`."""
        return self._blob[self._offsets[at] : self._offsets[at + 1]]

    def numbered(self) -> Iterator[tuple[int, array[int]]]:
        """Each item that has users, by number, with its users' numbers."""
        starts, targets = self._starts, self._targets
        for at in range(self.count):
            if starts[at] != starts[at + 1]:
                yield at, targets[starts[at] : starts[at + 1]]

    def _number_of(self, item: Hashable) -> int | None:
        at = self._known.get(item)
        if at is not None:
            return at
        packed = canonical(item)
        digest = _hash(packed)
        hashes = self._hashes
        for place in range(bisect.bisect_left(hashes, digest), len(hashes)):
            if hashes[place] != digest:
                break
            if self.key_at(self._order[place]) == packed:
                at = self._known[item] = self._order[place]
                return at
        return None

    def _item(self, at: int) -> Hashable:
        item = self._items.get(at)
        if item is None:
            item = self._items[at] = _unpack_tuples(self.key_at(at))
            self._known[item] = at
        return item

    def get(self, item: Hashable, default: Any = None) -> Any:  # the hot path of `Uses.affected`
        at = self._number_of(item)
        if at is None:
            return default
        start, end = self._starts[at], self._starts[at + 1]
        if start == end:
            return default
        return set(map(self._item, self._targets[start:end]))

    def __getitem__(self, item: Hashable) -> set[Hashable]:
        users: set[Hashable] | None = self.get(item)
        if users is None:
            raise KeyError(item)
        return users

    def __iter__(self) -> Iterator[Hashable]:
        return (self._item(at) for at, _ in self.numbered())

    def __len__(self) -> int:
        return sum(1 for _ in self.numbered())


def _uses_back(packed: tuple[Any, ...]) -> Uses:
    return Uses((StoredUses(packed),))
