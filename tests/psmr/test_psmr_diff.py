"""Semantic diff across two commits of a temporary git repository, analysed from worktrees, and
`slotrelay psmr build --rev` on one of them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from slotrelay.cli import app
from slotrelay.psmr.api import build_workspace, call
from tests.support.psmr_trees import write_tree

BEFORE = """def fetch(url, timeout=10):
    return _get(url)


def _get(url):
    return url


def legacy():
    return 1


class Client:
    def send(self, data):
        return fetch(data)
"""
AFTER = """def fetch(url):
    return _get(url).strip()


def _get(url):
    return url


def newer():
    return fetch("x")


class Client:
    def send(self, data):
        return newer()
"""
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=GIT_ENV
    ).stdout.strip()


def test_semantic_diff_between_two_commits(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", {"pkg/__init__.py": "", "pkg/api.py": BEFORE})
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "one")
    (root / "pkg" / "api.py").write_text(AFTER)
    git(root, "commit", "-qam", "two")
    head = git(root, "rev-parse", "HEAD")
    store = tmp_path / "store"
    ws = build_workspace(root, store=store)["workspace_id"]

    result = call(
        "analysis.semantic_diff", {"workspace_id": ws, "rev_a": "HEAD~1", "rev_b": "HEAD"}, store=store
    )
    assert result["status"] == "ok", result.get("error")
    data = result["data"]
    assert [s["id"] for s in data["symbols_added"]] == ["semantic:pkg.api.newer"]
    assert [s["id"] for s in data["symbols_removed"]] == ["semantic:pkg.api.legacy"]
    changed = {s["id"]: s["changes"] for s in data["symbols_changed"]}
    assert changed["semantic:pkg.api.fetch"] == ["signature_changed", "body_changed"]
    assert changed["semantic:pkg.api.Client.send"] == ["body_changed"]
    added = {(e["caller"], e["callee"]) for e in data["call_sites_added"]}
    removed = {(e["caller"], e["callee"]) for e in data["call_sites_removed"]}
    assert ("semantic:pkg.api.Client.send", "semantic:pkg.api.newer") in added
    assert ("semantic:pkg.api.newer", "semantic:pkg.api.fetch") in added
    assert ("semantic:pkg.api.Client.send", "semantic:pkg.api.fetch") in removed
    breakages = {(b["kind"], b["object"]) for b in data["api_breakages"]}
    assert ("object_removed", "pkg.api.legacy") in breakages
    assert ("parameter_removed", "pkg.api.fetch") in breakages
    assert data["revision_b"] == head and data["revision_a"] == git(root, "rev-parse", "HEAD~1")
    assert result["evidence_refs"]

    # The CLI builds one revision on its own, as docs/psmr.md shows.
    command = ["psmr", "build", str(root), "--rev", "HEAD~1", "--store", str(store), "--json"]
    built = CliRunner().invoke(app, command)
    assert built.exit_code == 0, built.output
    summary = json.loads(built.stdout)
    assert summary["commit"] == git(root, "rev-parse", "HEAD~1")
    found = call("query.search", {"workspace_id": summary["workspace_id"], "text": "legacy"}, store=store)
    assert "semantic:pkg.api.legacy" in [match["id"] for match in found["data"]["matches"]]

    # The user's checkout is untouched: same HEAD, same files, nothing staged or modified.
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == ""
    assert (root / "pkg" / "api.py").read_text() == AFTER

    # Two workspaces of the same tree: an empty delta.
    same = call("analysis.semantic_diff", {"workspace_a": ws, "workspace_b": ws}, store=store)["data"]
    assert all(count == 0 for count in same["counts"].values())

    # The delta pages like any other answer, and resumes exactly.
    whole = {k: v for k, v in data.items() if isinstance(v, list)}
    request = {"workspace_id": ws, "rev_a": "HEAD~1", "rev_b": "HEAD", "budget": {"max_nodes": 2}}
    paged: dict[str, list] = {}
    pages = 0
    while True:
        page = call("analysis.semantic_diff", request, store=store)
        pages += 1
        for key, value in page["data"].items():
            if isinstance(value, list):
                paged.setdefault(key, []).extend(value)
        if page["continuation"] is None:
            break
        request = {**request, "continuation_token": page["continuation"]["continuation_token"]}
    assert pages > 2 and paged == whole


ONE = """import os


def helper(x):
    return x


def spare(y):
    total = y * 2
    return total + 1


class Box:
    size = 1

    def grow(self):
        helper(1)
        helper(2)
        helper(3)
        return 1
"""
TWO = """import os


def helper(x):
    return x


def renamed_spare(y):
    total = y * 2
    return total + 1


class Box:
    size = 1

    def grow(self):
        helper(1)
        helper(3)
        return 2
"""


def test_semantic_diff_sites_renames_members_and_plain_text(tmp_path: Path) -> None:
    # A removed call between a pair that keeps two others is seen; a rename is one item; a class
    # whose method alone changed is not changed itself; griffe's explanations carry no ANSI codes.
    store = tmp_path / "store"
    one = build_workspace(write_tree(tmp_path / "one", {"pkg/__init__.py": "", "pkg/m.py": ONE}), store=store)
    two = build_workspace(write_tree(tmp_path / "two", {"pkg/__init__.py": "", "pkg/m.py": TWO}), store=store)
    result = call(
        "analysis.semantic_diff",
        {"workspace_a": one["workspace_id"], "workspace_b": two["workspace_id"]},
        store=store,
    )
    assert result["status"] == "ok", result.get("error")
    data = result["data"]
    removed = [(s["caller"], s["callee"]) for s in data["call_sites_removed"]]
    assert removed == [("semantic:pkg.m.Box.grow", "semantic:pkg.m.helper")]
    assert data["call_sites_added"] == []
    assert [(r["old"], r["new"]) for r in data["symbols_renamed"]] == [
        ("semantic:pkg.m.spare", "semantic:pkg.m.renamed_spare")
    ]
    assert data["symbols_added"] == [] and data["symbols_removed"] == []
    changed = {s["id"]: s["changes"] for s in data["symbols_changed"]}
    assert changed == {"semantic:pkg.m.Box.grow": ["body_changed"]}
    breakages = data["api_breakages"]
    assert any(b["object"] == "pkg.m.spare" for b in breakages)
    assert all("\x1b" not in b["explanation"] for b in breakages)
