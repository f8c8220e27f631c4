"""Remote deploy targets over SSH (asyncssh): where a remote is, and how a batch of files lands there proven.

Where a remote is comes from the environment or `.env`, never from the chain file; for a target with
`"ssh": "SITE_C"`:

    SITE_C_HOST         host name or address (unset: the target is its local `folder`, if it has one)
    SITE_C_PORT         default 22
    SITE_C_USER         the login
    SITE_C_KEY          path of the private key file (relative paths: against the chain file's folder)
    SITE_C_KNOWN_HOSTS  known_hosts file the host key must be in (default ~/.ssh/known_hosts);
                        `none` skips the check (a throwaway host only: the output slot says so)
    SITE_C_PATH         the remote folder (relative paths: against the login's home)
    SITE_C_URL          where that folder is served, for the URL check and the feature points (optional)

A batch lands in three steps, so that a failure leaves nothing half written under a final name:
every file goes over SFTP to a temporary name beside its final one; then one `sha256sum` over the SSH
exec channel hashes every temporary copy on the remote host, and its output is parsed strictly (one
`<64 hex>  <path>` line per file, in order); only when every hash matches its source is each copy
renamed into place (the OpenSSH `posix-rename` extension: atomic, replaces an older copy). On any
failure the temporary copies are removed.

Why the remote `sha256sum` rather than reading each copy back over SFTP: the hash is computed by the
remote host from its own disk, and only a line per file crosses the network instead of every byte a
second time (the deploy's cost stays near one transfer, see bench/deploy_bench.py). Its cost is that
the login needs a shell with coreutils; an SFTP-only account fails with `deploy_proof_failed`, named.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import shlex
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from slotrelay.chain.errors import NodeError

CONNECT_TIMEOUT_SECONDS = 15
PARALLEL_TRANSFERS = 8
# sha256sum takes many paths in one call; this keeps a command line far below ARG_MAX.
HASH_BATCH = 200
_HASH_LINE = re.compile(r"([0-9a-f]{64})  (.+)")

HOST_UNREACHABLE = "deploy_host_unreachable"
AUTH_REFUSED = "deploy_auth_refused"
HOST_KEY_UNKNOWN = "deploy_host_key_unknown"
CONFIG_INVALID = "deploy_config_invalid"
WRITE_DENIED = "write_denied"
TARGET_UNWRITABLE = "deploy_target_unwritable"
HASH_MISMATCH = "deploy_hash_mismatch"
PROOF_FAILED = "deploy_proof_failed"


@dataclass(frozen=True)
class Upload:
    """One file of a batch: the source on this machine, its path under the target, its sha256."""

    source: Path
    relative: str
    sha256: str


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
        url = env.get(f"{prefix}_URL", "").strip() or None
        if url is not None and not url.startswith(("http://", "https://")):
            raise NodeError(CONFIG_INVALID, f"{prefix}_URL={url!r} is not an http(s) URL")
        return cls(
            prefix=prefix,
            host=host,
            port=int(port_text),
            user=required("USER"),
            key_path=existing_file("KEY", required("KEY")),
            known_hosts=None if known == "none" else existing_file("KNOWN_HOSTS", known),
            path=required("PATH").rstrip("/") or "/",
            url=url,
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


async def _land(settings: RemoteSettings, uploads: list[Upload]) -> list[str]:
    key = _read_key(settings)
    token = uuid.uuid4().hex[:8]
    finals = [posixpath.join(settings.path, u.relative) for u in uploads]
    temporaries = [
        posixpath.join(posixpath.dirname(f), f".{posixpath.basename(f)}.{token}.tmp") for f in finals]
    where = settings.location
    with _mapped(settings, "connecting"):
        connection = await asyncssh.connect(
            settings.host, settings.port, username=settings.user, client_keys=[key],
            known_hosts=None if settings.known_hosts is None else str(settings.known_hosts),
            agent_path=None, config=None, password=None, kbdint_auth=False,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
        )
    async with connection:
        with _mapped(settings, "opening SFTP"):
            sftp = await connection.start_sftp_client()
        written: list[str] = []
        try:
            async with sftp:
                for folder in sorted({posixpath.dirname(f) for f in finals}):
                    with _mapped(settings, f"creating the folder {folder}"):
                        await sftp.makedirs(folder, exist_ok=True)
                gate = asyncio.Semaphore(PARALLEL_TRANSFERS)

                async def send(upload: Upload, temporary: str) -> None:
                    async with gate:
                        written.append(temporary)
                        with _mapped(settings, f"writing {temporary}"):
                            await sftp.put(str(upload.source), temporary)

                # Every transfer ends before anything else happens, failed or not: a copy still being
                # written while the leftovers are removed would outlive the removal.
                sent = await asyncio.gather(*(send(u, t) for u, t in zip(uploads, temporaries, strict=True)),
                                            return_exceptions=True)
                failure = next((outcome for outcome in sent if isinstance(outcome, BaseException)), None)
                if failure is not None:
                    raise failure
                with _mapped(settings, "hashing the copies"):
                    digests = await _hashes(connection, temporaries, where)
                for upload, final, digest in zip(uploads, finals, digests, strict=True):
                    if digest != upload.sha256:
                        raise NodeError(
                            HASH_MISMATCH,
                            f"{where}: the copy of {upload.source} for {final} has sha256 {digest}, "
                            f"the source {upload.sha256}",
                        )
                # In the given order: a caller lists a sitemap last, so it never names a page not yet in
                # place.
                for temporary, final in zip(temporaries, finals, strict=True):
                    with _mapped(settings, f"renaming {temporary} to {final}"):
                        await sftp.posix_rename(temporary, final)
                    written.remove(temporary)
        finally:
            await _remove_leftovers(connection, written)
    return [settings.location_of(final) for final in finals]


async def _remove_leftovers(connection: asyncssh.SSHClientConnection, temporaries: list[str]) -> None:
    """Remove temporary copies a failed batch left (best effort: the connection may be what failed)."""
    if not temporaries:
        return
    try:
        async with connection.start_sftp_client() as sftp:
            for temporary in temporaries:
                with suppress(asyncssh.SFTPNoSuchFile):
                    await sftp.remove(temporary)
    except (OSError, asyncssh.Error):
        # The original failure is what the caller must see; a temporary name is never served as a page.
        return


def deploy_remote(settings: RemoteSettings, uploads: list[Upload]) -> list[str]:
    """Copy a batch to a remote folder: temporary names, remote `sha256sum` proof, rename into place.

    Parameters:
        settings: the remote (see `RemoteSettings.from_env`).
        uploads: the files, in the order they are to be renamed into place.

    Returns:
        Where each file landed, as `ssh://user@host:port/path`, in the order of `uploads`.

    Raises:
        NodeError: deploy_host_unreachable, deploy_auth_refused, deploy_host_key_unknown,
            deploy_config_invalid, write_denied, deploy_target_unwritable, deploy_hash_mismatch,
            deploy_proof_failed.
    """
    # The engine's core is synchronous; asyncssh is not. One event loop per batch, in this thread.
    return asyncio.run(_land(settings, uploads))
