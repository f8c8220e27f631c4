"""The calls Python makes without call syntax, as the fast pass records them ("implicit"): operators
and their dunders, truth tests, values hashed as keys, f-string formatting, `await`, attribute reads
that may run a property; and the reads and writes of state (names, `self` attributes).

What `with`, `for`, `raise`, `class` and `from m import x` call is recorded where the walk visits those
statements (`slotrelay.psmr.analysis.extract_flow`, `extract_defs`, `extract_bindings`), through `_implicit`.
"""

from __future__ import annotations

import ast

from slotrelay.psmr.analysis.extract_refs import RefWalker
from slotrelay.psmr.analysis.extract_scopes import Ref, span
from slotrelay.psmr.analysis.typerefs import BINARY_DUNDERS, BUILTIN_DUNDERS, COMPARE_DUNDERS, UNARY_DUNDERS

# Builtins whose result is a str, number or bool: never an instance of the tree's classes.
SCALAR_BUILTINS = frozenset(
    {"len", "str", "repr", "int", "float", "bool", "abs", "round", "hash", "id", "ord", "chr", "format",
     "isinstance", "issubclass", "callable", "hasattr", "sum", "divmod", "bin", "hex", "oct"}
)
# Builtins that make a list or a tuple: `x in` one compares, never hashes.
SEQUENCE_BUILTINS = frozenset({"list", "tuple", "sorted"})


class ImplicitWalker(RefWalker):
    """Records the implicit calls of operators, truth tests and keys, and the state a scope reads and
    writes."""

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

def _is_empty_sequence(node: ast.expr) -> bool:
    """Whether an expression is `()` or `[]`."""
    return isinstance(node, ast.Tuple | ast.List) and not node.elts

