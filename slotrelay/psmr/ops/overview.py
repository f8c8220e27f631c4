"""What a person reads first about a workspace: its modules as a map, its entry points, its busiest
symbols and the findings worth reading first.

The counts of `workspace.describe` say how much there is; this says where to start. Everything comes
from the stored graph, except what the store does not record: a tree's console scripts (its
`pyproject.toml` or `setup.cfg`), the modules with an `if __name__ == "__main__":` block and the
public names of a top-level package's `__init__`, which are read from the tree's files as the build
read them (`slotrelay.psmr.workspace.build.read_artifact`: inside the root, no link followed out of it). A
file that cannot be read or parsed gives a warning, never an error.

    module_map(ws)        the largest modules, by package, with each one's most-used imports
    entry_points(ws)      console scripts, `python -m` modules, `__main__` blocks, public API
    busiest(ws)           the symbols with the most distinct callers
    read_first(found)     confirmed defects, then the module's own anomalies, then the worst hotspots
    orient(ws, store)     all four, and the findings' counts
"""

from __future__ import annotations

import ast
import configparser
import os
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from slotrelay.psmr.ops.findings import THRESHOLDS, all_findings
from slotrelay.psmr.ops.slicing import CODE_KINDS
from slotrelay.psmr.workspace.build import NotSource, Unanalysable, read_artifact
from slotrelay.psmr.workspace.graph import sid
from slotrelay.psmr.workspace.store import Store, Workspace

# A map of more modules than this is a hairball at any size: the largest are drawn, the rest listed.
MAP_MODULES = 30
# Per module, the imports drawn: those it calls into most. Real packages import each other in
# cycles (rich's 30 largest modules hold 145 imports among them); two a module keep the backbone.
IMPORTS_PER_MODULE = 2
BUSIEST = 12
# Read first: every confirmed defect up to this many, then a few anomalies and hotspots.
FIRST_DEFECTS = 10
FIRST_ANOMALIES = 5
FIRST_HOTSPOTS = 5
SYMBOL_KINDS = CODE_KINDS - {"module"}
MAIN_BLOCK = re.compile(
    rb"""^if\s+(?:__name__\s*==\s*(['"])__main__\1|(['"])__main__\2\s*==\s*__name__)\s*:""", re.MULTILINE
)
# The scripts tables of pyproject.toml, by where they sit.
PYPROJECT_SCRIPTS = (
    ("project", "scripts"),
    ("project", "gui-scripts"),
    ("tool", "poetry", "scripts"),
)
SETUP_CFG_GROUPS = ("console_scripts", "gui_scripts")


@dataclass
class ModuleMap:
    """The modules drawn (largest first), the imports drawn among them, and the modules left out."""

    modules: list[dict[str, Any]]
    imports: list[tuple[str, str]]
    # Imports between the drawn modules, drawn or not.
    imports_among: int
    left_out: list[dict[str, Any]]

    @property
    def total(self) -> int:
        return len(self.modules) + len(self.left_out)


@dataclass
class EntryPoints:
    """Where a program or a user enters the tree."""

    scripts: list[dict[str, Any]] = field(default_factory=list)
    main_modules: list[dict[str, Any]] = field(default_factory=list)
    main_blocks: list[dict[str, Any]] = field(default_factory=list)
    public_api: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _module_of(data: dict[str, Any]) -> str | None:
    """The module a node of the tree belongs to (itself for a module); None outside the tree."""
    return data["qualname"] if data["kind"] == "module" else data.get("module")


def _package_of(module: str, artifact: str | None) -> str:
    if artifact is not None and os.path.basename(artifact) == "__init__.py":
        return module
    return module.rpartition(".")[0] or module


def module_map(ws: Workspace, *, limit: int = MAP_MODULES, per_module: int = IMPORTS_PER_MODULE) -> ModuleMap:
    """The `limit` modules with the most symbols, each with its package and size, and for each the
    `per_module` imports (of the drawn modules) it makes the most calls through.

    Parameters:
        ws: the workspace.
        limit: how many modules to draw.
        per_module: how many of a module's imports to draw.

    Returns:
        The map; `left_out` holds the other modules, largest first.
    """
    graph = ws.graph
    symbols: Counter[str] = Counter()
    for _, data in graph.nodes(data=True):
        if data["kind"] in SYMBOL_KINDS and data.get("module"):
            symbols[data["module"]] += 1
    modules = []
    for node, data in graph.nodes(data=True):
        if data["kind"] == "module" and data.get("artifact"):
            name = data["qualname"]
            modules.append(
                {
                    "id": node,
                    "name": name,
                    "package": _package_of(name, data["artifact"]),
                    "symbols": symbols[name],
                    "lines": data.get("lines", 0),
                    "artifact": data["artifact"],
                }
            )
    modules.sort(key=lambda m: (-m["symbols"], m["name"]))
    drawn, left_out = modules[:limit], modules[limit:]
    shown = {m["id"] for m in drawn}
    imports: set[tuple[str, str]] = set()
    calls: Counter[tuple[str, str]] = Counter()
    nodes = graph.nodes
    for source, target, key in graph.edges(keys=True):
        if key == "imports" and source in shown and target in shown and source != target:
            imports.add((source, target))
        elif key == "calls":
            caller, callee = _module_of(nodes[source]), _module_of(nodes[target])
            if caller != callee and caller is not None and callee is not None:
                calls[sid(caller), sid(callee)] += 1
    chosen: list[tuple[str, str]] = []
    for module in drawn:
        made = sorted((i for i in imports if i[0] == module["id"]), key=lambda i: (-calls[i], i[1]))
        # An import nothing is called through (a type, a constant) still shows the module's place.
        used = [i for i in made if calls[i]] or made[:1]
        chosen += used[:per_module]
    return ModuleMap(drawn, sorted(chosen), len(imports), left_out)


def busiest(ws: Workspace, *, limit: int = BUSIEST) -> list[dict[str, Any]]:
    """The symbols of the tree with the most distinct callers, most first.

    Returns:
        `{"id", "kind", "callers", "artifact", "line"}` per symbol.
    """
    graph = ws.graph
    callers: dict[str, set[str]] = {}
    for source, target, key in graph.edges(keys=True):
        if key == "calls" and source != target:
            callers.setdefault(target, set()).add(source)
    ranked = sorted(
        (node for node in callers if graph.nodes[node]["kind"] in SYMBOL_KINDS and not _hidden(node)),
        key=lambda node: (-len(callers[node]), node),
    )
    out = []
    for node in ranked[:limit]:
        data = graph.nodes[node]
        out.append(
            {
                "id": node,
                "kind": data["kind"],
                "callers": len(callers[node]),
                "artifact": data.get("artifact"),
                "line": data["span"][0] if data.get("span") else 1,
            }
        )
    return out


def _hidden(node: str) -> bool:
    """A method Python calls for syntax (`__init__` when the class is called, `__enter__` for `with`):
    its callers are its class's, listed there."""
    name = node.rsplit(".", 1)[-1]
    return name.startswith("__") and name.endswith("__") and name != "__call__"


def _read(ws: Workspace, artifact: str, warnings: list[str]) -> bytes | None:
    """A file of the tree, or None (with a warning unless it is simply absent)."""
    try:
        return read_artifact(ws.source_root, artifact)
    except (NotSource, Unanalysable) as exc:
        if os.path.lexists(os.path.join(ws.source_root, artifact)):
            warnings.append(f"{artifact} cannot be read ({exc}); its entry points are not shown")
        return None


def _target(ws: Workspace, reference: str) -> str | None:
    """The node an entry point reference (`pkg.mod:func` or `pkg.mod.func`) names, if in the tree."""
    node = sid(reference.strip().replace(":", ".").split("[", 1)[0].strip())
    return node if node in ws.graph else None


def _scripts(ws: Workspace, found: EntryPoints) -> None:
    data = _read(ws, "pyproject.toml", found.warnings)
    if data is not None:
        try:
            project = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            found.warnings.append(f"pyproject.toml does not parse ({exc}); its scripts are not shown")
            project = {}
        for path in PYPROJECT_SCRIPTS:
            table: Any = project
            for key in path:
                table = table.get(key) if isinstance(table, dict) else None
            if not isinstance(table, dict):
                continue
            for name, reference in sorted(table.items()):
                if isinstance(reference, str):
                    found.scripts.append(
                        {
                            "name": name,
                            "reference": reference,
                            "id": _target(ws, reference),
                            "declared": f"pyproject.toml [{'.'.join(path)}]",
                        }
                    )
    data = _read(ws, "setup.cfg", found.warnings)
    if data is not None:
        config = configparser.ConfigParser(interpolation=None)
        try:
            config.read_string(data.decode("utf-8"), source="setup.cfg")
        except (UnicodeDecodeError, configparser.Error) as exc:
            found.warnings.append(
                f"setup.cfg does not parse ({type(exc).__name__}); its scripts are not shown"
            )
            return
        for group in SETUP_CFG_GROUPS:
            lines = config.get("options.entry_points", group, fallback="")
            for line in lines.splitlines():
                name, sep, reference = line.partition("=")
                if sep and name.strip() and reference.strip():
                    found.scripts.append(
                        {
                            "name": name.strip(),
                            "reference": reference.strip(),
                            "id": _target(ws, reference),
                            "declared": f"setup.cfg [options.entry_points] {group}",
                        }
                    )


def _public_names(tree: ast.Module, package: str) -> tuple[list[tuple[str, str | None]], str]:
    """The public names a package's `__init__` offers, each with the qualified name it binds, and how
    they were told: its `__all__` (a literal list or tuple of strings, possibly extended with `+=`),
    else every public name it binds at the top level (not a plain `import x`)."""
    bound: dict[str, str | None] = {}
    declared: list[str] | None = None
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound[statement.name] = f"{package}.{statement.name}"
        elif isinstance(statement, ast.ImportFrom) and statement.module != "__future__":
            base = statement.module or ""
            if statement.level:
                parent = package.split(".")[: max(0, package.count(".") + 1 - (statement.level - 1))]
                base = ".".join([*parent, *([base] if base else [])])
            for alias in statement.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
        elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    names = _literal_names(statement.value)
                    if names is not None:
                        extend = isinstance(statement, ast.AugAssign) and declared is not None
                        declared = [*(declared or []), *names] if extend else names
                elif isinstance(target, ast.Name):
                    bound[target.id] = f"{package}.{target.id}"
    if declared is not None:
        return [(name, bound.get(name)) for name in dict.fromkeys(declared)], "__all__"
    public = [(name, where) for name, where in bound.items() if not name.startswith("_")]
    return public, "public names of __init__"


def _literal_names(value: ast.expr | None) -> list[str] | None:
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left, right = _literal_names(value.left), _literal_names(value.right)
        return None if left is None or right is None else left + right
    if isinstance(value, ast.List | ast.Tuple) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
    ):
        return [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def _public_api(ws: Workspace, found: EntryPoints) -> None:
    for artifact, entry in sorted(ws.files.items()):
        module = entry["module"]
        if "." in module or os.path.basename(artifact) != "__init__.py":
            continue
        data = _read(ws, artifact, found.warnings)
        if data is None:
            continue
        try:
            tree = ast.parse(data, filename=artifact)
        except (SyntaxError, ValueError) as exc:
            found.warnings.append(f"{artifact} does not parse ({exc}); its public API is not shown")
            continue
        names, declared = _public_names(tree, module)
        found.public_api.append(
            {
                "id": sid(module),
                "package": module,
                "artifact": artifact,
                "declared": declared,
                "names": [{"name": name, "id": _bound(ws, module, name, where)} for name, where in names],
            }
        )


def _bound(ws: Workspace, package: str, name: str, where: str | None) -> str | None:
    """The node a public name of a package stands for: what it imports or defines, if in the tree."""
    for candidate in (where, f"{package}.{name}"):
        if candidate and sid(candidate) in ws.graph:
            return sid(candidate)
    return None


def entry_points(ws: Workspace) -> EntryPoints:
    """Console scripts, `python -m` modules, `if __name__ == "__main__":` blocks and the public API of
    each top-level package.

    Returns:
        The entry points; `warnings` names the files that could not be read or parsed.
    """
    found = EntryPoints()
    _scripts(ws, found)
    for artifact, entry in sorted(ws.files.items()):
        module = entry["module"]
        if module == "__main__" or module.endswith(".__main__"):
            package = module.removesuffix("__main__").rstrip(".")
            found.main_modules.append(
                {
                    "id": sid(module),
                    "run": f"python -m {package}" if package else "python __main__.py",
                    "artifact": artifact,
                }
            )
            continue
        data = _read(ws, artifact, found.warnings)
        # Most files never name __main__: a byte search rules them out before the pattern runs.
        if data is None or b"__main__" not in data:
            continue
        block = MAIN_BLOCK.search(data)
        if block is not None:
            found.main_blocks.append(
                {"id": sid(module), "artifact": artifact, "line": data.count(b"\n", 0, block.start()) + 1}
            )
    _public_api(ws, found)
    return found


def _excess(finding: dict[str, Any]) -> float:
    """How far past its thresholds a hotspot is (the largest ratio of a measure to its threshold)."""
    measures = finding.get("measures", {})
    return max((v / THRESHOLDS[k] for k, v in measures.items() if k in THRESHOLDS), default=0.0)


def _reexport(finding: dict[str, Any]) -> bool:
    """An unused import in a package's `__init__`: how a package offers names, not a slip."""
    artifact = finding.get("artifact") or ""
    return finding["rule"] == "pyflakes:UnusedImport" and os.path.basename(artifact) == "__init__.py"


def read_first(found: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The findings worth reading first, from analysis.findings' three lists: every confirmed defect
    (up to `FIRST_DEFECTS`), then the module's own anomalies (not guarded names, not demo blocks),
    then the hotspots furthest past their thresholds. The lists stay apart: each item keeps its kind.

    Parameters:
        found: `{"confirmed_defect": [...], "anomaly": [...], "hotspot": [...]}`.

    Returns:
        The findings, in that order.
    """
    anomalies = [f for f in found.get("anomaly", []) if not f.get("label") and not _reexport(f)]
    hotspots = sorted(found.get("hotspot", []), key=lambda f: (-_excess(f), f["id"]))
    return (
        found.get("confirmed_defect", [])[:FIRST_DEFECTS]
        + anomalies[:FIRST_ANOMALIES]
        + hotspots[:FIRST_HOTSPOTS]
    )


@dataclass
class Overview:
    """A workspace's orientation: its map, entry points, busiest symbols and findings to read first."""

    modules: ModuleMap
    entries: EntryPoints
    busiest: list[dict[str, Any]]
    finding_counts: dict[str, int]
    read_first: list[dict[str, Any]]


def orient(ws: Workspace, store: Store) -> Overview:
    """Everything the overview shows besides the counts.

    Parameters:
        ws: the workspace.
        store: its store (analysis.findings keeps the checker's output per file there).

    Returns:
        The orientation.
    """
    found = all_findings(ws, store)
    return Overview(
        modules=module_map(ws),
        entries=entry_points(ws),
        busiest=busiest(ws),
        finding_counts={kind: len(items) for kind, items in found.items()},
        read_first=read_first(found),
    )
