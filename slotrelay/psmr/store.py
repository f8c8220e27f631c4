"""The persistent workspace store: a folder (`.psmr/` by default) that outlives any session.

    <store>/workspaces/<ws_id>/manifest.json   root, revision, files with content hashes, version
    <store>/workspaces/<ws_id>/graph.pickle    the assembled graph, evidence, unknowns, conflicts
    <store>/facts/<key>.pickle                 one file's fast-pass facts, keyed by content hash
    <store>/cache/<kind>/<key>.json            per-file caches (jedi inference, pyflakes findings,
                                               the passes' recorded disagreements)
    <store>/trees/<commit>/                    git worktrees of analysed revisions

Invariants: every file is written to a temporary name, flushed and renamed, so a crash never leaves a
half-written manifest or graph; pickles (graph, facts) are only ever read from a store this runtime
wrote, and the graph's digest must match its manifest before it is trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from slotrelay.psmr.errors import ValidationFailed, WorkspaceNotFound

MANIFEST_SCHEMA = "psmr-workspace-0.1"
# Loaded workspaces kept per process (a server answers many calls); the least recently used go first.
_LOADED: OrderedDict[tuple[str, str], Workspace] = OrderedDict()
KEEP_LOADED = 8


@dataclass
class Workspace:
    """One analysed tree: its files, graph and the records beside it."""

    workspace_id: str
    root: str
    source_root: str
    rev: str | None
    commit: str | None
    version: str
    files: dict[str, dict[str, Any]]
    graph: nx.MultiDiGraph
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    unknowns: dict[str, dict[str, Any]] = field(default_factory=dict)
    conflicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    updated: str = ""


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def _remember(key: tuple[str, str], workspace: Workspace) -> None:
    _LOADED[key] = workspace
    _LOADED.move_to_end(key)
    while len(_LOADED) > KEEP_LOADED:
        _LOADED.popitem(last=False)


def default_store(root: Path | None = None) -> Path:
    """`PSMR_STORE`, else `.psmr/` under `root`, else under the current folder's git root or itself."""
    env = os.environ.get("PSMR_STORE")
    if env:
        return Path(env).expanduser().resolve()
    if root is not None:
        return root.resolve() / ".psmr"
    cwd = Path.cwd()
    done = subprocess.run(
        ["git", "-C", str(cwd), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
    )
    top = Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else cwd
    return top.resolve() / ".psmr"


class Store:
    """A store folder: workspaces, content-addressed facts, caches and revision trees."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def open(cls, store: str | Path | None = None, *, root: Path | None = None) -> Store:
        """The store at `store`, or the default one (see `default_store`)."""
        return cls(Path(store).expanduser().resolve() if store is not None else default_store(root))

    def _ws_dir(self, workspace_id: str) -> Path:
        return self.path / "workspaces" / workspace_id

    def list(self) -> list[dict[str, Any]]:
        """Summaries of the workspaces in this store, sorted by id."""
        out = []
        base = self.path / "workspaces"
        for folder in sorted(base.iterdir()) if base.is_dir() else []:
            try:
                manifest = self.manifest(folder.name)
            except (WorkspaceNotFound, ValidationFailed):
                continue
            out.append(
                {k: manifest.get(k) for k in ("workspace_id", "root", "rev", "commit", "version", "updated")}
                | {"files": len(manifest["files"])}
            )
        return out

    def manifest(self, workspace_id: str) -> dict[str, Any]:
        """The manifest of a workspace.

        Raises:
            WorkspaceNotFound: no such workspace in this store.
            ValidationFailed: the manifest is unreadable or not a PSMR manifest.
        """
        path = self._ws_dir(workspace_id) / "manifest.json"
        if not path.is_file():
            raise WorkspaceNotFound(
                f"no workspace {workspace_id} in the store {self.path}; run `slotrelay psmr build PATH` "
                "(or pass the store it was built in with --store / PSMR_STORE)"
            )
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValidationFailed(
                f"{path} is not valid JSON ({exc}); rebuild with `slotrelay psmr build`"
            ) from exc
        if (
            not isinstance(manifest, dict)
            or manifest.get("schema") != MANIFEST_SCHEMA
            or not isinstance(manifest.get("files"), dict)
        ):
            raise ValidationFailed(
                f"{path} is not a {MANIFEST_SCHEMA} manifest; rebuild with `slotrelay psmr build`"
            )
        return manifest

    def load(self, workspace_id: str) -> Workspace:
        """The workspace, from the in-process cache when its version is unchanged.

        Raises:
            WorkspaceNotFound: no such workspace.
            ValidationFailed: the manifest or graph is damaged or does not match.
        """
        manifest = self.manifest(workspace_id)
        key = (str(self.path), workspace_id)
        cached = _LOADED.get(key)
        if cached is not None and cached.version == manifest["version"]:
            _LOADED.move_to_end(key)
            return cached
        path = self._ws_dir(workspace_id) / "graph.pickle"
        try:
            blob = path.read_bytes()
        except OSError as exc:
            raise ValidationFailed(f"{path} is missing; rebuild with `slotrelay psmr build`") from exc
        if hashlib.sha256(blob).hexdigest() != manifest.get("graph_sha256"):
            raise ValidationFailed(f"{path} does not match its manifest; rebuild with `slotrelay psmr build`")
        workspace: Workspace = pickle.loads(blob)  # the digest above proves this runtime wrote it
        _remember(key, workspace)
        return workspace

    def graph_intact(self, workspace_id: str) -> bool:
        """True if the workspace's graph file exists and matches its manifest's digest."""
        try:
            manifest = self.manifest(workspace_id)
            blob = (self._ws_dir(workspace_id) / "graph.pickle").read_bytes()
        except (OSError, WorkspaceNotFound, ValidationFailed):
            return False
        return hashlib.sha256(blob).hexdigest() == manifest.get("graph_sha256")

    def save(self, workspace: Workspace, *, stats: dict[str, Any]) -> None:
        """Write a workspace's graph, then its manifest (the manifest last, so it never points at nothing)."""
        folder = self._ws_dir(workspace.workspace_id)
        blob = pickle.dumps(workspace, protocol=pickle.HIGHEST_PROTOCOL)
        _atomic_write(folder / "graph.pickle", blob)
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "workspace_id": workspace.workspace_id,
            "root": workspace.root,
            "source_root": workspace.source_root,
            "rev": workspace.rev,
            "commit": workspace.commit,
            "version": workspace.version,
            "updated": workspace.updated,
            "files": workspace.files,
            "graph_sha256": hashlib.sha256(blob).hexdigest(),
            "stats": stats,
        }
        _atomic_write(folder / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True).encode())
        _remember((str(self.path), workspace.workspace_id), workspace)

    def get_json(self, kind: str, key: str) -> Any:
        """A cached JSON document (jedi inference, pyflakes findings), or None."""
        path = self.path / kind / f"{key}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def put_json(self, kind: str, key: str, value: Any) -> None:
        """Cache a JSON document under a content key."""
        _atomic_write(self.path / kind / f"{key}.json", json.dumps(value, separators=(",", ":")).encode())

    def json_keys(self, kind: str) -> set[str]:
        """The keys under which documents of a kind are cached."""
        return {path.stem for path in (self.path / kind).glob("*.json")}

    def get_facts(self, key: str) -> dict[str, Any] | None:
        """One file's cached facts by content key, or None."""
        try:
            return pickle.loads((self.path / "facts" / f"{key}.pickle").read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError):
            return None

    def put_facts(self, key: str, facts: dict[str, Any]) -> None:
        """Cache one file's facts under its content key (pickled: the refs stay tuples)."""
        _atomic_write(
            self.path / "facts" / f"{key}.pickle", pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL)
        )

    def tree_dir(self, commit: str) -> Path:
        """Where a revision's worktree lives in this store."""
        return self.path / "trees" / commit
