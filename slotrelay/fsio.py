"""Files slotrelay writes and reads, never through a link it did not make.

The rule is CONTRACTS.md#files-the-product-writes. Two places hold what slotrelay writes:

- its state folder (`state_home()`): the PSMR store, delta records, audit logs with their head and
  lock files, the sealing key. A tree's own state lives under `tree_state(tree)`, keyed by the tree's
  resolved path, so nothing a tree holds (a cloned `.psmr/` or `.slotrelay/`) is read or written as
  slotrelay's state;
- the files it must write inside a tree it did not create (a projected source file, a kept pen): each
  goes through a `CheckedDir`. Every folder from a trusted anchor (a granted root, the state folder)
  down is opened relative to its parent's descriptor with `O_NOFOLLOW | O_DIRECTORY`, so a folder that
  is, or is swapped for, a symlink or a file is refused, never followed. The file is written to a
  fresh temporary name in that same folder, fsynced, renamed over its target within the descriptor,
  and the folder is fsynced.

Reads of files a request can reach (`read_file`, `read_regular`, `open_regular`) never block and read
only regular files: a link not followed raises `LinkRefused` (ELOOP), a FIFO, socket, device or folder
`NotRegular` (EINVAL), and a file larger than the caller's limit `FileTooLarge` (EFBIG).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path, PurePath
from types import TracebackType
from typing import Self

STATE_HOME_ENV = "SLOTRELAY_STATE_HOME"
# The anchor of a path whose every folder is checked: the chain engine's files (slotrelay.chain.slots.walked).
FS_ROOT = Path("/")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISLNK, "a symbolic link"),
)
CHUNK = 1 << 20


class RefusedPath(OSError):
    """A path fsio does not open: a link it did not make, or not the kind of file asked for."""


class LinkRefused(RefusedPath):
    """A symbolic link where a folder or file was expected; it is not followed."""

    def __init__(self, path: str | PurePath) -> None:
        super().__init__(errno.ELOOP, "a symbolic link, not followed", str(path))


class NotRegular(RefusedPath):
    """Not a regular file (or, on the way to one, not a folder); `kind` says what it is."""

    def __init__(self, path: str | PurePath, kind: str, expected: str = "a regular file") -> None:
        super().__init__(errno.EINVAL, f"{kind}, not {expected}", str(path))
        self.kind = kind


class FileTooLarge(OSError):
    """A file larger than the reader's limit (nothing of it is returned)."""

    def __init__(self, path: str | PurePath, limit: int) -> None:
        super().__init__(errno.EFBIG, f"larger than {limit} bytes, the limit", str(path))
        self.limit = limit


def state_home() -> Path:
    """slotrelay's state folder: `$SLOTRELAY_STATE_HOME`, else `$XDG_STATE_HOME/slotrelay`, else
    `~/.local/state/slotrelay` (an XDG_STATE_HOME that is not absolute is ignored, as the XDG
    specification says)."""
    explicit = os.environ.get(STATE_HOME_ENV)
    if explicit:
        return Path(os.path.abspath(os.path.expanduser(explicit)))
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return base / "slotrelay"


def tree_state(tree: str | Path) -> Path:
    """The state folder of one tree (its audit logs, pen ids and staged pens), keyed by its resolved path.

    Parameters:
        tree: the tree (a pen root, an analysed root).

    Returns:
        `<state_home>/trees/<name>-<12 hex digits of the sha1 of the resolved path>`.
    """
    resolved = os.path.realpath(tree)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(resolved))[:40] or "root"
    digest = hashlib.sha1(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return state_home() / "trees" / f"{name}-{digest}"


def kind_of(mode: int) -> str:
    """What a file of this mode is, in words ("a FIFO", "a folder", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _components(path: str) -> tuple[str, list[str]]:
    """A path as `PurePosixPath` reads it, in plain strings: its root ('', '/', or '//' for exactly two
    leading slashes, which POSIX keeps apart) and its components, without '.' and empty ones.

    Strings, not `PurePath`: every slot read and write of a chain run walks its path (four a node), and
    pathlib's parsing was a quarter of the engine's own CPU on a node's path (cProfile, thread time).
    """
    stripped = path.lstrip("/")
    leading = len(path) - len(stripped)
    root = "//" if leading == 2 else "/" if leading else ""
    return root, [part for part in stripped.split("/") if part and part != "."]


def _parts(anchor: str | PurePath, path: str | PurePath) -> list[str]:
    """The components of `path` below `anchor` (`path` absolute under it, or relative to it)."""
    root, parts = _components(os.fspath(path))
    if root:
        anchor_root, anchor_parts = _components(os.fspath(anchor))
        if root != anchor_root or parts[: len(anchor_parts)] != anchor_parts:
            raise ValueError(f"{path} is not inside {PurePath(anchor)}")
        parts = parts[len(anchor_parts) :]
    if ".." in parts:
        raise ValueError(f"{path}: '..' is not followed below {PurePath(anchor)}")
    return parts


class CheckedDir:
    """A folder reached through checked descriptors (see the module docstring); a context manager
    that closes its descriptor.

    Parameters:
        fd: the folder's descriptor (owned from now on).
        path: the folder's path, for messages only.
    """

    def __init__(self, fd: int, path: str | Path) -> None:
        self.fd = fd
        # Kept as text: a walk opens every folder on the way, and a `Path` per folder cost more than the
        # open; `path` builds one for the message that needs it.
        self._path = os.fspath(path)

    @property
    def path(self) -> Path:
        """The folder's path (for messages)."""
        return Path(self._path)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the descriptor (once)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def child(self, name: str, *, create: bool = False) -> CheckedDir:
        """The sub-folder `name`, opened without following a link.

        Raises:
            LinkRefused: it is a symbolic link.
            NotRegular: it is not a folder.
            FileNotFoundError: it does not exist (and `create` is False).
        """
        for attempt in (1, 2):
            try:
                return CheckedDir(os.open(name, _DIR_FLAGS, dir_fd=self.fd), os.path.join(self._path, name))
            except FileNotFoundError:
                if not create or attempt == 2:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=self.fd)
            except OSError as exc:
                self._refuse(name, exc, "a folder")
                raise
        raise AssertionError("unreachable")

    def _refuse(self, name: str, exc: OSError, expected: str) -> None:
        """Raise, from `exc`, what a failed open of `name` met, when that is the reason (a link: ELOOP;
        a file where a folder was expected: ENOTDIR; a socket: ENXIO); otherwise the caller re-raises
        `exc` itself. Never `raise exc from exc`: an error that is its own cause is a cycle, and the
        frames of its traceback (a build's, with every fact it holds) wait for the cyclic collector."""
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EOPNOTSUPP):
            return
        try:
            mode = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode
        except OSError:
            return
        if stat.S_ISLNK(mode):
            raise LinkRefused(self.path / name) from exc
        raise NotRegular(
            self.path / name, kind_of(mode) if not stat.S_ISREG(mode) else "a file", expected
        ) from exc

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry's own status (a link is not followed), or None when there is none."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        """The entries of the folder, sorted."""
        return sorted(os.listdir(self.fd))

    def open_regular(self, name: str) -> int:
        """A read-only descriptor of the regular file `name` (not following a link, never blocking).

        Raises:
            LinkRefused: it is a symbolic link.
            NotRegular: it is a FIFO, socket, device or folder.
        """
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            self._refuse(name, exc, "a regular file")
            raise
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise NotRegular(self.path / name, kind_of(mode))
        return fd

    def read(self, name: str, *, limit: int) -> bytes:
        """The bytes of the regular file `name`.

        Raises:
            LinkRefused, NotRegular: as `open_regular`.
            FileTooLarge: it holds more than `limit` bytes.
        """
        return _read_fd(self.open_regular(name), self.path / name, limit)

    def _mode_for(self, name: str, default: int) -> tuple[int, bool]:
        """The mode a rewritten `name` keeps (and True), or `default` for a new file (and False).

        Raises:
            LinkRefused: `name` is a symbolic link (a link is never replaced by a file silently).
            NotRegular: `name` is a folder or special file.
        """
        info = self.lstat(name)
        if info is None:
            return default, False
        if stat.S_ISLNK(info.st_mode):
            raise LinkRefused(self.path / name)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(self.path / name, kind_of(info.st_mode))
        return stat.S_IMODE(info.st_mode), True

    def write_temp(self, name: str, data: bytes, *, mode: int = 0o644, sync: bool = True) -> str:
        """Write `data` to a fresh temporary file beside `name` (flushed to disk unless `sync` is off)
        and return its name.

        The temporary keeps the mode of an existing `name` (else `mode`, less the umask).

        Raises:
            LinkRefused, NotRegular: `name` exists and is not a regular file.
        """
        wanted, keep = self._mode_for(name, mode)
        temporary = f".{name[:100]}.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, wanted,
            dir_fd=self.fd,
        )  # fmt: skip
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if keep:
                os.fchmod(fd, wanted)
            if sync:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            self.unlink(temporary)
            raise
        os.close(fd)
        return temporary

    def replace(self, temporary: str, name: str) -> None:
        """Rename `temporary` over `name`, both in this folder."""
        os.rename(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        """Remove the file `name` if it is there."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def sync(self) -> None:
        """Flush the folder's entries (a rename) to disk."""
        os.fsync(self.fd)

    def write(self, name: str, data: bytes, *, mode: int = 0o644, sync: bool = True) -> None:
        """Replace `name` atomically: a reader sees the old file or the new one, never a part.

        Parameters:
            sync: fsync the file and then the folder, so the new file outlives a power cut. Without
                it the replacement is as atomic for readers, but after a power cut `name` may be the
                old file, missing, empty or cut short: only for a file its writer rebuilds.

        Raises:
            LinkRefused, NotRegular: `name` exists and is not a regular file.
        """
        temporary = self.write_temp(name, data, mode=mode, sync=sync)
        try:
            self.replace(temporary, name)
        except BaseException:
            self.unlink(temporary)
            raise
        if sync:
            self.sync()

    def open_append(self, name: str, *, mode: int = 0o644) -> int:
        """A descriptor appending to the regular file `name` (created if missing; a link is not
        followed, a FIFO never blocked on).

        Raises:
            LinkRefused, NotRegular: `name` is not a regular file.
        """
        try:
            fd = os.open(
                name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                mode, dir_fd=self.fd,
            )  # fmt: skip
        except OSError as exc:
            self._refuse(name, exc, "a regular file")
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise NotRegular(self.path / name, kind_of(info.st_mode))
        return fd

    def append(self, name: str, data: bytes, *, mode: int = 0o644) -> None:
        """Append `data` to `name` (created if missing) in one write, and fsync it.

        Raises:
            LinkRefused, NotRegular: `name` is not a regular file.
        """
        fd = self.open_append(name, mode=mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)


def open_dir(
    anchor: str | Path, path: str | PurePath | Iterable[str] = ".", *, create: bool = False
) -> CheckedDir:
    """The folder `path` below `anchor`, each component opened relative to its parent without
    following a link.

    Parameters:
        anchor: a folder the caller trusts (a granted root, the state folder); created when missing
            and `create` is set.
        path: the folder, relative to `anchor` or absolute under it, or its components.
        create: make the folders that are missing.

    Raises:
        LinkRefused: a component is a symbolic link.
        NotRegular: a component is not a folder.
        FileNotFoundError: a component is missing (and `create` is False).
        ValueError: `path` is not below `anchor` (absolute elsewhere, or through `..`).
    """
    parts = _parts(anchor, path) if isinstance(path, str | PurePath) else _parts(anchor, PurePath(*path))
    return _walk(anchor, parts, create=create)


def _walk(anchor: str | Path, parts: list[str], *, create: bool) -> CheckedDir:
    """`open_dir` of components `_parts` has already read (a file's folders: not parsed a second time)."""
    anchor = os.fspath(anchor)
    try:
        fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            raise
        # Only when missing: an existing anchor is the common case, and mkdir would fail on it first.
        Path(anchor).mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    folder = CheckedDir(fd, anchor)
    try:
        for part in parts:
            inner = folder.child(part, create=create)
            folder.close()
            folder = inner
    except BaseException:
        folder.close()
        raise
    return folder


def _split(anchor: str | Path, path: str | PurePath) -> tuple[list[str], str]:
    parts = _parts(anchor, path)
    if not parts:
        raise ValueError(f"{path} names no file below {PurePath(anchor)}")
    return parts[:-1], parts[-1]


def write_file(anchor: str | Path, path: str | PurePath, data: bytes, *, mode: int = 0o644,
               sync: bool = True) -> None:
    """Replace the file `path` below `anchor` atomically, through checked folders (created if missing);
    `sync` as `CheckedDir.write`.

    Raises:
        LinkRefused, NotRegular: a folder on the way, or the file itself, is not what it should be.
        ValueError: `path` is not below `anchor`.
    """
    folders, name = _split(anchor, path)
    with _walk(anchor, folders, create=True) as folder:
        folder.write(name, data, mode=mode, sync=sync)


def append_line(anchor: str | Path, path: str | PurePath, data: bytes, *, mode: int = 0o644) -> None:
    """Append `data` (one line, with its newline) to `path` below `anchor` and fsync it.

    Raises:
        LinkRefused, NotRegular: a folder on the way, or the file itself, is not what it should be.
        ValueError: `path` is not below `anchor`.
    """
    folders, name = _split(anchor, path)
    with _walk(anchor, folders, create=True) as folder:
        folder.append(name, data, mode=mode)


def open_regular(anchor: str | Path, path: str | PurePath) -> int:
    """A read-only descriptor of the regular file `path` below `anchor`, reached through checked folders.

    Raises:
        LinkRefused, NotRegular: a folder on the way, or the file itself, is not what it should be.
        FileNotFoundError: it is missing.
        ValueError: `path` is not below `anchor`.
    """
    folders, name = _split(anchor, path)
    with _walk(anchor, folders, create=False) as folder:
        return folder.open_regular(name)


def read_file(anchor: str | Path, path: str | PurePath, *, limit: int, links_inside: bool = False) -> bytes:
    """The bytes of the regular file `path` below `anchor`, reached through checked folders.

    Parameters:
        anchor: the folder the file belongs to.
        path: the file, relative to `anchor` or absolute under it.
        limit: the most bytes read; a larger file is refused.
        links_inside: when the file itself is a symbolic link, read its target if that lies inside
            `anchor` (once: a link on the way to the target is refused).

    Raises:
        LinkRefused: a link on the way, or the file itself when it is a link (leading out of
            `anchor`, or `links_inside` unset).
        NotRegular: not a regular file, or a component on the way is not a folder.
        FileTooLarge: it holds more than `limit` bytes.
        FileNotFoundError, PermissionError: as the system says.
        ValueError: `path` is not below `anchor`.
    """
    anchor = Path(anchor)
    try:
        return _read_fd(open_regular(anchor, path), anchor / path, limit)
    except LinkRefused:
        if not links_inside:
            raise
        real_anchor = Path(os.path.realpath(anchor))
        target = Path(os.path.realpath(anchor / path))
        if not target.is_relative_to(real_anchor) or target == real_anchor:
            raise
        return _read_fd(open_regular(real_anchor, target.relative_to(real_anchor)), anchor / path, limit)


def read_file_status(anchor: str | Path, path: str | PurePath, *, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file `path` below `anchor` (reached as `read_file` reaches it, no link
    followed) and its status, both from the one open file.

    Raises:
        as `read_file` (without `links_inside`).
    """
    fd = open_regular(anchor, path)
    status = os.fstat(fd)
    return _read_fd(fd, os.path.join(anchor, path), limit), status


def read_regular(path: str | Path, *, limit: int) -> bytes:
    """The bytes of a regular file that is not a symbolic link itself (its folders are the caller's).

    Raises:
        LinkRefused: it is a symbolic link.
        NotRegular: it is a FIFO, socket, device or folder.
        FileTooLarge: it holds more than `limit` bytes.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(path) from exc
        if exc.errno == errno.ENXIO:
            raise NotRegular(path, "a socket") from exc
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegular(path, kind_of(mode))
    return _read_fd(fd, path, limit)


def _read_fd(fd: int, path: str | PurePath, limit: int) -> bytes:
    """Read a regular file's descriptor (closed here) up to `limit` bytes; more is `FileTooLarge`."""
    try:
        if os.fstat(fd).st_size > limit:
            raise FileTooLarge(path, limit)
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise FileTooLarge(path, limit)
    return data
