"""A private OpenSSH server on 127.0.0.1 for the deploy tests and bench/deploy_bench.py.

Debian's `sshd` runs with its own config, host key and authorized key, all generated for the run, as
a non-root user: as root (CI) the system user `slotrelay-ssh` (created here if missing, with a shell
for the remote `sha256sum` and no password), otherwise the current user. A non-root sshd needs no
privilege-separation directory (/run/sshd) and can only log that one user in, which is what a deploy
account is. Everything lives in one temporary folder owned by that user, removed at the end.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from harness.process_groups import stop_process_group

SSHD = "/usr/sbin/sshd"
SSH_USER = "slotrelay-ssh"
START_SECONDS = 30


@dataclass(frozen=True)
class Sshd:
    """A running sshd: where it listens, who logs in, the files a client needs."""

    port: int
    user: str
    root: Path
    key: Path
    known_hosts: Path
    log: Path

    def folder(self, name: str, *, mode: int = 0o755) -> Path:
        """A folder under the server's root owned by its user (what the remote login may write)."""
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        self.own(path)
        path.chmod(mode)
        return path

    def own(self, path: Path) -> None:
        """Give a file or folder to the server's user (a no-op when the tests are that user)."""
        _own(path, self.user)

    def env(self, prefix: str, path: Path, *, url: str | None = None,
            key: Path | None = None) -> dict[str, str]:
        """The environment variables that name this server as a deploy target's remote."""
        values = {f"{prefix}_HOST": "127.0.0.1", f"{prefix}_PORT": str(self.port),
                  f"{prefix}_USER": self.user,
                  f"{prefix}_KEY": str(key or self.key), f"{prefix}_KNOWN_HOSTS": str(self.known_hosts),
                  f"{prefix}_PATH": str(path)}
        if url:
            values[f"{prefix}_URL"] = url
        return values


def sshd_available() -> bool:
    """Whether Debian's openssh-server is installed."""
    return os.access(SSHD, os.X_OK)


def _login_user() -> str:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid()).pw_name
    try:
        pwd.getpwnam(SSH_USER)
    except KeyError:
        # `-p '*'`: no password, but not a locked account, which sshd (without PAM) would refuse.
        subprocess.run(["useradd", "--system", "--create-home", "--shell", "/bin/sh", "-p", "*", SSH_USER],
                       check=True, capture_output=True)
    return SSH_USER


def new_key(path: Path) -> bytes:
    """A fresh ed25519 key written to `path` (mode 0600, OpenSSH format), with its `.pub` beside it;
    returns the public key's line, as authorized_keys and known_hosts hold it."""
    key = Ed25519PrivateKey.generate()
    path.touch(mode=0o600)
    path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()))
    public = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH) + b"\n"
    path.with_name(path.name + ".pub").write_bytes(public)
    return public


def _own(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(root: Path, user: str) -> tuple[subprocess.Popen[bytes], int]:
    log = root / "sshd.log"
    for _ in range(3):
        port = _free_port()
        (root / "sshd_config").write_text(
            f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {root / 'host_key'}\nPidFile "
            f"{root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {root / 'authorized_keys'}\nUsePAM no\nStrictModes no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nSubsystem sftp internal-sftp\n"
        )
        prefix = ["runuser", "-u", user, "--"] if os.geteuid() == 0 else []
        with log.open("ab") as out:
            server = subprocess.Popen([*prefix, SSHD, "-D", "-e", "-f", str(root / "sshd_config")],
                                      stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True)
        deadline = time.monotonic() + START_SECONDS
        while server.poll() is None and time.monotonic() < deadline:
            if f"listening on 127.0.0.1 port {port}" in log.read_text(errors="replace"):
                return server, port
            time.sleep(0.05)
        _stop(server)
        if "Address already in use" not in log.read_text(errors="replace"):
            break
    raise RuntimeError(f"sshd did not start; its log: {log.read_text(errors='replace')[-2000:]}")


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        stop_process_group(server, signal.SIGTERM, 20)


@contextmanager
def running_sshd() -> Iterator[Sshd]:
    """Start a private sshd on a free port of 127.0.0.1 and stop it (and remove its folder) at the end."""
    user = _login_user()
    root = Path(tempfile.mkdtemp(prefix="slotrelay-sshd-"))
    try:
        root.chmod(0o755)
        host_key = new_key(root / "host_key")
        client_key = new_key(root / "client_key")
        (root / "authorized_keys").write_bytes(client_key)
        for owned in (root, root / "host_key", root / "authorized_keys"):
            _own(owned, user)
        server, port = _start(root, user)
        # known_hosts names a non-default port as [host]:port.
        (root / "known_hosts").write_bytes(f"[127.0.0.1]:{port} ".encode() + host_key)
        try:
            yield Sshd(port=port, user=user, root=root, key=root / "client_key",
                       known_hosts=root / "known_hosts",
                       log=root / "sshd.log")
        finally:
            _stop(server)
    finally:
        shutil.rmtree(root, ignore_errors=True)
