"""An operator's sandbox policy in plain Python: the daemon, image tags, default limits, egress, pool size.

The `SandboxPolicy` Prefect Block (blocks/sandbox_policy.py) builds one; without it every field keeps
the zero-setup default: the environment's daemon (DOCKER_HOST), this checkout's images, the seed's
limits, any egress host a request names, SLOTRELAY_SANDBOX_POOL_SIZE. When the policy names a
daemon, runs go to that daemon or nowhere: no other backend is tried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slotrelay.sandbox.daemon import DaemonEndpoint
from slotrelay.sandbox.egress import host_allowed
from slotrelay.sandbox.limits import SandboxLimits, Violation


@dataclass(frozen=True)
class SandboxSettings:
    """What an operator fixed for every sandbox run of a flow.

    Parameters:
        endpoint: the Docker daemon; None: the environment's (and bwrap when no daemon answers).
        image_tags: (language, image tag) pairs run instead of this checkout's images.
        default_limits: SandboxLimits fields a request leaves unset (e.g. {"timeout_ms": 10000}).
        egress_allow: the hosts any run may reach; None: whatever a request names.
        pool_size: containers kept ready per shape; None: SLOTRELAY_SANDBOX_POOL_SIZE or 2.
        source: where the policy came from, as a run reports it (`SandboxPolicy block <name>`).
    """

    endpoint: DaemonEndpoint | None = None
    image_tags: tuple[tuple[str, str], ...] = ()
    default_limits: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    egress_allow: tuple[str, ...] | None = None
    pool_size: int | None = None
    source: str = field(default="an operator's sandbox policy", compare=False)

    def with_defaults(self, sandbox_options: Mapping[str, Any] | None) -> dict[str, Any]:
        """A request's sandbox options with the policy's default limits under the ones it sets."""
        return {**self.default_limits, **(sandbox_options or {})}

    def egress_refusals(self, limits: SandboxLimits) -> list[Violation]:
        """One `network` violation per host a run asks for that the policy's allow-list does not cover."""
        if self.egress_allow is None:
            return []
        refused = []
        for entry in limits.allow_hosts:
            name, _, port = entry.partition(":")
            if name.startswith("*."):
                covered = entry in self.egress_allow or any(
                    allowed.startswith("*.") and name.endswith(allowed[1:]) for allowed in self.egress_allow
                )
            else:
                covered = all(
                    host_allowed(name, p, self.egress_allow) for p in ({int(port)} if port else {80, 443}))
            if not covered:
                refused.append(
                    Violation(kind="network",
                              detail=f"network.allow: {entry} is outside the operator's egress allow-list")
                )
        return refused
