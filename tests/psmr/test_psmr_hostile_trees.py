"""Hostile source trees against `slotrelay psmr build` and `slotrelay mcp serve --workspace` (issue 11).

Each reproduction of the fault sweep is one named test, its tree built here from strings: a shipped
store (pickle or JSON at the exact key the build reads) must never run nor be read (the store lives in
slotrelay's state folder, never in the tree); a FIFO or
socket `.py` must not hang; a 100k-term expression, an unreadable file, files vanishing or turning
into folders mid-build, a link to /etc/passwd and an oversized file each end as a warning or an
unknown, never a traceback. The CLI and the MCP server run as real subprocesses.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import socket
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from harness.commands import SLOTRELAY
from slotrelay.psmr.analysis.facts_version import FACTS_VERSION
from slotrelay.psmr.api import build_workspace
from slotrelay.psmr.workspace.build import MAX_FILE_BYTES_ENV, workspace_id
from slotrelay.psmr.workspace.store import Store
from tests.support.psmr_trees import write_tree

MOD = "def real():\n    return 1\n"
TREE = {"pkg/__init__.py": "", "pkg/mod.py": MOD, "pkg/use.py": "from pkg.mod import real\n\nreal()\n"}


class RunsCommand:
    """Unpickling this calls `os.system(command)`: the payload of a crafted store."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (self.command,))


def facts_key(module: str, source: str, *, is_package: bool = False) -> str:
    """The key the build reads a module's facts under (see slotrelay.psmr.workspace.build)."""
    return hashlib.sha256(f"{FACTS_VERSION}\0{module}\0{is_package}\0".encode() + source.encode()).hexdigest()


def hostile_tree(root: Path, marker: Path) -> Path:
    """TREE with a crafted `.psmr/` store: pickles that create `marker` when loaded, and forged JSON
    (plain and with a made-up seal) claiming a function `pkg.mod.injected` that the source lacks."""
    write_tree(root, TREE)
    store = root / ".psmr"
    key = facts_key("pkg.mod", MOD)
    payload = pickle.dumps(RunsCommand(f"touch {marker}"))
    forged_facts = {
        "version": FACTS_VERSION,
        "module": "pkg.mod",
        "is_package": False,
        "lines": 2,
        "syntax_error": None,
        "defs": [{"qualname": "pkg.mod.injected", "kind": "function", "span": [1, 0, 2, 0]}],
    }
    forged = json.dumps(forged_facts).encode()
    (store / "facts").mkdir(parents=True)
    (store / "facts" / f"{key}.pickle").write_bytes(payload)
    (store / "facts" / f"{key}.json").write_bytes(
        b"psmr-sealed-1 " + b"0" * 64 + b" " + str(len(forged)).encode() + b"\n" + forged
    )
    ws_dir = store / "workspaces" / workspace_id(root, None)
    ws_dir.mkdir(parents=True)
    (ws_dir / "graph.pickle").write_bytes(payload)
    graph = json.dumps(
        {"schema": "psmr-graph-0.1", "nodes": [["semantic:pkg.mod.injected", {}]], "edges": []}
    )
    (ws_dir / "graph.json").write_text(graph)
    (ws_dir / "manifest.json").write_text(
        json.dumps(
            {
                "schema": "psmr-workspace-0.1",
                "workspace_id": ws_dir.name,
                "files": {"pkg/mod.py": {"key": key, "module": "pkg.mod", "sha256": "0"}},
                "graph_sha256": hashlib.sha256(payload).hexdigest(),
                "version": "0",
                "stats": {"files": 99},
            }
        )
    )
    return root


def cli_build(root: Path, *args: str, prefix: tuple[str, ...] = (), **env: str) -> dict[str, Any]:
    """`slotrelay psmr build ROOT --json` as a subprocess (a timeout turns a hang into a failure)."""
    done = subprocess.run(
        [*prefix, SLOTRELAY, "psmr", "build", str(root), "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def serve(root: Path) -> StdioServerParameters:
    """`slotrelay mcp serve --workspace ROOT` over stdio, with this checkout's code (PYTHONPATH)."""
    return StdioServerParameters(
        command=SLOTRELAY, args=["mcp", "serve", "--workspace", str(root)], cwd=root, env=dict(os.environ)
    )


def unknowns_by_artifact(summary: dict[str, Any], store: Path | None = None) -> dict[str, str]:
    ws = Store.open(store).load(summary["workspace_id"])
    return {u["artifact"]: u["reason"] for u in ws.unknowns.values()}


def test_a_shipped_pickle_or_json_store_runs_nothing_through_the_cli(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    root = hostile_tree(tmp_path / "tree", marker)
    shipped = {p: p.read_bytes() for p in (root / ".psmr").rglob("*") if p.is_file()}
    summary = cli_build(root)
    assert not marker.exists()
    assert summary["analysed"] == summary["files"] == 3 and summary["unknowns"] >= 0
    assert Path(summary["store"]) == Store.open().path and not Path(summary["store"]).is_relative_to(root)
    ws = Store.open().load(summary["workspace_id"])
    assert "semantic:pkg.mod.real" in ws.graph and "semantic:pkg.mod.injected" not in ws.graph
    assert ws.graph.has_edge("semantic:pkg.use", "semantic:pkg.mod.real")
    # The workspace's records are sealed JSON; the shipped store was neither read nor written.
    # (Only this workspace's: the session's store also holds records other tests damage on purpose.)
    folder = Store.open().path / "workspaces" / summary["workspace_id"]
    written = [p for p in folder.rglob("*") if p.is_file() and p.suffix == ".json"]
    assert written and all(p.read_bytes().startswith(b"psmr-sealed-1 ") for p in written)
    assert {p: p.read_bytes() for p in (root / ".psmr").rglob("*") if p.is_file()} == shipped
    assert not marker.exists()


@pytest.mark.anyio
async def test_a_shipped_pickle_or_json_store_runs_nothing_through_mcp(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    root = hostile_tree(tmp_path / "tree", marker)
    params = serve(root)
    async with Client(params) as client:
        described = await client.call_tool("psmr_workspace_describe", {})
        assert not described.is_error, described.content
        found = await client.call_tool("psmr_query_search", {"text": "injected", "kind": "symbol"})
        assert found.structured_content["data"]["matches"] == []
        rebuilt = await client.call_tool("psmr_workspace_build", {"path": str(root)})
        assert not rebuilt.is_error, rebuilt.content
        real = await client.call_tool("psmr_query_search", {"text": "real", "kind": "symbol"})
        assert "semantic:pkg.mod.real" in json.dumps(real.structured_content)
    assert not marker.exists()


def test_a_store_sealed_by_another_key_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    """Records of another user's store (a valid seal under a different key) are rebuilt."""
    root = write_tree(tmp_path / "tree", TREE)
    other = tmp_path / "other-home"
    shared = tmp_path / "shared-store"
    cli_build(root, "--store", str(shared), SLOTRELAY_STATE_HOME=str(other))
    facts = sorted((shared / "facts").iterdir())
    stamps = {p: p.stat().st_mtime_ns for p in facts}
    summary = cli_build(root, "--store", str(shared))
    assert summary["analysed"] == 3
    assert all(p.stat().st_mtime_ns != stamps[p] for p in facts)


@pytest.mark.timeout(180)
@pytest.mark.anyio
async def test_a_fifo_or_socket_py_file_is_skipped_without_hanging(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    os.mkfifo(root / "pkg" / "fifo.py")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "pkg" / "sock.py"))
        summary = cli_build(root)
        assert summary["files"] == 3
        assert "pkg/fifo.py is not a regular file (a FIFO); skipped" in summary["warnings"]
        assert "pkg/sock.py is not a regular file (a socket); skipped" in summary["warnings"]
        params = serve(root)
        async with Client(params) as client:
            built = await client.call_tool("psmr_workspace_build", {"path": str(root)})
            assert not built.is_error, built.content
            described = await client.call_tool("psmr_workspace_describe", {})
            assert not described.is_error, described.content


def test_a_100k_term_expression_is_a_nesting_too_deep_unknown(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {**TREE, "pkg/huge.py": "x = " + "+".join(["1"] * 100_000) + "\n"})
    summary = cli_build(root)
    assert unknowns_by_artifact(summary)["pkg/huge.py"] == "nesting_too_deep"


@pytest.mark.skipif(shutil.which("setpriv") is None and os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_file_is_an_unreadable_file_unknown(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {**TREE, "pkg/secret.py": "TOKEN = 1\n"})
    (root / "pkg" / "secret.py").chmod(0)
    # root reads any file: drop the capabilities that let it, for the build's process only.
    prefix = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search") if os.geteuid() == 0 else ()
    summary = cli_build(root, prefix=prefix)
    unknowns = unknowns_by_artifact(summary)
    assert unknowns["pkg/secret.py"] == "unreadable_file"
    ws = Store.open().load(summary["workspace_id"])
    assert "Permission denied" in next(
        u["detail"] for u in ws.unknowns.values() if u["artifact"] == "pkg/secret.py"
    )


def test_files_vanishing_or_turning_into_folders_during_builds(tmp_path: Path) -> None:
    files = {f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(40)}
    root = write_tree(tmp_path / "tree", {**TREE, **files})
    stop = threading.Event()

    def churn() -> None:
        # Delete a file, put a folder in its place, then the file again, over and over.
        while not stop.is_set():
            for rel, text in files.items():
                path = root / rel
                path.unlink(missing_ok=True)
                path.mkdir(exist_ok=True)
                path.rmdir()
                path.write_text(text)

    worker = threading.Thread(target=churn, daemon=True)
    worker.start()
    try:
        for _ in range(8):
            summary = build_workspace(root, store=tmp_path / "store")
            assert summary["files"] >= 3
    finally:
        stop.set()
        worker.join(timeout=30)


def test_a_symlink_out_of_the_root_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("SECRET = 'root:x:0:0:outside-the-tree'\n")
    root = write_tree(tmp_path / "tree", TREE)
    os.symlink("/etc/passwd", root / "pkg" / "passwd.py")
    os.symlink(outside / "secret.py", root / "pkg" / "secret.py")
    os.symlink("mod.py", root / "pkg" / "alias.py")
    summary = cli_build(root)
    assert "pkg/passwd.py is a symbolic link leading out of the analysed root; skipped" in summary["warnings"]
    assert "pkg/secret.py is a symbolic link leading out of the analysed root; skipped" in summary["warnings"]
    ws = Store.open().load(summary["workspace_id"])
    assert "semantic:pkg.alias.real" in ws.graph  # a link inside the root is a file of the tree
    stored = b"".join(p.read_bytes() for p in Store.open().path.rglob("*") if p.is_file())
    assert b"root:x:0:0" not in stored and b"root:x:0:0" not in json.dumps(summary).encode()


def test_a_file_above_the_size_limit_is_a_file_too_large_unknown(tmp_path: Path) -> None:
    big = "X = [\n" + "    1,\n" * 200_000 + "]\n"
    root = write_tree(tmp_path / "tree", {**TREE, "pkg/generated.py": big})
    summary = cli_build(root)
    assert len(big) > 1_000_000
    assert unknowns_by_artifact(summary)["pkg/generated.py"] == "file_too_large"
    small = cli_build(root, "--store", str(tmp_path / "s2"), **{MAX_FILE_BYTES_ENV: "20"})
    unknowns = unknowns_by_artifact(small, tmp_path / "s2")
    assert unknowns["pkg/mod.py"] == "file_too_large" and "pkg/__init__.py" not in unknowns
    done = subprocess.run(
        [SLOTRELAY, "psmr", "build", str(root)],
        capture_output=True,
        text=True,
        env={**os.environ, MAX_FILE_BYTES_ENV: "lots"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and f"{MAX_FILE_BYTES_ENV} must be a positive number of bytes" in done.stderr


def test_a_store_folder_link_in_the_tree_is_never_followed(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / ".psmr")
    summary = cli_build(root)
    assert summary["files"] == 3 and not Path(summary["store"]).is_relative_to(root)
    assert not any(elsewhere.iterdir())
    assert stat.S_ISLNK((root / ".psmr").lstat().st_mode)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
