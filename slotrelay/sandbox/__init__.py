"""Run untrusted code under limits: `run(code, lang=..., limits=...) -> ExecutionResult`.

Backends: docker (default; a fresh hardened container per run, from a pool created ahead of
time) and bwrap (the same limits without a daemon). Where neither works, `SandboxUnavailable`
(the pen's MPP-E002); code never runs unsandboxed. A program that fails, times out or breaks a
limit is not an exception: it is an `ExecutionResult` with that status and its `violations`.

How a program receives inputs and returns a result:

- python: the code runs as `__main__`. `inputs` (any JSON value) arrive as JSON on stdin
  (`json.load(sys.stdin)`) and as the argument of `main(inputs)` when the code defines `main`.
  `result` is what `main` returns; without `main`, the value of a global named `result`;
  otherwise None. It must be JSON-serializable (else the run is an error).
- node: the code runs as a CommonJS module; `result` is the (awaited) return of
  `module.exports(inputs)` when the module exports a function, else of `module.exports.main(inputs)`,
  else null. The inputs are also the global `INPUTS`.
- shell: bash runs the code with `inputs` as JSON on stdin; `result` is None. Use stdout.

stdout and stderr are exactly what the program printed (up to their caps). Nothing is read
back from files inside the sandbox: the result travels on stdout behind a per-run marker
that the host strips (see `protocol`).
"""

from __future__ import annotations

import json
from typing import Any

from slotrelay.sandbox.backends import BACKENDS, doctor, get_backend
from slotrelay.sandbox.daemon import DaemonEndpoint
from slotrelay.sandbox.errors import SandboxError, SandboxImageError, SandboxRequestError, SandboxUnavailable
from slotrelay.sandbox.limits import (
    LANGUAGES,
    ExecutionResult,
    FsAllowPaths,
    NetworkAllow,
    SandboxLimits,
    Truncated,
    Violation,
)
from slotrelay.sandbox.settings import SandboxSettings

__all__ = [
    "BACKENDS",
    "LANGUAGES",
    "DaemonEndpoint",
    "ExecutionResult",
    "FsAllowPaths",
    "NetworkAllow",
    "SandboxError",
    "SandboxImageError",
    "SandboxLimits",
    "SandboxRequestError",
    "SandboxSettings",
    "SandboxUnavailable",
    "Truncated",
    "Violation",
    "doctor",
    "get_backend",
    "run",
]


def run(
    code: str,
    *,
    lang: str = "python",
    limits: SandboxLimits | None = None,
    inputs: Any = None,
    backend: str | None = None,
    settings: SandboxSettings | None = None,
) -> ExecutionResult:
    """Run `code` in a sandbox and report what it did.

    Parameters:
        code: the program's source.
        lang: "python", "node" or "shell".
        limits: the run's limits; `SandboxLimits()` (the seed's defaults) when None.
        inputs: any JSON-serializable value handed to the program (see the module docstring).
        backend: "docker" or "bwrap"; the first usable one when None.
        settings: the operator's policy (daemon, image tags, egress allow-list, pool size); a host
            outside its egress allow-list refuses the run before anything starts.

    Returns:
        The run's status, exit code, output, result, duration, violations and backend.

    Raises:
        SandboxRequestError: an unknown language or backend, or inputs that are not JSON.
        SandboxUnavailable: no backend (or not the one asked for) can run `lang` here.
    """
    try:
        json.dumps(inputs)
    except (TypeError, ValueError) as error:
        raise SandboxRequestError(f"inputs: not JSON-serializable ({error})") from error
    limits = limits or SandboxLimits()
    chosen = get_backend(backend, lang=lang, settings=settings)
    refused = settings.egress_refusals(limits) if settings else []
    if refused:
        return ExecutionResult.refused(refused, chosen.name)
    return chosen.run(code, lang=lang, limits=limits, inputs=inputs)
