"""Operator policy: which host paths a sandbox may be given, and how they are checked.

A request's `fs.allow_paths` are only wishes. Each is resolved to its real path (symlinks
followed on the host, before anything is mounted) and admitted only when that real path lies
inside a root the operator configured in `SLOTRELAY_SANDBOX_ROOTS` (paths separated by `:`).
With no roots configured, no host path is ever admitted. Admitted paths are mounted read-only
at the path the request named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from slotrelay.sandbox.limits import Violation

ROOTS_VARIABLE = "SLOTRELAY_SANDBOX_ROOTS"


def configured_roots() -> tuple[Path, ...]:
    """The operator's roots from `SLOTRELAY_SANDBOX_ROOTS`, resolved; empty when unset."""
    value = os.environ.get(ROOTS_VARIABLE, "")
    return tuple(Path(part).resolve() for part in value.split(os.pathsep) if part.strip())


@dataclass(frozen=True)
class ReadOnlyMount:
    """A host path admitted into a sandbox: `source` (real, on the host) shown at `target`."""

    source: str
    target: str


def admit_paths(
    requested: tuple[str, ...], roots: tuple[Path, ...] | None = None
) -> tuple[list[ReadOnlyMount], list[Violation]]:
    """Resolve requested host paths and keep those inside the operator's roots.

    Parameters:
        requested: absolute paths from `fs.allow_paths`.
        roots: the admitted roots; `configured_roots()` when None.

    Returns:
        The mounts to make, and one `fs` violation per path refused (outside every root,
        a symlink escaping its root, or missing).
    """
    roots = configured_roots() if roots is None else roots
    mounts: list[ReadOnlyMount] = []
    violations: list[Violation] = []
    for path in requested:
        real = Path(os.path.realpath(path))
        if not real.exists():
            violations.append(Violation(kind="fs", detail=f"allow_paths: {path} does not exist"))
            continue
        if not any(real == root or root in real.parents for root in roots):
            shown = path if str(real) == path else f"{path} (resolves to {real})"
            violations.append(
                Violation(kind="fs", detail=f"allow_paths: {shown} is outside the roots the operator allows")
            )
            continue
        mounts.append(ReadOnlyMount(source=str(real), target=path))
    return mounts, violations
