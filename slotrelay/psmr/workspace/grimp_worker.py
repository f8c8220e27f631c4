"""The child process that runs grimp for `slotrelay.psmr.workspace.importgraph` (stdlib and grimp only).

Run as `python -I grimp_worker.py`; reads `{"root", "base", "packages", "modules", "files"}` as JSON on
stdin, writes the files (relative path -> text) under a temporary folder named `root`, and writes
`{"packages": [...], "edges": [[importer, imported, line], ...]}` or `{"error": "..."}`; `base` is the
folder, relative to the temporary one, the packages are imported from.

grimp runs apart from the build because it finds packages with `importlib.util.find_spec`, which
answers from `sys.modules` first (a package the build's process has imported, such as an installed
copy of the analysed package, would be read from where it was imported, not from the tree), and
because its Rust core can fail in ways a process cannot survive: a panic arrives as pyo3's
`PanicException` (a BaseException), a stack overflow aborts the process. Here either ends only this
child.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def found_in_base(package: str, base: Path) -> bool:
    """True if importing `package` with `base` first on `sys.path` finds it inside `base`."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    origin = spec.origin if spec else None
    if not origin:
        return False
    return Path(origin).resolve().is_relative_to(base.resolve())


def import_graph(request: dict[str, Any]) -> dict[str, Any]:
    """grimp's direct imports among the request's packages, by importer in `modules`."""
    import grimp

    base = Path(request["base"])
    sys.path.insert(0, str(base))
    packages = [p for p in request["packages"] if found_in_base(p, base)]
    if not packages:
        return {"packages": [], "edges": []}
    graph = grimp.build_graph(*packages, include_external_packages=True, cache_dir=None)
    modules = set(request["modules"])
    edges = []
    for importer in sorted(graph.modules & modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            details = graph.get_import_details(importer=importer, imported=imported)
            edges.append([importer, imported, min((d["line_number"] for d in details), default=1)])
    return {"packages": packages, "edges": edges}


def main() -> None:
    """Answer one request from stdin on stdout; what grimp raises becomes `error`."""
    request = json.load(sys.stdin)
    try:
        with tempfile.TemporaryDirectory(prefix="psmr-grimp-") as folder:
            copy = Path(folder) / request["root"]
            for rel, text in request["files"].items():
                path = copy / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            answer = import_graph({**request, "base": str(Path(folder) / request["base"])})
    except BaseException as exc:  # noqa: BLE001 - this process exists to contain grimp's failures
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
