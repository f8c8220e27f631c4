"""A small package laid out as a cloned repository (committed, so `--rev` and the git commands work on
it), and a folder's every entry as a test compares it before and after."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "def real():\n    return 1\n",
    "pkg/use.py": "from pkg.mod import real\n\n\ndef twice():\n    return real() + real()\n",
}


GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"
}


def make_clone(root: Path, files: dict[str, str] | None = None) -> Path:
    """`files` (default: `PACKAGE`) committed in a fresh git repository at `root`; returns `root`."""
    for name, text in (files or PACKAGE).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "clone"]):
        environment = {**os.environ, **GIT_ENV}
        subprocess.run(["git", *args], cwd=root, env=environment, check=True, capture_output=True)
    return root


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: a file's bytes, a link's target (never followed)."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            out[key] = f"-> {os.readlink(path)}"
        elif path.is_file():
            out[key] = path.read_bytes()
    return out
