"""Definitions in the fast pass's facts: functions, methods, lambdas and classes (their records, the
parameters they bind, the decorators they go through), and what pytest gives a test's parameters
(the fixture of the same name, the rows `@pytest.mark.parametrize` lists)."""

from __future__ import annotations

import ast
import hashlib
from typing import Any

from slotrelay.psmr.analysis.extract_implicit import ImplicitWalker
from slotrelay.psmr.analysis.extract_scopes import Ref, span
from slotrelay.psmr.analysis.syntaxwalk import walk
from slotrelay.psmr.analysis.typerefs import annotation_ref

PROPERTY_DECORATORS = frozenset({"property", "cached_property", "functools.cached_property"})
PROPERTY_ACCESSORS = (".setter", ".getter", ".deleter")
# Annotations of a set or a dict: it stores its elements' (its keys') hashes.
HASHED_SET_ANNOTATIONS = frozenset(
    {"set", "Set", "frozenset", "FrozenSet", "AbstractSet", "MutableSet", "dict", "Dict", "Mapping",
     "MutableMapping"}
)
# Methods that take the class as their first parameter without a decorator.
CLASS_DUNDERS = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})


def is_overload(decorators: list[str]) -> bool:
    """Whether a definition is an `@overload` stub: `overload`, or `overload` of a module however it
    is imported (`typing.overload`, `t.overload` under `import typing as t`)."""
    return any(d.rsplit(".", 1)[-1] == "overload" and d.count(".") <= 1 for d in decorators)


class DefinitionWalker(ImplicitWalker):
    """Records the definitions of a module and binds their names and their parameters."""

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
                    for r in walk(node)
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

def _last_name(node: ast.Name | ast.Attribute) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr


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

