"""The persistent workspace store: a folder in slotrelay's state folder that outlives any session.

    <store>/workspaces/<ws_id>/manifest.json   root, revision, files with content hashes, version, and
                                               the record of each module's part of the graph
    <store>/workspaces/<ws_id>/parts/<digest>.json
                                               one module's part of the graph (nodes, edges, evidence,
                                               unknowns, conflicts: `slotrelay.psmr.workspace.parts`), named
                                               by its content
    <store>/workspaces/<ws_id>/deltas/<delta_id>.json
                                               the workspace's deltas (`slotrelay.psmr.change.delta`)
    <store>/workspaces/<ws_id>/resolution.msgpack
                                               the workspace's last resolution, for a one-shot build to
                                               replay (`slotrelay.psmr.workspace.replay`), and beside it
                                               `resolution.lock`, held while it is written
    <store>/facts/<key>.msgpack                one file's fast-pass facts, keyed by content hash
    <store>/cache/<kind>/<key>.json            per-file caches (jedi inference, pyflakes findings,
                                               the passes' recorded disagreements)
    <store>/trees/<commit>/                    git worktrees of analysed revisions

The store is `<state>/psmr` (`default_store`; CONTRACTS.md#files-the-product-writes), never a folder
of the analysed tree, so a `.psmr/` a repository ships is never read. Every record is still data only
(JSON, and MessagePack for facts; never pickle: loading a record cannot run code), sealed with this
user's key (`slotrelay.psmr.workspace.sealed`) and checked on load: its seal, then its shape, types and format
version. A record that fails any check is discarded and rebuilt, never used: a facts record is
re-extracted from the file, a graph or manifest makes the build start over. Records are read and
written through `slotrelay.fsio` (no symlink followed inside the store, only regular files opened,
writes to a fresh temporary file that is flushed and renamed), so a crash never leaves a half-written
manifest or graph. Each graph part's seal is written into the manifest, so a manifest and a graph
from different builds do not pair. A build writes only the parts it has not stored before, then the
manifest, then removes the parts no manifest names any more; concurrent builds of one workspace leave
the last manifest written, and a load that finds its parts removed by a build that saved meanwhile
reads the new manifest.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import msgpack
import orjson

from slotrelay import fsio
from slotrelay.collector import collector_off
from slotrelay.psmr.analysis.facts_version import FACTS_VERSION
from slotrelay.psmr.errors import ValidationFailed, WorkspaceNotFound
from slotrelay.psmr.workspace import sealed
from slotrelay.psmr.workspace.parts import Assembly, Content, EdgeKey, ModulePart, Records, StoredPart

if TYPE_CHECKING:
    import networkx as nx

MANIFEST_SCHEMA = "psmr-workspace-0.4"
PART_NAME = re.compile(r"[0-9a-f]{32}\.json")
WORKSPACE_ID = re.compile(r"ws_[0-9a-f]+")
STORE_ENV = "PSMR_STORE"
# Loaded workspaces kept per process (a server answers many calls); the least recently used go first.
# Threads share it (the MCP server and the view answer calls in parallel): the lock guards the table,
# never a read of the store.
_LOADED: OrderedDict[tuple[str, str], Workspace] = OrderedDict()
_LOADED_LOCK = threading.Lock()
KEEP_LOADED = 8
# A load that finds a part gone reads the manifest again this often: a build saved meanwhile.
LOAD_ATTEMPTS = 3


@dataclass
class Workspace:
    """One analysed tree: its files, graph and the records beside it.

    The graph is its nodes (identity -> data) and edges ((source, target, relation) -> data) as the
    stored parts make them (`slotrelay.psmr.workspace.parts.merge`); `edges_from` and `edges_to` walk them.
    Read from the store, a workspace merges its parts' edges and parses their evidence, unknowns and
    conflicts on first use (`content`); `defined_nodes` needs neither.
    `graph` is the same graph as a networkx MultiDiGraph, built on first use, for the code that
    walks it with networkx's API: reading nodes and edges needs neither networkx nor that copy.
    """

    workspace_id: str
    root: str
    source_root: str
    rev: str | None
    commit: str | None
    version: str
    files: dict[str, dict[str, Any]]
    content: Content
    warnings: list[str] = field(default_factory=list)
    updated: str = ""

    @property
    def nodes(self) -> dict[str, dict[str, Any]]:
        """Every node of the graph by identity."""
        return _assembly_of(self.content).nodes

    @property
    def edges(self) -> dict[EdgeKey, dict[str, Any]]:
        """Every edge by (source, target, relation)."""
        return _assembly_of(self.content).edges

    @property
    def defined_nodes(self) -> dict[str, dict[str, Any]]:
        """The nodes the tree's modules define and the outside names they call (`Content.defined_nodes`):
        every node of a kind a search looks for, without merging the edges."""
        return self.content.defined_nodes()

    @property
    def evidence(self) -> dict[str, dict[str, Any]]:
        """Evidence records by id."""
        return _records_of(self.content)[0]

    @property
    def unknowns(self) -> dict[str, dict[str, Any]]:
        """What the analysis could not resolve, by id."""
        return _records_of(self.content)[1]

    @property
    def conflicts(self) -> dict[str, dict[str, Any]]:
        """The analysis' open conflicts, by id."""
        return _records_of(self.content)[2]

    def edges_from(self, node: str) -> list[EdgeKey]:
        """The edges leaving a node, in the order they were stored."""
        return self._adjacency[0].get(node, [])

    def edges_to(self, node: str) -> list[EdgeKey]:
        """The edges reaching a node, in the order they were stored."""
        return self._adjacency[1].get(node, [])

    @functools.cached_property
    def _adjacency(self) -> tuple[dict[str, list[EdgeKey]], dict[str, list[EdgeKey]]]:
        leaving: dict[str, list[EdgeKey]] = {}
        reaching: dict[str, list[EdgeKey]] = {}
        for key in self.edges:
            leaving.setdefault(key[0], []).append(key)
            reaching.setdefault(key[1], []).append(key)
        return leaving, reaching

    # node ids are str; [Any] because typeshed's NodeDataView, given to list() or sorted(), yields node ids
    # where it yields (id, data) pairs
    @functools.cached_property
    def graph(self) -> nx.MultiDiGraph[Any]:
        """The nodes and edges as a networkx MultiDiGraph (edges keyed by relation), made on first use."""
        import networkx as nx

        graph: nx.MultiDiGraph[Any] = nx.MultiDiGraph()
        graph.add_nodes_from(self.nodes.items())
        edges: list[Any] = [(u, v, k, data) for (u, v, k), data in self.edges.items()]
        graph.add_edges_from(edges)
        return graph


def _remember(key: tuple[str, str], workspace: Workspace) -> None:
    with _LOADED_LOCK:
        _LOADED[key] = workspace
        _LOADED.move_to_end(key)
        while len(_LOADED) > KEEP_LOADED:
            _LOADED.popitem(last=False)


def _cached(key: tuple[str, str], version: str) -> Workspace | None:
    with _LOADED_LOCK:
        cached = _LOADED.get(key)
        if cached is None or cached.version != version:
            return None
        _LOADED.move_to_end(key)
        return cached


def default_store() -> Path:
    """`PSMR_STORE`, else `psmr/` in slotrelay's state folder (`slotrelay.fsio.state_home`): one store
    for every workspace, whatever folder a command runs in."""
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return fsio.state_home() / "psmr"


class Store:
    """A store folder: workspaces, content-addressed facts, caches and revision trees."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def open(cls, store: str | Path | None = None) -> Store:
        """The store at `store`, or the default one (see `default_store`)."""
        if store is not None:
            return cls(Path(store).expanduser().resolve())
        return cls(default_store())

    def _parts_folder(self, workspace_id: str) -> Path:
        return self.path / "workspaces" / workspace_id / "parts"

    def read_record(self, name: str) -> tuple[bytes, str] | None:
        """A record's payload and seal, or None when it is missing, damaged or not sealed by this user.

        Parameters:
            name: the record's path inside the store (`workspaces/<ws_id>/manifest.json`).
        """
        return sealed.unseal(self.path, name)

    def write_record(self, name: str, payload: bytes) -> str:
        """Seal and write a record atomically; returns its seal.

        Raises:
            ValidationFailed: a folder on the way to it is a symbolic link or not a folder.
        """
        blob, mac = sealed.seal(name, payload)
        try:
            fsio.write_file(self.path, name, blob)
        except fsio.RefusedPath as exc:
            raise ValidationFailed(
                f"cannot write {self.path / name}: {exc.filename} is {exc.strerror}; remove it and rebuild"
            ) from exc
        return mac

    def record_names(self, folder: str) -> list[str]:
        """The names in a folder of the store, sorted; none when it is missing, a link or not a folder."""
        try:
            with fsio.open_dir(self.path, folder) as opened:
                return opened.names()
        except (OSError, ValueError):
            return []

    def list(self) -> list[dict[str, Any]]:
        """Summaries of the workspaces in this store, sorted by id."""
        out = []
        for name in self.record_names("workspaces"):
            try:
                manifest = self.manifest(name)
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
            ValidationFailed: the manifest is damaged, not sealed by this user or not a PSMR manifest.
        """
        name = f"workspaces/{workspace_id}/manifest.json"
        path = self.path / name
        if not WORKSPACE_ID.fullmatch(workspace_id) or not os.path.lexists(path):
            raise WorkspaceNotFound(
                f"no workspace {workspace_id} in the store {self.path}; run `slotrelay psmr build PATH` "
                "(or pass the store it was built in with --store / PSMR_STORE)"
            )
        record = self.read_record(name)
        manifest = _json(record[0]) if record else None
        if not _is_manifest(manifest, workspace_id):
            raise ValidationFailed(
                f"{path} is damaged, was not written by this user's slotrelay, or is not a "
                f"{MANIFEST_SCHEMA} manifest; rebuild with `slotrelay psmr build`"
            )
        return manifest

    @collector_off()
    def load(self, workspace_id: str) -> Workspace:
        """The workspace, from the in-process cache when its version is unchanged.

        Raises:
            WorkspaceNotFound: no such workspace.
            ValidationFailed: the manifest or graph is damaged, not sealed by this user, or does not
                match.
        """
        key = (str(self.path), workspace_id)
        for attempt in range(1, LOAD_ATTEMPTS + 1):
            manifest = self.manifest(workspace_id)
            cached = _cached(key, manifest["version"])
            if cached is not None:
                return cached
            try:
                parts = self._parts(workspace_id, manifest)
            except ValidationFailed:
                # A build that saved since the manifest was read removes the parts it no longer names.
                if attempt == LOAD_ATTEMPTS or self.manifest(workspace_id)["version"] == manifest["version"]:
                    raise
                continue
            workspace = _workspace(Content(stored=parts), manifest)
            _remember(key, workspace)
            return workspace
        raise AssertionError("unreachable")

    def _parts(self, workspace_id: str, manifest: dict[str, Any]) -> tuple[StoredPart, ...]:
        """The workspace's parts in the merge's order, their seals checked, their nodes parsed."""
        records = self._part_records(workspace_id, manifest)
        parts = []
        for module in sorted(manifest["parts"]):
            name, seal, _ = manifest["parts"][module]
            record = records.get(name)
            if record is None or record[1] != seal:
                raise ValidationFailed(
                    f"{self.path}/workspaces/{workspace_id}/parts/{name} (the graph of {module}) is missing, "
                    "damaged or does not match its manifest; rebuild with `slotrelay psmr build`"
                )
            part = StoredPart.read(record[0])
            if part is None:
                raise ValidationFailed(
                    f"{self.path}/workspaces/{workspace_id}/parts/{name} is not a part of a PSMR graph; "
                    "rebuild with `slotrelay psmr build`"
                )
            parts.append(part)
        return tuple(parts)

    def _part_records(self, workspace_id: str, manifest: dict[str, Any]) -> dict[str, tuple[bytes, str]]:
        """The part records the manifest names that read back sealed, by file name; the parts folder is
        opened (and checked) once, not once per part."""
        folder_name = f"workspaces/{workspace_id}/parts"
        try:
            folder = fsio.open_dir(self.path, folder_name)
        except (OSError, ValueError):
            return {}
        records = {}
        with folder:
            for name, _, _ in manifest["parts"].values():
                record = sealed.unseal_in(folder, name, f"{folder_name}/{name}")
                if record is not None:
                    records[name] = record
        return records

    def graph_intact(self, workspace_id: str, manifest: dict[str, Any] | None = None) -> bool:
        """True if the workspace's graph records are sealed by this user and match its manifest.

        A record whose size, modification time and inode are still those noted in the manifest when
        the manifest was written is that record (git trusts an unchanged stat the same way), so it is not read
        and hashed again; `load` checks its seal whenever it reads it.

        Parameters:
            workspace_id: the workspace.
            manifest: its manifest, when the caller has just read it.
        """
        if manifest is None:
            try:
                manifest = self.manifest(workspace_id)
            except (WorkspaceNotFound, ValidationFailed):
                return False
        folder = self._parts_folder(workspace_id)
        for name, seal, known in manifest["parts"].values():
            if known == _stat_of(folder / name):
                continue
            read = self.read_record(f"workspaces/{workspace_id}/parts/{name}")
            if read is None or read[1] != seal:
                return False
        return True

    def save(
        self,
        manifest: dict[str, Any],
        parts: dict[str, ModulePart],
        *,
        previous: dict[str, Any] | None = None,
        unchanged: Collection[str] = (),
    ) -> None:
        """Write a workspace's graph parts, then its manifest (last, so it never points at nothing), then
        remove the parts it no longer names.

        Parameters:
            manifest: the workspace's manifest fields (workspace_id, root, source_root, rev, commit,
                version, updated, files, warnings, stats); the schema and the parts' records are added.
            parts: each module's part of the graph. A part already stored (the same content) is not
                written again.
            previous: the records of every part of the last manifest: a part whose content is the
                one it names (its name is its content's digest) is kept as it is while its file is,
                without reading the file back to compare.
            unchanged: the modules whose parts the caller knows are unchanged since the last manifest:
                their records are kept as they are while their files are, without making the part's
                content.
        """
        started = time.time_ns()
        folder = f"workspaces/{manifest['workspace_id']}"
        records: dict[str, list[Any]] = {}
        parts_folder = self._parts_folder(manifest["workspace_id"])
        previous = previous or {}
        for module, part in parts.items():
            known = previous.get(module)
            if known is not None and module in unchanged and _stat_of(parts_folder / known[0]) == known[2]:
                records[module] = known
                continue
            payload = part.to_payload()
            name = hashlib.sha256(payload).hexdigest()[:32] + ".json"
            if (
                known is not None
                and known[0] == name
                and known[2] is not None
                and _stat_of(parts_folder / name) == known[2]
            ):
                records[module] = known
                continue
            record = f"{folder}/parts/{name}"
            found = self.read_record(record) if (parts_folder / name).exists() else None
            same = found is not None and found[0] == payload
            seal = found[1] if found is not None and same else self.write_record(record, payload)
            records[module] = [name, seal, _stat_of(self.path / record)]
        document = {"schema": MANIFEST_SCHEMA, **manifest, "parts": records}
        self.write_record(f"{folder}/manifest.json", orjson.dumps(document, option=orjson.OPT_INDENT_2))
        with _LOADED_LOCK:
            _LOADED.pop((str(self.path), manifest["workspace_id"]), None)
        self._remove_unnamed(manifest["workspace_id"], {name for name, _, _ in records.values()}, started)

    def _remove_unnamed(self, workspace_id: str, named: set[str], before: int) -> None:
        """Remove the workspace's parts its manifest does not name that were last changed before
        `before` (ns: a part another build of the workspace wrote meanwhile stays), and the whole-graph
        record of the store format before parts (`graph.json`)."""
        parts_folder = self._parts_folder(workspace_id)
        for path in parts_folder.iterdir() if parts_folder.is_dir() else ():
            info = _stat_of(path)
            if (
                path.name not in named
                and not path.name.startswith(".")
                and info is not None
                and info[1] < before
            ):
                path.unlink(missing_ok=True)
        former = parts_folder.parent / "graph.json"
        if _stat_of(former) is not None:
            former.unlink(missing_ok=True)

    def get_json(self, kind: str, key: str) -> Any:
        """A cached JSON document (jedi inference, pyflakes findings), or None."""
        record = self.read_record(f"{kind}/{key}.json")
        return _json(record[0]) if record else None

    def put_json(self, kind: str, key: str, value: Any) -> None:
        """Cache a JSON document under a content key."""
        self.write_record(f"{kind}/{key}.json", orjson.dumps(value))

    def json_keys(self, kind: str) -> set[str]:
        """The keys under which documents of a kind are cached."""
        return {path.stem for path in (self.path / kind).glob("*.json")}

    def get_facts(self, key: str) -> dict[str, Any] | None:
        """One file's cached facts by content key, or None (also when the record fails its checks)."""
        record = self.read_record(f"facts/{key}.msgpack")
        if record is None:
            return None
        try:
            facts = sealed.unpack_facts(record[0])
        except (ValueError, TypeError, msgpack.UnpackException):
            return None
        return facts if _is_facts(facts) else None

    def put_facts(self, key: str, facts: dict[str, Any]) -> None:
        """Cache one file's facts under its content key (their refs read back as tuples).

        Facts MessagePack cannot hold (an integer past 64 bits, refs nested past its depth limit)
        are not cached: the file is extracted again by the next build.
        """
        try:
            payload = sealed.pack_facts(facts)
        except (TypeError, ValueError, OverflowError):
            return
        self.write_record(f"facts/{key}.msgpack", payload)

    def tree_dir(self, commit: str) -> Path:
        """Where a revision's worktree lives in this store."""
        return self.path / "trees" / commit


def _stat_of(path: Path) -> list[int] | None:
    """A record's size, modification time (ns) and inode, or None when it is not a regular file."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ino] if stat.S_ISREG(info.st_mode) else None


def _json(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None


def _is_manifest(manifest: Any, workspace_id: str) -> TypeGuard[dict[str, Any]]:
    return (
        isinstance(manifest, dict)
        and manifest.get("schema") == MANIFEST_SCHEMA
        and manifest.get("workspace_id") == workspace_id
        and all(isinstance(manifest.get(name), str) for name in ("root", "source_root", "version", "updated"))
        and all(isinstance(manifest.get(name), str | None) for name in ("rev", "commit"))
        and isinstance(manifest.get("parts"), dict)
        and all(
            type(record) is list
            and len(record) == 3
            and type(record[0]) is str
            and PART_NAME.fullmatch(record[0]) is not None
            and type(record[1]) is str
            for record in manifest["parts"].values()
        )
        and isinstance(manifest.get("warnings"), list)
        and all(isinstance(w, str) for w in manifest["warnings"])
        and isinstance(manifest.get("files"), dict)
        and all(
            isinstance(entry, dict)
            and isinstance(entry.get("key"), str)
            and isinstance(entry.get("module"), str)
            for entry in manifest["files"].values()
        )
        and isinstance(manifest.get("stats"), dict | None)
    )


def _is_span(span: Any) -> bool:
    return isinstance(span, list) and len(span) == 4 and all(type(n) is int for n in span)


def _is_facts(facts: Any) -> bool:
    """The shape the build relies on before it hands facts to the resolver."""
    if not (
        isinstance(facts, dict)
        and facts.get("version") == FACTS_VERSION
        and isinstance(facts.get("module"), str)
        and type(facts.get("is_package")) is bool
        and type(facts.get("lines")) is int
    ):
        return False
    error = facts.get("syntax_error")
    return error is None or (
        isinstance(error, dict) and isinstance(error.get("message"), str) and _is_span(error.get("span"))
    )


@collector_off()
def _assembly_of(content: Content) -> Assembly:
    """The merged graph, merged (on first use) as a load would: without the cyclic collector."""
    return content.assembly()


@collector_off()
def _records_of(content: Content) -> Records:
    """The records, parsed (on first use) as a load would: without the cyclic collector."""
    return content.records()


def _workspace(content: Content, manifest: dict[str, Any]) -> Workspace:
    """The workspace a manifest and its graph parts make."""
    return Workspace(
        workspace_id=manifest["workspace_id"],
        root=manifest["root"],
        source_root=manifest["source_root"],
        rev=manifest["rev"],
        commit=manifest["commit"],
        version=manifest["version"],
        files=manifest["files"],
        content=content,
        warnings=manifest["warnings"],
        updated=manifest["updated"],
    )
