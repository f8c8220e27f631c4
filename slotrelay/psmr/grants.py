"""The capabilities a PSMR runtime was started with: source-write, process execution (CONTRACTS.md#psmr).

A runtime is read-only unless its caller grants more, explicitly, at start: `slotrelay mcp serve
--allow-write ROOT` (repeatable) and `--allow-exec`, the same flags on `slotrelay psmr call`. Nothing
else grants a capability: not an environment variable, not a request field. A write is admitted
only for files whose real path (symlinks followed) lies inside a granted root.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from slotrelay.psmr.errors import CapabilityDenied, InvalidQuery

SOURCE_WRITE = "source-write"
PROCESS_EXECUTION = "process-execution"


@dataclass(frozen=True)
class Grants:
    """What a runtime may do beyond reading.

    Parameters:
        write_roots: folders under which `projection.apply` may write source files.
        process_execution: whether `execution.run_tests` may run tests (inside the sandbox).
    """

    write_roots: tuple[Path, ...] = field(default_factory=tuple)
    process_execution: bool = False

    @classmethod
    def of(cls, *, write_roots: Iterable[str | Path] = (), process_execution: bool = False) -> Grants:
        """Grants with the write roots resolved (symlinks followed).

        Raises:
            InvalidQuery: a root given as text is empty or blank (`--allow-write ''`): resolved, it
                would grant the current folder, which nobody named.
        """
        roots = list(write_roots)
        for root in roots:
            if isinstance(root, str) and not root.strip():
                raise InvalidQuery(
                    f"--allow-write {root!r}: an empty path names no folder; give the folder the runtime "
                    "may write under (--allow-write . for the current one)"
                )
        return cls(tuple(Path(os.path.realpath(r)) for r in roots), process_execution)

    def names(self) -> list[str]:
        """The capability names granted."""
        return [SOURCE_WRITE] * bool(self.write_roots) + [PROCESS_EXECUTION] * self.process_execution

    def require_write(self, operation: str, files: Iterable[Path]) -> None:
        """Refuse unless every file lies inside a granted write root.

        Raises:
            CapabilityDenied: no write root was granted, or a file lies outside all of them.
        """
        if not self.write_roots:
            raise CapabilityDenied(
                f"{operation} needs the {SOURCE_WRITE} capability, which this runtime was not started "
                "with; restart it with --allow-write ROOT (the folder it may write under), or apply "
                "the diff of projection.preview yourself"
            )
        for file in files:
            try:
                real = Path(os.path.realpath(file))
            except OSError as exc:
                # A folder on the way swapped for a link (or back) while it was being resolved.
                raise CapabilityDenied(
                    f"{operation} would write {file}, whose path changed while it was checked "
                    f"({exc.strerror}); nothing was written"
                ) from exc
            if not any(real == root or root in real.parents for root in self.write_roots):
                allowed = ", ".join(str(r) for r in self.write_roots)
                raise CapabilityDenied(
                    f"{operation} would write {file}, outside the roots this runtime may write under "
                    f"({allowed}); restart it with --allow-write for that folder"
                )

    def write_root(self, operation: str, folder: Path) -> Path:
        """The granted root holding `folder` by its path as written: a write walks from that root down
        without following a link (`slotrelay.fsio`), so `folder` must be it or below it as named.

        Raises:
            CapabilityDenied: no granted root holds the path as written.
        """
        for root in self.write_roots:
            if folder.is_relative_to(root):
                return root
        allowed = ", ".join(str(r) for r in self.write_roots) or "none"
        raise CapabilityDenied(
            f"{operation} would write under {folder}, which is not below a root this runtime may write "
            f"under as written ({allowed}); restart it with --allow-write naming the folder's real path"
        )

    def require_execution(self, operation: str) -> None:
        """Refuse unless process execution was granted.

        Raises:
            CapabilityDenied: it was not.
        """
        if not self.process_execution:
            raise CapabilityDenied(
                f"{operation} needs the {PROCESS_EXECUTION} capability, which this runtime was not "
                "started with; restart it with --allow-exec (tests then run inside the sandbox)"
            )


READ_ONLY = Grants()
