"""A second Docker daemon on 127.0.0.1, reached over TCP with TLS client certificates: a stand-in for a
remote host, for the sandbox tests and the "Beyond one machine" commands of docs/beyond.md.

The test generates everything: a CA, the daemon's certificate (for 127.0.0.1), a client certificate the
daemon trusts, and a stranger's certificate from another CA that it must refuse. The daemon never
listens on TCP without `--tlsverify`. It has its own data root, exec root (with its own containerd),
pid file and unix socket, and the flags scripts/start-dockerd.sh uses (no iptables, no bridge:
sandboxes run with network none). It needs root, as dockerd does.
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from harness.ports import free_port
from harness.process_groups import stop_process_group
from slotrelay.sandbox.daemon import DaemonEndpoint, docker_client
from slotrelay.sandbox.errors import SandboxUnavailable
from tests.support.processes import wait_while_running

START_SECONDS = 60


@dataclass(frozen=True)
class RemoteDaemon:
    """A running TLS daemon: its address, the files a client needs, and a stranger's certificate."""

    url: str
    folder: Path
    ca: Path
    cert: Path
    key: Path
    stranger_cert: Path
    stranger_key: Path
    log: Path

    def endpoint(self, *, stranger: bool = False) -> DaemonEndpoint:
        """The endpoint with this test's client certificate, or with one the daemon does not trust."""
        if stranger:
            return DaemonEndpoint(self.url, ca_cert=str(self.ca), client_cert=str(self.stranger_cert),
                                  client_key=str(self.stranger_key))
        return DaemonEndpoint(self.url, ca_cert=str(self.ca), client_cert=str(self.cert),
                              client_key=str(self.key))

    def env(self) -> dict[str, str]:
        """The variables the docker CLI and SDK read to reach this daemon (DOCKER_CERT_PATH holds
        ca/cert/key.pem)."""
        return {"DOCKER_HOST": self.url, "DOCKER_TLS_VERIFY": "1",
                "DOCKER_CERT_PATH": str(self.folder / "client")}


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None,
           key_path: Path | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None and key_path is not None:
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        key_path.chmod(0o600)


def _certificate(subject: str, key, issuer: x509.Name | None, issuer_key, *, ca: bool = False,
                 server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_certificates(folder: Path) -> None:
    """CA, daemon and client certificates in `folder` (client files as DOCKER_CERT_PATH expects them)."""
    ca_key = _key()
    ca = _certificate("slotrelay test CA", ca_key, None, ca_key, ca=True)
    server_key = _key()
    _write(folder / "server" / "cert.pem",
           _certificate("127.0.0.1", server_key, ca.subject, ca_key, server=True),
           server_key, folder / "server" / "key.pem")
    _write(folder / "server" / "ca.pem", ca)
    client_key = _key()
    _write(folder / "client" / "cert.pem", _certificate("slotrelay client", client_key, ca.subject, ca_key),
           client_key, folder / "client" / "key.pem")
    _write(folder / "client" / "ca.pem", ca)
    other_key = _key()
    other = _certificate("another CA", other_key, None, other_key, ca=True)
    stranger_key = _key()
    _write(folder / "stranger" / "cert.pem", _certificate("stranger", stranger_key, other.subject, other_key),
           stranger_key, folder / "stranger" / "key.pem")


@contextmanager
def remote_dockerd() -> Iterator[RemoteDaemon]:
    """Start a TLS-only dockerd on a free port of 127.0.0.1; stop it and remove its folders afterwards.

    Raises:
        RuntimeError: dockerd exited or did not answer in time (its log is in the message).
    """
    # Short: containerd's socket lives under the exec root, and unix socket paths stop at 108 bytes.
    folder = Path(tempfile.mkdtemp(prefix="srd-", dir="/tmp"))
    make_certificates(folder)
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_path = folder / "dockerd.log"
    command = [
        "dockerd", "--tlsverify",
        "--tlscacert", str(folder / "server" / "ca.pem"),
        "--tlscert", str(folder / "server" / "cert.pem"),
        "--tlskey", str(folder / "server" / "key.pem"),
        "-H", url, "-H", f"unix://{folder}/docker.sock",
        "--data-root", str(folder / "data"), "--exec-root", str(folder / "exec"),
        "--pidfile", str(folder / "docker.pid"),
        "--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=overlay2",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    daemon = RemoteDaemon(url, folder, folder / "client" / "ca.pem", folder / "client" / "cert.pem",
                          folder / "client" / "key.pem", folder / "stranger" / "cert.pem",
                          folder / "stranger" / "key.pem", log_path)
    try:

        def answers() -> bool:
            try:
                docker_client(daemon.endpoint(), timeout=5).close()
            except SandboxUnavailable:
                return False
            return True

        wait_while_running(process, answers, timeout=START_SECONDS, what="the test dockerd to answer",
                           log=log_path, interval=0.25)
        yield daemon
    finally:
        stop_process_group(process, signal.SIGTERM, 30)
        # overlay2 leaves nothing mounted after a clean stop; a killed daemon may, so unmount what is left.
        subprocess.run(["umount", "-R", str(folder / "data")], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)

