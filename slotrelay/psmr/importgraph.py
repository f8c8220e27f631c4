"""The module import graph: grimp for the packages of the tree, the fast pass's imports elsewhere.

grimp builds the graph of importable packages (it finds them on `sys.path`, so the root is put first
for the duration); a package grimp would find somewhere else than in the root (a same-named installed
package) is not asked, and its edges come from the fast pass's import facts instead.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import grimp

ImportEdge = tuple[str, str, int, str]


def import_edges(root: Path, facts: dict[str, dict[str, Any]]) -> tuple[list[ImportEdge], list[str]]:
    """Module import edges (importer, imported, line, authority) and the warnings met.

    Parameters:
        root: the analysed root.
        facts: module name -> facts of the tree.

    Returns:
        The sorted edges and warnings (e.g. a package grimp could not build).
    """
    base = import_base(root)
    packages = sorted({m.split(".")[0] for m in facts if (base / m.split(".")[0] / "__init__.py").exists()})
    edges: set[ImportEdge] = set()
    warnings: list[str] = []
    by_grimp: set[str] = set()
    usable = [p for p in packages if _found_in_root(p, base)]
    if usable:
        try:
            edges |= _grimp_edges(base, usable, facts)
            by_grimp = set(usable)
        except Exception as exc:  # noqa: BLE001 - grimp parse failures fall back to the fast pass
            warnings.append(
                f"grimp could not build the import graph ({type(exc).__name__}: {exc}); "
                "import edges come from the fast pass"
            )
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
    return item["module"].split(".")[0]


def _found_in_root(package: str, root: Path) -> bool:
    sys.path.insert(0, str(root))
    try:
        importlib.invalidate_caches()
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    finally:
        sys.path.remove(str(root))
    origin = spec.origin if spec else None
    return bool(origin) and Path(origin).resolve().is_relative_to(root.resolve())


def _grimp_edges(root: Path, packages: list[str], facts: dict[str, Any]) -> set[ImportEdge]:
    sys.path.insert(0, str(root))
    try:
        graph = grimp.build_graph(*packages, include_external_packages=True, cache_dir=None)
    finally:
        sys.path.remove(str(root))
    edges: set[ImportEdge] = set()
    for importer in graph.modules:
        if importer not in facts:
            continue
        for imported in graph.find_modules_directly_imported_by(importer):
            details = graph.get_import_details(importer=importer, imported=imported)
            line = min((d["line_number"] for d in details), default=1)
            edges.add((importer, imported, line, "static:grimp"))
    return edges
