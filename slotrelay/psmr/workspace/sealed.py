"""Sealed records: how the PSMR store writes data so that a store it did not write is never trusted.

A record is one file: a header line, then the payload, plain data in a format that cannot carry
code (JSON through orjson, or MessagePack for the fast pass's facts):

    psmr-sealed-1 <hmac-sha256 hex> <payload length>\\n<payload>

The seal is an HMAC over the record's name inside its store and the payload, under a key of this
user (`psmr-store.key` in slotrelay's state folder, `slotrelay.fsio.state_home`: 32 random bytes,
created on first use with mode 0600). A store copied from another user or machine, or edited by hand,
therefore fails the seal and is rebuilt; renaming a record (a sealed facts file put under another
content key, a delta record put under another workspace or id) fails it too. Reading goes through
`slotrelay.fsio`: it never follows a symlink, never opens anything but a regular file, never blocks
(a FIFO is refused, not read), and never reads more than the header announces.

The fast pass's facts hold their refs as tuples (the resolver hashes them), which JSON cannot tell
from lists, and re-freezing them after `orjson.loads` made loading networkx's facts 5-7 times
slower than pickle had been. So facts are MessagePack (`pack_facts`): a tuple is an extension type
holding the packed tuple, unpacked in C as tuples all the way down (refs are: `extract` freezes
them), so only each outermost tuple costs a Python call, about twice as fast as JSON and tagging.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

import msgpack

from slotrelay import fsio

MAGIC = b"psmr-sealed-1"
TUPLE_EXT = 1
KEY_BYTES = 32
# The header is short; a file whose first line is longer is not a record.
HEADER_LIMIT = 128


def key_path() -> Path:
    """Where this user's sealing key lives (in slotrelay's state folder)."""
    return fsio.state_home() / "psmr-store.key"


@functools.cache
def seal_key() -> bytes:
    """This user's sealing key, created on first use.

    Returns:
        32 bytes. When no key file can be kept (no writable home), a key for this process alone:
        its records verify only in this process and later runs rebuild them.
    """
    path = key_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            return _read_key(path)
        except FileNotFoundError:
            pass
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".psmr-store.key.")
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            # A hard link creates the name only if it is free, so two first runs agree on one key.
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        return _read_key(path)
    except (OSError, ValueError, RuntimeError):
        # RuntimeError: no home folder to find the state folder in.
        return secrets.token_bytes(KEY_BYTES)


def _read_key(path: Path) -> bytes:
    data = fsio.read_regular(path, limit=KEY_BYTES)
    if len(data) != KEY_BYTES:
        raise ValueError(f"{path} is not a {KEY_BYTES}-byte key")
    return data


def _mac(name: str, payload: bytes) -> str:
    return hmac.new(seal_key(), name.encode() + b"\0" + payload, hashlib.sha256).hexdigest()


def seal(name: str, payload: bytes) -> tuple[bytes, str]:
    """The record's bytes for a payload stored under `name`, and its seal (hex).

    Parameters:
        name: the record's path relative to its store (e.g. `facts/<key>.json`).
        payload: the JSON document.
    """
    mac = _mac(name, payload)
    return MAGIC + b" " + mac.encode() + b" " + str(len(payload)).encode() + b"\n" + payload, mac


def unseal(store: Path, name: str) -> tuple[bytes, str] | None:
    """The payload and seal of a record, or None if it is missing, damaged, not a regular file reached
    without a link, or not sealed by this user.

    Parameters:
        store: the store folder.
        name: the record's path relative to it, as given to `seal`.
    """
    try:
        fd = fsio.open_regular(store, name)
    except (OSError, ValueError):
        return None
    return _unseal_fd(fd, name)


def unseal_in(folder: fsio.CheckedDir, file: str, name: str) -> tuple[bytes, str] | None:
    """`unseal` of the record `file` of a store folder the caller has opened (checked) once for many
    records, e.g. a workspace's graph parts.

    Parameters:
        folder: the opened folder.
        file: the record's file name in it.
        name: the record's path relative to its store, as given to `seal`.
    """
    try:
        fd = folder.open_regular(file)
    except (OSError, ValueError):
        return None
    return _unseal_fd(fd, name)


def _unseal_fd(fd: int, name: str) -> tuple[bytes, str] | None:
    """The payload and seal read from an open record (closed here), or None as `unseal` says."""
    try:
        info = os.fstat(fd)
        head = os.pread(fd, HEADER_LIMIT, 0)
        line, newline, _ = head.partition(b"\n")
        parts = line.split(b" ")
        if not newline or len(parts) != 3 or parts[0] != MAGIC or not parts[2].isdigit():
            return None
        length = int(parts[2])
        if info.st_size != len(line) + 1 + length:
            return None
        payload = os.pread(fd, length, len(line) + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    mac = parts[1].decode("ascii", errors="replace")
    if len(payload) != length or not hmac.compare_digest(mac, _mac(name, payload)):
        return None
    return payload, mac


def pack_facts(facts: dict[str, Any]) -> bytes:
    """MessagePack of a file's facts, each outermost tuple an extension type.

    Raises:
        TypeError, ValueError, OverflowError: the facts hold something MessagePack cannot (an
            integer past 64 bits, nesting deeper than its limit).
    """
    # One packer for the tuples of this file: `msgpack.packb` makes a packer per call, and a file's
    # facts hold hundreds of tuples. Not shared between calls: a packer is not thread-safe.
    tuples = msgpack.Packer()

    def tuple_ext(value: Any) -> msgpack.ExtType:
        if type(value) is tuple:
            return msgpack.ExtType(TUPLE_EXT, tuples.pack(value))
        raise TypeError(f"cannot store a {type(value).__name__} in facts")

    packed: bytes = msgpack.packb(facts, default=tuple_ext, strict_types=True)
    return packed


def unpack_facts(payload: bytes) -> Any:
    """The facts `pack_facts` wrote (tuples as tuples, lists as lists).

    Raises:
        ValueError: the payload is not MessagePack of this shape.
    """
    return msgpack.unpackb(payload, ext_hook=_tuple_from_ext)


def _tuple_from_ext(code: int, data: bytes) -> Any:
    if code != TUPLE_EXT:
        raise ValueError(f"unknown MessagePack extension {code}")
    return msgpack.unpackb(data, use_list=False)
