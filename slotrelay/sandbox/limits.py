"""What a sandbox run may use (`SandboxLimits`) and what it reports back (`ExecutionResult`).

`SandboxLimits` mirrors the pen request's `options.sandbox` (CONTRACTS.md#pen-request: timeout_ms,
memory_mb, network, fs; `lang` is an argument of `run`), plus the limits the operator may tighten (pids, cpus,
output caps). `ExecutionResult` is the seed's `execution` object plus what a caller needs to
judge a run: the exit code, the limits it broke (`violations`), the backend and which output
was cut.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from slotrelay.validation_text import first_problem

LANGUAGES = ("python", "node", "shell")

# A DNS name, optionally with a port: letters, digits, hyphens, dots; "*." admits subdomains.
_HOST = re.compile(r"^(\*\.)?[a-z0-9]([a-z0-9-]{0,62})(\.[a-z0-9]([a-z0-9-]{0,62}))*(:[0-9]{1,5})?$")


class NetworkAllow(BaseModel):
    """An egress allow-list: host names (optionally `host:port`, or `*.domain`) the program may reach.

    Without a port, a host admits 80 (plain HTTP) and 443 (CONNECT). IP literals are refused:
    the proxy checks names, so an address would bypass the list.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow: tuple[str, ...] = Field(min_length=1)

    @field_validator("allow")
    @classmethod
    def _hosts_by_name(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        checked = []
        for entry in hosts:
            host = entry.strip().lower()
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
            try:
                ipaddress.ip_address(name.strip("[]"))
            except ValueError:
                pass
            else:
                raise ValueError(f"{entry!r} is an IP address; list hosts by name")
            if not _HOST.match(host):
                raise ValueError(f"{entry!r} is not a host name (host, host:port or *.domain)")
            checked.append(host)
        return tuple(checked)


# Where the backends build the sandbox's own file system (the runner, the egress socket, /proc, /dev,
# /tmp): a host path mounted at one of them, or above one, would hide it and the sandbox could not start.
SANDBOX_OWN_PATHS = ("/opt/slotrelay", "/run/slotrelay-egress", "/proc", "/dev", "/tmp")
# Nor may one be mounted inside these: the kernel's file systems and the sandbox's own code (/tmp may).
SANDBOX_SEALED_PATHS = ("/opt/slotrelay", "/run/slotrelay-egress", "/proc", "/dev")


class FsAllowPaths(BaseModel):
    """Host paths the program may read, mounted read-only at the same path; /tmp is writable too.

    Each path is resolved to its real path and must lie inside a root the operator configured
    (`SLOTRELAY_SANDBOX_ROOTS`); a path outside them is refused as a violation and nothing runs.
    `/`, a path at or above one of SANDBOX_OWN_PATHS, and one inside SANDBOX_SEALED_PATHS, are bad
    input: mounted, they would replace the sandbox's own file system or could not be mounted at all.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow_paths: tuple[str, ...] = Field(min_length=1)

    @field_validator("allow_paths")
    @classmethod
    def _absolute(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        normal = []
        for path in paths:
            if not posixpath.isabs(path):
                raise ValueError(f"{path!r} is not an absolute path")
            # normpath keeps a leading "//" (POSIX lets it mean something else); a mount does not.
            mounted = "/" + posixpath.normpath(path).lstrip("/")
            if mounted == "/":
                raise ValueError(f"{path!r} is the whole file system: name the folders the program may read")
            hidden = next((own for own in SANDBOX_OWN_PATHS if (own + "/").startswith(mounted + "/")), None)
            if hidden is not None:
                raise ValueError(
                    f"{path!r} would hide the sandbox's own {hidden}: name a folder that does not"
                )
            sealed = next((own for own in SANDBOX_SEALED_PATHS if mounted.startswith(own + "/")), None)
            if sealed is not None:
                raise ValueError(
                    f"{path!r} is inside the sandbox's own {sealed}, where nothing can be mounted"
                )
            normal.append(mounted)
        return tuple(normal)


def _nested(model: type[BaseModel], value: dict[str, Any], field: str) -> BaseModel:
    """Validate a union's object branch, reporting its own first error rather than the union's."""
    try:
        return model.model_validate(value)
    except ValidationError as error:
        problem = first_problem(error)
        raise ValueError(problem if problem.startswith(f"{field}.") else f"{field}.{problem}") from None


class SandboxLimits(BaseModel):
    """The limits of one run. Defaults are the seed's (30 s, 512 MB, no network, a writable /tmp).

    Parameters:
        timeout_ms: wall-clock limit; at the deadline the sandbox is killed from outside.
        memory_mb: memory limit, swap included; /tmp (a tmpfs) is sized inside it.
        network: "none", or {"allow": [host, ...]} through the egress proxy.
        fs: "none" (nothing writable), "tmp" (a sized tmpfs at /tmp) or {"allow_paths": [...]}.
        pids: most processes and threads at once.
        cpus: CPU share (1.0 = one core).
        stdout_max_bytes: stdout kept; the rest is read and discarded, and marked truncated.
        stderr_max_bytes: the same for stderr.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_ms: int = Field(default=30000, ge=50, le=3_600_000)
    memory_mb: int = Field(default=512, ge=32, le=65536)
    network: Literal["none"] | NetworkAllow = "none"
    fs: Literal["none", "tmp"] | FsAllowPaths = "tmp"
    pids: int = Field(default=64, ge=4, le=4096)
    cpus: float = Field(default=1.0, gt=0, le=64)
    stdout_max_bytes: int = Field(default=1 << 20, ge=0, le=64 << 20)
    stderr_max_bytes: int = Field(default=256 << 10, ge=0, le=64 << 20)

    @field_validator("network", mode="before")
    @classmethod
    def _network(cls, value: Any) -> Any:
        if value == "none" or isinstance(value, NetworkAllow):
            return value
        if isinstance(value, dict):
            return _nested(NetworkAllow, value, "network")
        raise ValueError('network: must be "none" or {"allow": [host, ...]}')

    @field_validator("fs", mode="before")
    @classmethod
    def _fs(cls, value: Any) -> Any:
        if value in ("none", "tmp") or isinstance(value, FsAllowPaths):
            return value
        if isinstance(value, dict):
            return _nested(FsAllowPaths, value, "fs")
        raise ValueError('fs: must be "none", "tmp" or {"allow_paths": [path, ...]}')

    @property
    def tmp_mb(self) -> int:
        """Size of the /tmp tmpfs: half the memory budget, because tmpfs pages count as memory."""
        return 0 if self.fs == "none" else max(1, self.memory_mb // 2)

    @property
    def allow_hosts(self) -> tuple[str, ...]:
        """The egress allow-list, empty when the network is off."""
        return self.network.allow if isinstance(self.network, NetworkAllow) else ()

    @property
    def allow_paths(self) -> tuple[str, ...]:
        """The host paths asked for, empty unless fs is an allow_paths object."""
        return self.fs.allow_paths if isinstance(self.fs, FsAllowPaths) else ()


ViolationKind = Literal["timeout", "memory", "output", "network", "fs", "result"]


class Violation(BaseModel):
    """A limit the run hit or a resource it was refused (the pen maps these to MPP-E004/E005)."""

    model_config = ConfigDict(frozen=True)

    kind: ViolationKind
    detail: str


class Truncated(BaseModel):
    """Which output streams were cut at their cap."""

    stdout: bool = False
    stderr: bool = False


class ExecutionResult(BaseModel):
    """What one sandbox run did.

    `status` is "success" (exit code 0, within limits), "timeout" (killed at the deadline) or
    "error" (any other end: a non-zero exit, an OOM kill, a refused request). `result` is the
    program's structured return value by the language's convention (see `slotrelay.sandbox`).
    """

    status: Literal["success", "error", "timeout"]
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    result: Any = None
    duration_ms: int
    violations: list[Violation] = Field(default_factory=list)
    backend: str
    truncated: Truncated = Field(default_factory=Truncated)

    @classmethod
    def refused(cls, violations: list[Violation], backend: str) -> ExecutionResult:
        """The result of a request refused before anything ran (e.g. an allow_path outside the roots)."""
        reasons = "; ".join(violation.detail for violation in violations)
        return cls(
            status="error", exit_code=None, duration_ms=0, violations=violations, backend=backend,
            stderr=f"refused: {reasons}",
        )  # fmt: skip
