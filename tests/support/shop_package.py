"""The sample package the MCP tests query, built from strings into a git repository with two commits.

It has what the tools report on: calls across modules, module state read and written, a
conditional double definition (a conflict), a dynamic call (an unknown), an unused import (a
anomaly), an undefined name (a confirmed defect), asserts and raises (contracts) and a test that reaches
`login`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

FIRST_COMMIT = {
    "shop/__init__.py": '"""A tiny shop."""\n',
    "shop/auth.py": '''"""Sessions and login."""

import os

SESSIONS = {}
ATTEMPTS = 0


def check(token):
    """True for a valid token."""
    return token == "ok"


def login(user, token):
    """Log a user in.

    Raises:
        ValueError: the token is invalid.
    """
    global ATTEMPTS
    assert user, "user is required"
    ATTEMPTS += 1
    if not check(token):
        raise ValueError("bad token")
    SESSIONS[user] = token
    return True


if os.environ.get("SHOP_LEGACY"):
    def logout(user):
        SESSIONS.pop(user, None)
else:
    def logout(user):
        SESSIONS.pop(user)
''',
    "shop/cart.py": '''"""The cart calls into auth."""

import json

from shop.auth import login


class Cart:
    def __init__(self, user):
        self.user = user
        self.items = []

    def checkout(self, token):
        login(self.user, token)
        handler = getattr(self, "on_" + token)
        handler()
        return len(self.items)

    def total(self):
        return len(self.items) * PRICE
''',
    "tests/test_auth.py": """from shop.auth import login


def test_login():
    assert login("ann", "ok")
""",
}
SECOND_COMMIT = {
    "shop/auth.py": FIRST_COMMIT["shop/auth.py"].replace(
        "def check(token):", "def check(token, strict=False):"
    ),
    "shop/audit.py": '''"""Added in the second commit."""

from shop.auth import SESSIONS


def who():
    return sorted(SESSIONS)
''',
}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _git(root: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def make_shop(root: Path) -> Path:
    """Create the sample package as a git repository with two commits; returns its root."""
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", "main")
    _write(root, FIRST_COMMIT)
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "first")
    _write(root, SECOND_COMMIT)
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "second")
    return root
