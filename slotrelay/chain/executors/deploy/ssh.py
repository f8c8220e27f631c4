"""Remote deploy targets over SSH (asyncssh): where a remote is, and how a release is made there and switched.

Where a remote is comes from the environment or `.env`, never from the chain file; for a target with
`"ssh": "SITE_C"`:

    SITE_C_HOST         host name or address (unset: the target is its local `folder`, if it has one)
    SITE_C_PORT         default 22
    SITE_C_USER         the login
    SITE_C_KEY          path of the private key file (relative paths: against the chain file's folder)
    SITE_C_KNOWN_HOSTS  known_hosts file the host key must be in (default ~/.ssh/known_hosts);
                        `none` skips the check (a throwaway host only: the output slot says so)
    SITE_C_PATH         the remote folder (relative paths: against the login's home)
    SITE_C_URL          where PATH/current is served, for the URL check and the feature points (optional)
    SITE_C_PREVIEW_URL  where PATH/releases is served, to check a release before it goes live (optional)

The layout and the steps are deploy.release's. One connection and one SFTP session
serve the whole deploy of a target, from the first look at `current` to the switch and the pruning.
A release is made with SFTP: missing folders level by level (asyncssh's `makedirs` passes over a
refusal on every level but the last; here a refusal at any level is `write_denied`), the previous
release's files hard-linked (the OpenSSH `hardlink@openssh.com` extension), the uploads written into
new files with many requests in flight at once. Then one `sha256sum` over the SSH exec channel hashes
every upload where it landed, parsed strictly (one `<64 hex>  <path>` line per file, in order); the
switch is an SFTP `symlink` and `posix-rename` over `current`.

Why the remote `sha256sum` rather than reading each copy back over SFTP: the hash is computed by the
remote host from its own disk, and only a line per file crosses the network instead of every byte a
second time (the deploy's cost stays near one transfer, see bench/deploy_bench.py). Its cost is that
the login needs a shell with coreutils; an SFTP-only account fails with `deploy_proof_failed`, named.

asyncssh is imported by this module only, and deploy.node imports this module only for a
deploy that has a remote target: loading a chain or a flow never pays for it.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import shlex
import uuid
import warnings
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

with warnings.catch_warnings():
    # cryptography 51 deprecates DSA, and asyncssh imports its DSA support whatever the key: a deploy
    # never chooses DSA, so the notice would only be noise on the stderr of every remote deploy.
    warnings.filterwarnings("ignore", message="DSA is deprecated")
    import asyncssh

from slotrelay.chain.errors import NodeError
from slotrelay.chain.executors.deploy.errors import (
    AUTH_REFUSED,
    CONFIG_INVALID,
    HASH_MISMATCH,
    HOST_KEY_UNKNOWN,
    HOST_UNREACHABLE,
    PROOF_FAILED,
    TARGET_UNWRITABLE,
    WRITE_DENIED,
)
from slotrelay.chain.executors.deploy.release import (
    CURRENT,
    RELEASE_ID,
    RELEASES,
    Staged,
    link_to,
    release_of_link,
    to_prune,
)
from slotrelay.chain.executors.deploy.sources import CHUNK_BYTES, Upload

CONNECT_TIMEOUT_SECONDS = 15
# Files in flight at once on the one SFTP session (each an open, its writes and a close).
PARALLEL_FILES = 32
# sha256sum takes many paths in one call; this keeps a command line far below ARG_MAX.
HASH_BATCH = 200
_HASH_LINE = re.compile(r"([0-9a-f]{64})  (.+)")
_T = TypeVar("_T")


@dataclass(frozen=True)
class RemoteSettings:
    """Where a remote target is and how to log in (from the environment; see the module docstring)."""

    prefix: str
    host: str
    port: int
    user: str
    key_path: Path
    known_hosts: Path | None
    path: str
    url: str | None
    preview_url: str | None = None

    @property
    def location(self) -> str:
        """The remote folder as `ssh://user@host:port/path`, for the output slot and messages."""
        return self.location_of(self.path)

    def location_of(self, path: str) -> str:
        """A remote path as `ssh://user@host:port/path` (`/~/path` when relative to the login's home)."""
        return f"ssh://{self.user}@{self.host}:{self.port}{path if path.startswith('/') else '/~/' + path}"

    @classmethod
    def from_env(cls, prefix: str, env: Mapping[str, str], *, base_dir: Path) -> RemoteSettings | None:
        """Read a remote's settings; None when `<prefix>_HOST` is not set.

        Parameters:
            prefix: the target's `ssh` value.
            env: the environment merged with `.env`.
            base_dir: the chain file's folder, for relative key and known_hosts paths.

        Raises:
            NodeError: `deploy_config_invalid` naming the variable that is missing or wrong.
        """
        host = env.get(f"{prefix}_HOST", "").strip()
        if not host:
            return None

        def required(name: str) -> str:
            value = env.get(f"{prefix}_{name}", "").strip()
            if not value:
                raise NodeError(CONFIG_INVALID,
                                f"{prefix}_HOST is set but {prefix}_{name} is not (environment or .env)")
            return value

        def existing_file(name: str, value: str) -> Path:
            path = Path(value).expanduser()
            path = path if path.is_absolute() else base_dir / path
            if not path.is_file():
                raise NodeError(CONFIG_INVALID, f"{prefix}_{name}={value}: no such file ({path})")
            return path

        port_text = env.get(f"{prefix}_PORT", "").strip() or "22"
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise NodeError(CONFIG_INVALID, f"{prefix}_PORT={port_text!r} is not a TCP port")
        known = env.get(f"{prefix}_KNOWN_HOSTS", "").strip() or "~/.ssh/known_hosts"

        def url(name: str) -> str | None:
            value = env.get(f"{prefix}_{name}", "").strip() or None
            if value is not None and not value.startswith(("http://", "https://")):
                raise NodeError(CONFIG_INVALID, f"{prefix}_{name}={value!r} is not an http(s) URL")
            return value
        return cls(
            prefix=prefix,
            host=host,
            port=int(port_text),
            user=required("USER"),
            key_path=existing_file("KEY", required("KEY")),
            known_hosts=None if known == "none" else existing_file("KNOWN_HOSTS", known),
            path=required("PATH").rstrip("/") or "/",
            url=url("URL"),
            preview_url=url("PREVIEW_URL"),
        )




@contextmanager
def _mapped(settings: RemoteSettings, doing: str) -> Iterator[None]:
    """Translate asyncssh's and the socket's errors into the deploy's error types, at one place."""
    where = settings.location
    try:
        yield
    except NodeError:
        raise
    except (asyncssh.SFTPPermissionDenied, asyncssh.SFTPWriteProtect) as refused:
        raise NodeError(WRITE_DENIED, f"{where}: {doing} refused: {refused.reason}") from refused
    except asyncssh.SFTPError as failed:
        raise NodeError(TARGET_UNWRITABLE, f"{where}: {doing} failed: {failed.reason}") from failed
    except asyncssh.PermissionDenied as refused:
        raise NodeError(
            AUTH_REFUSED, f"{where}: the host refused the key {settings.key_path} ({refused.reason})"
        ) from refused
    except asyncssh.HostKeyNotVerifiable as unknown:
        known = settings.known_hosts or "~/.ssh/known_hosts"
        raise NodeError(
            HOST_KEY_UNKNOWN, f"{where}: the host key is not the one in {known} ({unknown.reason})"
        ) from unknown
    except asyncssh.Error as lost:
        raise NodeError(HOST_UNREACHABLE, f"{where}: the connection failed while {doing}: {lost}") from lost
    except OSError as unreachable:
        reason = unreachable.strerror or type(unreachable).__name__
        raise NodeError(HOST_UNREACHABLE,
                        f"{where}: cannot reach the host while {doing}: {reason}") from unreachable


def _read_key(settings: RemoteSettings) -> asyncssh.SSHKey:
    try:
        return asyncssh.read_private_key(str(settings.key_path))
    except (OSError, asyncssh.KeyImportError) as bad:
        raise NodeError(
            CONFIG_INVALID, f"{settings.prefix}_KEY={settings.key_path} is not a readable private key: {bad}"
        ) from bad


async def _hashes(connection: asyncssh.SSHClientConnection, paths: list[str], where: str) -> list[str]:
    """The sha256 of each remote path, by `sha256sum` on the remote host, parsed strictly."""
    digests: list[str] = []
    for start in range(0, len(paths), HASH_BATCH):
        chunk = paths[start:start + HASH_BATCH]
        command = "sha256sum -- " + " ".join(shlex.quote(p) for p in chunk)
        done = await connection.run(command, check=False, encoding="utf-8", errors="replace")
        if done.exit_status != 0:
            raise NodeError(
                PROOF_FAILED,
                f"{where}: `sha256sum` exited {done.exit_status}: {str(done.stderr).strip()[-300:]}",
            )
        lines = str(done.stdout).splitlines()
        if len(lines) != len(chunk):
            raise NodeError(PROOF_FAILED,
                            f"{where}: `sha256sum` printed {len(lines)} lines for {len(chunk)} files")
        for path, line in zip(chunk, lines, strict=True):
            parsed = _HASH_LINE.fullmatch(line)
            if parsed is None or parsed.group(2) != path:
                raise NodeError(PROOF_FAILED,
                                f"{where}: `sha256sum` line {line[:200]!r} is not the hash of {path}")
            digests.append(parsed.group(1))
    return digests


class RemoteReleases:
    """A remote folder that keeps releases, reached over one SSH connection for the whole deploy.

    The engine's core is synchronous and asyncssh is not: each step runs on this target's own event
    loop (`asyncio.Runner`), which keeps the connection between steps.

    Parameters:
        name: the target's label.
        settings: the remote (see `RemoteSettings.from_env`).
    """

    kind = "ssh"

    def __init__(self, name: str, settings: RemoteSettings) -> None:
        self.name = name
        self.settings = settings
        self.location = settings.location
        self.base_url = settings.url
        self.preview_url = settings.preview_url
        self.url_settings = f"{settings.prefix}_URL or {settings.prefix}_PREVIEW_URL"
        self._runner = asyncio.Runner()
        self._connection: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._release: str | None = None
        self._previous: str | None = None
        self._created: list[str] = []

    def _run(self, step: Coroutine[Any, Any, _T]) -> _T:
        return self._runner.run(step)

    def _at(self, *parts: str) -> str:
        return posixpath.join(self.settings.path, *parts)

    @property
    def sftp(self) -> asyncssh.SFTPClient:
        """The SFTP session (open from the first step on)."""
        assert self._sftp is not None  # stage() connects first
        return self._sftp

    async def _connect(self) -> None:
        settings = self.settings
        key = _read_key(settings)
        with _mapped(settings, "connecting"):
            self._connection = await asyncssh.connect(
                settings.host, settings.port, username=settings.user, client_keys=[key],
                known_hosts=None if settings.known_hosts is None else str(settings.known_hosts),
                agent_path=None, config=None, password=None, kbdint_auth=False,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
            )
        with _mapped(settings, "opening SFTP"):
            self._sftp = await self._connection.start_sftp_client()

    def stage(self, uploads: list[Upload], release: str) -> Staged:
        """Make `releases/<release>/` on the remote (see deploy.release)."""
        return self._run(self._stage(uploads, release))

    async def _live(self) -> str | None:
        current = self._at(CURRENT)
        with _mapped(self.settings, f"reading {current}"):
            try:
                target = await self.sftp.readlink(current)
            except asyncssh.SFTPNoSuchFile:
                return None
            except asyncssh.SFTPError:
                # readlink(2) of something that is not a link; say what it is.
                attributes = await self.sftp.lstat(current)
                raise NodeError(TARGET_UNWRITABLE,
                                f"{self.settings.location_of(current)} is not a link a deploy made (type "
                                f"{attributes.type}): move it away, and serve current/ after the next deploy"
                                ) from None
        release = release_of_link(target)
        if release is None:
            raise NodeError(TARGET_UNWRITABLE, f"{self.settings.location_of(current)} points at {target!r}, "
                                               f"not at a release in {RELEASES}/")
        return release

    async def _ensure_folder(self, path: str) -> None:
        """Create `path` level by level, remembering each level made; a refusal at any level is named."""
        with _mapped(self.settings, f"looking at {path}"):
            try:
                attributes = await self.sftp.stat(path)
            except asyncssh.SFTPNoSuchFile:
                attributes = None
        if attributes is None:
            parent = posixpath.dirname(path)
            if parent not in ("", "/", path):
                await self._ensure_folder(parent)
            with _mapped(self.settings, f"creating the folder {path}"):
                await self.sftp.mkdir(path)
            self._created.append(path)
        elif attributes.type != asyncssh.FILEXFER_TYPE_DIRECTORY:
            raise NodeError(TARGET_UNWRITABLE, f"{self.settings.location_of(path)} is not a folder")

    async def _stage(self, uploads: list[Upload], release: str) -> Staged:
        await self._connect()
        self._previous = await self._live()
        await self._ensure_folder(self.settings.path)
        releases = self._at(RELEASES)
        with _mapped(self.settings, f"looking at {releases}"):
            try:
                kind = (await self.sftp.lstat(releases)).type
            except asyncssh.SFTPNoSuchFile:
                kind = None
        if kind is None:
            await self._ensure_folder(releases)
        elif kind != asyncssh.FILEXFER_TYPE_DIRECTORY:
            raise NodeError(TARGET_UNWRITABLE,
                            f"{self.settings.location_of(releases)} is not a folder (a link?): releases are "
                            "kept in a folder of their own")
        root = self._at(RELEASES, release)
        with _mapped(self.settings, f"creating the release folder {root}"):
            await self.sftp.mkdir(root)
        self._release = release
        staged = Staged(release=release, previous=self._previous,
                        landed=[self.settings.location_of(posixpath.join(root, u.relative)) for u in uploads],
                        linked=set(), carried=0,
                        proof="sha256sum on the remote host, in the release before the switch")
        folders: set[str] = {posixpath.dirname(u.relative) for u in uploads}
        links: list[str] = []
        if self._previous is not None:
            previous = self._at(RELEASES, self._previous)
            files, previous_folders = await self._tree(previous, staged)
            folders |= previous_folders
            links = await self._unchanged(previous, files, uploads, staged)
        await self._make_folders(root, folders)
        gate = asyncio.Semaphore(PARALLEL_FILES)

        async def link(relative: str) -> None:
            async with gate:
                with _mapped(self.settings, f"hard-linking {relative} from release {self._previous}"):
                    await self.sftp.link(self._at(RELEASES, str(self._previous), relative),
                                         posixpath.join(root, relative))

        async def send(upload: Upload) -> None:
            async with gate:
                path = posixpath.join(root, upload.relative)
                with _mapped(self.settings, f"writing {path}"), upload.open() as source:
                    async with self.sftp.open(path, "xb") as remote:
                        offset = 0
                        for chunk in iter(lambda: source.read(CHUNK_BYTES), b""):
                            await remote.write(chunk, offset)
                            offset += len(chunk)

        # Every request ends before anything else happens, failed or not: a copy still being written
        # while the release is removed would outlive the removal.
        done = await asyncio.gather(*(link(r) for r in links),
                                    *(send(u) for u in uploads if u.relative not in staged.linked),
                                    return_exceptions=True)
        failure = next((outcome for outcome in done if isinstance(outcome, BaseException)), None)
        if failure is not None:
            raise failure
        assert self._connection is not None  # connected above
        with _mapped(self.settings, "hashing the copies"):
            digests = await _hashes(self._connection, [posixpath.join(root, u.relative) for u in uploads],
                                    self.settings.location)
        for upload, landed, digest in zip(uploads, staged.landed, digests, strict=True):
            if digest != upload.sha256:
                raise NodeError(HASH_MISMATCH, f"{landed}: the copy of {upload.source} has sha256 {digest}, "
                                               f"the source {upload.sha256}")
        return staged

    async def _tree(self, previous: str, staged: Staged) -> tuple[list[str], set[str]]:
        """The regular files and folders of the previous release (relative paths), read with SFTP."""
        files: list[str] = []
        folders: set[str] = set()

        async def walk(relative: str) -> None:
            entries = []
            with _mapped(self.settings, f"listing {posixpath.join(previous, relative)}"):
                async for entry in self.sftp.scandir(posixpath.join(previous, relative)):
                    entries.append(entry)
            inner = []
            for entry in entries:
                name = str(entry.filename)
                if name in (".", "..") or "/" in name:
                    continue
                path = posixpath.join(relative, name) if relative else name
                if entry.attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY:
                    folders.add(path)
                    inner.append(walk(path))
                elif entry.attrs.type == asyncssh.FILEXFER_TYPE_REGULAR:
                    files.append(path)
                else:
                    staged.not_carried.append(path)
            await asyncio.gather(*inner)

        await walk("")
        return files, folders

    async def _unchanged(self, previous: str, files: list[str], uploads: list[Upload],
                         staged: Staged) -> list[str]:
        """Which files to hard-link: every file the batch does not list, and those it lists unchanged."""
        digests = {u.relative: u.sha256 for u in uploads}
        listed = [f for f in files if f in digests]
        assert self._connection is not None  # connected before staging
        with _mapped(self.settings, "hashing the previous release's copies"):
            before = await _hashes(self._connection, [posixpath.join(previous, f) for f in listed],
                                   self.settings.location) if listed else []
        staged.linked = {f for f, digest in zip(listed, before, strict=True) if digest == digests[f]}
        carried = [f for f in files if f not in digests]
        staged.carried = len(carried)
        return [*carried, *sorted(staged.linked)]

    async def _make_folders(self, root: str, folders: set[str]) -> None:
        """Create the release's folders, each depth at once (a folder's parent is made before it)."""
        wanted: set[str] = set()
        for folder in folders:
            while folder:
                wanted.add(folder)
                folder = posixpath.dirname(folder)
        by_depth: dict[int, list[str]] = {}
        for folder in wanted:
            by_depth.setdefault(folder.count("/"), []).append(folder)
        for depth in sorted(by_depth):
            with _mapped(self.settings, f"creating the folders of {root}"):
                await asyncio.gather(*(self.sftp.mkdir(posixpath.join(root, f)) for f in by_depth[depth]))

    async def _point_current(self, release: str | None) -> None:
        current = self._at(CURRENT)
        if release is None:
            with _mapped(self.settings, f"removing {current}"), suppress(asyncssh.SFTPNoSuchFile):
                await self.sftp.remove(current)
            return
        temporary = self._at(f".{CURRENT}.{uuid.uuid4().hex[:8]}")
        try:
            with _mapped(self.settings, f"switching {current} to release {release}"):
                await self.sftp.symlink(link_to(release), temporary)
                await self.sftp.posix_rename(temporary, current)
        except NodeError:
            with suppress(asyncssh.Error, OSError):
                await self.sftp.remove(temporary)
            raise

    def switch(self) -> None:
        """Rename a link to the staged release over `current`."""
        self._run(self._point_current(self._release))

    def switch_back(self) -> None:
        """Rename a link to the previous release over `current` (remove it if there was none)."""
        self._run(self._point_current(self._previous))

    def discard(self) -> list[str]:
        """Remove the staged release and the folders this deploy created (only if left empty)."""
        if self._sftp is None:
            return []
        return self._run(self._discard())

    async def _discard(self) -> list[str]:
        problems = []
        if self._release is not None:
            root = self._at(RELEASES, self._release)
            try:
                await self.sftp.rmtree(root)
            except asyncssh.SFTPNoSuchFile:
                pass
            except (asyncssh.Error, OSError) as failure:
                problems.append(f"{self.settings.location_of(root)}: {failure}")
        for level in reversed(self._created):
            try:
                await self.sftp.rmdir(level)
            except (asyncssh.Error, OSError) as failure:
                # A folder another deploy or person filled meanwhile stays; anything else is said.
                if not isinstance(failure, asyncssh.SFTPFailure | asyncssh.SFTPNoSuchFile):
                    problems.append(f"{self.settings.location_of(level)}: {failure}")
        return problems

    def prune(self, keep: int) -> list[str]:
        """Remove the oldest releases beyond `keep`."""
        return self._run(self._prune(keep))

    async def _prune(self, keep: int) -> list[str]:
        assert self._release is not None  # pruned after a successful switch
        releases = self._at(RELEASES)
        with _mapped(self.settings, f"listing {releases}"):
            names = [str(entry.filename) async for entry in self.sftp.scandir(releases)
                     if entry.attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY
                     and RELEASE_ID.fullmatch(str(entry.filename))]
        pruned = to_prune(names, keep=keep, live=self._release)
        with _mapped(self.settings, "removing old releases"):
            await asyncio.gather(*(self.sftp.rmtree(posixpath.join(releases, name)) for name in pruned))
        return pruned

    def close(self) -> None:
        """Close the SFTP session, the connection and the event loop."""
        try:
            if self._connection is not None:
                self._run(self._close())
        finally:
            self._runner.close()

    async def _close(self) -> None:
        assert self._connection is not None  # only called when connected
        if self._sftp is not None:
            self._sftp.exit()
        self._connection.close()
        with suppress(asyncssh.Error, OSError):
            await self._connection.wait_closed()
