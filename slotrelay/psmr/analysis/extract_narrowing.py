"""What an `if` or `assert` test tells the fast pass about a name in the code it guards.

`isinstance(x, C)` / `issubclass(x, C)` narrow x to C's instances (or subclasses), `x is None` /
`x is not None` guard a return, `TYPE_CHECKING` marks imports that never run, and `x is S` against a
sentinel S (`IdentityGuards`) excludes S from x where the test fails or past an `if x is S: return`.
Pure functions of the AST: `slotrelay.psmr.analysis.extract_flow` applies them while it walks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from slotrelay.psmr.analysis.syntaxwalk import children, walk

# What the identity tests are gathered per: the module and each function (a class body is no one's).
Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef


class IdentityGuards:
    """The `if x is S` / `if x is not S` tests of a module whose S is a sentinel: a name (or a module's
    attribute) the function does not bind, so one object, not a local that may hold any. `tests`: an
    `if` -> (x, S, whether the test is `is`); `after`: a statement -> the (x, S) of the `if x is S:`
    tests before it in its block whose body always leaves the block (continue, break, return, raise).
    The statements after one that rebinds x are left out."""

    def __init__(self, tree: ast.Module) -> None:
        self.tests: dict[int, tuple[str, ast.expr, bool]] = {}
        self.after: dict[int, list[tuple[str, ast.expr]]] = {}
        # One walk for the whole module: most scopes hold no candidate test, and those skip the rest.
        for scope, own in _scopes(tree):
            if any(isinstance(node, ast.If) and _identity_test(node.test, set()) for node in own):
                self._scope(scope, own)

    def _scope(self, scope: Scope, own: list[ast.AST]) -> None:
        local: set[str] = set()
        if not isinstance(scope, ast.Module):
            args = scope.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            local = {a.arg for a in every if a is not None}
            local |= {n.id for n in own if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for node in own:
            if isinstance(node, ast.If) and (test := _identity_test(node.test, local)) is not None:
                self.tests[id(node)] = test
        # The blocks of a nested function or class are another scope's, and its tests are not here.
        for node in own:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
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
                    for n in walk(later)
                ):
                    break


def _scopes(tree: ast.Module) -> Iterator[tuple[Scope, list[ast.AST]]]:
    """Each function (and the module) with its own nodes: those of its body, not those of the
    functions, classes and lambdas defined in it (each node is walked once)."""
    todo: list[Scope] = [tree]
    while todo:
        scope = todo.pop()
        own: list[ast.AST] = []
        stack = children(scope)
        while stack:
            node = stack.pop()
            own.append(node)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                todo.append(node)
            elif isinstance(node, ast.ClassDef | ast.Lambda):
                todo += _functions_in(node)
            else:
                stack += children(node)
        yield scope, own


def _functions_in(node: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions a class body (or a lambda) defines, outside those functions: scopes of their own,
    while the body's other nodes are no scope's."""
    stack = children(node)
    while stack:
        inner = stack.pop()
        if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
            yield inner
        else:
            stack += children(inner)


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


def none_test(test: ast.expr) -> tuple[str, bool] | None:
    """For `name is None`: (name, True); for `name is not None`: (name, False); else None."""
    match test:
        case ast.Compare(
            left=ast.Name(id=name), ops=[ast.Is() | ast.IsNot() as op], comparators=[ast.Constant(value=None)]
        ):
            return name, isinstance(op, ast.Is)
    return None


def is_type_checking(test: ast.expr) -> bool:
    """Whether an `if` test is `TYPE_CHECKING` (or `typing.TYPE_CHECKING`): false at run time."""
    name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
    return name == "TYPE_CHECKING"


def isinstance_test(test: ast.expr) -> tuple[str, list[ast.expr], str] | None:
    """For `isinstance(name, C)` / `isinstance(name, (C, D))` (or a `*isinstance` helper): name, classes
    and "narrow"; for `issubclass(name, C)`: name, classes and "narrowcls"."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        # `isinstance(x, C) and x.ready`: the first test that narrows holds in the body.
        return next(filter(None, map(isinstance_test, test.values)), None)
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
