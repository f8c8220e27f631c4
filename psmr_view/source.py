"""The source lines behind a span: the file the workspace was built from, the span's lines marked.

The file is read from the workspace's source root (a revision's worktree for `--rev` builds), only
if it is one of the workspace's files, as the build read it (`slotrelay.psmr.workspace.build.read_artifact`: a
regular file inside the root, its folders and itself opened without following a link out of it and
without blocking, so a file swapped for a FIFO gives a warning, not a hung page). When its content no
longer matches the hash recorded at build time, the lines are still shown, with a warning that they
may have moved. A page reads each file once (`SourceFiles`), however many spans it shows from it;
nothing is kept between pages.

Lines are split as Python's tokenizer splits them (`\\n`, `\\r\\n`, `\\r`; not form feeds), so line
numbers are the analysis's, and kept as bytes, since a span's columns count UTF-8 bytes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psmr_view.errors import ViewError
from slotrelay.psmr.workspace.build import NotSource, Unanalysable, read_artifact

CONTEXT_LINES = 4


@dataclass
class SourceText:
    """One file's lines as bytes; `changed` when it no longer matches the build, `warning` why it
    cannot be read (then `lines` is empty)."""

    artifact: str
    lines: list[bytes] = field(default_factory=list)
    changed: bool = False
    warning: str | None = None

    def line(self, number: int) -> bytes | None:
        """Line `number` (1-based), or None past the end."""
        return self.lines[number - 1] if 0 < number <= len(self.lines) else None


class SourceFiles:
    """The workspace's files as one page reads them: each at most once.

    Parameters:
        source_root: the folder the workspace was built from.
        files: the workspace manifest's files (`{artifact: {"sha256": ...}}`).
    """

    def __init__(self, source_root: Path, files: dict[str, Any]) -> None:
        self.source_root = source_root
        self.files = files
        self._read: dict[str, SourceText] = {}

    def text(self, artifact: str) -> SourceText:
        """A file's lines.

        Raises:
            ViewError: OBJECT_NOT_FOUND (404) when the artifact is not a file of the workspace.
        """
        entry = self.files.get(artifact)
        if entry is None:
            raise ViewError("OBJECT_NOT_FOUND", f"{artifact} is not a file of this workspace")
        if artifact not in self._read:
            found = SourceText(artifact)
            try:
                data = read_artifact(self.source_root, artifact)
            except (NotSource, Unanalysable) as exc:
                found.warning = f"{artifact} cannot be read now ({exc}); rebuild the workspace"
            else:
                found.changed = hashlib.sha256(data).hexdigest() != entry.get("sha256")
                if found.changed:
                    found.warning = f"{artifact} changed since the workspace was built: lines may have moved"
                found.lines = data.splitlines()
            self._read[artifact] = found
        return self._read[artifact]


@dataclass
class Excerpt:
    """Numbered lines around a span; `marked` are the span's own lines. `before` and `after` say
    whether the file goes on past the lines shown."""

    artifact: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    marked: range = range(0)
    warning: str | None = None
    before: bool = False
    after: bool = False


def excerpt(
    files: SourceFiles,
    artifact: str,
    span: dict[str, int],
    *,
    context: int = CONTEXT_LINES,
) -> Excerpt:
    """The lines of `artifact` from `span["line"]` to `span["end_line"]`, with `context` lines around.

    Parameters:
        files: the page's reader of the workspace's files.
        artifact: the file, relative to the source root.
        span: `{"line", "end_line"}` (1-based, inclusive).
        context: lines shown before and after.

    Returns:
        The excerpt; its `warning` says when the file changed or is gone since the build.

    Raises:
        ViewError: OBJECT_NOT_FOUND (404) when the artifact is not a file of the workspace.
    """
    text = files.text(artifact)
    first, last = span["line"], max(span.get("end_line") or span["line"], span["line"])
    found = Excerpt(artifact, marked=range(first, last + 1), warning=text.warning)
    start, stop = max(1, first - context), min(len(text.lines), last + context)
    found.lines = [(n, text.lines[n - 1].decode("utf-8", errors="replace")) for n in range(start, stop + 1)]
    found.before, found.after = start > 1, stop < len(text.lines)
    return found
