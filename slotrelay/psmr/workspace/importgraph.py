"""The module import graph: grimp for the packages of the tree, the fast pass's imports elsewhere.

grimp builds the graph of importable packages; a package it would find somewhere else than in the
tree (a same-named installed package) is not asked, and its edges come from the fast pass's import
facts instead, like those of every package grimp could not build.

grimp reads files itself, so it never sees the analysed tree: it reads a temporary copy of exactly
the text the build read and vetted (regular files inside the root, within the size limit), where a
file the fast pass could not parse is empty. A FIFO, a link out of the root or a file changed since
cannot reach it, and one bad file does not cost the package its grimp graph. It runs in a child
process (`slotrelay.psmr.workspace.grimp_worker`, which says why), with a timeout: whatever grimp raises, a
panic of its Rust core or the child's death becomes a warning here, never the build's end. The child
writes the copy itself from one request file: the build makes the import graph on a thread while it
resolves (`slotrelay.psmr.workspace.build`), and a thread writing hundreds of files would wait for the
interpreter lock at every one.

grimp's answer depends only on which files the tree has and on their import statements, so it is
kept in the store under a key made of exactly that (each file's import facts, with their lines, and
whether it parsed): an update that leaves every import where it was (a changed body, a new or
removed function) reuses it instead of paying a copy of the tree, a child process and a second parse
of every file.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from slotrelay.psmr.workspace.store import Store

WORKER = Path(__file__).with_name("grimp_worker.py")
# networkx's 580 files take grimp about a second; a child still running after this is stuck.
GRIMP_TIMEOUT_S = 300
ImportEdge = tuple[str, str, int, str]


def import_edges(
    root: Path, facts: dict[str, dict[str, Any]], sources: dict[str, str], *, store: Store
) -> tuple[list[ImportEdge], list[str]]:
    """Module import edges (importer, imported, line, authority) and the warnings met.

    Parameters:
        root: the analysed root.
        facts: module name -> facts of the tree.
        sources: every source file of the tree, relative path -> the text grimp may read (empty
            for a file that was not parsed).
        store: where grimp's answers are kept (see the module docstring).

    Returns:
        The sorted edges and warnings (e.g. a package grimp could not build).
    """
    edges: set[ImportEdge] = set()
    warnings: list[str] = []
    by_grimp: set[str] = set()
    # Where the copy puts the tree and the folder its top-level modules are imported from, relative
    # to the copy's folder.
    base = PurePosixPath(import_base(root).relative_to(root.parent).as_posix())
    files = {PurePosixPath(root.name, rel) for rel in sources}
    packages = sorted({m.split(".")[0] for m in facts if base / m.split(".")[0] / "__init__.py" in files})
    if packages:
        answer = _remembered_grimp(root, base, packages, facts, sources, store)
        if "error" in answer:
            warnings.append(
                f"grimp could not build the import graph ({answer['error']}); "
                "import edges come from the fast pass"
            )
        else:
            by_grimp = set(answer["packages"])
            edges |= {
                (importer, imported, line, "static:grimp") for importer, imported, line in answer["edges"]
            }
    for module, f in facts.items():
        if module.split(".")[0] in by_grimp or f.get("syntax_error"):
            continue
        for item in f["imports"]:
            target = _internal_target(item, facts)
            edges.add((module, target, item["span"][0], "static:ast"))
    return sorted(edges), warnings


def import_base(root: Path) -> Path:
    """The folder the tree's top-level modules are imported from.

    A root that is itself a package is imported from its parent folder; the src layout from `src/`.
    """
    if (root / "__init__.py").exists():
        return root.parent
    if (root / "src").is_dir() and not (root / "src" / "__init__.py").exists():
        return root / "src"
    return root


def _internal_target(item: dict[str, Any], facts: dict[str, Any]) -> str:
    candidates = [item["module"]]
    if item["name"] and item["name"] != "*":
        candidates.insert(0, f"{item['module']}.{item['name']}")
    for candidate in candidates:
        parts = candidate.split(".")
        for cut in range(len(parts), 0, -1):
            if ".".join(parts[:cut]) in facts:
                return ".".join(parts[:cut])
    return str(item["module"]).split(".")[0]


def _remembered_grimp(
    root: Path,
    base: PurePosixPath,
    packages: list[str],
    facts: dict[str, dict[str, Any]],
    sources: dict[str, str],
    store: Store,
) -> dict[str, Any]:
    """grimp's answer for this layout and these import statements: the stored one, else a fresh one
    (kept only when grimp succeeded, so a timeout is tried again next build)."""
    key = hashlib.sha256(
        orjson.dumps(
            {
                "root": root.name,
                "base": base.as_posix(),
                "packages": packages,
                "files": sorted(sources),
                "imports": {
                    m: None if f.get("syntax_error") else f["imports"] for m, f in sorted(facts.items())
                },
            }
        )
    ).hexdigest()
    answer = store.get_json("cache/grimp", key)
    if isinstance(answer, dict) and "packages" in answer and "edges" in answer:
        return answer
    request = {
        "root": root.name,
        "base": base.as_posix(),
        "packages": packages,
        "modules": sorted(facts),
        "files": sources,
    }
    answer = _run_grimp(request)
    if "error" not in answer:
        store.put_json("cache/grimp", key, answer)
    return answer


def _run_grimp(request: dict[str, Any]) -> dict[str, Any]:
    """The worker's answer, or `{"error": ...}` when the child fails, dies or hangs."""
    with tempfile.TemporaryFile() as stdin:
        stdin.write(orjson.dumps(request))
        stdin.seek(0)
        try:
            done = subprocess.run(
                [sys.executable, "-I", str(WORKER)],
                stdin=stdin,
                capture_output=True,
                timeout=GRIMP_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"it did not finish within {GRIMP_TIMEOUT_S} s"}
        except OSError as exc:
            return {"error": f"it could not be started: {exc}"}
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if done.returncode != 0 or not isinstance(answer, dict):
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
        return {"error": f"its process ended with {how}"}
    return answer
