"""Which Docker daemon the sandbox talks to, and the one place a Docker client is built.

Without an explicit endpoint the client comes from the environment, as the docker CLI reads it:
DOCKER_HOST (`unix:///var/run/docker.sock` when unset), DOCKER_TLS_VERIFY and DOCKER_CERT_PATH
(`ca.pem`, `cert.pem`, `key.pem`). A `DaemonEndpoint` (the `SandboxPolicy` block gives one) names
a daemon explicitly: a unix socket, or `tcp://host:port` with TLS client certificates; a TCP daemon
without TLS is refused, since anyone who reaches its port owns the host. The backend, the image
builder, `doctor` and the chain's preflight all call `docker_client`, so they all reach the same daemon.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slotrelay.sandbox.docker_errors import docker_errors
from slotrelay.sandbox.errors import SandboxRequestError

if TYPE_CHECKING:
    import docker

DEFAULT_SOCKET = "unix:///var/run/docker.sock"
# Seconds one API call may take; an image build or a long run passes its own.
DEFAULT_TIMEOUT_S = 60


@dataclass(frozen=True)
class DaemonEndpoint:
    """A Docker daemon named explicitly, with the TLS files a TCP one needs.

    Parameters:
        url: `unix:///path/docker.sock` or `tcp://host:port`.
        ca_cert: the CA that signed the daemon's certificate (PEM file).
        client_cert: this client's certificate (PEM file), signed by a CA the daemon trusts.
        client_key: the key of `client_cert` (PEM file).

    Raises:
        SandboxRequestError: an unsupported scheme, a TCP daemon without all three TLS files, or a
            TLS file that does not exist; the message names the field.
    """

    url: str
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None

    def __post_init__(self) -> None:
        scheme = self.url.partition("://")[0]
        if scheme not in ("unix", "tcp"):
            raise SandboxRequestError(f"daemon_url: {self.url!r} must start with unix:// or tcp://")
        tls = {"tls_ca_cert": self.ca_cert, "tls_client_cert": self.client_cert,
               "tls_client_key": self.client_key}
        if scheme == "tcp":
            missing = [name for name, value in tls.items() if not value]
            if missing:
                raise SandboxRequestError(
                    f"{', '.join(missing)}: a tcp:// daemon ({self.url}) is reached only with TLS client "
                    "certificates; an unauthenticated TCP daemon gives root on its host to anyone"
                )
        for name, value in tls.items():
            if value and not Path(value).is_file():
                raise SandboxRequestError(f"{name}: {value} is not a file")


def describe(endpoint: DaemonEndpoint | None) -> str:
    """The daemon's address as a person would name it in an error."""
    if endpoint is not None:
        return endpoint.url
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def _endpoint_params(endpoint: DaemonEndpoint) -> dict[str, Any]:
    import docker.tls

    tls: docker.tls.TLSConfig | bool = False
    if endpoint.url.startswith("tcp://"):
        # __post_init__ made sure a tcp:// endpoint has all three files
        assert endpoint.client_cert is not None and endpoint.client_key is not None
        tls = docker.tls.TLSConfig(
            client_cert=(endpoint.client_cert, endpoint.client_key), ca_cert=endpoint.ca_cert,
            verify=endpoint.ca_cert
        )
    return {"base_url": endpoint.url, "tls": tls}


def docker_client(endpoint: DaemonEndpoint | None = None, *,
                  timeout: int = DEFAULT_TIMEOUT_S) -> docker.DockerClient:
    """A connected client of the daemon `endpoint` names, else of the environment's daemon.

    Parameters:
        endpoint: an explicit daemon; None reads DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH.
        timeout: seconds one API call may take.

    Returns:
        A `docker.DockerClient` whose daemon answered; the caller closes it.

    Raises:
        SandboxUnavailable: the daemon does not answer, or refuses this client's certificate; the
            message names the daemon.
    """
    import docker
    from docker.constants import MINIMUM_DOCKER_API_VERSION
    from docker.utils import kwargs_from_env

    # A refused certificate surfaces as requests' SSLError, not as a DockerException: both are mapped.
    with docker_errors(f"the daemon at {describe(endpoint)} does not answer or refuses this client"):
        # DOCKER_CERT_PATH without its three files, or an endpoint's missing file, fails here.
        params = kwargs_from_env() if endpoint is None else _endpoint_params(endpoint)
        # requests lets REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE replace a session's CA file, which breaks
        # every TLS daemon on machines that set them: the daemon's own CA must win, so the sessions
        # ignore the environment. The API version is asked with such a session (docker.from_env would
        # ask with one that trusts the environment), and that answer is also the liveness check.
        with docker.APIClient(**params, timeout=timeout, version=MINIMUM_DOCKER_API_VERSION) as probe:
            probe.trust_env = False
            version = probe.version(api_version=False)["ApiVersion"]
    client = docker.DockerClient(**params, timeout=timeout, version=version)
    client.api.trust_env = False
    return client


def close_attach(stream: Any) -> None:
    """End an attach stream of the docker SDK for good, so the daemon sees its client go.

    The SDK hands out a `SocketIO` (unix socket) or the `SSLSocket` itself (TLS); a TLS socket stays
    open while the HTTP response that made it holds a file over it, so that response is closed too.
    """
    raw = getattr(stream, "_sock", None) or stream
    if not hasattr(raw, "shutdown"):
        return  # a closed SocketIO has let go of its socket: this stream was ended already
    response = getattr(raw, "_response", None)
    with contextlib.suppress(OSError):  # the daemon already closed it
        raw.shutdown(socket.SHUT_RDWR)
    stream.close()
    raw.close()
    if response is not None:
        response.close()


def is_local(client: docker.DockerClient) -> bool:
    """Whether the client reaches a daemon on this machine (a unix socket), so host paths can be bound."""
    return client.api.base_url.startswith("http+docker://local")
