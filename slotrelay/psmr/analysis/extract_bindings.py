"""The statements that bind names in the fast pass's facts: imports, assignments (to names, unpacked
targets, attributes, subscripts, `self` attributes), annotated ones (fields, type aliases) and augmented
ones, with what each records besides its bindings."""

from __future__ import annotations

import ast

from slotrelay.psmr.analysis.extract_implicit import ImplicitWalker
from slotrelay.psmr.analysis.extract_refs import constant_key
from slotrelay.psmr.analysis.extract_scopes import Ref, span
from slotrelay.psmr.analysis.typerefs import BINARY_DUNDERS, TYPE_CONSTRUCTORS, annotation_ref


def module_base(module: str, is_package: bool, level: int) -> str:
    """The package a relative import of `level` dots starts from."""
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts)


class BindingWalker(ImplicitWalker):
    """Binds what imports and assignments bind."""

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
                    self.bind(name, ["coll", [value], [constant_key(index)]], adds=True)
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
                        ["coll", [value], [constant_key(index)]]
                    )
                self.visit(obj)
                self.visit(index)
            case ast.Subscript(value=obj, slice=index):
                self._operator([(obj, ("__setitem__",))], target)
                self.visit(obj)
                self.visit(index)

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

