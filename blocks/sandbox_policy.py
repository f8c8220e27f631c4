"""The sandbox policy as a Prefect Block: which Docker daemon runs pen code, and under what rules.

Save one (UI or Python) and pass its name to the `pen-write`, `registry-review` or `chain` flow as
`sandbox_policy`:

    SandboxPolicy(daemon_url="tcp://build-host:2376", tls_ca_cert="/etc/slotrelay/ca.pem",
                  tls_client_cert="/etc/slotrelay/cert.pem", tls_client_key="/etc/slotrelay/key.pem",
                  pool_size=4).save("remote-sandbox")

Without a block the sandbox keeps its zero-setup defaults: the environment's daemon (DOCKER_HOST,
DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, or `.env`), then bwrap. A policy that names a daemon runs code
there or not at all (MPP-E002 naming the daemon); it never falls back to bwrap. So does a policy naming
an image (`image_tags`): a missing one is MPP-E002 naming it, when the flow starts. The TLS fields are
paths to PEM files on the machine that runs the flow, not the files' contents.
"""

from __future__ import annotations

from typing import Any

from prefect.blocks.core import Block
from pydantic import Field

from slotrelay.sandbox.daemon import DaemonEndpoint
from slotrelay.sandbox.errors import SandboxRequestError
from slotrelay.sandbox.limits import LANGUAGES
from slotrelay.sandbox.settings import SandboxSettings


class SandboxPolicy(Block):
    """Where and how the magic pen's sandbox runs code."""

    _block_type_name = "slotrelay sandbox policy"
    _block_type_slug = "slotrelay-sandbox-policy"
    _description = (
        "The Docker daemon, images, default limits, egress allow-list and pool size of pen sandboxes.")

    daemon_url: str | None = Field(
        default=None,
        description="unix:///path/docker.sock or tcp://host:port (TLS required); empty: DOCKER_HOST or the "
                    "local socket",
    )
    tls_ca_cert: str | None = Field(default=None,
                                    description="path of the CA certificate that signed the daemon's")
    tls_client_cert: str | None = Field(default=None, description="path of this client's certificate")
    tls_client_key: str | None = Field(default=None, description="path of this client's private key")
    image_tags: dict[str, str] = Field(
        default_factory=dict,
        description="images to run instead of this checkout's, by language, "
                    'e.g. {"python": "registry/py:1"}',
    )
    default_limits: dict[str, Any] = Field(
        default_factory=dict,
        description='sandbox limits a request leaves unset, e.g. {"timeout_ms": 10000, "memory_mb": 256}',
    )
    egress_allow: list[str] | None = Field(
        default=None,
        description="the only hosts a run may reach (host, host:port, *.domain); empty: any a request names"
    )
    pool_size: int | None = Field(default=None, ge=0, le=64, description="containers kept ready per shape")

    def settings(self) -> SandboxSettings:
        """The plain settings the sandbox's core takes.

        Raises:
            SandboxRequestError: the daemon URL or its TLS files are unusable, or `image_tags` names a
                language the sandbox does not run (the message names the field).
        """
        unknown = sorted(set(self.image_tags) - set(LANGUAGES))
        if unknown:
            raise SandboxRequestError(
                f"image_tags: {', '.join(map(repr, unknown))} is not a language the sandbox runs "
                f"({', '.join(LANGUAGES)})"
            )
        endpoint = None
        if self.daemon_url:
            endpoint = DaemonEndpoint(
                url=self.daemon_url,
                ca_cert=self.tls_ca_cert,
                client_cert=self.tls_client_cert,
                client_key=self.tls_client_key,
            )
        return SandboxSettings(
            endpoint=endpoint,
            image_tags=tuple(sorted(self.image_tags.items())),
            default_limits=dict(self.default_limits),
            egress_allow=tuple(self.egress_allow) if self.egress_allow is not None else None,
            pool_size=self.pool_size,
            source=f"SandboxPolicy block {self._block_document_name or '(not saved)'}",
        )
