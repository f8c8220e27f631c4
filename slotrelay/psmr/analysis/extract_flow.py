"""The fast pass's walk through control flow: branches and loops (which bindings reach a use),
comprehensions, `with` blocks, returns and yields, `raise`, `except` handlers, and the names an `if`
or `assert` narrows (`slotrelay.psmr.analysis.extract_narrowing`) in the code they guard."""

from __future__ import annotations

import ast
from typing import Any

from slotrelay.psmr.analysis.extract_bindings import BindingWalker
from slotrelay.psmr.analysis.extract_narrowing import (
    IdentityGuards,
    is_type_checking,
    isinstance_test,
    none_test,
)
from slotrelay.psmr.analysis.extract_scopes import span
from slotrelay.psmr.analysis.syntaxwalk import walk


class FlowWalker(BindingWalker):
    """Walks the statements of a scope that direct its flow, and the narrowing their tests imply."""

    def visit(self, node: ast.AST) -> Any:
        # A statement past `if x is SENTINEL: continue` (or return, raise, break) sees x without it.
        after = self.identity.after.get(id(node))
        if after is None:
            return super().visit(node)
        pushed = 0
        for name, sentinel in after:
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
        self.identity = IdentityGuards(node)
        self._docstring_scope(node, self.module)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.globals.update(node.names)
        self.escaped.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.escaped.update(node.names)

    def _nested(self, node: ast.stmt) -> None:
        # A branch, loop or handler: what it binds may or may not have happened after it. A loop's
        # body also sees what its own later statements bound in an earlier turn.
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            for inner in walk(node):
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
            for inner in walk(gen.target):
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
        narrowed = isinstance_test(node.test)
        if narrowed is not None:
            name, classes, kind = narrowed
            refs = [r for r in map(self.ref, classes) if r is not None]
            self.narrowed.append((self.scope.qualname, name, refs, kind))
        # `if isinstance(x, C): ... else: ...` (one test, not a conjunction): in the else branch x is no C.
        failed = isinstance_test(node.test) if isinstance(node.test, ast.Call) else None
        failed_refs = [r for r in map(self.ref, failed[1]) if r is not None] if failed else []
        if failed is None or failed[2] != "narrow" or len(failed_refs) != len(failed[1]):
            failed = None
        guard = none_test(node.test)
        if guard is not None:
            self.none_guards.append((self.scope.qualname, guard[0], guard[1]))
        identity = self.identity.tests.get(id(node))
        # `x is not S` holds in the body, `x is S` fails in the else branch: there x is not S.
        excluded = self._exclude(identity[0], identity[1]) if identity and not identity[2] else 0
        checking = is_type_checking(node.test)
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
        narrowed = isinstance_test(node.test)
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

def _raises(expr: ast.expr) -> ast.expr | None:
    """For `pytest.raises(E, ...)` (or `raises(E)`): E, when it names one class."""
    match expr:
        case ast.Call(func=ast.Name(id="raises") | ast.Attribute(attr="raises"), args=[exc, *_]):
            return exc if isinstance(exc, ast.Name | ast.Attribute) else None
    return None

