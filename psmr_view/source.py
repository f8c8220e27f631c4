"""The source lines behind a span: the file the workspace was built from, the span's lines marked.

The file is read from the workspace's source root (a revision's worktree for `--rev` builds), only
if it is one of the workspace's files, as the build read it (`slotrelay.psmr.build.read_artifact`: a
regular file inside the root, its folders and itself opened without following a link out of it and
without blocking, so a file swapped for a FIFO gives a warning, not a hung page). When its content no
longer matches the hash recorded at build time, the lines are still shown, with a warning that they
may have moved.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psmr_view.errors import ViewError
from slotrelay.psmr.build import NotSource, Unanalysable, read_artifact

CONTEXT_LINES = 4


@dataclass
class Excerpt:
    """Numbered lines around a span; `marked` are the span's own lines."""

    artifact: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    marked: range = range(0)
    warning: str | None = None


def excerpt(
    source_root: Path,
    files: dict[str, Any],
    artifact: str,
    span: dict[str, int],
    *,
    context: int = CONTEXT_LINES,
) -> Excerpt:
    """The lines of `artifact` from `span["line"]` to `span["end_line"]`, with `context` lines around.

    Parameters:
        source_root: the folder the workspace was built from.
        files: the workspace manifest's files (`{artifact: {"sha256": ...}}`).
        artifact: the file, relative to the source root.
        span: `{"line", "end_line"}` (1-based, inclusive).
        context: lines shown before and after.

    Returns:
        The excerpt; its `warning` says when the file changed or is gone since the build.

    Raises:
        ViewError: OBJECT_NOT_FOUND (404) when the artifact is not a file of the workspace.
    """
    entry = files.get(artifact)
    if entry is None:
        raise ViewError("OBJECT_NOT_FOUND", f"{artifact} is not a file of this workspace")
    first, last = span["line"], max(span.get("end_line") or span["line"], span["line"])
    found = Excerpt(artifact, marked=range(first, last + 1))
    try:
        data = read_artifact(source_root, artifact)
    except (NotSource, Unanalysable) as exc:
        found.warning = f"{artifact} cannot be read now ({exc}); rebuild the workspace"
        return found
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        found.warning = f"{artifact} changed since the workspace was built: the lines may have moved"
    text = data.decode("utf-8", errors="replace").splitlines()
    start, stop = max(1, first - context), min(len(text), last + context)
    found.lines = [(n, text[n - 1]) for n in range(start, stop + 1)]
    return found
