"""The state of the fast pass's walk over one module: the facts it fills, its scopes and their bindings.

Each scope (module, class, function, lambda) keeps its bindings per name in the order the walk meets
them, and, where only straight-line code of the scope bound a name, which of those bindings reach the
current statement: a name's ref (`["name", scope, id, which]`) carries them. The walkers of the other
`extract_*` modules build on `ScopeWalker`; `slotrelay.psmr.analysis.extract.FileExtractor` joins them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from slotrelay.psmr.analysis.extract_narrowing import IdentityGuards

Ref = list[Any]


def span(node: ast.AST) -> list[int]:
    """[line, col, end_line, end_col] of a node (1-based lines, 0-based columns)."""
    line = getattr(node, "lineno", 1)
    col = getattr(node, "col_offset", 0)
    return [
        line,
        col,
        getattr(node, "end_lineno", None) or line,
        getattr(node, "end_col_offset", None) or col,
    ]


class _Scope:
    def __init__(self, qualname: str, kind: str, parent: _Scope | None, class_q: str | None = None):
        self.qualname = qualname
        self.kind = kind
        self.parent = parent
        self.class_q = class_q
        self.globals: set[str] = set()
        self.lambda_count = 0
        # How deep in branches and loops of this scope the walk is, and per name the indexes of its
        # bindings that reach straight-line code here (None once a branch or a loop bound it).
        self.nesting = 0
        self.reaching: dict[str, tuple[int, ...] | None] = {}


# The walk's visitor per (walker class, node class): `ast.NodeVisitor.visit` builds the method's name and
# looks it up along the walkers' long MRO at every node, a fifth of the fast pass on a large package.
_VISITORS: dict[tuple[type, type], Callable[[Any, Any], Any]] = {}


class ScopeWalker(ast.NodeVisitor):
    """The facts one module's walk fills (see `slotrelay.psmr.analysis.extract`), the scope it is in, and the
    names each scope binds."""

    def __init__(self, module: str, *, is_package: bool, lines: list[str] | None = None) -> None:
        self.module = module
        self.lines = lines or []
        self.is_package = is_package
        self.defs: list[dict[str, Any]] = []
        self.scopes: dict[str, dict[str, Any]] = {}
        self.bindings: dict[str, dict[str, list[Ref]]] = {}
        self.instance_attrs: dict[str, dict[str, list[Ref]]] = {}
        self.calls: list[dict[str, Any]] = []
        self.state: list[dict[str, Any]] = []
        self.imports: list[dict[str, Any]] = []
        self.stars: dict[str, list[str]] = {}
        self.unknowns: list[dict[str, Any]] = []
        self.withs: list[dict[str, Any]] = []
        # `module.attr = value` (a module's global patched from outside, `module` an import):
        # [the ref of module, attr, the ref of value] (see `Linker.patched`).
        self.stores: list[list[Any]] = []
        self.exports: list[str] | None = None
        self.lambdas: dict[int, str] = {}
        self.implicit: list[dict[str, Any]] = []
        # Names narrowed by an enclosing `if isinstance(name, C):` (or `x is not SENTINEL`), per scope.
        self.narrowed: list[tuple[str, str, list[Ref], str]] = []
        # Parameters annotated as a set or a dict, per scope: `set(p)` hashes none of their elements.
        self.set_params: set[tuple[str, str]] = set()
        # The module's identity tests against a sentinel (set when the walk enters the module).
        self.identity = IdentityGuards(ast.Module(body=[], type_ignores=[]))
        # Names an enclosing `if name is None:` (True) or `is not None` / `else` (False) tests, per scope.
        self.none_guards: list[tuple[str, str, bool]] = []
        # Names some nested scope declares global or nonlocal: rebound from elsewhere at any time.
        self.escaped: set[str] = set()
        # Attributes in call position: their read is the call's, not a property access.
        self.callee_attrs: set[int] = set()
        # Names bound by `with pytest.raises(E) as name`, per scope: the ref of E.
        self.raises: dict[tuple[str, str], Ref | None] = {}
        # How many `if TYPE_CHECKING:` bodies enclose the statement visited: their imports never run.
        self.type_checking = 0
        # `from __future__ import annotations`: annotations stay strings, never evaluated.
        self.deferred_annotations = False
        self.scope = self._open(module, "module", None, None)
        if is_package:
            # Whether `from module import x` looks up the module's `__path__` (a plain module: its
            # `__getattr__` answers); kept in the scope, whose changes a replay follows.
            self.scopes[module]["package"] = True

    def visit(self, node: ast.AST) -> Any:
        visitor = _VISITORS.get((type(self), type(node)))
        if visitor is None:
            found: Callable[[Any, Any], Any] = getattr(
                type(self), f"visit_{type(node).__name__}", type(self).generic_visit
            )
            visitor = _VISITORS[type(self), type(node)] = found
        return visitor(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        # `ast.NodeVisitor.generic_visit` without its generator of (field, value) pairs per node.
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def visit_Constant(self, node: ast.Constant) -> None:
        """A constant holds no node; `ast.NodeVisitor.visit_Constant` only looks for the visitors of
        Python 3.7's constant nodes, which no walker here has."""

    def _open(self, qualname: str, kind: str, parent: _Scope | None, class_q: str | None) -> _Scope:
        scope = _Scope(qualname, kind, parent, class_q)
        self.scopes.setdefault(
            qualname,
            {"kind": kind, "parent": parent.qualname if parent else None, "returns": [], "yields": []},
        )
        self.bindings.setdefault(qualname, {})
        return scope

    def bind(self, name: str, ref: Ref | None, scope: _Scope | None = None, *, adds: bool = False) -> None:
        """Bind name to ref in the scope; `adds`: the binding adds to the value (`d[k] = f`), not replaces
        it."""
        scope = scope or self.scope
        if ref is None:
            ref = ["unk", "opaque_value"]
        target = self._module_scope() if name in scope.globals else scope
        bound = self.bindings[target.qualname].setdefault(name, [])
        bound.append(ref)
        index = len(bound) - 1
        before = target.reaching.get(name)
        if target is not scope or target.nesting:
            target.reaching[name] = None
        elif adds:
            target.reaching[name] = None if before is None else (*before, index)
        else:
            target.reaching[name] = (index,)

    def _module_scope(self) -> _Scope:
        scope = self.scope
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def _name_ref(self, name: str) -> Ref:
        # Flow-sensitive where it is cheap and sure: in straight-line code, a name denotes only the
        # bindings that reach it (`f = a; f = b; f()` calls b). Names other scopes may rebind (global,
        # nonlocal) denote all their bindings.
        which = self.scope.reaching.get(name)
        if which is None or name in self.scope.globals or name in self.escaped:
            return ["name", self.scope.qualname, name]
        return ["name", self.scope.qualname, name, list(which)]

    def _lambda_name(self, node: ast.Lambda) -> str:
        name = self.lambdas.get(id(node))
        if name is None:
            self.scope.lambda_count += 1
            name = f"{self.scope.qualname}.<lambda{self.scope.lambda_count}>"
            self.lambdas[id(node)] = name
        return name

    def _docstring_scope(self, node: ast.AST, qualname: str) -> None:
        self.scopes[qualname]["doc"] = ast.get_docstring(node)  # type: ignore[arg-type]

    def _imported_name(self, name: str) -> bool:
        """Whether a name read here is the module's import (`from . import termui`), not a local."""
        if self.scope.qualname != self.module and name in self.bindings.get(self.scope.qualname, {}):
            return False
        refs = self.bindings.get(self.module, {}).get(name, [])
        return bool(refs) and all(r is not None and r[0] in ("imp", "from") for r in refs)

    def _self_class(self, name: str) -> str | None:
        scope = self.scope
        if scope.kind != "method" or scope.class_q is None:
            return None
        refs = self.bindings[scope.qualname].get(name, [])
        return scope.class_q if any(r[0] in ("self", "cls") for r in refs) else None

