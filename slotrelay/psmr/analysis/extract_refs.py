"""The fast pass's expressions to refs: what an expression denotes, symbolically (the ref language of
`slotrelay.psmr.analysis.extract`), left for the linker to evaluate across files."""

from __future__ import annotations

import ast

from slotrelay.psmr.analysis.extract_scopes import Ref, ScopeWalker
from slotrelay.psmr.analysis.typerefs import BINARY_DUNDERS, UNARY_DUNDERS, annotation_ref


class RefWalker(ScopeWalker):
    """Turns the expressions of the scope the walk is in into refs."""

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
                return ["sub", base, constant_key(index)] if base is not None else None
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
                keyed = [(constant_key(k), self.ref(v)) for k, v in zip(keys, values, strict=True)]
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

def constant_key(node: ast.expr | None) -> str | int | None:
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
    key = constant_key(node)
    return ["const", key] if key is not None else ["unk", "opaque_value"]

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

def _is_cast(func: ast.expr) -> bool:
    """Whether a callee is typing's `cast` (by name: `cast(...)`, `typing.cast(...)`, `t.cast(...)`)."""
    return (isinstance(func, ast.Name) and func.id == "cast") or (
        isinstance(func, ast.Attribute) and func.attr == "cast" and isinstance(func.value, ast.Name)
        and func.value.id in ("typing", "t", "typing_extensions")
    )

