"""What annotations declare a call returns: return annotations, `Callable[..., R]`, and the
`@overload` the arguments select."""

from __future__ import annotations

from typing import Any

from slotrelay.psmr.analysis.hierarchy import Hierarchy
from slotrelay.psmr.analysis.linkrules import MAX_PRECISE_RETURNS, Value, Values
from slotrelay.psmr.analysis.narrowing import Narrowing


class DeclaredTypes:
    """A call's results as its callee's annotations state them, beside what its body returns."""

    def __init__(self, values: Values, hierarchy: Hierarchy, narrowing: Narrowing) -> None:
        self.values = values
        self.hierarchy = hierarchy
        self.narrowing = narrowing
        self.scopes = values.scopes

    def with_declared(self, func: str, out: set[Value]) -> set[Value]:
        """What a call of func returns: what its body returns (`out`) and what its return annotation
        declares; past a few subclasses of the declared type in what the body returns, the body's
        answer is a guess of its own, and the declared type answers."""
        annotated = self.scopes.get(func, {}).get("annotated")
        if annotated is None:
            return out
        if len(out) > MAX_PRECISE_RETURNS or any(v[0] == "many" for v in out):
            stated = self.values.eval(annotated)
            bases = {v[1] for v in stated if v[0] == "inst"}
            if bases and all(
                v[0] == "many" or (v[0] == "inst" and bases & set(self.hierarchy.mro(v[1]))) for v in out
            ):
                return set(stated)
        declared = self.declared(annotated, out)
        # A base the body returns (`-> Array` over `return value(raw)`, declared `-> Item`): the
        # annotation's subclass is the more precise.
        narrower = {v[1] for v in declared if v[0] == "inst"}
        out = {
            v
            for v in out
            if not (v[0] == "inst" and any(v[1] in self.hierarchy.mro(n)[1:] for n in narrower))
        }
        return out | declared

    def declared(self, annotated: Any, found: set[Value] | frozenset[Value] = frozenset()) -> set[Value]:
        """The values a return annotation declares, less the classes `found` already covers with a
        subclass (a body returning `Sub()` under `-> Base` returns a Sub)."""
        if annotated is None:
            return set()
        stated = self.values.eval(annotated)
        known = {v[1] for v in found if v[0] == "inst"}
        return {
            v
            for v in stated
            if not (v[0] == "inst" and any(v[1] in self.hierarchy.mro(k) for k in known))
        }

    def overload_result(self, func: str, args: Any, kwargs: Any) -> set[Value]:
        """What a call of an `@overload`ed function returns: the return types of the overloads the
        arguments can select (by their annotations), or of all of them and the implementation's
        when the arguments cannot tell them apart."""
        # Each overload: [its parameters, what it returns] (see `extract`). The first whose
        # annotations admit the arguments is the one called; one the arguments cannot tell may be.
        kept = []
        for params, returns in self.scopes[func]["overloads"]:
            fit = self.overload_fits(params, args, kwargs)
            if fit is not False:
                kept.append(returns)
            if fit:
                break
        out: set[Value] = set()
        for returns in kept:
            if returns is None:
                out |= self.values.call_result(("def", func))
                continue
            stated = self.values.eval(returns)
            out |= stated
            if any(v[0] == "returns" for v in stated):
                # The callable it declares is one the body makes (a decorator factory's inner
                # function): calling it calls that, and `declared_call` types its result.
                out |= {v for v in self.values.call_result(("def", func)) if v[0] == "def"}
            # A generator the body returns (`-> Iterator[T]` over `return other_generator(...)`):
            # iterating the result runs its body, which no annotation says.
            out |= {v for v in self.values.call_result(("def", func)) if v[0] == "gen"}
        return out or self.values.call_result(("def", func))

    def declared_call(self, callees: set[Value] | frozenset[Value], out: set[Value]) -> set[Value]:
        """A call's results where an annotation declares what the callable returns (`Callable[.., R]`
        beside the tree's function it is): of the instances found, those of R's classes and their
        subclasses; R itself where none is."""
        stated: set[Value] = set()
        for value in callees:
            if value[0] == "returns":
                stated |= self.values.eval(value[1])
        bases = {v[1] for v in stated if v[0] == "inst"}
        if not bases:
            return out
        kept = {v for v in out if v[0] == "inst" and bases & set(self.hierarchy.mro(v[1]))}
        return kept or stated

    def overload_fits(self, params: Any, args: Any, kwargs: Any) -> bool | None:
        """Whether an overload's annotations admit the arguments (None: no argument tells); False
        too when it cannot take them (too many, too few, an unknown keyword)."""
        verdict: bool | None = None
        positional = [p for p in params if p[0] >= 0]
        by_name = {p[1]: p for p in params if p[0] != -2}
        variadic = {p[0] for p in params if p[0] < -1}
        if len(args) > len(positional) and -2 not in variadic:
            return False
        if any(k not in by_name and -3 not in variadic for k, _ in kwargs):
            return False
        given_names = {p[1] for p in positional[: len(args)]} | {k for k, _ in kwargs}
        if any(p[3] and p[1] not in given_names for p in params):
            return False
        given = [(positional[i] if i < len(positional) else None, a) for i, a in enumerate(args)]
        given += [(by_name.get(k), a) for k, a in kwargs]
        told = True
        for param, arg in given:
            if param is None or param[2] == "any":
                continue
            kinds = self.argument_kinds(arg)
            if kinds is None:
                continue
            named = {v for r in param[2] or () for v in self.values.eval(r)}
            if ("builtin", "object") in named:
                verdict = True
                continue
            admitted = None if param[2] is None else self.narrowing.checkable_classes(param[2])
            if admitted is None:
                # A known argument against an annotation this cannot judge (`Sequence[Any]`).
                told = False
                continue
            tree, _ = admitted
            outside = {v[1].rsplit(".", 1)[-1] for v in named if v[0] in ("builtin", "ext")}
            ok = any(
                (kind == "inst" and tree & set(self.hierarchy.mro(subject)))
                or (kind != "inst" and subject.rsplit(".", 1)[-1] in outside)
                for kind, subject in kinds
            )
            if not ok:
                return False
            verdict = True
        return verdict if told else None

    def argument_kinds(self, arg: Any) -> set[tuple[str, str]] | None:
        """What an argument is, as far as overloads tell them apart: instances of the tree's classes
        ("inst", class) and builtin constants ("builtin", "int"/"str"); None when not known."""
        if arg[0] == "const":
            return {("builtin", type(arg[1]).__name__)}
        if arg[0] == "call":
            # `date(2018, 7, 22)`: an instance of what an external name called makes.
            made = self.values.eval(arg[1])
            if made and all(v[0] == "ext" for v in made):
                return {("extinst", v[1]) for v in made}
        values = self.values.eval(arg)
        if not values or any(v[0] not in ("inst", "extinst") for v in values):
            return None
        return set(values)
