"""Releases in a local folder (a B mirror, or a C side served from this machine).

The layout and the steps are deploy.release's. Here a release is made with the file
system's own calls: missing folders level by level (a refusal at any level is `write_denied`), files of
the previous release hard-linked (`link(2)`, same file system: `releases/` is inside the folder), each
upload copied from the chain's folder into a file created exclusively, fsynced, and read back from
disk for its sha256 (the proof is what the target holds); `current` switched by `rename(2)` of a new
link over it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import uuid
from contextlib import suppress
from pathlib import Path, PurePosixPath

from slotrelay.chain.errors import NodeError
from slotrelay.chain.executors.deploy.errors import HASH_MISMATCH, TARGET_UNWRITABLE, folder_error
from slotrelay.chain.executors.deploy.release import (
    CURRENT,
    RELEASE_ID,
    RELEASES,
    Staged,
    link_to,
    release_of_link,
    to_prune,
)
from slotrelay.chain.executors.deploy.sources import Upload, sha256_of


def _digest(path: Path) -> str:
    with path.open("rb") as handle:
        return sha256_of(handle)


class FolderReleases:
    """A local folder that keeps releases.

    Parameters:
        name: the target's label.
        folder: the folder (`releases/` and `current` go inside it).
        base_url: where `<folder>/current` is served, if it is.
        preview_url: where `<folder>/releases` is served, if it is.
    """

    kind = "folder"
    url_settings = "base_url or preview_url"

    def __init__(self, name: str, folder: Path, *, base_url: str | None, preview_url: str | None) -> None:
        self.name = name
        self.folder = folder
        self.location = str(folder)
        self.base_url = base_url
        self.preview_url = preview_url
        self._release: str | None = None
        self._previous: str | None = None
        self._created: list[Path] = []

    def _live(self) -> str | None:
        current = self.folder / CURRENT
        try:
            mode = current.lstat().st_mode
        except FileNotFoundError:
            return None
        except OSError as failure:
            raise folder_error(current, failure, doing="read") from failure
        if not stat.S_ISLNK(mode):
            raise NodeError(TARGET_UNWRITABLE,
                            f"{current} is not a link a deploy made (a folder or file is there): move it "
                            "away, and serve current/ after the next deploy")
        try:
            target = os.readlink(current)
        except OSError as failure:
            raise folder_error(current, failure, doing="read") from failure
        release = release_of_link(target)
        if release is None or not (self.folder / RELEASES / release).is_dir():
            raise NodeError(TARGET_UNWRITABLE, f"{current} points at {target!r}, not at a release in "
                                               f"{self.folder / RELEASES}")
        return release

    def _ensure_folder(self, path: Path) -> None:
        """Create `path` level by level, remembering each level made; a refusal at any level is named."""
        missing = []
        probe = path
        while probe.parent != probe:
            try:
                probe.lstat()
                break
            except FileNotFoundError:
                missing.append(probe)
                probe = probe.parent
            except OSError as failure:
                raise folder_error(probe, failure, doing="look at") from failure
        for level in reversed(missing):
            try:
                level.mkdir()
            except OSError as failure:
                raise folder_error(level, failure, doing="create the folder") from failure
            self._created.append(level)
        if not path.is_dir():
            raise NodeError(TARGET_UNWRITABLE, f"{path} is not a folder")

    def stage(self, uploads: list[Upload], release: str) -> Staged:
        """Make `releases/<release>/` (see deploy.release)."""
        self._previous = self._live()
        self._ensure_folder(self.folder)
        releases = self.folder / RELEASES
        if releases.is_symlink():
            raise NodeError(TARGET_UNWRITABLE,
                            f"{releases} is a link: releases are kept in a folder of their own")
        self._ensure_folder(releases)
        root = releases / release
        try:
            root.mkdir()
        except OSError as failure:
            raise folder_error(root, failure, doing="create the release folder") from failure
        self._release = release
        staged = Staged(release=release, previous=self._previous,
                        landed=[str(root / u.relative) for u in uploads], linked=set(), carried=0,
                        proof="sha256 of the copy read back from disk, before the switch")
        if self._previous is not None:
            self._carry(releases / self._previous, root, uploads, staged)
        for upload in uploads:
            if upload.relative not in staged.linked:
                self._copy(upload, root / upload.relative)
        for upload in uploads:
            copy = root / upload.relative
            try:
                digest = _digest(copy)
            except OSError as failure:
                raise folder_error(copy, failure, doing="read back") from failure
            if digest != upload.sha256:
                raise NodeError(HASH_MISMATCH, f"{copy}: the copy has sha256 {digest}, the source "
                                               f"{upload.source} {upload.sha256}")
        return staged

    def _carry(self, previous: Path, root: Path, uploads: list[Upload], staged: Staged) -> None:
        """Hard-link every file of the previous release the batch does not change into the new one."""
        try:
            self._link_previous(previous, root, {u.relative: u.sha256 for u in uploads}, staged)
        except OSError as failure:
            # A folder of the previous release that cannot be listed must not leave its files out silently.
            raise folder_error(failure.filename or previous, failure, doing="carry over") from failure

    def _link_previous(self, previous: Path, root: Path, digests: dict[str, str], staged: Staged) -> None:
        def unreadable(failure: OSError) -> None:
            raise failure

        for folder, folders, files in os.walk(previous, onerror=unreadable):
            here = Path(folder)
            relative_folder = here.relative_to(previous)
            for name in folders:
                # os.walk lists a link to a folder among the folders; it does not enter it.
                if (here / name).is_symlink():
                    staged.not_carried.append((relative_folder / name).as_posix())
                else:
                    self._make(root / relative_folder / name)
            for name in files:
                relative = PurePosixPath(relative_folder.as_posix(), name).as_posix()
                source = here / name
                if not stat.S_ISREG(source.lstat().st_mode):
                    staged.not_carried.append(relative)
                    continue
                if relative in digests:
                    if _digest(source) != digests[relative]:
                        continue
                    staged.linked.add(relative)
                else:
                    staged.carried += 1
                os.link(source, root / relative, follow_symlinks=False)

    def _make(self, folder: Path) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as failure:
            raise folder_error(folder, failure, doing="create the folder") from failure

    def _copy(self, upload: Upload, copy: Path) -> None:
        self._make(copy.parent)
        try:
            with upload.open() as source, copy.open("xb") as target:
                shutil.copyfileobj(source, target)
                target.flush()
                os.fsync(target.fileno())
        except OSError as failure:
            raise folder_error(copy, failure) from failure

    def _point_current(self, release: str | None) -> None:
        current = self.folder / CURRENT
        if release is None:
            with suppress(FileNotFoundError):
                current.unlink()
            return
        temporary = self.folder / f".{CURRENT}.{uuid.uuid4().hex[:8]}"
        try:
            os.symlink(link_to(release), temporary)
            os.replace(temporary, current)
        except OSError as failure:
            with suppress(OSError):
                temporary.unlink()
            raise folder_error(current, failure, doing="switch") from failure

    def switch(self) -> None:
        """Rename a link to the staged release over `current`."""
        self._point_current(self._release)

    def switch_back(self) -> None:
        """Rename a link to the previous release over `current` (remove it if there was none)."""
        self._point_current(self._previous)

    def discard(self) -> list[str]:
        """Remove the staged release and the folders this deploy created (only if left empty)."""
        problems = []
        if self._release is not None:
            root = self.folder / RELEASES / self._release
            try:
                shutil.rmtree(root)
            except FileNotFoundError:
                pass
            except OSError as failure:
                problems.append(f"{root}: {failure.strerror}")
        for level in reversed(self._created):
            try:
                level.rmdir()
            except OSError as failure:
                if failure.errno not in (errno.ENOTEMPTY, errno.ENOENT):
                    problems.append(f"{level}: {failure.strerror}")
        return problems

    def prune(self, keep: int) -> list[str]:
        """Remove the oldest releases beyond `keep`."""
        assert self._release is not None  # pruned after a successful switch
        releases = self.folder / RELEASES
        try:
            names = [entry.name for entry in os.scandir(releases)
                     if RELEASE_ID.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)]
        except OSError as failure:
            raise folder_error(releases, failure, doing="list") from failure
        pruned = to_prune(names, keep=keep, live=self._release)
        for name in pruned:
            try:
                shutil.rmtree(releases / name)
            except OSError as failure:
                raise folder_error(releases / name, failure, doing="remove the old release") from failure
        return pruned

    def close(self) -> None:
        """Nothing to let go of."""
