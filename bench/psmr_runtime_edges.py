"""PSMR's call graph against what real code runs: the call edges a package's own test suite makes.

    .venv/bin/python bench/psmr_runtime_edges.py [PACKAGE ...] [--json FILE] [--audit N] [--audit-confirmed]
        [--no-jedi]

For each package (pinned below, all typed and pure Python, with a pytest suite of their own):

1. its sdist is fetched with pip (`pip download --no-binary :all:`) into ~/.cache/slotrelay/bench/sdists,
   checked against the sha256 pinned here, and unpacked into a temporary folder (nothing of it is
   committed);
2. its test dependencies (pinned in TEST_DEPS) go into a bench venv, kept in
   ~/.cache/slotrelay/bench/runtime-venv-<digest of TEST_DEPS>;
3. its test suite runs in that venv, from the unpacked tree (PYTHONPATH), under the profile hook of
   `bench/psmr_runtime_trace.py`, which records every caller -> callee pair whose callee is the
   package's code and whose caller is the package's or its tests' ("observed edges");
4. PSMR builds the package folder and the tests folder (copied as they lie in the sdist), and its
   `calls` edges are scored on the observed ones; so are jedi's (the reference tool), asked at every
   call site of the same files.

Mapping what ran onto PSMR's nodes: a code object is named by its file (the module, as
`slotrelay.psmr.workspace.build.module_name` names it) and its `co_qualname` with the `<locals>` parts removed
(`f.<locals>.g` is `f.g`, a method of a class defined in a function `f.C.m`), which is how PSMR names
nested definitions. Lambdas, comprehensions and generator expressions are folded into the function
that holds them, on both sides: a call made in `[g(x) for x in xs]` inside `f` is f's call, and PSMR's
edges from a lambda node are its enclosing function's; a lambda as a callee is not scored (neither
side can name it the same way). A class body's frame is the class's node; module code is the module's
node. A property's getter and setter are the method PSMR names by the property. PSMR draws a
constructor call to the class: it counts as a call of the `__init__` the class's MRO finds in the
tree (not of `__new__`, which PSMR does not draw). Observed edges to a class body or a module (class
statements and imports running) are definitions, not calls, and are left out. An observed frame PSMR
has no node for (a function defined twice under `if`, code generated with `exec`) is counted as
unmapped and left out. Which frame is a generator's caller, and a call made through the standard
library's own code (contextlib, `functools.cached_property`) is whose: see `psmr_runtime_trace.py`.

Figures:

- recall: the share of observed edges PSMR draws;
- per-callee caller recall: over the callees with observed callers, the mean share of their observed
  callers that PSMR draws (what `analysis.impact` needs);
- static, never observed: PSMR's edges in the same scope that the tests never made, all of them and
  those whose two ends both ran (the edge was possible and the tests exercised both ends, but never that
  pair). A sample of the latter is written for a person to judge (`--audit N`, default 50, shared
  evenly by the packages) to `psmr-runtime-audit.md` in the output folder, each with its call sites'
  lines, resolution and status. With `--audit-confirmed` the sample is drawn from the edges with a
  `confirmed` call site only (both ends ran first, then the others to fill the share);
- the same figures for jedi (`Script.goto` at the end of each call's callee expression, `infer` where
  goto finds nothing, a class taken as its `__init__` as above);
- PSMR's misses by category, from the call's line and the callee (see `miss_category`); with
  `--json`, every missed edge with its category, file and lines.

A suite's observed edges are kept in ~/.cache/slotrelay/bench/traces (see `trace`), so only the first
run of a package pays for its suite under the hook.

This is a benchmark of the resolver's quality, not of its speed: only the figures matter, and the
baseline of each is what the same test run observed.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

CACHE = Path.home() / ".cache" / "slotrelay" / "bench"
TRACER = Path(__file__).with_name("psmr_runtime_trace.py")
TEST_DEPS = ["pytest==9.2.0", "hypothesis==6.170.15", "pretend==1.0.9", "simplejson==4.3.0", "tomli-w==1.2.0"]
TEST_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Package:
    """A pinned sdist, where its code and tests lie in it, and how its suite is run."""

    name: str
    version: str
    sha256: str
    code: str
    tests: str = "tests"
    pytest_args: tuple[str, ...] = ()


PACKAGES = [
    Package(
        "click",
        "8.5.1",
        "9bbfada76703fd1d784b83eea012e3e8c6a001a876543ef104fa56aaaeb072b4",
        "src/click",
        pytest_args=("-m", "not stress", "-p", "no:cacheprovider"),
    ),
    Package(
        "marshmallow",
        "4.4.0",
        "9e6ffa8511012ca89732324c1c253efd7b4d35632dcbdf80aa793fe01804af3e",
        "src/marshmallow",
        pytest_args=("-p", "no:cacheprovider", "--ignore=tests/mypy_test_cases"),
    ),
    Package(
        "packaging",
        "26.3",
        "94edc256424af38762eb31306eed28beb9f0efc50a8837492c9d6fd6004aed79",
        "src/packaging",
        pytest_args=("-m", "not property", "-p", "no:cacheprovider"),
    ),
    Package(
        "tomlkit",
        "0.15.2",
        "83e32755ba1d20d9340bd069ee97e9f6232ba2346b63ffcba425de01f7e327a6",
        "tomlkit",
        pytest_args=("-p", "no:cacheprovider"),
    ),
]
COMPREHENSIONS = ("<lambda>", "<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>", "<module>")
PROPERTY_DECORATORS = ("property", "cached_property", "functools.cached_property")


# fetching and running


def fetch(package: Package) -> Path:
    """The package's sdist, from the cache or pip, checked against its pinned sha256."""
    folder = CACHE / "sdists"
    folder.mkdir(parents=True, exist_ok=True)
    found = [
        p for p in folder.glob(f"{package.name}-{package.version}.*") if p.name.endswith((".tar.gz", ".zip"))
    ]
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{package.name}=={package.version}",
                "-d",
                str(folder),
            ],
            check=True,
        )
        found = [p for p in folder.glob(f"{package.name}-{package.version}.*") if p.name.endswith(".tar.gz")]
    sdist = found[0]
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != package.sha256:
        sdist.unlink()
        raise SystemExit(f"{sdist.name}: sha256 {digest} is not the pinned {package.sha256}; removed it")
    return sdist


def unpack(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as archive:
        archive.extractall(into, filter="data")
    (tree,) = [p for p in into.iterdir() if p.is_dir()]
    return tree


def bench_venv() -> Path:
    """The venv the test suites run in, with TEST_DEPS: one per set of pins, named by their digest, so
    that benches of other pins (another checkout) never change it under a running one."""
    wanted = "\n".join(TEST_DEPS)
    venv = CACHE / f"runtime-venv-{hashlib.sha256(wanted.encode()).hexdigest()[:12]}"
    python = venv / "bin" / "python"
    marker = venv / "deps.txt"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *TEST_DEPS], check=True)
        marker.write_text(wanted)
    return python


def install(python: Path, package: Package, sdist: Path) -> None:
    """The package itself into the bench venv, without dependencies: its tests read its metadata (the
    code they run is the unpacked tree's, first on PYTHONPATH)."""
    marker = python.parent.parent / f"installed-{package.name}-{package.version}"
    if not marker.exists():
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(sdist)], check=True)
        marker.touch()


def trace(python: Path, tree: Path, package: Package, out: Path) -> dict[str, Any]:
    """Run the package's tests under the profile hook; the edges it saw.

    The edges are kept in ~/.cache/slotrelay/bench/traces, named by what decides them (the sdist, the
    test pins, the pytest arguments and the hook's code), so scoring another resolver reuses them.
    """
    key = hashlib.sha256(
        json.dumps([package.sha256, TEST_DEPS, package.pytest_args, TRACER.read_text()]).encode()
    ).hexdigest()[:16]
    cached = CACHE / "traces" / f"{package.name}-{package.version}-{key}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    code = tree / package.code
    env = {**os.environ, "PYTHONPATH": str(code.parent), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONSTARTUP", None)
    subprocess.run(
        [
            str(python),
            str(TRACER),
            str(tree),
            str(out),
            str(code),
            str(tree / package.tests),
            "-q",
            "-o",
            "addopts=",
            *package.pytest_args,
        ],
        cwd=tree,
        env=env,
        check=True,
        timeout=TEST_TIMEOUT_S,
        stdout=subprocess.DEVNULL,
    )
    seen = json.loads(out.read_text())
    if seen["pytest_status"] not in (0, 1):
        # 0: all passed, 1: some failed; anything else means the suite did not run (a collection error).
        raise SystemExit(f"{package.name}'s tests did not run (pytest exit {seen['pytest_status']})")
    cached.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(out, cached)
    return seen


# naming code


def folded(qualname: str) -> str:
    """A code object's qualified name as PSMR names the definition that holds it (see the docstring)."""
    parts = []
    for part in qualname.split("."):
        if part == "<locals>":
            continue
        if part.startswith("<"):
            break
        parts.append(part)
    return ".".join(parts)


@dataclass
class Definition:
    """A def or class of the analysed files, from their ast."""

    node: str
    name: str
    kind: str
    decorators: list[str]
    params: dict[str, bool] = field(default_factory=dict)  # name -> annotated
    bases: list[ast.expr] = field(default_factory=list)


@dataclass
class Source:
    """One analysed file: its module, ast, definitions by node and by line, and calls by line."""

    module: str
    path: Path
    text: str
    tree: ast.Module
    calls: dict[int, list[tuple[ast.Call, str]]] = field(default_factory=lambda: defaultdict(list))


class Index:
    """The analysed files' definitions and call sites, named as PSMR names them."""

    def __init__(self, root: Path, files: list[Path]) -> None:
        from slotrelay.psmr.workspace.build import module_name

        self.root = root
        self.defs: dict[str, Definition] = {}
        self.by_line: dict[tuple[str, int], str] = {}  # (relative path, def line) -> node
        self.sources: dict[str, Source] = {}
        for path in files:
            rel = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tree = ast.parse(text)
            except SyntaxError:
                continue
            module = module_name(root, path)[0]
            source = self.sources[rel] = Source(module, path, text, tree)
            self._walk(source, rel, tree, f"semantic:{module}", None)

    def _walk(self, source: Source, rel: str, node: ast.AST, owner: str, cls: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{owner}.{child.name}"
                decorators = [ast.unparse(d) for d in child.decorator_list]
                definition = Definition(
                    name, child.name, "class" if isinstance(child, ast.ClassDef) else "def", decorators
                )
                if isinstance(child, ast.ClassDef):
                    definition.bases = list(child.bases)
                else:
                    args = child.args
                    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                        definition.params[a.arg] = a.annotation is not None
                self.defs.setdefault(name, definition)
                self.by_line.setdefault((rel, child.lineno), name)
                for d in child.decorator_list:
                    self.by_line.setdefault((rel, d.lineno), name)
                for d in child.decorator_list:
                    self._walk(source, rel, d, owner, cls)
                self._walk(source, rel, child, name, name if isinstance(child, ast.ClassDef) else cls)
                continue
            if isinstance(child, ast.Call):
                source.calls[child.lineno].append((child, owner))
                if child.end_lineno and child.end_lineno != child.lineno:
                    source.calls[child.end_lineno].append((child, owner))
            self._walk(source, rel, child, owner, cls)

    def code_node(self, module_of: dict[str, str], rel: str, qualname: str) -> str | None:
        module = module_of.get(rel)
        if module is None:
            return None
        name = folded(qualname)
        return f"semantic:{module}.{name}" if name else f"semantic:{module}"


# PSMR's and jedi's edges


def psmr_edges(graph: Any) -> set[tuple[str, str]]:
    """PSMR's call edges, lambda callers folded into their function, a class callee as its __init__."""
    out = set()
    for caller, callee, key in graph.edges(keys=True):
        if key != "calls":
            continue
        caller = enclosing(graph, caller)
        for target in constructor_targets(graph, callee):
            out.add((caller, target))
    return out


def enclosing(graph: Any, node: str) -> str:
    while graph.nodes.get(node, {}).get("kind") == "lambda":
        node = node.rsplit(".", 1)[0]
    return node


def constructor_targets(graph: Any, node: str) -> list[str]:
    data = graph.nodes.get(node, {})
    if data.get("kind") == "lambda":
        return []
    if data.get("kind") != "class":
        return [node]
    for cls in data.get("mro") or [data.get("qualname")]:
        init = f"semantic:{cls}.__init__"
        if init in graph:
            return [init]
    return []


def jedi_edges(index: Index, graph: Any, progress: Any) -> set[tuple[str, str]]:
    """jedi's call edges over every call site of the analysed files."""
    import jedi

    from slotrelay.psmr.workspace.importgraph import import_base

    project = jedi.Project(str(import_base(index.root)))
    rel_of = {str(s.path.resolve()): rel for rel, s in index.sources.items()}
    out: set[tuple[str, str]] = set()
    task = progress.add_task("  jedi", total=len(index.sources))
    for source in index.sources.values():
        script = jedi.Script(source.text, path=str(source.path), project=project)
        seen = set()
        for calls in source.calls.values():
            for call, owner in calls:
                if id(call) in seen:
                    continue
                seen.add(id(call))
                func = call.func
                line, column = func.end_lineno or func.lineno, max((func.end_col_offset or 1) - 1, 0)
                try:
                    names = script.goto(line, column, follow_imports=True)
                    names = [n for n in names if n.type in ("function", "class")] or [
                        n for n in script.infer(line, column) if n.type in ("function", "class")
                    ]
                except Exception:  # noqa: BLE001 - jedi fails on some constructs: no edge
                    names = []
                for name in names:
                    rel = rel_of.get(str(name.module_path.resolve())) if name.module_path else None
                    node = index.by_line.get((rel, name.line)) if rel else None
                    if node is not None:
                        for target in constructor_targets(graph, node):
                            out.add((enclosing(graph, owner), target))
        progress.advance(task)
    progress.remove_task(task)
    return out


# scoring


def score(observed: set[tuple[str, str]], drawn: set[tuple[str, str]], ran: set[str]) -> dict[str, Any]:
    """Recall, per-callee caller recall and the never-observed counts of one tool's edges."""
    callers: dict[str, set[str]] = defaultdict(set)
    for caller, callee in observed:
        callers[callee].add(caller)
    per_callee = [len({c for c in cs if (c, callee) in drawn}) / len(cs) for callee, cs in callers.items()]
    never = drawn - observed
    both_ran = {e for e in never if e[0] in ran and e[1] in ran}
    return {
        "recall": len(observed & drawn) / len(observed) if observed else 0.0,
        "caller_recall": sum(per_callee) / len(per_callee) if per_callee else 0.0,
        "drawn": len(drawn),
        "never_observed": len(never),
        "never_observed_both_ran": len(both_ran),
        "both_ran_edges": sorted(both_ran),
    }


DUNDER_CALLS = {"__call__"}


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _root_name(expr: ast.expr) -> ast.expr:
    while isinstance(expr, ast.Attribute | ast.Subscript | ast.Call):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr


def miss_category(index: Index, graph: Any, caller: str, callee: str, lines: set[int], rel: str) -> str:
    """Why PSMR may have missed an observed edge, read off the caller's lines and the callee.

    The first rule that holds names it: class-creation hooks and metaclasses; `__new__`; operator and
    protocol dunders (a dunder no call on the line names); properties; decorator wrappers (a nested
    function no call names); then, by the call on the line that names the callee, the form of its
    receiver: `super()`, a parameter of a test (a pytest fixture or parametrize argument), an annotated
    parameter (an override reached through a base-annotated parameter), another parameter
    (callbacks, duck typing), `self.attr` (a field's declared type), a call's result (its return
    annotation), a container element, `self`/`cls` (a method of a subclass or generic base); a
    constructor call reaching an inherited `__init__` (through a generic or external base); a call
    of a name; and when no call on the line names it, a callable stored or passed along (callbacks,
    dispatch tables).
    """
    name = callee.rsplit(".", 1)[-1]
    owner = callee.rsplit(".", 1)[0]
    owner_def = index.defs.get(owner)
    callee_def = index.defs.get(callee)
    source = index.sources.get(rel)
    calls = [call for line in lines for call, _ in (source.calls.get(line, []) if source else [])]
    named = [c for c in calls if _call_name(c) == name]
    lines_text = " ".join(source.text.splitlines()[line - 1] for line in lines if source and line > 0)
    if name in (
        "__init_subclass__",
        "__set_name__",
        "__class_getitem__",
        "__prepare__",
        "__instancecheck__",
        "__subclasscheck__",
    ):
        return "class-creation hook / metaclass"
    if (
        owner_def is not None
        and owner_def.kind == "class"
        and name in ("__new__", "__init__", "__call__")
        and any(
            ast.unparse(b).split(".")[-1] in ("type", "ABCMeta") or ast.unparse(b).endswith("Meta")
            for b in owner_def.bases
        )
    ):
        return "class-creation hook / metaclass"
    if name == "__new__":
        return "__new__ on construction"
    if name.startswith("__") and name.endswith("__") and name != "__init__" and not named:
        return "operator / protocol dunder"
    if callee_def is not None and any(
        d in PROPERTY_DECORATORS or d.endswith((".setter", ".getter", ".deleter"))
        for d in callee_def.decorators
    ):
        return "property"
    if (
        "." in folded(callee.removeprefix("semantic:"))
        and owner_def is not None
        and owner_def.kind == "def"
        and not named
    ):
        return "decorator wrapper / nested function"
    caller_def = index.defs.get(caller)
    params = caller_def.params if caller_def else {}
    is_test = graph.nodes.get(caller, {}).get("kind") == "test" or caller.split(".")[-1].startswith("test")
    if name == "__init__" and not named:
        if "super()" in lines_text:
            return "super()"
        bases = [ast.unparse(b) for b in (owner_def.bases if owner_def else [])]
        if any("[" in b for b in bases):
            return "constructor through a generic base"
        return "constructor reaching an inherited or external-base __init__"
    for call in named:
        func = call.func
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if isinstance(receiver, ast.Call) and _call_name(receiver) == "super":
                return "super()"
            root = _root_name(receiver)
            if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
                bases = [ast.unparse(b) for b in (owner_def.bases if owner_def else [])]
                if any("[" in b for b in bases):
                    return "method through a generic base"
                return "self method (override or base not linked)"
            if isinstance(root, ast.Name) and root.id in params and root.id not in ("self", "cls"):
                if is_test:
                    return "pytest fixture / parametrize argument"
                if params[root.id]:
                    return "override through an annotated parameter"
                return "unannotated parameter (callback, duck typing)"
            if (
                isinstance(receiver, ast.Attribute)
                and isinstance(receiver.value, ast.Name)
                and receiver.value.id in ("self", "cls")
            ):
                return "attribute of self (field type)"
            if isinstance(receiver, ast.Call):
                return "call result (return annotation)"
            if isinstance(receiver, ast.Subscript):
                return "container element"
            return "attribute of a local or global"
        if isinstance(func, ast.Name):
            if func.id in params:
                return "called parameter (callback)"
            return "call of a name (local rebinding, conditional definition)"
    if calls:
        return "callable passed or stored (callback, dispatch table)"
    return "no call on the line (implicit)"


def measure(
    package: Package,
    python: Path,
    work: Path,
    audit_n: int,
    use_jedi: bool,
    progress: Any,
    *,
    audit_confirmed: bool = False,
) -> dict[str, Any]:
    from slotrelay.psmr.api import build_workspace
    from slotrelay.psmr.workspace.build import discover, module_name
    from slotrelay.psmr.workspace.store import Store

    task = progress.add_task(f"{package.name} {package.version}", total=5)
    sdist = fetch(package)
    install(python, package, sdist)
    tree = unpack(sdist, work / "sdist")
    progress.advance(task)
    observed_raw = trace(python, tree, package, work / "trace.json")
    progress.advance(task)
    # PSMR's tree: the package folder and the tests, where they lie in the sdist.
    root = work / "tree"
    for part in (package.code, package.tests):
        shutil.copytree(tree / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    summary = build_workspace(root, store=work / "store")
    ws = Store.open(work / "store").load(summary["workspace_id"])
    graph = ws.graph
    progress.advance(task)
    files = discover(root)
    module_of = {p.relative_to(root).as_posix(): module_name(root, p)[0] for p in files}
    index = Index(root, files)

    def in_package(node: str) -> bool:
        artifact = graph.nodes.get(node, {}).get("artifact", "")
        return artifact.startswith(package.code + "/")

    def in_scope(node: str) -> bool:
        artifact = graph.nodes.get(node, {}).get("artifact", "")
        return artifact.startswith((package.code + "/", package.tests + "/"))

    observed: set[tuple[str, str]] = set()
    lines: dict[tuple[str, str], set[int]] = defaultdict(set)
    files_of: dict[tuple[str, str], str] = {}
    unmapped = 0
    for caller_file, caller_q, _, line, callee_file, callee_q, _, _count in observed_raw["edges"]:
        caller = index.code_node(module_of, caller_file, caller_q)
        callee = index.code_node(module_of, callee_file, callee_q)
        if callee_q.rsplit(".", 1)[-1] in COMPREHENSIONS:
            continue
        if caller not in graph or callee not in graph:
            unmapped += 1
            continue
        if graph.nodes[callee].get("kind") in ("class", "module", "lambda"):
            continue
        edge = (caller, callee)
        observed.add(edge)
        lines[edge].add(line)
        files_of[edge] = caller_file
    ran = {n for f, q, _ in observed_raw["ran"] if (n := index.code_node(module_of, f, q)) in graph}
    drawn = {(a, b) for a, b in psmr_edges(graph) if in_package(b) and in_scope(a)}
    psmr = score(observed, drawn, ran)
    progress.advance(task)
    reference = None
    if use_jedi:
        jedi_drawn = {(a, b) for a, b in jedi_edges(index, graph, progress) if in_package(b) and in_scope(a)}
        reference = score(observed, jedi_drawn, ran)
    progress.advance(task)
    missed = [
        [caller, callee, category, files_of[edge], sorted(lines[edge])]
        for edge in sorted(observed - drawn)
        for caller, callee in [edge]
        for category in [miss_category(index, graph, caller, callee, lines[edge], files_of[edge])]
    ]
    misses = Counter(category for _, _, category, _, _ in missed)
    if audit_confirmed:
        # The strict linker's edges: the ones whose two ends both ran first (the tests exercised both,
        # never that pair), then the others, to fill the share.
        confirmed = confirmed_edges(ws)
        both = [e for e in psmr["both_ran_edges"] if e in confirmed]
        rest = sorted(e for e in drawn - observed if e in confirmed and e not in set(both))
        sample = random.Random(31).sample(both, min(audit_n, len(both)))
        sample += random.Random(31).sample(rest, min(audit_n - len(sample), len(rest)))
    else:
        sample = random.Random(31).sample(psmr["both_ran_edges"], min(audit_n, len(psmr["both_ran_edges"])))
    progress.remove_task(task)
    return {
        "package": package.name,
        "version": package.version,
        "sha256": package.sha256,
        "pytest_status": observed_raw["pytest_status"],
        "observed": len(observed),
        "observed_callees": len({b for _, b in observed}),
        "observed_callers": dict(sorted(Counter(b for _, b in observed).items())),
        "unmapped_observations": unmapped,
        "psmr": {k: v for k, v in psmr.items() if k != "both_ran_edges"},
        "never_observed_both_ran": [list(e) for e in psmr["both_ran_edges"]],
        "reference": {k: v for k, v in reference.items() if k != "both_ran_edges"} if reference else None,
        "misses": dict(misses.most_common()),
        "missed": missed,
        "audit": [audit_entry(ws, index, edge, ran) for edge in sample],
    }


def confirmed_edges(ws: Any) -> set[tuple[str, str]]:
    """The call edges (named as `psmr_edges` names them) with at least one `confirmed` call site."""
    out = set()
    graph = ws.graph
    for caller, callee, key, data in graph.edges(keys=True, data=True):
        if key != "calls" or not any(ws.evidence[ev]["status"] == "confirmed" for ev in data["evidence"]):
            continue
        for target in constructor_targets(graph, callee):
            out.add((enclosing(graph, caller), target))
    return out


def audit_entry(ws: Any, index: Index, edge: tuple[str, str], ran: set[str]) -> dict[str, Any]:
    """A never-observed edge with its call sites (line, text, resolution, status), for a person to judge."""
    caller, callee = edge
    graph = ws.graph
    sites = []
    for _, target, key, data in graph.out_edges(caller, keys=True, data=True):
        if key != "calls" or callee not in constructor_targets(graph, target):
            continue
        for ev in data["evidence"]:
            record = ws.evidence[ev]
            source = index.sources.get(record["artifact"])
            line = record["span"]["line"]
            text = source.text.splitlines()[line - 1].strip() if source else ""
            sites.append(
                {
                    "artifact": record["artifact"],
                    "line": line,
                    "text": text,
                    "resolution": record["resolution"],
                    "status": record["status"],
                }
            )
    return {
        "caller": caller.removeprefix("semantic:"),
        "callee": callee.removeprefix("semantic:"),
        "both_ran": caller in ran and callee in ran,
        "sites": sites,
    }


def write_audit(rows: list[dict[str, Any]], out: Path) -> None:
    lines = [
        "# PSMR call edges the tests never made, though both ends ran",
        "",
        "Judge each: `real` (some run of the code can make this call), `wrong` (none can), `?`.",
        "",
    ]
    for r in rows:
        lines += [f"## {r['package']} {r['version']}", ""]
        for i, entry in enumerate(r["audit"], 1):
            ends = "both ends ran" if entry["both_ran"] else "an end never ran"
            lines.append(f"{i}. `{entry['caller']}` -> `{entry['callee']}` ({ends}) — verdict:")
            lines += [
                f"    - {s['artifact']}:{s['line']} ({s['resolution']}, {s['status']}): `{s['text']}`"
                for s in entry["sites"]
            ]
        lines.append("")
    out.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("packages", nargs="*", help="names from PACKAGES (default: all)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--audit", type=int, default=50, help="never-observed edges to sample, in all")
    parser.add_argument("--no-jedi", action="store_true", help="skip the reference tool")
    parser.add_argument(
        "--audit-confirmed", action="store_true", help="sample only edges with a `confirmed` call site"
    )
    args = parser.parse_args()
    chosen = [p for p in PACKAGES if not args.packages or p.name in args.packages]
    console = Console(width=max(Console().width, 140))
    python = bench_venv()
    rows = []
    with Progress(console=console, transient=True) as progress:
        for package in chosen:
            with tempfile.TemporaryDirectory(prefix=f"psmr-runtime-{package.name}-") as work:
                share = -(-args.audit // len(chosen))
                rows.append(
                    measure(
                        package,
                        python,
                        Path(work),
                        share,
                        not args.no_jedi,
                        progress,
                        audit_confirmed=args.audit_confirmed,
                    )
                )
    table = Table(title=f"PSMR's call edges against the edges the tests made ({datetime.now(UTC):%Y-%m-%d})")
    for column in (
        "package",
        "observed",
        "PSMR recall",
        "PSMR caller recall",
        "PSMR unobserved (ran)",
        "jedi recall",
        "jedi caller recall",
        "jedi unobserved (ran)",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        ref = r["reference"] or {}
        table.add_row(
            f"{r['package']} {r['version']}",
            str(r["observed"]),
            f"{r['psmr']['recall']:.3f}",
            f"{r['psmr']['caller_recall']:.3f}",
            f"{r['psmr']['never_observed']} ({r['psmr']['never_observed_both_ran']})",
            f"{ref['recall']:.3f}" if ref else "-",
            f"{ref['caller_recall']:.3f}" if ref else "-",
            f"{ref['never_observed']} ({ref['never_observed_both_ran']})" if ref else "-",
        )
    console.print(table)
    misses: Counter[str] = Counter()
    for r in rows:
        misses.update(r["misses"])
    by_category = Table(title="PSMR's misses by category (observed edges it does not draw)")
    by_category.add_column("category")
    for r in rows:
        by_category.add_column(r["package"], justify="right")
    by_category.add_column("all", justify="right")
    for category, count in misses.most_common():
        by_category.add_row(category, *(str(r["misses"].get(category, 0)) for r in rows), str(count))
    console.print(by_category)
    out_dir = args.json.parent if args.json else Path.cwd()
    write_audit(rows, out_dir / "psmr-runtime-audit.md")
    console.print(f"audit sample: {out_dir / 'psmr-runtime-audit.md'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
