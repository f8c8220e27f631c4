"""What the types a program states denote, in the fast pass's ref language (see
`slotrelay.psmr.analysis.extract`).

An annotation becomes the ref of the values it declares: `Reg` an instance of Reg (`["annot", ref]`),
`list[Foo]` a container of Foo instances, `Optional[X]`, `X | None`, `Union[..]` any of their parts,
`Annotated[X, ..]`, `Final[X]`, `ClassVar[X]` X, `type[X]` the class itself, `Self` an instance of the
enclosing class, a user generic `Registry[D]` an instance of Registry, and in an `@overload`'s return
type `Callable[[..], R]` a callable whose call returns what R declares (`["returns", ref]`); a string is
parsed as the annotation it holds. Anything else (a type variable, `Callable` elsewhere, `Literal`,
`Any`) declares nothing the tree defines, and evaluates to no value.

Operators are calls of the operand's dunder: `a + b` calls `a.__add__` (or `b.__radd__`), `x[k]`
`x.__getitem__`, `k in x` `x.__contains__`, `len(x)` `x.__len__`; `OPERATOR_DUNDERS` and
`BUILTIN_DUNDERS` name them, each as the methods Python tries in turn.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

Ref = list[Any]

# Annotations whose parameter is what iterating (or indexing) the value yields.
ELEMENT_ANNOTATIONS = frozenset(
    {
        "list",
        "List",
        "Sequence",
        "MutableSequence",
        "Iterable",
        "Iterator",
        "Collection",
        "Container",
        "set",
        "Set",
        "frozenset",
        "FrozenSet",
        "AbstractSet",
        "MutableSet",
        "deque",
        "Deque",
        "Generator",
        "AsyncIterator",
        "AsyncIterable",
        "AsyncGenerator",
        "Reversible",
        "KeysView",
        "ValuesView",
    }
)
# Annotations whose second parameter is what indexing the value gives.
MAPPING_ANNOTATIONS = frozenset(
    {"dict", "Dict", "Mapping", "MutableMapping", "defaultdict", "DefaultDict", "OrderedDict", "ChainMap"}
)
# Annotations that declare what their first parameter declares.
WRAPPING_ANNOTATIONS = frozenset(
    {
        "Annotated",
        "Final",
        "ClassVar",
        "Required",
        "NotRequired",
        "ReadOnly",
        "InitVar",
        "Awaitable",
        "Coroutine",
    }
)
UNION_ANNOTATIONS = frozenset({"Optional", "Union"})
# Generics a module's type alias is made of (`Interval = tuple[A, B]`).
TYPE_CONSTRUCTORS = frozenset(
    {"tuple", "Tuple", "type", "Type", *ELEMENT_ANNOTATIONS, *MAPPING_ANNOTATIONS, *WRAPPING_ANNOTATIONS}
    | UNION_ANNOTATIONS
)
# Names that declare no value of the tree.
OPAQUE_ANNOTATIONS = frozenset(
    {
        "Any",
        "Callable",
        "Literal",
        "TypeVar",
        "ParamSpec",
        "Concatenate",
        "TypeGuard",
        "TypeIs",
        "Never",
        "NoReturn",
        "LiteralString",
        "object",
        "str",
        "int",
        "float",
        "bool",
        "bytes",
        "complex",
        "None",
        "bytearray",
    }
)

# Binary, unary and comparison operators: the dunders Python tries on the left operand, and the
# reflected one it tries on the right.
BINARY_DUNDERS: dict[type[ast.operator], tuple[str, str]] = {
    ast.Add: ("__add__", "__radd__"),
    ast.Sub: ("__sub__", "__rsub__"),
    ast.Mult: ("__mul__", "__rmul__"),
    ast.MatMult: ("__matmul__", "__rmatmul__"),
    ast.Div: ("__truediv__", "__rtruediv__"),
    ast.FloorDiv: ("__floordiv__", "__rfloordiv__"),
    ast.Mod: ("__mod__", "__rmod__"),
    ast.Pow: ("__pow__", "__rpow__"),
    ast.LShift: ("__lshift__", "__rlshift__"),
    ast.RShift: ("__rshift__", "__rrshift__"),
    ast.BitOr: ("__or__", "__ror__"),
    ast.BitXor: ("__xor__", "__rxor__"),
    ast.BitAnd: ("__and__", "__rand__"),
}
UNARY_DUNDERS: dict[type[ast.unaryop], str] = {
    ast.USub: "__neg__",
    ast.UAdd: "__pos__",
    ast.Invert: "__invert__",
}
# A comparison's dunders on its left operand, then the reflected ones Python tries on its right when
# the left's returns NotImplemented (`a < b`: `a.__lt__(b)`, then `b.__gt__(a)`).
COMPARE_DUNDERS: dict[type[ast.cmpop], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ast.Eq: (("__eq__",), ("__eq__",)),
    ast.NotEq: (("__ne__", "__eq__"), ("__ne__", "__eq__")),
    ast.Lt: (("__lt__",), ("__gt__",)),
    ast.LtE: (("__le__",), ("__ge__",)),
    ast.Gt: (("__gt__",), ("__lt__",)),
    ast.GtE: (("__ge__",), ("__le__",)),
}
# The `operator` module's functions are the operators: `operator.lt(a, b)` is `a < b`. By function:
# the dunders tried on the first argument, then those tried on the second.
OPERATOR_FUNCTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    **{
        name: COMPARE_DUNDERS[op]
        for name, op in (
            ("eq", ast.Eq), ("ne", ast.NotEq), ("lt", ast.Lt), ("le", ast.LtE), ("gt", ast.Gt),
            ("ge", ast.GtE),
        )
    },
    **{
        name: ((BINARY_DUNDERS[op][0],), (BINARY_DUNDERS[op][1],))
        for name, op in (
            ("add", ast.Add), ("sub", ast.Sub), ("mul", ast.Mult), ("matmul", ast.MatMult),
            ("truediv", ast.Div), ("floordiv", ast.FloorDiv), ("mod", ast.Mod), ("pow", ast.Pow),
            ("lshift", ast.LShift), ("rshift", ast.RShift), ("or_", ast.BitOr), ("xor", ast.BitXor),
            ("and_", ast.BitAnd),
        )
    },
    **{
        name: ((UNARY_DUNDERS[op],), ())
        for name, op in (("neg", ast.USub), ("pos", ast.UAdd), ("invert", ast.Invert))
    },
    "getitem": (("__getitem__",), ()),
    "setitem": (("__setitem__",), ()),
    "delitem": (("__delitem__",), ()),
    "contains": (("__contains__", "__iter__", "__getitem__"), ()),
    "truth": (("__bool__", "__len__"), ()),
    "not_": (("__bool__", "__len__"), ()),
    "abs": (("__abs__",), ()),
    "index": (("__index__",), ()),
}
# Builtins that call a dunder of their first argument, in the order Python tries them.
BUILTIN_DUNDERS: dict[str, tuple[str, ...]] = {
    "len": ("__len__",),
    "str": ("__str__", "__repr__"),
    "repr": ("__repr__",),
    "format": ("__format__", "__str__", "__repr__"),
    "bool": ("__bool__", "__len__"),
    "hash": ("__hash__",),
    "iter": ("__iter__",),
    "next": ("__next__",),
    "abs": ("__abs__",),
    "int": ("__int__", "__index__"),
    "float": ("__float__",),
    "complex": ("__complex__",),
    "bytes": ("__bytes__",),
    "reversed": ("__reversed__",),
    "round": ("__round__",),
    "dir": ("__dir__",),
}


def annotation_ref(
    note: ast.expr | None,
    name_ref: Callable[[ast.expr], Ref | None],
    class_q: str | None,
    *,
    callables: bool = False,
) -> Ref | None:
    """The ref of the values an annotation declares, or None when it declares none of the tree's.

    Parameters:
        note: the annotation.
        name_ref: the ref of a name or attribute where the annotation is evaluated.
        class_q: the class whose body encloses the annotation (what `Self` is), if any.
        callables: whether `Callable[[..], R]` declares a callable returning R (an `@overload`'s
            return type, which picks what a decorator factory's decorator makes); elsewhere it
            declares nothing, and what the code passes or returns answers alone.
    """
    match note:
        case ast.Constant(value=str(text)):
            try:
                parsed = ast.parse(text.strip(), mode="eval").body
            except SyntaxError:
                return None
            return annotation_ref(parsed, name_ref, class_q, callables=callables)
        case ast.Name(id=name) | ast.Attribute(attr=name):
            if name == "Self":
                return ["self", class_q] if class_q else None
            if name in OPAQUE_ANNOTATIONS:
                return None
            ref = name_ref(note)
            return ["annot", ref] if ref is not None else None
        case ast.BinOp(left=left, op=ast.BitOr(), right=right):
            return _union(
                [annotation_ref(part, name_ref, class_q, callables=callables) for part in (left, right)]
            )
        case ast.Subscript(value=ast.Name(id=kind) | ast.Attribute(attr=kind) as base, slice=inner):
            elts = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
            return _subscripted(kind, base, elts, name_ref, class_q, callables=callables)
    return None


def _subscripted(
    kind: str,
    base: ast.expr,
    elts: list[ast.expr],
    name_ref: Callable[[ast.expr], Ref | None],
    class_q: str | None,
    *,
    callables: bool,
) -> Ref | None:
    def of(node: ast.expr) -> Ref | None:
        return annotation_ref(node, name_ref, class_q, callables=callables)

    if kind in UNION_ANNOTATIONS:
        return _union([of(e) for e in elts])
    if kind in WRAPPING_ANNOTATIONS:
        return of(elts[-1]) if kind in ("Awaitable", "Coroutine") else of(elts[0])
    if kind in ("type", "Type"):
        # `type[X]`: the class itself (its call constructs an X).
        parts = [_class_of(e, name_ref) for e in _union_parts(elts[0])]
        return _union(parts)
    if kind in ("tuple", "Tuple"):
        if len(elts) == 2 and isinstance(elts[1], ast.Constant) and elts[1].value is Ellipsis:
            return _collection([of(elts[0])], [None])
        return _collection([of(e) for e in elts], list(range(len(elts))))
    if kind in ELEMENT_ANNOTATIONS:
        return _collection([of(elts[0])], [None])
    if kind in MAPPING_ANNOTATIONS:
        return _collection([of(elts[-1])], [None]) if len(elts) > 1 else None
    if kind == "Callable" and len(elts) == 2 and callables:
        # `Callable[[A], R]`: something whose call returns what R declares.
        result = of(elts[1])
        return ["returns", result] if result is not None else None
    if kind in OPAQUE_ANNOTATIONS:
        return None
    # A generic class of its own (`Registry[D]`): an instance of that class.
    ref = name_ref(base)
    return ["annot", ref] if ref is not None else None


def _union_parts(node: ast.expr) -> list[ast.expr]:
    match node:
        case ast.BinOp(left=left, op=ast.BitOr(), right=right):
            return _union_parts(left) + _union_parts(right)
        case ast.Subscript(
            value=ast.Name(id="Union") | ast.Attribute(attr="Union"), slice=ast.Tuple(elts=elts)
        ):
            return list(elts)
    return [node]


def _class_of(node: ast.expr, name_ref: Callable[[ast.expr], Ref | None]) -> Ref | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value.strip(), mode="eval").body
        except SyntaxError:
            return None
    return name_ref(node) if isinstance(node, ast.Name | ast.Attribute) else None


def _union(parts: list[Ref | None]) -> Ref | None:
    found = [p for p in parts if p is not None]
    if not found:
        return None
    return found[0] if len(found) == 1 else ["union", found]


def _collection(parts: list[Ref | None], keys: list[int | None]) -> Ref | None:
    kept = [(p, k) for p, k in zip(parts, keys, strict=True) if p is not None]
    if not kept:
        return None
    return ["coll", [p for p, _ in kept], [k for _, k in kept]]
