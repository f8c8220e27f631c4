"""Source trees built from strings for the PSMR tests.

A module of its own (not `conftest`): test modules import it by a name no other test folder uses, so
the import does not depend on which folder's conftest pytest loaded last.
"""

from __future__ import annotations

from pathlib import Path


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write {relative path: text} under root and return root."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
