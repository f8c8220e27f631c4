"""Call sites in the fast pass's facts: a call's callee and arguments as refs, what a call of a
container's method stores in it, the keys a dict's or set's method hashes, and the calls to builtins
the analysis cannot follow (`eval`, a computed `getattr` or import), recorded as unknowns."""

from __future__ import annotations

import ast
from typing import Any

from slotrelay.psmr.analysis.extract_implicit import ImplicitWalker
from slotrelay.psmr.analysis.extract_refs import constant_key
from slotrelay.psmr.analysis.extract_scopes import span

DYNAMIC_BUILTINS = {"eval": "dynamic_eval", "exec": "dynamic_exec", "compile": "dynamic_eval"}
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
# Methods of dicts and sets that hash their first argument.
KEYED_METHODS = frozenset({"get", "pop", "setdefault", "add", "discard"})


class CallWalker(ImplicitWalker):
    """Records the call sites of a scope."""

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
            keys = [constant_key(node.args[0])]
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

