"""The fast pass: one Python file's source to its facts (definitions, bindings, calls, state access).

Facts are file-local plain data (refs frozen to tuples), so the store caches them by content hash and a
rebuild re-parses only changed files; `slotrelay.psmr.link` resolves them across files afterwards. Expressions
become small symbolic references ("refs"), evaluated later, never guessed here:

    ["name", scope, id(, which)] a name looked up from a scope (LEGB, class scopes skipped inside functions);
                                 `which`: the indexes of the scope's bindings of id that reach this use,
                                 when only straight-line code of the scope bound it before
    ["attr", ref, name]          an attribute of what ref denotes
    ["attrs", ref, prefix, rest] `getattr(ref, prefix + rest)`: the attributes whose names rest's
                                 constants complete, or any named with the prefix (none for the
                                 prefix "", `getattr(ref, rest)`)
    ["call", ref, [args], {kw}]  the result of calling ref
    ["sub", ref, key] / ["iter", ref]   an element of a container (at a constant key, or None) / of an
    iteration ["coll", [refs], [keys]]     a literal container holding these values (a dict's constant keys,
    else None) ["union", [refs]]            any of these (conditional expression, `or`)
    ["def", qualname]            a definition in this file (function, class, lambda)
    ["deco", [refs], ref]        a definition passed through decorators, innermost last
    ["imp", dotted] / ["from", module, name]   what an import binds
    ["param", func, index, name, default, classes]   a parameter, bound to arguments at link time;
                                 classes: its annotation's classes (only their instances flow in), or None
    ["annot", ref]               an instance of the class an annotation names
    ["typed", ref]               what an annotation declares (ref: `slotrelay.psmr.typerefs`)
    ["returns", typed]           a callable an annotation declares (`Callable[[..], R]`): its call
                                 returns what typed declares
    ["alias", typed]             a module's type alias (`Interval = tuple[A, B]`): an annotation naming it
                                 declares what `typed` does
    ["cast", typed, ref]         `typing.cast(T, x)`: what T declares, or x where T names none of the tree's
    ["op", [[ref, [names]], ..]] the result of an operator: the first of the named dunders each
                                 operand's class defines, called
    ["narrowcls", ref, [refs]]   ref where `issubclass(ref, classes)` holds (inside the `if` body)
    ["fixture", module, name]    a test's parameter: what the pytest fixture of that name gives
    ["narrow", ref, [refs]]      ref where `isinstance(ref, classes)` holds (inside the `if` body)
    ["without", ref, [sentinel]] ref where `ref is not sentinel` holds (see `_IdentityGuards`)
    ["unlike", ref, [refs]]      ref where `isinstance(ref, classes)` fails (the `else` branch)
    ["rows", ref]                a test parameter's values `@pytest.mark.parametrize` lists (ref's elements)
    ["guard", name, none, ref]   a value returned where parameter `name` is None (none=True) or is not
    ["prop", qualname]           a method made a property (@property, @x.setter, @cached_property)
    ["self", class] / ["cls", class] / ["super", class]   first parameter of a method, super()
    ["varargs", func]            a `*args` parameter: a tuple of the arguments past the named ones
    ["const", key]               a str or int constant argument (a key for `d.get(key)`), denoting nothing
    ["unk", reason]              something dynamic the analysis refuses to guess

Besides call sites, the facts list the calls Python makes without call syntax ("implicit"): `for`
(`__iter__`/`__next__`), `with` (`__enter__`/`__exit__`), `raise Cls` (the constructor), every
attribute read or write outside call position (a property's getter or setter, when the linker finds one),
operators (`op`: `a + b`, `x[k]`, `k in x`, `==` and its reflected dunder on the right, f-strings,
`await`, a truth test `if x`/`not x`/`x and y`, pytest's `raises(E, match=...)` formatting the E; the
dunders in `slotrelay.psmr.typerefs`), class statements (`classdef`: the metaclass's `__new__`/`__init__`,
the bases' `__init_subclass__`), `from m import x` (`import`: a module `__getattr__`) and a value used
as a key (`key`: `d[k]`, `k in d`, `d.get(k)`, `{k: v}`, `{k}`, `set(xs)`, with the container as
`receiver`). `yield from x` and `"sep".join(x)` iterate x.

A file that does not parse yields facts with `syntax_error` set and nothing else.
"""

from __future__ import annotations

import ast
import hashlib
import warnings
from collections.abc import Iterator
from typing import Any

from slotrelay.psmr.facts_version import FACTS_VERSION
from slotrelay.psmr.typerefs import (
    BINARY_DUNDERS,
    BUILTIN_DUNDERS,
    COMPARE_DUNDERS,
    TYPE_CONSTRUCTORS,
    UNARY_DUNDERS,
    annotation_ref,
)

DYNAMIC_BUILTINS = {"eval": "dynamic_eval", "exec": "dynamic_exec", "compile": "dynamic_eval"}
PROPERTY_DECORATORS = frozenset({"property", "cached_property", "functools.cached_property"})
PROPERTY_ACCESSORS = (".setter", ".getter", ".deleter")
# Builtins whose result is a str, number or bool: never an instance of the tree's classes.
SCALAR_BUILTINS = frozenset(
    {"len", "str", "repr", "int", "float", "bool", "abs", "round", "hash", "id", "ord", "chr", "format",
     "isinstance", "issubclass", "callable", "hasattr", "sum", "divmod", "bin", "hex", "oct"}
)

# The list, set and dict methods that store their arguments in the receiver: how many positional
# arguments each takes (least, most), and whether it takes keywords (`d.update(k=v)`).
CONTAINER_ARITY: dict[str, tuple[int, int, bool]] = {
    "append": (1, 1, False),
    "add": (1, 1, False),
    "insert": (2, 2, False),
    "extend": (1, 1, False),
    "update": (0, 1, True),
    "setdefault": (1, 2, False),
}
# Builtins that make a list or a tuple: `x in` one compares, never hashes.
SEQUENCE_BUILTINS = frozenset({"list", "tuple", "sorted"})
# Annotations of a set or a dict: it stores its elements' (its keys') hashes.
HASHED_SET_ANNOTATIONS = frozenset(
    {"set", "Set", "frozenset", "FrozenSet", "AbstractSet", "MutableSet", "dict", "Dict", "Mapping",
     "MutableMapping"}
)
# Methods of dicts and sets that hash their first argument.
CLASS_DUNDERS = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})
KEYED_METHODS = frozenset({"get", "pop", "setdefault", "add", "discard"})

Ref = list[Any]


def is_overload(decorators: list[str]) -> bool:
    """Whether a definition is an `@overload` stub: `overload`, or `overload` of a module however it
    is imported (`typing.overload`, `t.overload` under `import typing as t`)."""
    return any(d.rsplit(".", 1)[-1] == "overload" and d.count(".") <= 1 for d in decorators)


def freeze(ref: Any) -> Any:
    """A hashable copy of a ref (lists become tuples, keyword dicts sorted pairs)."""
    if isinstance(ref, list):
        return tuple(freeze(r) for r in ref)
    if isinstance(ref, dict):
        return tuple(sorted((k, freeze(v)) for k, v in ref.items()))
    return ref


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


def module_base(module: str, is_package: bool, level: int) -> str:
    """The package a relative import of `level` dots starts from."""
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts)


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


class FileExtractor(ast.NodeVisitor):
    """Walks one module's AST and fills the facts dict (see the module docstring)."""

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
        self.identity = _IdentityGuards(ast.Module(body=[], type_ignores=[]))
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

    # scopes and bindings

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

    # expressions to refs

    def ref(self, node: ast.AST | None) -> Ref | None:
        """The symbolic reference of an expression, or None when it denotes nothing callable."""
        q = self.scope.qualname
        match node:
            case ast.Name(id=name):
                plain = self._name_ref(name)
                for scope, narrowed, classes, kind in self.narrowed:
                    if scope == q and narrowed == name:
                        plain = [kind, plain, classes]
                return plain
            case ast.Attribute(value=ast.Name(id=name), attr="value") if (q, name) in self.raises:
                raised = self.raises[(q, name)]
                return ["annot", raised] if raised is not None else None
            case ast.Attribute(value=value, attr=attr):
                base = self.ref(value)
                return ["attr", base, attr] if base is not None else None
            case ast.Call(func=func, args=[note, value]) if _is_cast(func):
                typed = annotation_ref(note, self.ref, self.scope.class_q)
                ref = self.ref(value)
                if typed is None or ref is None:
                    return ["typed", typed] if typed is not None else ref
                return ["cast", typed, ref]
            case ast.Call():
                return self._call_ref(node)
            case ast.BinOp(left=left, op=op, right=right):
                forward, reflected = BINARY_DUNDERS[type(op)]
                return self._op_ref([(left, (forward,)), (right, (reflected,))])
            case ast.UnaryOp(op=op, operand=operand) if type(op) in UNARY_DUNDERS:
                return self._op_ref([(operand, (UNARY_DUNDERS[type(op)],))])
            case ast.Subscript(value=value, slice=ast.Slice()):
                # A slice of a sequence is a sequence of its elements.
                return self.ref(value)
            case ast.Subscript(value=value, slice=index):
                base = self.ref(value)
                return ["sub", base, _constant_key(index)] if base is not None else None
            case ast.List(elts=elts) | ast.Tuple(elts=elts):
                # Elements keyed by position, up to the first starred one.
                starred = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), len(elts))
                pairs = [(i if i < starred else None, self.ref(e)) for i, e in enumerate(elts)]
                return [
                    "coll",
                    [r for _, r in pairs if r is not None],
                    [i for i, r in pairs if r is not None],
                ]
            case ast.Set(elts=elts):
                refs = [r for r in map(self.ref, elts) if r is not None]
                return ["coll", refs, [None] * len(refs)]
            case ast.Dict(keys=keys, values=values):
                keyed = [(_constant_key(k), self.ref(v)) for k, v in zip(keys, values, strict=True)]
                keyed = [(k, r) for k, r in keyed if r is not None]
                return ["coll", [r for _, r in keyed], [k for k, _ in keyed]]
            case ast.Lambda():
                return ["def", self._lambda_name(node)]
            case ast.IfExp(body=body, orelse=orelse):
                return ["union", [r for r in (self.ref(body), self.ref(orelse)) if r is not None]]
            case ast.BoolOp(values=values):
                return ["union", [r for r in map(self.ref, values) if r is not None]]
            case ast.Await(value=value) | ast.NamedExpr(value=value) | ast.Starred(value=value):
                return self.ref(value)
            case ast.ListComp(elt=elt) | ast.SetComp(elt=elt) | ast.GeneratorExp(elt=elt):
                refs = [r for r in [self.ref(elt)] if r is not None]
                return ["coll", refs, [None] * len(refs)]
            case ast.DictComp(value=value):
                refs = [r for r in [self.ref(value)] if r is not None]
                return ["coll", refs, [None] * len(refs)]
        return None

    def _op_ref(self, operands: list[tuple[ast.expr, tuple[str, ...]]]) -> Ref | None:
        """The result of an operator: what the dunder of the first operand whose class has one returns."""
        parts = [[ref, list(names)] for node, names in operands if (ref := self.ref(node)) is not None]
        return ["op", parts] if parts else None

    def _operator(
        self, operands: list[tuple[ast.expr, tuple[str, ...]]], node: ast.AST, *, reflected: bool = False
    ) -> None:
        """Record the dunders an operator may call, one implicit call per operand. With `reflected`,
        the second operand's dunder runs only where the first's returns NotImplemented: it keeps the
        first's (`after`), so the linker knows when that is a guess."""
        for index, (operand, names) in enumerate(operands):
            ref = self.ref(operand)
            if _may_be_instance(operand) and ref is not None:
                self._implicit("op", ref, node, list(names))
                first = self.ref(operands[0][0]) if reflected and index == 1 else None
                if first is not None:
                    self.implicit[-1]["after"] = [first, list(operands[0][1])]

    def _call_ref(self, node: ast.Call) -> Ref | None:
        func = node.func
        if isinstance(func, ast.Name):
            if func.id == "super" and self.scope.class_q:
                return ["super", self.scope.class_q]
            if func.id == "getattr" and len(node.args) >= 2:
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    base = self.ref(node.args[0])
                    return ["attr", base, name.value] if base is not None else None
                prefixed = _prefixed(name)
                if prefixed is not None:
                    base = self.ref(node.args[0])
                    prefix, rest = prefixed
                    return ["attrs", base, prefix, self.ref(rest) or _constant_ref(rest)] if base else None
                rest_ref = self.ref(name) if isinstance(name, ast.Name) else None
                if rest_ref is not None:
                    # `getattr(x, name)`: the attributes the constants given to name (no prefix) name.
                    base = self.ref(node.args[0])
                    return ["attrs", base, "", rest_ref] if base else None
                return ["unk", "dynamic_getattr"]
            if func.id == "__import__" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    return ["imp", arg.value.split(".")[0]]
                return ["unk", "dynamic_import"]
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "import_module"
            and isinstance(func.value, ast.Name)
            and func.value.id == "importlib"
            and node.args
        ):
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                return ["imp", arg.value]
            return ["unk", "dynamic_import"]
        callee = self.ref(func)
        if callee is None:
            return None
        args = [self.ref(a) or _constant_ref(a) for a in node.args]
        kwargs = {k.arg: self.ref(k.value) or ["unk", "opaque_value"] for k in node.keywords if k.arg}
        return ["call", callee, args, kwargs]

    # statements

    def visit(self, node: ast.AST) -> Any:
        # A statement past `if x is SENTINEL: continue` (or return, raise, break) sees x without it.
        pushed = 0
        for name, sentinel in self.identity.after.get(id(node), ()):
            pushed += self._exclude(name, sentinel)
        try:
            return super().visit(node)
        finally:
            del self.narrowed[len(self.narrowed) - pushed :]

    def _exclude(self, name: str, sentinel: ast.expr) -> int:
        """Narrow name to what is not the sentinel, from here to the end of the enclosing block or
        branch (the caller pops it); 1 if it did."""
        ref = self.ref(sentinel)
        if ref is None:
            return 0
        self.narrowed.append((self.scope.qualname, name, [ref], "without"))
        return 1

    def visit_Module(self, node: ast.Module) -> None:
        self.identity = _IdentityGuards(node)
        self._docstring_scope(node, self.module)
        self.generic_visit(node)

    def _docstring_scope(self, node: ast.AST, qualname: str) -> None:
        self.scopes[qualname]["doc"] = ast.get_docstring(node)  # type: ignore[arg-type]

    def _decorated(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, qualname: str) -> Ref:
        base: Ref = ["def", qualname]
        if not node.decorator_list:
            return base
        return ["deco", [self.ref(d) or ["unk", "opaque_value"] for d in node.decorator_list], base]

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        parent = self.scope
        qualname = f"{parent.qualname}.{node.name}"
        is_method = parent.kind == "class"
        decorators = [ast.unparse(d) for d in node.decorator_list]
        self._record_decorator_calls(node.decorator_list, qualname)
        if is_method and any(d in PROPERTY_DECORATORS or d.endswith(PROPERTY_ACCESSORS) for d in decorators):
            self.bind(node.name, ["prop", qualname])
        else:
            self.bind(node.name, self._decorated(node, qualname))
        kind = "method" if is_method else "function"
        is_test = node.name.startswith("test") and self._is_test_module()
        self._add_def(node, qualname, kind, decorators=decorators, is_test=is_test)
        scope = self._open(qualname, kind, parent, parent.class_q if not is_method else parent.qualname)
        self._docstring_scope(node, qualname)
        self.scope = scope
        self._bind_params(
            node.args, qualname, method_of=parent.qualname if is_method else None, decorators=decorators
        )
        if self._is_test_module() or self.module.rsplit(".", 1)[-1] == "conftest":
            self._bind_test_values(node, is_method=is_method)
        overload = is_overload(decorators)
        if overload:
            bound_first = is_method and "staticmethod" not in decorators
            signature = self._overload_params(node.args, skip_first=bound_first)
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.scope = parent
            self.visit(default)
            self.scope = scope
        for stmt in node.body:
            self.visit(stmt)
        self.scope = parent
        if node.returns is not None and not self.deferred_annotations:
            # The return annotation is evaluated when the def runs (not under the __future__ import).
            self.visit(node.returns)
        returns = annotation_ref(
            node.returns, self.ref, parent.qualname if is_method else parent.class_q, callables=overload
        )
        info = self.scopes[qualname]
        if overload:
            # One signature of the function: which arguments select it, and what it then returns.
            info.setdefault("overloads", []).append(
                [signature, returns]
            )
        elif returns is not None:
            info["annotated"] = returns

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def _record_decorator_calls(self, decorators: list[ast.expr], qualname: str) -> None:
        # `@dec` calls dec with the function; `@dec(...)` calls dec(...) (visited) then its result.
        # Decorators apply innermost first: each outer one is called with what the inner one returned.
        for deco in decorators:
            self.visit(deco)
        arg: Ref = ["def", qualname]
        for deco in reversed(decorators):
            ref = self.ref(deco)
            if ref is None:
                continue
            self.calls.append(
                {
                    "scope": self.scope.qualname,
                    "callee": ref,
                    "args": [arg],
                    "kwargs": {},
                    "span": span(deco),
                    "decorates": qualname,
                }
            )
            arg = ["call", ref, [arg], {}]

    def _outer_ref(self, node: ast.expr | None) -> Ref | None:
        # Defaults are evaluated where the function is defined, not inside it.
        inner = self.scope
        self.scope = inner.parent or inner
        try:
            return self.ref(node)
        finally:
            self.scope = inner

    def _annotation(self, arg: ast.arg) -> list[Ref] | None:
        """Bind a parameter to what its annotation declares; the classes it admits (for argument
        flow: `x: Cls`, `Optional[Cls]`, `A | B`, a string of those), or None when it admits anything."""
        typed = annotation_ref(arg.annotation, self._outer_ref, self.scope.class_q)
        if typed is not None:
            self.bind(arg.arg, ["typed", typed], adds=True)
        return self._admitted(arg.annotation)

    def _admitted(self, note: ast.expr | None) -> list[Ref] | None:
        classes = _annotation_classes(note) if note is not None else None
        refs = [r for r in (self._outer_ref(c) for c in classes or []) if r is not None]
        return refs if classes is not None and len(refs) == len(classes) else None

    def _overload_classes(self, arg: ast.arg) -> list[Ref] | str | None:
        return "any" if arg.annotation is None else self._admitted(arg.annotation)

    def _overload_params(self, args: ast.arguments, *, skip_first: bool) -> list[Ref]:
        # Per parameter: index (-1 keyword-only, -2 `*args`, -3 `**kwargs`), name, the classes its
        # annotation admits (None: not told, "any": no annotation), and whether a call must give it.
        positional = args.posonlyargs + args.args
        required = len(positional) - len(args.defaults)
        out: list[Ref] = [
            [i, a.arg, self._overload_classes(a), i < required] for i, a in enumerate(positional)
        ][1 if skip_first else 0 :]
        if skip_first:
            out = [[i - 1, *rest] for i, *rest in out]
        out += [
            [-1, a.arg, self._overload_classes(a), d is None]
            for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
        ]
        out += [[-2, args.vararg.arg, None, False]] if args.vararg else []
        return out + ([[-3, args.kwarg.arg, None, False]] if args.kwarg else [])

    def _bind_params(
        self, args: ast.arguments, qualname: str, *, method_of: str | None, decorators: list[str]
    ) -> None:
        positional = args.posonlyargs + args.args
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(
            args.defaults
        )
        for arg in positional + args.kwonlyargs:
            note = arg.annotation.value if isinstance(arg.annotation, ast.Subscript) else arg.annotation
            if isinstance(note, ast.Name | ast.Attribute) and _last_name(note) in HASHED_SET_ANNOTATIONS:
                self.set_params.add((qualname, arg.arg))
        for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
            if index == 0 and method_of and "staticmethod" not in decorators:
                # `__new__` and `__init_subclass__` take the class (implicitly static or class methods).
                takes_class = "classmethod" in decorators or qualname.rsplit(".", 1)[-1] in CLASS_DUNDERS
                self.bind(arg.arg, ["cls" if takes_class else "self", method_of])
                continue
            classes = self._annotation(arg)
            self.bind(
                arg.arg, ["param", qualname, index, arg.arg, self._outer_ref(default), classes], adds=True
            )
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            classes = self._annotation(arg)
            self.bind(arg.arg, ["param", qualname, -1, arg.arg, self._outer_ref(default), classes], adds=True)
        if args.vararg is not None:
            self.bind(args.vararg.arg, ["varargs", qualname])
        if args.kwarg is not None:
            # The keywords a call passes it are the function's `**` slot (see `Linker.spread_keywords`).
            self.bind(args.kwarg.arg, ["unk", "variadic_parameter", qualname])

    def _bind_test_values(self, node: ast.FunctionDef | ast.AsyncFunctionDef, *, is_method: bool) -> None:
        """A test's or fixture's parameters take what pytest gives them: the fixture of the same name,
        and the values `@pytest.mark.parametrize` lists for them."""
        params = (node.args.posonlyargs + node.args.args)[1 if is_method else 0 :] + node.args.kwonlyargs
        names = {a.arg for a in params}
        for deco in node.decorator_list:
            for name, values in _parametrized(deco):
                if name in names:
                    for ref in filter(None, map(self._outer_ref, values)):
                        self.bind(name, ["rows", ref], adds=True)
                    for row in (e for v in values if isinstance(v, ast.List) for e in v.elts):
                        if isinstance(row, ast.Constant) and isinstance(row.value, str):
                            # A string row names what `getattr(x, name)` reads (see `Linker.completions`).
                            self.bind(name, ["rows", ["const", row.value]], adds=True)
        is_fixture = any("fixture" in ast.unparse(d) for d in node.decorator_list)
        if node.name.startswith("test") or is_fixture:
            for arg in params:
                self.bind(arg.arg, ["fixture", self.module, arg.arg], adds=True)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        parent = self.scope
        qualname = self._lambda_name(node)
        self._add_def(node, qualname, "lambda")
        scope = self._open(qualname, "lambda", parent, parent.class_q)
        self.scope = scope
        self._bind_params(node.args, qualname, method_of=None, decorators=[])
        self.scopes[qualname]["returns"].append(self.ref(node.body))
        self.visit(node.body)
        self.scope = parent

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        parent = self.scope
        qualname = f"{parent.qualname}.{node.name}"
        self._record_decorator_calls(node.decorator_list, qualname)
        for base in node.bases + [k.value for k in node.keywords]:
            self.visit(base)
        self.bind(node.name, self._decorated(node, qualname))
        # A subscripted base (`Field[list]`, `Generic[T]`) is the class subscripted.
        bases = [
            self.ref(b.value if isinstance(b, ast.Subscript) else b) or ["unk", "opaque_value"]
            for b in node.bases
        ]
        extra: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg == "metaclass":
                extra["metaclass"] = self.ref(keyword.value) or ["unk", "opaque_value"]
        abstract = sorted(
            stmt.name
            for stmt in node.body
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
            and any(ast.unparse(d).endswith("abstractmethod") for d in stmt.decorator_list)
        )
        if abstract:
            extra["abstract"] = abstract
        self._add_def(
            node,
            qualname,
            "class",
            bases=bases,
            decorators=[ast.unparse(d) for d in node.decorator_list],
            **extra,
        )
        # The class statement runs the metaclass and the bases' __init_subclass__.
        self._implicit("classdef", ["def", qualname], _header(node))
        scope = self._open(qualname, "class", parent, qualname)
        self._docstring_scope(node, qualname)
        self.scope = scope
        for stmt in node.body:
            self.visit(stmt)
        self.scope = parent

    def _add_def(self, node: ast.AST, qualname: str, kind: str, **extra: Any) -> None:
        record: dict[str, Any] = {
            "qualname": qualname,
            "kind": kind,
            "span": span(node),
            "parent": self.scope.qualname,
        }
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            record["signature"] = f"({ast.unparse(node.args)})" + (
                f" -> {ast.unparse(node.returns)}" if node.returns else ""
            )
            record["params"] = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
            record["accepts"] = _accepts(node.args)
            record["body_hash"] = self._body_hash(node)
            record["asserts"] = _asserts(node)
            record["raises"] = sorted(
                {
                    ast.unparse(r.exc.func if isinstance(r.exc, ast.Call) else r.exc)
                    for r in ast.walk(node)
                    if isinstance(r, ast.Raise) and r.exc
                }
            )
            record["is_async"] = isinstance(node, ast.AsyncFunctionDef)
            if _is_stub(node.body):
                record["stub"] = True
        if isinstance(node, ast.ClassDef):
            record["body_hash"] = self._body_hash(node)
        record.update(extra)
        self.defs.append(record)

    def _body_hash(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
        # The definition's text, indentation and blank lines aside: what a reader would call a change.
        lines = self.lines[node.lineno - 1 : node.end_lineno]
        text = "\n".join(line.strip() for line in lines if line.strip())
        return hashlib.sha1(text.encode()).hexdigest()[:16]

    def _is_test_module(self) -> bool:
        last = self.module.rsplit(".", 1)[-1]
        return last.startswith("test_") or last.endswith("_test") or ".tests." in f".{self.module}."

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.globals.update(node.names)
        self.escaped.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.escaped.update(node.names)

    def _nested(self, node: ast.stmt) -> None:
        # A branch, loop or handler: what it binds may or may not have happened after it. A loop's
        # body also sees what its own later statements bound in an earlier turn.
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    self.scope.reaching[inner.id] = None
        self.scope.nesting += 1
        try:
            self._visit_nested(node)
        finally:
            self.scope.nesting -= 1

    def visit_While(self, node: ast.While) -> None:
        self._nested(node)

    def visit_Try(self, node: ast.Try) -> None:
        self._nested(node)

    def visit_TryStar(self, node: ast.TryStar) -> None:
        self._nested(node)

    def visit_Match(self, node: ast.Match) -> None:
        self._nested(node)

    def _visit_nested(self, node: ast.stmt) -> None:
        if isinstance(node, ast.For | ast.AsyncFor):
            self._for(node)
        elif isinstance(node, ast.If):
            self._if(node)
        else:
            if isinstance(node, ast.While):
                self._truth(node.test)
            self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            ref = self.ref(node.value)
            if ref is not None:
                for scope, name, none in reversed(self.none_guards):
                    if scope == self.scope.qualname:
                        ref = ["guard", name, none, ref]
                self.scopes[self.scope.qualname]["returns"].append(ref)
            self.visit(node.value)

    def _yield(self, node: ast.Yield | ast.YieldFrom) -> None:
        info = self.scopes[self.scope.qualname]
        info["generator"] = True
        if node.value is not None:
            ref = self.ref(node.value)
            if ref is not None:
                info["yields"].append(["iter", ref] if isinstance(node, ast.YieldFrom) else ref)
            if isinstance(node, ast.YieldFrom):
                # `yield from x` iterates x: a generator's body runs from here.
                self._implicit("iter", ref, node.value)
            self.visit(node.value)

    visit_Yield = _yield
    visit_YieldFrom = _yield

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.bind(alias.asname, ["imp", alias.name])
            else:
                self.bind(alias.name.split(".")[0], ["imp", alias.name.split(".")[0]])
            self.imports.append(
                {"scope": self.scope.qualname, "module": alias.name, "name": None, "span": span(node)}
            )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = module_base(self.module, self.is_package, node.level)
            module = f"{base}.{node.module}" if node.module and base else (node.module or base)
        else:
            module = node.module or ""
        if module == "__future__" and any(a.name == "annotations" for a in node.names):
            self.deferred_annotations = True
        if module and not self.type_checking:
            # Importing from a module asks it for each name (and a plain module for its `__path__`):
            # a module-level `__getattr__` may answer.
            self._implicit("import", ["imp", module], node, [a.name for a in node.names if a.name != "*"])
        for alias in node.names:
            self.imports.append(
                {"scope": self.scope.qualname, "module": module, "name": alias.name, "span": span(node)}
            )
            if alias.name == "*":
                self.stars.setdefault(self.scope.qualname, []).append(module)
                continue
            self.bind(alias.asname or alias.name, ["from", module, alias.name])

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        value = self._alias(node.value) or self.ref(node.value)
        for target in node.targets:
            self._assign(target, value, node)
            if (
                self.scope.kind == "module"
                and isinstance(target, ast.Name)
                and target.id == "__all__"
                and isinstance(node.value, ast.List | ast.Tuple)
            ):
                self.exports = [
                    e.value for e in node.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._assign(node.target, self._alias(node.value) or self.ref(node.value), node)
        elif isinstance(node.target, ast.Attribute):
            self.visit(node.target.value)
        typed = annotation_ref(node.annotation, self.ref, self.scope.class_q)
        if typed is None:
            return
        # A field (`reg: Reg` in a class body: dataclass, attrs, NamedTuple, TypedDict, pydantic) types
        # the instances' attribute; `self.reg: Reg` in a method too; `x: Reg` a local or global.
        match node.target:
            case ast.Name(id=name) if self.scope.kind == "class":
                self.instance_attrs.setdefault(self.scope.qualname, {}).setdefault(name, []).append(
                    ["typed", typed]
                )
            case ast.Name(id=name):
                self.bind(name, ["typed", typed], adds=True)
            case ast.Attribute(value=ast.Name(id=owner), attr=attr) if self._self_class(owner):
                class_q = self._self_class(owner)
                assert class_q is not None  # the case's guard
                self.instance_attrs.setdefault(class_q, {}).setdefault(attr, []).append(["typed", typed])

    def _alias(self, value: ast.expr) -> Ref | None:
        """A module's type alias (`Interval = tuple[Low, Up]`, `Item = Union[A, B]`): what an
        annotation naming it declares."""
        if self.scope.kind != "module" or not _is_type_expression(value):
            return None
        typed = annotation_ref(value, self.ref, None)
        return ["alias", typed] if typed is not None else None

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        # `a += b` calls a.__iadd__, or a.__add__ where a's class has no in-place one.
        forward, reflected = BINARY_DUNDERS[type(node.op)]
        in_place = forward.replace("__", "__i", 1)
        self._operator([(node.target, (in_place, forward)), (node.value, (reflected,))], node, reflected=True)
        if isinstance(node.target, ast.Subscript):
            # `x[k] += v` reads x[k] and writes it back.
            container = node.target.value
            self._operator([(container, ("__getitem__",)), (container, ("__setitem__",))], node)
        self._access(node.target, "read", node)
        self._access(node.target, "write", node)
        if isinstance(node.target, ast.Attribute):
            base = self.ref(node.target.value)
            self._implicit("get", base, node.target, node.target.attr)
            self._implicit("set", base, node.target, node.target.attr)
        if isinstance(node.target, ast.Attribute | ast.Subscript):
            self.visit(node.target.value)

    def _assign(self, target: ast.expr, value: Ref | None, node: ast.AST) -> None:
        if isinstance(target, ast.Subscript):
            self._key(target.value, target.slice, target)
        match target:
            case ast.Name(id=name):
                self.bind(name, value)
                self._access(target, "write", node)
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                starred = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), len(elts))
                for i, elt in enumerate(elts):
                    key = i if i < starred else None
                    self._assign(elt, ["sub", value, key] if value is not None else None, node)
            case ast.Starred(value=inner):
                self._assign(inner, value, node)
            case ast.Attribute(value=ast.Name(id=owner), attr=attr) if self._self_class(owner):
                self._implicit("set", self.ref(target.value), target, attr)
                class_q = self._self_class(owner)
                assert class_q is not None  # the case's guard
                self.instance_attrs.setdefault(class_q, {}).setdefault(attr, []).append(
                    value or ["unk", "opaque_value"]
                )
                self._access(target, "write", node)
            case ast.Attribute(value=obj, attr=attr):
                self._implicit("set", self.ref(obj), target, attr)
                if isinstance(obj, ast.Name) and value is not None and self._imported_name(obj.id):
                    self.stores.append([self.ref(obj), attr, value])
                self.visit(obj)
                self._access(target, "write", node)
            case ast.Subscript(value=ast.Name(id=name) as container, slice=index):
                self._operator([(container, ("__setitem__",))], target)
                # `d[k] = f` puts f in d: later `d[k]()` must see it.
                if value is not None:
                    self.bind(name, ["coll", [value], [_constant_key(index)]], adds=True)
                self._access(container, "write", node)
                self.visit(index)
            case ast.Subscript(
                value=ast.Attribute(value=ast.Name(id=owner), attr=attr) as obj, slice=index
            ) if self._self_class(owner):
                # `self.handlers[k] = f`: the instances' attribute holds f at k.
                self._operator([(obj, ("__setitem__",))], target)
                if value is not None:
                    class_q = self._self_class(owner)
                    assert class_q is not None  # the case's guard
                    self.instance_attrs.setdefault(class_q, {}).setdefault(attr, []).append(
                        ["coll", [value], [_constant_key(index)]]
                    )
                self.visit(obj)
                self.visit(index)
            case ast.Subscript(value=obj, slice=index):
                self._operator([(obj, ("__setitem__",))], target)
                self.visit(obj)
                self.visit(index)

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

    def _access(self, target: ast.expr, mode: str, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.state.append(
                {
                    "scope": self.scope.qualname,
                    "mode": mode,
                    "ref": ["name", self.scope.qualname, target.id],
                    "span": span(node),
                    "global": target.id in self.scope.globals,
                }
            )
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            base = self.ref(target.value)
            self.state.append(
                {
                    "scope": self.scope.qualname,
                    "mode": mode,
                    "ref": ["attr", base, target.attr],
                    "span": span(node),
                    "global": False,
                }
            )

    def visit_BinOp(self, node: ast.BinOp) -> None:
        forward, reflected = BINARY_DUNDERS[type(node.op)]
        self._operator([(node.left, (forward,)), (node.right, (reflected,))], node, reflected=True)
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if type(node.op) in UNARY_DUNDERS:
            self._operator([(node.operand, (UNARY_DUNDERS[type(node.op)],))], node)
        elif isinstance(node.op, ast.Not):
            self._truth(node.operand, node)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        # `a and b` / `a or b` test each operand but the last for truth, and return one of them.
        for value in node.values[:-1]:
            self._truth(value, node)
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._truth(node.test)
        self.generic_visit(node)

    def _truth(self, test: ast.expr, node: ast.AST | None = None) -> None:
        """A value tested for truth (`if x`, `while x`, `not x`, `and`/`or`): `bool(x)`, which calls
        its `__bool__`, else its `__len__` (the evidence spans `node`, the `not` or `and` that tests)."""
        match test:
            case ast.BoolOp(values=[*_, last]):
                # The other operands are tested by the operator itself (`visit_BoolOp`).
                self._truth(last, test)
            case ast.UnaryOp(op=ast.Not()):
                pass
            case _:
                self._operator([(test, BUILTIN_DUNDERS["bool"])], node or test)

    def visit_Compare(self, node: ast.Compare) -> None:
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.In | ast.NotIn):
                self._operator([(right, ("__contains__", "__iter__", "__getitem__"))], node)
                if self._is_sequence(right):
                    # A list's or tuple's `in` compares x with each element (`e is x or e == x`).
                    self._operator([(left, ("__eq__",))], node)
                else:
                    # A set's or dict's hashes x.
                    self._key(right, left, node)
            elif type(op) in COMPARE_DUNDERS:
                forward, reflected = COMPARE_DUNDERS[type(op)]
                self._operator([(left, forward), (right, reflected)], node, reflected=True)
                if isinstance(op, ast.Eq | ast.NotEq) and any(_is_empty_sequence(n) for n in (left, right)):
                    # Sequences of different lengths are unequal before any element is compared.
                    for item in self.implicit[-2:]:
                        if item["span"] == span(node) and item["kind"] == "op":
                            item["elementwise"] = False
            left = right
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            self._operator([(node.value, ("__getitem__",))], node)
        elif isinstance(node.ctx, ast.Del):
            self._operator([(node.value, ("__delitem__",))], node)
        self._key(node.value, node.slice, node)
        self.generic_visit(node)

    def _key(self, container: ast.expr, key: ast.expr, node: ast.AST) -> None:
        """A value used as a key of a container (`d[k]`, `k in d`, `d.get(k)`, `{k: v}`, `{k}`): a dict
        or set hashes it (the linker keeps the keys whose class defines `__hash__`)."""
        if _may_be_instance(key) and not isinstance(key, ast.Slice):
            self._hashed(self.ref(container), self.ref(key), node)

    def _is_sequence(self, node: ast.expr) -> bool:
        """Whether an expression is a list or tuple: a display, a comprehension, a call of `list`,
        `tuple` or `sorted`, or a name of this scope bound only to those so far."""
        if isinstance(node, ast.List | ast.Tuple | ast.ListComp):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return node.func.id in SEQUENCE_BUILTINS
        if isinstance(node, ast.Name) and node.id not in self.scope.globals:
            refs = self.bindings.get(self.scope.qualname, {}).get(node.id, [])
            return bool(refs) and all(
                r[0] == "call" and r[1][0] == "name" and r[1][2] in SEQUENCE_BUILTINS for r in refs
            )
        return False

    def _is_hashed_set(self, node: ast.expr) -> bool:
        """Whether an expression is a set or dict, whose elements' hashes are stored: a display, a
        comprehension, a call of `set`, `frozenset` or `dict`, or a parameter annotated as one."""
        if isinstance(node, ast.Set | ast.SetComp | ast.Dict | ast.DictComp):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return node.func.id in ("set", "frozenset", "dict")
        return isinstance(node, ast.Name) and (self.scope.qualname, node.id) in self.set_params

    def _hashed(self, receiver: Ref | None, ref: Ref | None, node: ast.AST) -> None:
        if ref is not None:
            self.implicit.append(
                {
                    "scope": self.scope.qualname,
                    "kind": "key",
                    "ref": ref,
                    "name": None,
                    "receiver": receiver,
                    "span": span(node),
                }
            )

    def visit_Set(self, node: ast.Set) -> None:
        # A set display hashes its elements, a dict display its keys.
        for elt in node.elts:
            self._key(node, elt, node)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key in node.keys:
            if key is not None:
                self._key(node, key, node)
        self.generic_visit(node)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> None:
        # f"{x}" formats x: its __format__, whose default is str(x); `!r` calls repr(x).
        names = {114: ("__repr__",), 97: ("__repr__",), 115: ("__str__", "__repr__")}.get(
            node.conversion, ("__format__", "__str__", "__repr__")
        )
        self._operator([(node.value, names)], node)
        self.generic_visit(node)

    def visit_Await(self, node: ast.Await) -> None:
        self._operator([(node.value, ("__await__",))], node)
        self.generic_visit(node)

    def _formats(self, raised: Ref | None, node: ast.AST) -> None:
        """pytest formats an exception of class `raised` (`str()` of it, its `__str__`)."""
        if raised is not None:
            self._implicit("op", ["annot", raised], node, ["__str__"])

    def _implicit(
        self, kind: str, ref: Ref | None, node: ast.AST, name: str | list[str] | None = None
    ) -> None:
        if ref is not None:
            self.implicit.append(
                {"scope": self.scope.qualname, "kind": kind, "ref": ref, "name": name, "span": span(node)}
            )

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and self.scope.kind != "module":
            self._access(node, "read", node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            if isinstance(node.value, ast.Name) and self._self_class(node.value.id):
                self._access(node, "read", node)
            if id(node) not in self.callee_attrs:
                # A read that may run a property's getter (the linker keeps those that do).
                self._implicit("get", self.ref(node.value), node, node.attr)
        self.visit(node.value)

    def _loop_target(self, target: ast.expr, iterable: ast.expr, node: ast.AST, *, is_async: bool) -> None:
        self.visit(iterable)
        ref = self.ref(iterable)
        # Iterating calls iter() on the iterable, then next() on what it returned.
        self._implicit("aiter" if is_async else "iter", ref, iterable)
        self._assign(target, ["iter", ref] if ref is not None else None, node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._nested(node)

    def _for(self, node: ast.For | ast.AsyncFor) -> None:
        self._loop_target(node.target, node.iter, node, is_async=isinstance(node, ast.AsyncFor))
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self._loop_target(node.target, node.iter, node, is_async=bool(node.is_async))
        for cond in node.ifs:
            self.visit(cond)
            self._truth(cond)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        # Its variables are bound here (the walk has no comprehension scope): as in a loop.
        for gen in node.generators:
            for inner in ast.walk(gen.target):
                if isinstance(inner, ast.Name):
                    self.scope.reaching[inner.id] = None
        self.scope.nesting += 1
        try:
            self._comprehension_parts(node)
        finally:
            self.scope.nesting -= 1

    def _comprehension_parts(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> None:
        for gen in node.generators:
            self.visit_comprehension(gen)
        for part in (getattr(node, "elt", None), getattr(node, "key", None), getattr(node, "value", None)):
            if part is not None:
                self.visit(part)
        hashed = node.elt if isinstance(node, ast.SetComp) else getattr(node, "key", None)
        if hashed is not None:
            self._key(node, hashed, node)

    visit_ListComp = _comprehension
    visit_SetComp = _comprehension
    visit_GeneratorExp = _comprehension
    visit_DictComp = _comprehension

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        is_async = isinstance(node, ast.AsyncWith)
        for item in node.items:
            self.visit(item.context_expr)
            ref = self.ref(item.context_expr)
            self._implicit("awith" if is_async else "with", ref, item.context_expr)
            self.withs.append(
                {
                    "scope": self.scope.qualname,
                    "expr": ast.unparse(item.context_expr),
                    "ref": ref,
                    "span": span(item.context_expr),
                }
            )
            raised = _raises(item.context_expr)
            if raised is not None and isinstance(item.optional_vars, ast.Name):
                # `with pytest.raises(E) as info`: `info.value` is the E raised.
                self.raises[(self.scope.qualname, item.optional_vars.id)] = self.ref(raised)
            expr = item.context_expr
            matched = isinstance(expr, ast.Call) and any(k.arg == "match" for k in expr.keywords)
            if raised is not None and matched:
                # `match=` searches `str()` of the exception raised.
                self._formats(self.ref(raised), expr)
            if item.optional_vars is not None:
                # `as` binds what __enter__ returns, not the context manager itself.
                enter = "__aenter__" if is_async else "__enter__"
                self._assign(
                    item.optional_vars, ["call", ["attr", ref, enter], [], {}] if ref else None, node
                )
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncWith = visit_With

    def visit_Raise(self, node: ast.Raise) -> None:
        # `raise Cls` instantiates Cls (`raise Cls(...)` is an ordinary call site).
        if isinstance(node.exc, ast.Name | ast.Attribute):
            self._implicit("raise", self.ref(node.exc), node.exc)
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        self._nested(node)

    def _if(self, node: ast.If) -> None:
        self.visit(node.test)
        self._truth(node.test)
        narrowed = _isinstance_test(node.test)
        if narrowed is not None:
            name, classes, kind = narrowed
            refs = [r for r in map(self.ref, classes) if r is not None]
            self.narrowed.append((self.scope.qualname, name, refs, kind))
        # `if isinstance(x, C): ... else: ...` (one test, not a conjunction): in the else branch x is no C.
        failed = _isinstance_test(node.test) if isinstance(node.test, ast.Call) else None
        failed_refs = [r for r in map(self.ref, failed[1]) if r is not None] if failed else []
        if failed is None or failed[2] != "narrow" or len(failed_refs) != len(failed[1]):
            failed = None
        guard = _none_test(node.test)
        if guard is not None:
            self.none_guards.append((self.scope.qualname, guard[0], guard[1]))
        identity = self.identity.tests.get(id(node))
        # `x is not S` holds in the body, `x is S` fails in the else branch: there x is not S.
        excluded = self._exclude(identity[0], identity[1]) if identity and not identity[2] else 0
        checking = _is_type_checking(node.test)
        self.type_checking += checking
        for stmt in node.body:
            self.visit(stmt)
        self.type_checking -= checking
        del self.narrowed[len(self.narrowed) - excluded :]
        if narrowed is not None:
            self.narrowed.pop()
        if guard is not None:
            self.none_guards[-1] = (self.scope.qualname, guard[0], not guard[1])
        excluded = self._exclude(identity[0], identity[1]) if identity and identity[2] else 0
        if failed is not None:
            self.narrowed.append((self.scope.qualname, failed[0], failed_refs, "unlike"))
            excluded += 1
        for stmt in node.orelse:
            self.visit(stmt)
        del self.narrowed[len(self.narrowed) - excluded :]
        if guard is not None:
            self.none_guards.pop()

    def visit_Assert(self, node: ast.Assert) -> None:
        self.generic_visit(node)
        self._truth(node.test)
        narrowed = _isinstance_test(node.test)
        if narrowed is not None and self.scope.kind != "class" and not self.scope.nesting:
            # `assert isinstance(x, C)`: from here on, in straight-line code, x is a C.
            name, classes, kind = narrowed
            refs = [r for r in map(self.ref, classes) if r is not None]
            if refs and name not in self.scope.globals and name not in self.escaped:
                self.bind(name, [kind, self._name_ref(name), refs])

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
            if node.name:
                # `except (A, B) as e`: e is an instance of A or of B.
                types = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
                excs = [r for r in map(self.ref, types) if r is not None]
                self.bind(node.name, ["union", [["call", e, [], {}] for e in excs]] if excs else None)
        for stmt in node.body:
            self.visit(stmt)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute):
            self.callee_attrs.add(id(node.func))
        ref = self._call_ref(node)
        if ref is not None and ref[0] == "call":
            site = {
                "scope": self.scope.qualname,
                "callee": ref[1],
                "args": ref[2],
                "kwargs": ref[3],
                "span": span(node.func),
            }
            if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords
            ):
                site["unpacks"] = True
            spread = [
                self.ref(k.value) for k in node.keywords if k.arg is None and isinstance(k.value, ast.Name)
            ]
            if any(spread):
                # `f(**kwargs)`: the keywords kwargs holds (see `Linker.spread_keywords`).
                site["spread"] = [r for r in spread if r is not None]
            self.calls.append(site)
            self._note_container_method(node)
            if isinstance(node.func, ast.Attribute) and node.func.attr in KEYED_METHODS and node.args:
                self._key(node.func.value, node.args[0], node)
            match node.func:
                case ast.Attribute(value=ast.Name(id=info), attr="match" | "exconly") if (
                    self.scope.qualname,
                    info,
                ) in self.raises:
                    # `info.match(...)`, `info.exconly()` of `pytest.raises(E) as info` format the E.
                    self._formats(self.raises[(self.scope.qualname, info)], node)
            if (
                isinstance(node.func, ast.Name)
                and node.func.id in ("set", "frozenset")
                and node.args
                and not self._is_hashed_set(node.args[0])
            ):
                # `set(xs)` hashes each element of xs (a set's or dict's stored hashes are reused).
                arg = self.ref(node.args[0])
                self._hashed(ref[1], ["iter", arg] if arg is not None else None, node)
        elif _is_str_join(node):
            # `", ".join(xs)` iterates xs (a str constant has no ref, so the call is no site).
            self._implicit("iter", self.ref(node.args[0]), node.args[0])
        elif ref is not None:
            # getattr / __import__ / super: the call itself is to the builtin.
            callee = self.ref(node.func)
            if callee is not None:
                self.calls.append(
                    {
                        "scope": self.scope.qualname,
                        "callee": callee,
                        "args": [],
                        "kwargs": {},
                        "span": span(node.func),
                    }
                )
            if ref[0] == "unk":
                self.unknowns.append(
                    {
                        "scope": self.scope.qualname,
                        "reason": ref[1],
                        "span": span(node),
                        "detail": ast.unparse(node)[:200],
                    }
                )
        if isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_BUILTINS:
            self.unknowns.append(
                {
                    "scope": self.scope.qualname,
                    "reason": DYNAMIC_BUILTINS[node.func.id],
                    "span": span(node),
                    "detail": ast.unparse(node)[:200],
                }
            )
        self.generic_visit(node)

    def _note_container_method(self, node: ast.Call) -> None:
        # `xs.append(f)` / `d.update(k=f)` put f in the container, as an assignment would. A call the
        # builtin method cannot take (`body.append(key, value)`) is some other class's method.
        func = node.func
        if not (
            isinstance(func, ast.Attribute)
            and func.attr in CONTAINER_ARITY
            and _takes(CONTAINER_ARITY[func.attr], node)
        ):
            return
        # `d.setdefault(k, v)` and `xs.insert(i, v)` store v; their first argument is a key or index.
        stored = node.args[1:] if func.attr in ("setdefault", "insert") else node.args
        values: list[Any] = [self.ref(a) for a in stored] + [self.ref(k.value) for k in node.keywords]
        values = [v for v in values if v is not None]
        if func.attr == "extend" or func.attr == "update":
            values = [["iter", v] for v in values] + values
        if not values:
            return
        keys: list[str | int | None] = [None] * len(values)
        if func.attr == "setdefault" and len(values) == 1:
            # `d.setdefault("k", v)` stores v at "k" (a `**kwargs` dict passed on names it).
            keys = [_constant_key(node.args[0])]
        held = ["coll", values, keys]
        match func.value:
            case ast.Name(id=name):
                self.bind(name, held, adds=True)
            case ast.Attribute(value=ast.Name(id=owner), attr=attr) if self._self_class(owner):
                # `self.callbacks.append(f)`: the instances' attribute holds f.
                class_q = self._self_class(owner)
                assert class_q is not None  # the case's guard
                self.instance_attrs.setdefault(class_q, {}).setdefault(attr, []).append(held)


def _takes(arity: tuple[int, int, bool], node: ast.Call) -> bool:
    """Whether a call's arguments fit a builtin method's (least, most positional, keywords)."""
    least, most, keywords = arity
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return True
    return least <= len(node.args) <= most and (keywords or not node.keywords)


def _constant_key(node: ast.expr | None) -> str | int | None:
    """A subscript's or dict key's constant (str, or int from 0), or None when it is computed."""
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str | int)
        and not isinstance(node.value, bool)
        and not (isinstance(node.value, int) and node.value < 0)
    ):
        return node.value
    return None


def _constant_ref(node: ast.expr) -> Ref:
    """An argument that denotes nothing callable: its constant key (`d.get("a")`), or opaque."""
    key = _constant_key(node)
    return ["const", key] if key is not None else ["unk", "opaque_value"]


def _may_be_instance(node: ast.expr) -> bool:
    """Whether an operand may be an instance of the tree's classes (not a literal, a comparison, or
    what a builtin such as `len` returns)."""
    match node:
        case ast.Call(func=ast.Name(id=name)):
            return name not in SCALAR_BUILTINS
        case ast.Name() | ast.Attribute() | ast.Subscript() | ast.Call() | ast.BinOp() | ast.UnaryOp():
            return True
        case ast.Await() | ast.NamedExpr() | ast.IfExp():
            return True
    return False


def _prefixed(name: ast.expr) -> tuple[str, ast.expr] | None:
    """A name made of a constant prefix and one value: `"on_" + event`, `f"_process_{kind}"`."""
    match name:
        case ast.BinOp(left=ast.Constant(value=str(prefix)), op=ast.Add(), right=rest) if prefix:
            return prefix, rest
        case ast.JoinedStr(
            values=[
                ast.Constant(value=str(prefix)),
                ast.FormattedValue(value=rest, conversion=-1, format_spec=None),
            ]
        ) if prefix:
            return prefix, rest
    return None


def _is_empty_sequence(node: ast.expr) -> bool:
    """Whether an expression is `()` or `[]`."""
    return isinstance(node, ast.Tuple | ast.List) and not node.elts


def _is_type_expression(node: ast.expr) -> bool:
    """Whether an expression spells a type made of typing's or the builtins' generics
    (`tuple[A, B]`, `Union[A, B]`, `Optional[A]`, `A | B`)."""
    match node:
        case ast.Subscript(value=ast.Name(id=name) | ast.Attribute(attr=name)):
            return name in TYPE_CONSTRUCTORS
        case ast.BinOp(left=left, op=ast.BitOr(), right=right):
            return all(
                isinstance(part, ast.Name | ast.Attribute | ast.Constant) or _is_type_expression(part)
                for part in (left, right)
            )
    return False


def _is_str_join(node: ast.Call) -> bool:
    """Whether a call is `"sep".join(x)`."""
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "join"
        and isinstance(func.value, ast.Constant)
        and isinstance(func.value.value, str)
        and len(node.args) == 1
    )


def _raises(expr: ast.expr) -> ast.expr | None:
    """For `pytest.raises(E, ...)` (or `raises(E)`): E, when it names one class."""
    match expr:
        case ast.Call(func=ast.Name(id="raises") | ast.Attribute(attr="raises"), args=[exc, *_]):
            return exc if isinstance(exc, ast.Name | ast.Attribute) else None
    return None


def _is_stub(body: list[ast.stmt]) -> bool:
    """Whether a function body only declares: a docstring, `...`, `pass`, `raise NotImplementedError`."""
    for stmt in body:
        match stmt:
            case ast.Expr(value=ast.Constant()) | ast.Pass():
                continue
            case ast.Raise(exc=ast.Name(id=name) | ast.Call(func=ast.Name(id=name))) if (
                name == "NotImplementedError"
            ):
                continue
        return False
    return True


def _is_cast(func: ast.expr) -> bool:
    """Whether a callee is typing's `cast` (by name: `cast(...)`, `typing.cast(...)`, `t.cast(...)`)."""
    return (isinstance(func, ast.Name) and func.id == "cast") or (
        isinstance(func, ast.Attribute) and func.attr == "cast" and isinstance(func.value, ast.Name)
        and func.value.id in ("typing", "t", "typing_extensions")
    )


def _header(node: ast.ClassDef) -> ast.AST:
    """The `class Name` of a class statement, for the span of what the statement calls."""
    start = node.col_offset
    return ast.Name(
        id=node.name,
        lineno=node.lineno,
        col_offset=start,
        end_lineno=node.lineno,
        end_col_offset=start + len("class ") + len(node.name),
    )


def _parametrized(deco: ast.expr) -> list[tuple[str, list[ast.expr]]]:
    """For `@pytest.mark.parametrize("a, b", [(x, y), pytest.param(z, w)])`: each name with a list to
    iterate for its values: the rows' values for it, or the rows themselves (a list that is not a
    literal, for one name)."""
    if not (
        isinstance(deco, ast.Call)
        and isinstance(deco.func, ast.Attribute)
        and deco.func.attr == "parametrize"
        and len(deco.args) >= 2
    ):
        return []
    spec, rows = deco.args[0], deco.args[1]
    if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
        names = [n.strip() for n in spec.value.split(",") if n.strip()]
    elif isinstance(spec, ast.List | ast.Tuple):
        names = [e.value for e in spec.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    else:
        return []
    if not isinstance(rows, ast.List | ast.Tuple):
        return [(names[0], [rows])] if len(names) == 1 else []
    out: list[tuple[str, list[ast.expr]]] = [(n, []) for n in names]
    for row in rows.elts:
        if isinstance(row, ast.Call) and isinstance(row.func, ast.Attribute) and row.func.attr == "param":
            parts: list[ast.expr] = list(row.args)
        elif len(names) == 1:
            parts = [row]
        elif isinstance(row, ast.Tuple | ast.List):
            parts = list(row.elts)
        else:
            continue
        for (_, values), part in zip(out, parts, strict=False):
            values.append(part)
    return [(name, [ast.List(elts=values, ctx=ast.Load())]) for name, values in out]


class _IdentityGuards:
    """The `if x is S` / `if x is not S` tests of a module whose S is a sentinel: a name (or a module's
    attribute) the function does not bind, so one object, not a local that may hold any. `tests`: an
    `if` -> (x, S, whether the test is `is`); `after`: a statement -> the (x, S) of the `if x is S:`
    tests before it in its block whose body always leaves the block (continue, break, return, raise).
    The statements after one that rebinds x are left out."""

    def __init__(self, tree: ast.Module) -> None:
        self.tests: dict[int, tuple[str, ast.expr, bool]] = {}
        self.after: dict[int, list[tuple[str, ast.expr]]] = {}
        for scope in ast.walk(tree):
            if isinstance(scope, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef):
                self._scope(scope)

    def _scope(self, scope: ast.Module | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        own = list(_own_nodes(scope))
        local: set[str] = set()
        if not isinstance(scope, ast.Module):
            args = scope.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            local = {a.arg for a in every if a is not None}
            local |= {n.id for n in own if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for node in own:
            if isinstance(node, ast.If) and (test := _identity_test(node.test, local)) is not None:
                self.tests[id(node)] = test
        for node in own:
            for block in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
                if isinstance(block, list):
                    self._block(block)

    def _block(self, block: list[ast.stmt]) -> None:
        for index, stmt in enumerate(block):
            test = self.tests.get(id(stmt))
            if test is None or not test[2] or not isinstance(stmt, ast.If):
                continue
            if not isinstance(stmt.body[-1], ast.Continue | ast.Break | ast.Return | ast.Raise):
                continue
            for later in block[index + 1 :]:
                self.after.setdefault(id(later), []).append((test[0], test[1]))
                if any(
                    isinstance(n, ast.Name) and n.id == test[0] and isinstance(n.ctx, ast.Store)
                    for n in ast.walk(later)
                ):
                    break


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope's body, not those of the functions, classes and lambdas defined in it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo += ast.iter_child_nodes(node)


def _identity_test(test: ast.expr, local: set[str]) -> tuple[str, ast.expr, bool] | None:
    """For `name is S` / `name is not S` where S is a name outside `local` or an attribute of one:
    (name, S, whether the test is `is`)."""
    match test:
        case ast.Compare(left=ast.Name(id=name), ops=[ast.Is() | ast.IsNot() as op], comparators=[sentinel]):
            root = sentinel
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id not in local and root.id != name:
                return name, sentinel, isinstance(op, ast.Is)
    return None


def _last_name(node: ast.Name | ast.Attribute) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr


def _none_test(test: ast.expr) -> tuple[str, bool] | None:
    """For `name is None`: (name, True); for `name is not None`: (name, False); else None."""
    match test:
        case ast.Compare(
            left=ast.Name(id=name), ops=[ast.Is() | ast.IsNot() as op], comparators=[ast.Constant(value=None)]
        ):
            return name, isinstance(op, ast.Is)
    return None


def _is_type_checking(test: ast.expr) -> bool:
    """Whether an `if` test is `TYPE_CHECKING` (or `typing.TYPE_CHECKING`): false at run time."""
    name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
    return name == "TYPE_CHECKING"


def _isinstance_test(test: ast.expr) -> tuple[str, list[ast.expr], str] | None:
    """For `isinstance(name, C)` / `isinstance(name, (C, D))` (or a `*isinstance` helper): name, classes
    and "narrow"; for `issubclass(name, C)`: name, classes and "narrowcls"."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        # `isinstance(x, C) and x.ready`: the first test that narrows holds in the body.
        return next(filter(None, map(_isinstance_test, test.values)), None)
    if not (isinstance(test, ast.Call) and len(test.args) == 2 and isinstance(test.args[0], ast.Name)):
        return None
    func = test.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if called.endswith("isinstance"):
        kind = "narrow"
    elif called == "issubclass":
        kind = "narrowcls"
    else:
        return None
    classes = test.args[1]
    return test.args[0].id, list(classes.elts) if isinstance(classes, ast.Tuple) else [classes], kind


def _annotation_classes(note: ast.expr) -> list[ast.expr] | None:
    """The classes an annotation allows (`Cls`, `mod.Cls`, `Optional[..]`, `Union[..]`, `A | B`, strings of
    those; None itself adds none), or None when it is anything else (generics, callables, aliases'
    subscripts)."""
    match note:
        case ast.Constant(value=str(text)):
            try:
                return _annotation_classes(ast.parse(text, mode="eval").body)
            except SyntaxError:
                return None
        case ast.Constant(value=None):
            return []
        case ast.Name() | ast.Attribute():
            return [note]
        case ast.BinOp(left=left, op=ast.BitOr(), right=right):
            parts = [_annotation_classes(left), _annotation_classes(right)]
            return None if None in parts else [c for p in parts for c in p or []]
        case ast.Subscript(value=ast.Name(id=kind) | ast.Attribute(attr=kind), slice=inner) if kind in (
            "Optional",
            "Union",
        ):
            elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            parts = [_annotation_classes(e) for e in elts]
            return None if None in parts else [c for p in parts for c in p or []]
    return None


def _accepts(args: ast.arguments) -> dict[str, Any]:
    """What a signature accepts: positional names, how many are required, keyword names, `*`/`**`, and
    the parameters whose default is None."""
    positional_args = args.posonlyargs + args.args
    positional = [a.arg for a in positional_args]
    return {
        "positional": positional,
        "required": len(positional) - len(args.defaults),
        "keywords": [a.arg for a in args.args + args.kwonlyargs],
        "varargs": args.vararg is not None,
        "varkw": args.kwarg is not None,
        "none_defaults": [
            a.arg
            for a, d in zip(
                positional_args[len(positional_args) - len(args.defaults) :] + args.kwonlyargs,
                list(args.defaults) + list(args.kw_defaults),
                strict=True,
            )
            if isinstance(d, ast.Constant) and d.value is None
        ],
    }


def _asserts(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[dict[str, Any]]:
    # Asserts before the body does anything are preconditions; asserts after it has are postconditions.
    found = []
    started = False
    for stmt in node.body:
        if isinstance(stmt, ast.Assert):
            found.append(
                {
                    "role": "postcondition" if started else "precondition",
                    "expr": ast.unparse(stmt.test),
                    "span": span(stmt),
                }
            )
        elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            started = True
    return found


def extract(source: str, module: str, *, is_package: bool = False) -> dict[str, Any]:
    """Facts of one module's source (see the module docstring for the ref language).

    Parameters:
        source: the file's text.
        module: its dotted module name relative to the analysed root.
        is_package: True for an `__init__.py` (relative imports start at the module itself).

    Returns:
        The facts (plain data, refs as tuples); on a syntax error only `syntax_error` and the module
        record.
    """
    base: dict[str, Any] = {
        "version": FACTS_VERSION,
        "module": module,
        "is_package": is_package,
        "lines": source.count("\n") + 1,
    }
    # The parser and the walker recurse once per level of nesting: a deeper file (a 100k-term
    # expression) is an unknown of its own, not a crash.
    too_deep = {
        **base,
        "syntax_error": {
            "message": "nested too deeply to analyse (Python's recursion limit)",
            "span": [1, 0, base["lines"], 0],
            "reason": "nesting_too_deep",
        },
    }
    try:
        # Invalid escapes etc. warn at parse time; they say nothing about structure.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except RecursionError:
        return too_deep
    except (SyntaxError, ValueError) as exc:
        # SyntaxError columns are 1-based; spans here are 0-based like the AST's.
        line = getattr(exc, "lineno", None) or 1
        col = max((getattr(exc, "offset", None) or 1) - 1, 0)
        end_line = getattr(exc, "end_lineno", None) or line
        end_col = max((getattr(exc, "end_offset", None) or col + 1) - 1, col)
        return {**base, "syntax_error": {"message": str(exc), "span": [line, col, end_line, end_col]}}
    walker = FileExtractor(module, is_package=is_package, lines=source.splitlines())
    try:
        walker.visit(tree)
    except RecursionError:
        return too_deep
    # Refs leave frozen (tuples), so the resolver hashes them as they are.
    return {
        **base,
        "syntax_error": None,
        "defs": [
            {**d, **{k: freeze(d[k]) for k in ("bases", "metaclass") if k in d}} if "bases" in d else d
            for d in walker.defs
        ],
        "scopes": {
            q: {
                **info,
                **{k: freeze(info[k]) for k in ("returns", "yields", "annotated", "overloads") if k in info},
            }
            for q, info in walker.scopes.items()
        },
        "bindings": {
            q: {n: freeze(refs) for n, refs in names.items()} for q, names in walker.bindings.items()
        },
        "instance_attrs": {
            c: {n: freeze(refs) for n, refs in names.items()} for c, names in walker.instance_attrs.items()
        },
        "calls": [
            {
                **site,
                "callee": freeze(site["callee"]),
                "args": freeze(site["args"]),
                "kwargs": {k: freeze(v) for k, v in site["kwargs"].items()},
                **({"spread": freeze(site["spread"])} if "spread" in site else {}),
            }
            for site in walker.calls
        ],
        "state": [{**access, "ref": freeze(access["ref"])} for access in walker.state],
        "imports": walker.imports,
        "stars": walker.stars,
        "exports": walker.exports,
        "unknowns": walker.unknowns,
        "withs": [{**w, "ref": freeze(w["ref"])} for w in walker.withs],
        "stores": [[freeze(base), attr, freeze(value)] for base, attr, value in walker.stores],
        "implicit": [
            {**i, **{k: freeze(i[k]) for k in ("ref", "receiver", "after") if k in i}}
            for i in walker.implicit
        ],
    }
