"""Build or update a workspace: discover files, reuse facts by content hash, resolve, assemble, store.

A revision is analysed from its own tree, a detached git worktree kept in the store, so the user's
checkout is never touched. An update re-parses only files whose content hash changed. Resolution is
whole-program (arguments flow from callers into callees in files that never import the caller), and
its answers do not depend on the order of its questions (see `link`). A build given the
resolutions its process keeps (`kept`, a `KeptResolutions`: the MCP server's registry and a watcher
each own one) resolves an update by replaying the last one where the edit reaches (`relink`);
otherwise, or when the edit reaches too far, it resolves the whole tree again from the cached facts.
Such a build also reuses each module's part of the graph and assembles again only the parts whose
module's facts or share of the resolution changed; the store writes only parts it has not stored
before. Either way an updated workspace equals a full rebuild.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from slotrelay import fsio
from slotrelay.collector import collector_off
from slotrelay.psmr.analysis.facts_version import FACTS_VERSION
from slotrelay.psmr.errors import ExecutionFailed, InvalidQuery, PsmrError
from slotrelay.psmr.workspace.kept import KeptResolutions, Resolved
from slotrelay.psmr.workspace.store import Store

if TYPE_CHECKING:
    from slotrelay.psmr.analysis.buildbudget import BuildBudget
    from slotrelay.psmr.analysis.link import Linker, LinkResult
    from slotrelay.psmr.analysis.record import ResolutionRecord
    from slotrelay.psmr.workspace.graph import Assembled
    from slotrelay.psmr.workspace.replay import WriteLock

log = logging.getLogger(__name__)

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})
# Generated files past this size cost seconds and gigabytes to analyse (5 MB: 27 s, 1.6 GB) and are
# rarely what a question is about; they become a `file_too_large` unknown instead.
MAX_FILE_BYTES = 1_000_000
MAX_FILE_BYTES_ENV = "PSMR_MAX_FILE_BYTES"


# One build of a tree (and revision) in a store at a time in this process, whatever thread asks:
# a second waits and then finds the first's work stored. Builds of other trees and every read go on.
_BUILDING: dict[tuple[str, str, str | None], threading.Lock] = {}
_BUILDING_GUARD = threading.Lock()


def discover(root: Path) -> list[Path]:
    """The `.py` names under root, sorted; hidden folders, virtualenvs and caches are skipped.

    Folders are walked without following symlinks; a name may still be a symlink or not a regular
    file (`read_source` decides what is read).
    """
    found = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in SKIP_DIRS and not (here / d / "pyvenv.cfg").exists()
        )
        found += [here / f for f in files if f.endswith(".py")]
    return sorted(found)


def module_name(root: Path, path: Path) -> tuple[str, bool]:
    """The dotted module of a file relative to root (a root that is a package keeps its own name;
    in the src layout, `src/` is not part of the name)."""
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if (root / "__init__.py").exists():
        parts.insert(0, root.name)
    elif len(parts) > 1 and parts[0] == "src" and not (root / "src" / "__init__.py").exists():
        # The src layout: `src/pkg/mod.py` is imported as `pkg.mod`.
        parts = parts[1:]
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts) or root.name, is_package


class NotSource(Exception):
    """A `.py` name that is not part of the tree's source: a symlink leading out of the root, or
    not a regular file (a FIFO, socket, device, or a folder that replaced the file)."""


class Unanalysable(Exception):
    """A source file the build cannot or will not read; it becomes an unknown with `reason`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def read_source(root: Path, path: Path, *, limit: int) -> bytes:
    """The bytes of one source file, read only if it is a regular file inside root.

    Every folder from root down is opened without following a link, and so is the file, without
    blocking (`slotrelay.fsio.read_file`): a file swapped for a FIFO or a link, or a folder swapped
    for a link, after `discover` saw it is refused, not read. A file that is itself a symlink to a
    file inside root is that file.

    Parameters:
        root: the analysed root (resolved).
        path: a file under it, from `discover` (or `root / artifact`).
        limit: the largest file read, in bytes.

    Returns:
        The file's bytes.

    Raises:
        NotSource: a symlink leading out of root, or not a regular file.
        Unanalysable: `unreadable_file` (permissions, vanished during the build) or `file_too_large`.
    """
    try:
        return fsio.read_file(root, path.relative_to(root), limit=limit, links_inside=True)
    except fsio.LinkRefused as exc:
        raise NotSource("a symbolic link leading out of the analysed root") from exc
    except fsio.NotRegular as exc:
        raise NotSource(f"not a regular file ({exc.kind})") from exc
    except fsio.FileTooLarge as exc:
        raise Unanalysable("file_too_large", f"more than {limit} bytes, the limit") from exc
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise Unanalysable("unreadable_file", f"cannot be read: {reason}") from exc


def read_artifact(root: str | Path, artifact: str) -> bytes:
    """One file of a workspace read again after the build, as the build read it (`read_source`, with
    the size limit in force): what propose, apply's hash check, the human view and the other
    operators read of the tree.

    Raises:
        NotSource, Unanalysable: as `read_source`.
    """
    base = Path(root)
    return read_source(base, base / artifact, limit=file_size_limit(None))


def artifact_text(root: str | Path, artifact: str) -> str | None:
    """`read_artifact` as text (UTF-8, undecodable bytes replaced), or None when it cannot be read."""
    try:
        return _as_text(read_artifact(root, artifact))
    except (NotSource, Unanalysable):
        return None


def _as_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def unanalysed_facts(module: str, is_package: bool, reason: str, detail: str) -> dict[str, Any]:
    """The facts of a file that was not analysed: a module with one unknown, like a syntax error."""
    return {
        "version": FACTS_VERSION,
        "module": module,
        "is_package": is_package,
        "lines": 1,
        "syntax_error": {"message": detail, "span": [1, 0, 1, 0], "reason": reason},
    }


def file_size_limit(max_file_bytes: int | None) -> int:
    """The per-file size limit: the argument, else `PSMR_MAX_FILE_BYTES`, else `MAX_FILE_BYTES`.

    Raises:
        InvalidQuery: the limit is not a positive whole number of bytes.
    """
    if max_file_bytes is not None:
        value: Any = max_file_bytes
        source = "max_file_bytes"
    else:
        value = os.environ.get(MAX_FILE_BYTES_ENV, str(MAX_FILE_BYTES))
        source = MAX_FILE_BYTES_ENV
        value = int(value) if value.strip().isdecimal() else value
    if type(value) is not int or value <= 0:
        raise InvalidQuery(f"{source} must be a positive number of bytes, got {value!r}")
    return value


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ExecutionFailed(
            f"git {' '.join(args)} failed in {root}: {done.stderr.strip()}; check that the "
            "folder is a git checkout and the revision exists (`git log`)"
        )
    return done.stdout.strip()


def revision_tree(root: Path, rev: str, store: Store) -> tuple[Path, str]:
    """The folder holding `rev`'s version of root (a detached worktree in the store) and its commit."""
    commit = _git(root, "rev-parse", "--verify", f"{rev}^{{commit}}")
    top = Path(_git(root, "rev-parse", "--show-toplevel")).resolve()
    tree = store.tree_dir(commit)
    if not (tree / ".git").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        _git(top, "worktree", "add", "--detach", "--force", str(tree), commit)
    return tree / root.resolve().relative_to(top), commit


def workspace_id(root: Path, commit: str | None) -> str:
    """The id of the workspace of a root (and revision): stable across rebuilds."""
    return "ws_" + hashlib.sha1(f"{root.resolve()}@{commit or 'worktree'}".encode()).hexdigest()[:12]


@collector_off()
def build(
    path: str | Path,
    *,
    rev: str | None = None,
    store: str | Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    max_file_bytes: int | None = None,
    warm: bool = False,
    budget: BuildBudget | None = None,
    kept: KeptResolutions | None = None,
    persist: bool = False,
    later: Callable[[Callable[[], None]], None] | None = None,
) -> dict[str, Any]:
    """Build or update the workspace of `path` (see `slotrelay.psmr.api.build_workspace`).

    `max_file_bytes` overrides the per-file size limit (see `file_size_limit`). `kept`: the
    resolutions the calling process keeps (see `slotrelay.psmr.workspace.kept`); the build replays the
    workspace's last one, and keeps its own there for the next update. `warm` resolves a workspace
    the store holds unchanged too, when `kept` holds none of this version of it, so that its next
    update is replayed (a watcher starting on a stored workspace, or after another process saved the
    change it saw: `slotrelay.psmr.workspace.watch`). A file
    that cannot be analysed never stops the build: it is skipped with a warning (not source, see
    `NotSource`) or becomes a module with an unknown (see `Unanalysable`). `budget` bounds what
    resolving costs (default: `BuildBudget()`); past it, the call sites left are the unknown
    `budget_exceeded` (see `slotrelay.psmr.analysis.buildbudget`), and the summary's `budget_exceeded` names
    the limit passed.

    A build given no `kept` replays the resolution the store keeps of the workspace, when it has one
    of the stored version (`slotrelay.psmr.workspace.replay`: a one-shot build in a new process).
    `persist` keeps this build's resolution there for the next one, once the store held a build of
    the workspace (a tree being iterated on; the first build does not pay for the records a replay
    needs). `later`: given the write of that record instead of running it, for a caller that runs it
    after it has answered (the CLI, in a child process).
    """
    key = (str(Store.open(store).path), str(Path(path).expanduser().resolve()), rev)
    with _BUILDING_GUARD:
        lock = _BUILDING.setdefault(key, threading.Lock())
    with lock:
        return _build(
            path, rev=rev, store=store, progress=progress, max_file_bytes=max_file_bytes, warm=warm,
            budget=budget, kept=kept, persist=persist, later=later,
        )


def _build(
    path: str | Path,
    *,
    rev: str | None,
    store: str | Path | None,
    progress: Callable[[int, int, str], None] | None,
    max_file_bytes: int | None,
    warm: bool,
    budget: BuildBudget | None,
    kept: KeptResolutions | None,
    persist: bool = False,
    later: Callable[[Callable[[], None]], None] | None = None,
) -> dict[str, Any]:
    """The phases of a build: discover, facts, resolve, assemble, save."""
    started = time.perf_counter()
    tree = _discovered(path, rev=rev, store=store, limit=file_size_limit(max_file_bytes))
    kept_key = (str(tree.store.path), tree.workspace_id)
    held = kept.get(kept_key) if kept is not None else None
    # Warm: resolve an unchanged workspace too when the resolution kept is not of this version of it.
    cold = warm and kept is not None and (held is None or held.version != tree.version)
    if not cold and tree.unchanged:
        return _unchanged(tree, started, progress)
    last = kept.take(kept_key) if kept is not None else None
    if kept is None:
        # The stored record is read and its seal checked (I/O and hashing, which let go of the
        # interpreter lock: 0.3-0.4 s on networkx) while this thread reads the facts.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="psmr-replay") as pool:
            stored = pool.submit(_stored_record, tree)
            facts = _facts(tree, last, progress)
            last = _stored_resolution(tree, facts, stored.result())
    else:
        facts = _facts(tree, last, progress)
    # A one-shot build records what a replay needs only for a workspace the store already holds.
    persisting = kept is None and persist and bool(tree.manifest.get("version"))
    resolution = _resolution(tree, facts, last, budget, keep=kept is not None or persisting)
    assembled = _assembled(tree, facts, resolution, last)
    if kept is not None and not resolution.exceeded:
        kept.put(kept_key, Resolved(tree.version, facts.keys, resolution.record, assembled))
    # A kept resolution may be of another version than the stored one (another process saved the
    # workspace since): it is replayed all the same (what changed is found by content key), but its
    # parts are not the manifest's, so the save then checks every part against the store.
    in_step = last is not None and last.version == tree.manifest.get("version")
    summary = _saved(tree, resolution, assembled, in_step=in_step, started=started)
    if persisting and resolution.record is not None:
        from slotrelay.psmr.workspace.replay import WriteLock

        write = functools.partial(
            _store_resolution,
            tree,
            Resolved(tree.version, facts.keys, resolution.record, None),
            WriteLock(tree.store.path, tree.workspace_id),
        )
        if later is not None:
            # The record shares the linker's memo: the linker is not closed (its process ends).
            later(write)
            return summary
        write()
    if kept is None:
        resolution.linker.close()
    return summary


def _stored_record(tree: _Tree) -> tuple[bytes, str] | None:
    """The record of the resolution the store keeps of the workspace, read and its seal checked; None
    when there is none, or it is damaged or not sealed by this user (the log says so)."""
    from slotrelay.psmr.workspace import replay

    name = replay.record_name(tree.workspace_id)
    if not tree.manifest.get("version"):
        return None
    # The command that saved the workspace may still be writing its resolution (in its child).
    replay.wait_for_writer(tree.store.path, tree.workspace_id)
    if not os.path.lexists(tree.store.path / name):
        return None
    record = tree.store.read_record(name)
    if record is None:
        log.warning(
            "the stored resolution %s is damaged or not sealed by this user: not replayed, resolving in full",
            tree.store.path / name,
        )
    return record


def _stored_resolution(tree: _Tree, facts: _Facts, record: tuple[bytes, str] | None) -> Resolved | None:
    """The resolution the store keeps of the workspace (`slotrelay.psmr.workspace.replay`), from its
    record (`_stored_record`), when it is the stored version's and reads back whole; else None, and
    the log says why."""
    from slotrelay.psmr.workspace import replay

    if record is None:
        return None
    name = replay.record_name(tree.workspace_id)
    try:
        return replay.load(record[0], tree.manifest, facts.facts, facts.keys, tree.store.get_facts)
    except replay.Refused as exc:
        log.info("the stored resolution %s is not replayed: %s", tree.store.path / name, exc)
        return None


@collector_off()
def _store_resolution(tree: _Tree, resolved: Resolved, lock: WriteLock) -> None:
    """Keep a resolution in the store for the next one-shot build of the workspace (then let the
    next build read it: `lock`)."""
    from slotrelay.psmr.workspace import replay

    try:
        tree.store.write_record(replay.record_name(tree.workspace_id), replay.dump(resolved))
    finally:
        lock.release()


@dataclass
class _Tree:
    """What discovering a tree found: where it is, the workspace it makes, the stored manifest, and
    its files. `entries` has a content key per file read; `unanalysed` the facts of the files without
    content to hash (unreadable, too large), apart from `entries`, whose every file has content (the
    queries read them back)."""

    root: Path
    source: Path
    rev: str | None
    commit: str | None
    store: Store
    workspace_id: str
    manifest: dict[str, Any]
    entries: dict[str, dict[str, Any]]
    texts: dict[str, tuple[bytes, bool]]
    unanalysed: dict[str, dict[str, Any]]
    warnings: list[str]

    @property
    def previous(self) -> dict[str, dict[str, Any]]:
        """The files of the stored workspace, by path."""
        files: dict[str, dict[str, Any]] = self.manifest["files"]
        return files

    @cached_property
    def version(self) -> str:
        """The tree's version: a digest of every file's content key and of what could not be read."""
        return hashlib.sha256(
            "".join(sorted(e["key"] for e in self.entries.values())).encode()
            + orjson.dumps(self.unanalysed, option=orjson.OPT_SORT_KEYS)
        ).hexdigest()[:16]

    @cached_property
    def analysed(self) -> list[str]:
        """The files whose content differs from the stored workspace's (or that it lacks)."""
        previous = self.previous
        return [rel for rel, e in self.entries.items() if previous.get(rel, {}).get("key") != e["key"]]

    @cached_property
    def removed(self) -> list[str]:
        """The stored workspace's files that are gone."""
        return sorted(set(self.previous) - set(self.entries))

    @property
    def total(self) -> int:
        return len(self.entries) + len(self.unanalysed)

    @property
    def unchanged(self) -> bool:
        """Whether the stored workspace is this tree's, whole; one whose resolution stopped at its
        budget is not (it is resolved again, perhaps with a larger one)."""
        manifest = self.manifest
        return (
            not self.analysed
            and not self.removed
            and manifest.get("version") == self.version
            and bool(manifest.get("stats"))
            and not manifest["stats"].get("budget_exceeded")
            and self.store.graph_intact(self.workspace_id, manifest)
        )


def _discovered(path: str | Path, *, rev: str | None, store: str | Path | None, limit: int) -> _Tree:
    """Discover: the tree's files, read and keyed by content, and the workspace stored of it."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise InvalidQuery(f"path {path} is not a folder; give the root of the Python code to analyse")
    the_store = Store.open(store)
    source, commit = revision_tree(root, rev, the_store) if rev else (root, None)
    ws_id = workspace_id(root, commit)
    try:
        manifest = the_store.manifest(ws_id)
    except PsmrError:
        manifest = {"files": {}}
    tree = _Tree(root, source, rev, commit, the_store, ws_id, manifest, {}, {}, {}, [])
    for file in discover(source):
        rel = file.relative_to(source).as_posix()
        module, is_package = module_name(source, file)
        try:
            data = read_source(source, file, limit=limit)
        except NotSource as exc:
            tree.warnings.append(f"{rel} is {exc}; skipped")
            continue
        except Unanalysable as exc:
            tree.unanalysed[rel] = unanalysed_facts(module, is_package, exc.reason, f"{rel}: {exc.detail}")
            continue
        key = hashlib.sha256(f"{FACTS_VERSION}\0{module}\0{is_package}\0".encode() + data).hexdigest()
        tree.entries[rel] = {"key": key, "module": module, "sha256": hashlib.sha256(data).hexdigest()}
        tree.texts[rel] = (data, is_package)
    return tree


def _unchanged(
    tree: _Tree, started: float, progress: Callable[[int, int, str], None] | None
) -> dict[str, Any]:
    """The summary of a build whose tree is the stored workspace's: the stored workspace is the answer."""
    if progress:
        progress(tree.total, tree.total, "unchanged")
    return {
        **tree.manifest["stats"],
        "store": str(tree.store.path),
        "analysed": 0,
        "reused": len(tree.entries),
        "removed": 0,
        "dependents": 0,
        "resolved_sites": 0,
        "duration_s": round(time.perf_counter() - started, 3),
    }


@dataclass
class _Facts:
    """Every module's facts, the file each came from, and the content key each was read by."""

    facts: dict[str, dict[str, Any]]
    paths: dict[str, str]
    keys: dict[str, str]


def _facts(tree: _Tree, last: Resolved | None, progress: Callable[[int, int, str], None] | None) -> _Facts:
    """Facts: each file's, from the kept resolution or the store by content key, else extracted (and
    stored)."""
    # The tree changed: only now the fast pass is loaded, so that a process starting on an
    # up-to-date workspace (the MCP server) answers without it (and the resolver and assembler).
    from slotrelay.psmr.analysis.extract import extract

    out = _Facts({}, {}, {})
    for done, (rel, entry) in enumerate(tree.entries.items(), start=1):
        module = entry["module"]
        cached = None
        if last is not None and last.assembled is not None and last.keys.get(module) == entry["key"]:
            cached = last.assembled.facts[module]
        if cached is None:
            cached = tree.store.get_facts(entry["key"])
        if cached is None:
            data, is_package = tree.texts[rel]
            cached = extract(_as_text(data), module, is_package=is_package)
            tree.store.put_facts(entry["key"], cached)
        out.facts[module], out.paths[module], out.keys[module] = cached, rel, entry["key"]
        if progress:
            progress(done, tree.total, rel)
    for done, (rel, unread) in enumerate(sorted(tree.unanalysed.items()), start=len(tree.entries) + 1):
        module = unread["module"]
        out.facts[module], out.paths[module] = unread, rel
        out.keys[module] = f"unanalysed:{unread['syntax_error']['message']}"
        if progress:
            progress(done, tree.total, rel)
    return out


@dataclass
class _Resolution:
    """The resolved tree: the linker (its answer in `result`), the import graph's edges, the warnings
    of both, the budget limit passed (or None), and the record an update replays when it is kept."""

    linker: Linker
    edges: list[tuple[str, str, int, str]]
    warnings: list[str]
    exceeded: str | None
    record: ResolutionRecord | None

    @property
    def result(self) -> LinkResult:
        result = self.linker.result
        assert result is not None
        return result


def _resolution(
    tree: _Tree, facts: _Facts, last: Resolved | None, budget: BuildBudget | None, *, keep: bool
) -> _Resolution:
    """Resolve: the kept resolution replayed where the edit reaches (`relink`), else the whole tree
    resolved (recording what a replay needs when `keep`), beside the import graph."""
    from slotrelay.psmr.analysis.buildbudget import REASON as BUDGET_REASON
    from slotrelay.psmr.analysis.buildbudget import BuildBudget
    from slotrelay.psmr.analysis.link import Linker
    from slotrelay.psmr.analysis.record import ResolutionRecord
    from slotrelay.psmr.analysis.relink import relink
    from slotrelay.psmr.workspace.importgraph import import_edges

    # grimp reads a copy of what this build read, decoded as the fast pass decoded it (so a stray
    # byte does not fail the package); files that did not parse are empty in it.
    sources = {
        rel: "" if facts.facts[entry["module"]].get("syntax_error") else _as_text(tree.texts[rel][0])
        for rel, entry in tree.entries.items()
    } | dict.fromkeys(tree.unanalysed, "")
    # The import graph (a copy of the tree and a grimp process when an import changed) is made while
    # the main thread resolves: it needs only the facts, and resolution never waits for it.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="psmr-imports") as pool:
        imports = pool.submit(import_edges, tree.source, facts.facts, sources, store=tree.store)
        linker = None
        if last is not None and last.record is not None:
            keys = facts.keys
            edited = {m for m in keys.keys() | last.keys.keys() if keys.get(m) != last.keys.get(m)}
            linker = relink(last.record, facts.facts, edited)
        if linker is None:
            budget = budget or BuildBudget()
            budget.start()
            linker = Linker(facts.facts, record=keep, budget=budget)
            linker.run()
        edges, warnings = imports.result()
    exceeded = linker.budget.exceeded
    if exceeded:
        assert linker.result is not None
        stopped = sum(reason == BUDGET_REASON for reason in linker.result.unresolved.values())
        warnings = [
            *warnings,
            (
                f"resolution stopped past {linker.budget.describe()}: {stopped} call sites are the "
                f"unknown {BUDGET_REASON}, and arguments stopped flowing where they were"
            ),
        ]
    record = ResolutionRecord.of(linker) if keep and not exceeded else None
    return _Resolution(linker, edges, warnings, exceeded, record)


def _assembled(tree: _Tree, facts: _Facts, resolution: _Resolution, last: Resolved | None) -> Assembled:
    """Assemble: each module's part of the graph, the kept resolution's reused where its module's
    facts and share of the resolution did not change."""
    from slotrelay.psmr.workspace.graph import GraphAssembler

    reusable = last.assembled if last is not None else None
    assembler = GraphAssembler(facts.facts, facts.paths, tree.commit)
    return assembler.assemble(resolution.result, resolution.edges, reusable)


def _saved(
    tree: _Tree, resolution: _Resolution, assembled: Assembled, *, in_step: bool, started: float
) -> dict[str, Any]:
    """Save: the workspace's manifest and the parts the store lacks; the build's summary.

    `in_step`: the reused parts are the stored manifest's, whose seals the save keeps; otherwise it
    checks every part against the store."""
    from slotrelay.psmr.workspace.parts import merge

    assembly = merge(assembled.parts.values())
    changed = {tree.entries[r]["module"] for r in tree.analysed}
    changed |= {tree.previous[r]["module"] for r in tree.removed}
    edges = resolution.edges
    dependents = sorted({importer for importer, imported, _, _ in edges if imported in changed} - changed)
    warnings = tree.warnings + resolution.warnings
    summary: dict[str, Any] = {
        "workspace_id": tree.workspace_id,
        "root": str(tree.root),
        "store": str(tree.store.path),
        "rev": tree.rev,
        "commit": tree.commit,
        "version": tree.version,
        "files": tree.total,
        "analysed": len(tree.analysed),
        "reused": len(tree.entries) - len(tree.analysed),
        "removed": len(tree.removed),
        "dependents": len(dependents),
        "resolved_sites": resolution.linker.resolved_sites,
        "assembled_modules": len(assembled.parts) - len(assembled.reused),
        "nodes": len(assembly.nodes),
        "edges": len(assembly.edges),
        "unknowns": len(assembly.unknowns),
        "conflicts": len(assembly.conflicts),
        "budget_exceeded": resolution.exceeded,
        "warnings": warnings,
    }
    summary["duration_s"] = round(time.perf_counter() - started, 3)
    stored = tree.manifest.get("parts", {})
    tree.store.save(
        {
            "workspace_id": tree.workspace_id,
            "root": str(tree.root),
            "source_root": str(tree.source),
            "rev": tree.rev,
            "commit": tree.commit,
            "version": tree.version,
            "updated": datetime.now(UTC).isoformat(timespec="seconds"),
            "files": tree.entries,
            "warnings": warnings,
            "stats": summary,
        },
        assembled.parts,
        previous=stored,
        unchanged=assembled.reused if in_step else (),
    )
    return summary
