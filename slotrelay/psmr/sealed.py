"""Sealed records: how the PSMR store writes data so that a store it did not write is never trusted.

A record is one file: a header line, then a JSON document (orjson), nothing that can carry code:

    psmr-sealed-1 <hmac-sha256 hex> <payload length>\\n<payload>

The seal is an HMAC over the record's name inside its store and the payload, under a key of this
user (`$XDG_STATE_HOME/slotrelay/psmr-store.key`, 32 random bytes, created on first use with mode
0600). A store cloned with a repository, copied from another machine or edited by hand therefore
fails the seal and is rebuilt; renaming a record (a sealed facts file put under another content key)
fails it too. Reading never follows a symlink, never opens anything but a regular file without
blocking (a FIFO is refused, not read), and never reads more than the header announces.

JSON has no tuples, and the fast pass's facts hold their refs as tuples (the resolver hashes them),
so `encode` writes a tuple as a list headed by `TUPLE` and escapes a list that happens to start with
a NUL-prefixed string; `decode` undoes both, so a record reads back equal to what was written.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Any

import orjson

MAGIC = b"psmr-sealed-1"
TUPLE = "\x00tuple"
ESCAPED_LIST = "\x00list"
KEY_BYTES = 32
# The header is short; a file whose first line is longer is not a record.
HEADER_LIMIT = 128


def key_path() -> Path:
    """Where this user's sealing key lives."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "slotrelay" / "psmr-store.key"


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
    except (OSError, ValueError):
        return secrets.token_bytes(KEY_BYTES)


def _read_key(path: Path) -> bytes:
    data = read_regular(path, limit=KEY_BYTES + 1)
    if len(data) != KEY_BYTES:
        raise ValueError(f"{path} is not a {KEY_BYTES}-byte key")
    return data


def read_regular(path: Path, *, limit: int) -> bytes:
    """The bytes of a regular file, read without following a symlink and without blocking.

    Parameters:
        path: the file.
        limit: read at most this many bytes.

    Returns:
        Its content (at most `limit` bytes).

    Raises:
        OSError: it cannot be opened, or it is not a regular file (ELOOP for a symlink, EINVAL for
            a FIFO, socket or device).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(22, "not a regular file", str(path))
        chunks = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


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


def unseal(name: str, path: Path) -> tuple[bytes, str] | None:
    """The payload and seal of a record, or None if it is missing, damaged or not sealed by this user.

    Parameters:
        name: the record's path relative to its store, as given to `seal`.
        path: the file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
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


def encode(value: Any) -> bytes:
    """JSON of plain data, tuples kept apart from lists (see the module docstring).

    Raises:
        orjson.JSONEncodeError: the value holds something JSON cannot (an integer past 64 bits,
            nesting deeper than orjson's 255 levels).
    """
    return orjson.dumps(_tag(value))


def decode(payload: bytes) -> Any:
    """The value `encode` wrote.

    Raises:
        orjson.JSONDecodeError: the payload is not JSON.
    """
    return _untag(orjson.loads(payload))


def _tag(value: Any) -> Any:
    kind = type(value)
    if kind is tuple:
        return [TUPLE, *(_tag(v) for v in value)]
    if kind is list:
        items = [_tag(v) for v in value]
        if items and isinstance(items[0], str) and items[0].startswith("\x00"):
            return [ESCAPED_LIST, *items]
        return items
    if kind is dict:
        return {k: _tag(v) for k, v in value.items()}
    return value


def _untag(value: Any) -> Any:
    kind = type(value)
    if kind is list:
        if value and value[0] == TUPLE:
            return tuple([_untag(v) for v in value[1:]])
        if value and value[0] == ESCAPED_LIST:
            return [_untag(v) for v in value[1:]]
        return [_untag(v) for v in value]
    if kind is dict:
        return {k: _untag(v) for k, v in value.items()}
    return value
