"""`slotrelay psmr build PATH --watch`: a real watcher process keeps a workspace equal to a full rebuild.

The watcher is started on a tree whose workspace is already stored (so its first build has nothing to
update and must still resolve, for its updates to replay), then the tree is edited as a person or an
agent does, and each edit's summary line (`--json`: JSON Lines on stdout) is read as it comes. At the
end the watcher is stopped with SIGINT and its store must hold what a build from scratch makes.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import build_workspace
from slotrelay.psmr.workspace.build import build
from slotrelay.psmr.workspace.kept import KeptResolutions
from slotrelay.psmr.workspace.store import Store, Workspace
from slotrelay.psmr.workspace.watch import TreeWatcher
from tests.support.psmr_trees import SHAPES, write_tree

# Updates wait for the tree to be quiet; on a loaded machine a build may take long, never this long.
WAIT_S = 120

UTIL = "def h{i}(x):\n    return len(str(x))\n\n\ndef k{i}():\n    return h{i}(1) + h{i}(2)\n"
TREE = SHAPES | {
    # Enough unrelated modules that an edit reaches a small share of the call sites (see
    # `slotrelay.psmr.analysis.relink.MAX_AGAIN_SHARE`): it is replayed, not resolved again in full.
    f"app/util{i}.py": UTIL.format(i=i)
    for i in range(60)
}


class Watcher:
    """A `slotrelay psmr build --watch --json` process, the summaries it prints, and its log."""

    def __init__(self, root: Path, store: Path, log: Path) -> None:
        self.log = log
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "slotrelay.cli", "psmr", "build", str(root), "--watch", "--json"],
                env={**os.environ, "PSMR_STORE": str(store)},
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def next_summary(self) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError(
                f"no build within {WAIT_S} s; the watcher's stderr:\n{self.log.read_text()}"
            ) from None
        summary: dict[str, Any] = json.loads(line)
        return summary

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.reader.join()
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture
def watcher(tmp_path: Path) -> Iterator[tuple[Watcher, Path, Path]]:
    root = write_tree(tmp_path / "tree", TREE)
    store = tmp_path / "store"
    build_workspace(root, store=store)
    watch = Watcher(root, store, tmp_path / "watch.log")
    yield watch, root, store
    watch.close()


def _pass_a_square(root: Path) -> None:
    """Argument flow: `describe` now also receives a Square, so `shape.area()` reaches Square.area."""
    with (root / "app/main.py").open("a") as main:
        main.write(
            "\n\ndef run_square():\n    from app.shapes import Square\n\n    return describe(Square())\n"
        )


def _workspace(store: Path, workspace_id: str) -> tuple[list, list, Any, Any]:
    ws: Workspace = Store.open(store).load(workspace_id)
    return (
        list(ws.graph.nodes(data=True)),
        list(ws.graph.edges(keys=True, data=True)),
        ws.unknowns,
        ws.conflicts,
    )


def test_a_watcher_replays_each_change_and_its_store_equals_a_full_rebuild(
    watcher: tuple[Watcher, Path, Path], tmp_path: Path
) -> None:
    watch, root, store = watcher
    start = watch.next_summary()
    # Nothing changed since the stored build, yet the watcher resolved it: its updates replay that.
    assert start["analysed"] == 0 and start["resolved_sites"] > 0, start
    everything = start["resolved_sites"]

    _pass_a_square(root)
    update = watch.next_summary()
    assert update["analysed"] == 1, update
    assert 0 < update["resolved_sites"] < everything, update
    assert update["assembled_modules"] < update["files"], update
    ws = Store.open(store).load(update["workspace_id"])
    assert ws.graph.has_edge("semantic:app.report.describe", "semantic:app.shapes.Square.area")

    # Files no build reads, written just before a source edit: the next update is the edit alone. That
    # the watcher starts no update for them is its decision (is_source: the test after this one).
    (root / "NOTES.txt").write_text("not source")
    (root / ".cache").mkdir()
    (root / ".cache" / "hidden.py").write_text("def hidden():\n    pass\n")
    (root / "app/util3.py").write_text("def h3(x):\n    return x\n")
    update = watch.next_summary()
    assert (update["analysed"], update["removed"]) == (1, 0), update

    # A file that does not parse is an unknown, and the watcher goes on.
    (root / "app/broken.py").write_text("def broken(:\n")
    update = watch.next_summary()
    assert update["unknowns"] > start["unknowns"], update

    # A burst (a formatter, a checkout): removed and added files, as one update or a few.
    (root / "app/util5.py").unlink()
    (root / "app/broken.py").write_text("from app.util4 import k4\n\n\ndef fixed():\n    return k4()\n")
    (root / "app/fresh.py").write_text("from app.main import run\n\n\ndef again():\n    return run()\n")
    removed = 0
    while True:
        update = watch.next_summary()
        removed += update["removed"]
        if update["files"] == len(TREE) + 1 and removed == 1 and update["unknowns"] == start["unknowns"]:
            break

    watch.process.send_signal(signal.SIGINT)
    assert watch.process.wait(timeout=WAIT_S) == 0
    full = build_workspace(root, store=tmp_path / "full")
    assert _workspace(store, update["workspace_id"]) == _workspace(tmp_path / "full", full["workspace_id"])


def test_a_watcher_ignores_what_a_build_does_not_read(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n"})
    watcher = TreeWatcher(root, store=root / ".psmr", on_build=print, on_failure=print)
    read = [root / "pkg" / "mod.py", root / "top.py"]
    not_read = [
        root / "README.md",
        root / ".psmr" / "workspaces" / "x.py",
        root / ".git" / "hooks.py",
        root / "pkg" / "__pycache__" / "mod.py",
        root / "build" / "lib" / "mod.py",
        tmp_path / "elsewhere.py",
    ]
    assert all(watcher.is_source(path, folder=False) for path in read)
    assert not any(watcher.is_source(path, folder=False) for path in not_read)
    # A folder moved or removed takes its modules with it; a hidden one or a cache has none.
    assert watcher.is_source(root / "pkg", folder=True)
    assert not watcher.is_source(root / ".venv", folder=True)
    assert not watcher.is_source(root / "pkg" / "__pycache__", folder=True)


def test_a_kept_resolution_is_replayed_after_another_process_saved_the_workspace(tmp_path: Path) -> None:
    # A watcher and an MCP server on one workspace: each keeps its own resolution, and each saves the
    # store the other then finds ahead of what it keeps. Each process is its own KeptResolutions.
    root = write_tree(tmp_path / "tree", TREE)
    store = tmp_path / "store"
    mine, other_process = KeptResolutions(), KeptResolutions()
    everything = build(root, store=store, kept=mine)["resolved_sites"]
    (root / "app/util1.py").write_text("def h1(x):\n    return len(str(x)) + len(x)\n")
    assert build(root, store=store, kept=other_process)["analysed"] == 1
    # The store holds the edit; a warm build brings this process's resolution up to it, replayed.
    caught_up = build(root, store=store, warm=True, kept=mine)
    assert caught_up["analysed"] == 0 and 0 < caught_up["resolved_sites"] < everything, caught_up
    assert build(root, store=store, warm=True, kept=mine)["resolved_sites"] == 0
    # Ahead again, and this time this process's next update takes it and another edit at once.
    (root / "app/util2.py").write_text("def h2(x):\n    return x\n")
    build(root, store=store, kept=other_process)
    _pass_a_square(root)
    update = build(root, store=store, kept=mine)
    assert update["analysed"] == 1 and 0 < update["resolved_sites"] < everything, update
    full = build_workspace(root, store=tmp_path / "full")
    assert _workspace(store, update["workspace_id"]) == _workspace(tmp_path / "full", full["workspace_id"])
    assert sorted(
        p.name for p in (store / "workspaces" / full["workspace_id"] / "parts").iterdir()
    ) == sorted(p.name for p in (tmp_path / "full" / "workspaces" / full["workspace_id"] / "parts").iterdir())
