"""What a deploy reads from the chain's folder, and the one file it writes back there, never through a link.

The chain's folder is a tree the product did not create (CONTRACTS.md#deploy-node): a listed
`build/leak.html -> /etc/hostname` must not publish the host's file. So every path is walked one
component at a time from a descriptor of the chain's folder, through `slotrelay.fsio`: each folder on
the way is opened with `O_NOFOLLOW | O_DIRECTORY`, the file itself with `O_NOFOLLOW | O_NONBLOCK` (a
FIFO does not block the deploy), and `fstat` must say it is a regular file. A symlink anywhere on the
path is refused with the component named; so is a path that leaves the folder (`..`, or an absolute path
elsewhere).

Each file is hashed once when the deploy starts (`Upload.sha256`); the copies on every target must
hash the same, so a source that changes during the deploy fails the proof instead of going live.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import BinaryIO

from slotrelay import fsio
from slotrelay.chain.errors import NodeError
from slotrelay.chain.executors.deploy.errors import CONFIG_INVALID, SOURCE_MISSING, folder_error

CHUNK_BYTES = 1 << 20


class SourceNotFound(NodeError):
    """deploy_source_missing for a file that is not there at all (as opposed to one that is refused)."""


def sha256_of(handle: BinaryIO) -> str:
    """The sha256 hex digest of an open file, read in chunks from where it stands."""
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
        digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Upload:
    """One file of a batch: its path under every target, its sha256, and how to read it.

    Attributes:
        relative: the path under each target's release (POSIX, no `..`).
        sha256: the digest every copy must have.
        source: where it comes from, for messages and the output slot.
        folder: the chain's folder it is read from again, through the same checks (None: `content`).
        content: the bytes themselves, for a file the deploy made (the staged sitemap).
    """

    relative: str
    sha256: str
    source: str
    folder: ChainFolder | None = None
    content: bytes | None = None

    @contextmanager
    def open(self) -> Iterator[BinaryIO]:
        """The file's bytes, read again without following a link."""
        if self.content is not None:
            yield io.BytesIO(self.content)
            return
        assert self.folder is not None  # an Upload has a folder or its content
        with self.folder.open(self.relative) as handle:
            yield handle


class ChainFolder:
    """The chain's folder, read (and written back to) one checked component at a time.

    Parameters:
        base: the chain file's folder (trusted as a whole: the user chose it).
    """

    def __init__(self, base: Path) -> None:
        self.base = base

    def relative_of(self, listed: str, *, field: str) -> PurePosixPath:
        """The path of a listed file relative to the chain's folder.

        Raises:
            NodeError: deploy_config_invalid for a path that leaves the folder.
        """
        path = PurePath(listed)
        if path.is_absolute():
            for base in dict.fromkeys((self.base, self.base.resolve())):
                if path.is_relative_to(base):
                    path = path.relative_to(base)
                    break
            else:
                raise NodeError(CONFIG_INVALID,
                                f"{field} {listed!r} lies outside the chain's folder {self.base}")
        relative = PurePosixPath(path.as_posix())
        if ".." in relative.parts or not relative.parts or relative.parts == (".",):
            raise NodeError(CONFIG_INVALID, f"{field} {listed!r} climbs out of the chain's folder with '..'")
        return relative

    def upload(self, listed: str, *, field: str) -> Upload:
        """A listed file as an upload: checked, hashed once.

        Raises:
            NodeError: deploy_config_invalid (outside the folder), deploy_source_missing (missing, a
                symlink on the way, not a regular file).
        """
        relative = self.relative_of(listed, field=field).as_posix()
        with self.open(relative) as handle:
            digest = sha256_of(handle)
        return Upload(relative=relative, sha256=digest, source=str(self.base / relative), folder=self)

    @contextmanager
    def open(self, relative: str) -> Iterator[BinaryIO]:
        """Open a file under the folder for reading through fsio's reader: no link followed on the way or
        at the file, a FIFO never blocked on, and only a regular file.

        Raises:
            NodeError: deploy_source_missing naming the file and what is wrong with it.
        """
        try:
            fd = fsio.open_regular(self.base, relative)
        except OSError as failure:
            raise self._refused(relative, failure) from None
        with os.fdopen(fd, "rb") as handle:
            yield handle

    def read(self, relative: str) -> bytes | None:
        """A file's bytes, or None when it does not exist (refusals as `open`)."""
        try:
            with self.open(relative) as handle:
                return handle.read()
        except SourceNotFound:
            return None

    def write(self, relative: str, content: bytes) -> None:
        """Replace a file atomically through fsio: every folder from the chain's folder down opened
        without following a link, a temporary file beside it, fsync, rename, all inside its folder.

        Raises:
            NodeError: deploy_source_missing for a link (or a file) on the way, write_denied or
                deploy_target_unwritable when the folder refuses the write.
        """
        path = self.base / relative
        try:
            fsio.write_file(self.base, relative, content)
        except fsio.RefusedPath as refused:
            raise NodeError(SOURCE_MISSING, f"file to deploy {path}: {refused.filename} is "
                            f"{refused.strerror}: refused (a deploy never follows a link in the chain's "
                            "folder)") from None
        except OSError as failure:
            raise folder_error(path, failure) from failure

    def _refused(self, relative: str, failure: OSError) -> NodeError:
        where = f"file to deploy {self.base / relative}"
        if isinstance(failure, fsio.LinkRefused):
            on_the_way = PurePath(failure.filename).relative_to(self.base).as_posix()
            link = "is a symlink" if on_the_way == relative else f"{on_the_way} is a symlink"
            return NodeError(SOURCE_MISSING,
                             f"{where}: {link}: refused (a deploy never follows a link in the chain's "
                             "folder)")
        if isinstance(failure, fsio.NotRegular) and failure.filename == str(self.base / relative):
            return NodeError(SOURCE_MISSING, f"{where} is not a regular file")
        if isinstance(failure, FileNotFoundError | NotADirectoryError | fsio.NotRegular):
            return SourceNotFound(SOURCE_MISSING, f"{where} does not exist")
        return NodeError(SOURCE_MISSING, f"{where} cannot be read: {failure.strerror}")
