"""Evaluation in one call's own context: a decorator, or a function that returns (part of) its
argument, evaluated with its parameters bound to that call's arguments alone (`CallContexts.apply`).
"""

from __future__ import annotations

from typing import Any

from slotrelay.psmr.analysis.declared import DeclaredTypes
from slotrelay.psmr.analysis.facttables import NameBindings, cached
from slotrelay.psmr.analysis.linkrules import (
    FIRST_ARGUMENT_STANDS,
    MAX_CONTEXT_DEPTH,
    MAX_FROZEN_NESTING,
    MAX_VALUES,
    STATED_KINDS,
    Value,
    Values,
)


class CallContexts:
    """The values of refs in call contexts, memoised in the evaluation's memo (keys `@apply`, `@in`,
    `@name_in`, which it hands back here)."""

    def __init__(self, values: Values, names: NameBindings, declared: DeclaredTypes) -> None:
        self.values = values
        self.names = names
        self.declared = declared
        self.defs = values.defs
        self.scopes = values.scopes
        self.memo = values.memo
        self.record = values.record
        self._mentions: dict[Any, bool] = {}

    def returns_argument(self, func: str) -> bool:
        """Whether a function (not a method) returns something made of one of its parameters."""
        info = self.defs.get(func, {})
        return info.get("kind") in ("function", "lambda") and any(
            self.mentions_param(r, func) for r in self.scopes.get(func, {}).get("returns", ())
        )

    def mentions_param(self, ref: Any, func: str) -> bool:
        """Whether a ref's value may depend on the arguments of a call of func (cached)."""
        mentions: bool = cached(
            self.memo,
            self.record,
            self._mentions,
            ("@mentions", ref, func),
            lambda: self._mentions_param(ref, func, 0),
        )
        return mentions

    def _mentions_param(self, ref: Any, func: str, depth: int) -> bool:
        if depth > 4 or not isinstance(ref, tuple) or not ref:
            return False
        kind: str = ref[0]
        if kind == "name":
            if self.names.binding_scope(ref) != func:
                return False
            return any(
                (r[0] == "param" and r[1] == func) or self._mentions_param(r, func, depth + 1)
                for r in self.names.binding_refs(ref)
            )
        if kind in ("attr", "sub", "iter", "narrow", "without", "unlike"):
            return self._mentions_param(ref[1], func, depth)
        if kind == "call":
            return (
                any(self._mentions_param(a, func, depth) for a in ref[2])
                or any(self._mentions_param(v, func, depth) for _, v in ref[3])
                or self._mentions_param(ref[1], func, depth)
            )
        if kind in ("coll", "union"):
            return any(self._mentions_param(r, func, depth) for r in ref[1])
        # A guard tests a parameter: whether its value is returned depends on the arguments.
        return kind == "guard"

    def apply(
        self,
        func: str,
        args: list[frozenset[Value]],
        kwargs: dict[str, frozenset[Value]],
        depth: int,
        unset: frozenset[int | str] = frozenset(),
    ) -> set[Value]:
        """What calling the tree's function `func` with these argument values returns, in this call's
        context alone (its parameters bound to these values only), a few calls deep. `unset`: the
        arguments (by index or keyword) that may be None besides their values (see `maybe_none`)."""
        scope = self.scopes.get(func, {})
        if scope.get("generator"):
            return {("gen", func)}
        context = (func, tuple(args), tuple(sorted(kwargs.items())), unset)
        if depth > MAX_CONTEXT_DEPTH:
            return self.values.call_result(("def", func))
        return set(self.memo.get(("@apply", context, depth)))

    def compute_apply(self, key: Any) -> frozenset[Value]:
        context, depth = key[1], key[2]
        env = context_env(context)
        out: set[Value] = set()
        for r in self.scopes.get(context[0], {}).get("returns", []):
            out |= self.eval_in(r, env, depth)
        return frozenset(self.declared.with_declared(context[0], out))

    def eval_in(self, ref: Any, env: dict[str, Any], depth: int) -> set[Value]:
        """A ref's values inside one call context (see `apply`): names of the context function's
        parameters denote its arguments, calls of the tree's functions are applied in turn."""
        if ref is None:
            return set()
        if not env:
            return self.compute_in(ref, env, depth)
        if not self.mentions_param(ref, env["func"]):
            # Nothing in it depends on the call's arguments: its values are the same everywhere.
            return set(self.values.eval(ref))
        return set(self.memo.get(("@in", ref, env["key"], depth)))

    def compute_in(self, ref: Any, env: dict[str, Any], depth: int) -> set[Value]:
        kind = ref[0]
        if kind == "name" and env and self.names.binding_scope(ref) == env["func"]:
            return set(self.memo.get(("@name_in", ref, env["key"], depth)))
        if kind in ("attr", "sub", "iter") and env:
            element_key = ref[2] if kind == "sub" and len(ref) > 2 else None
            out = set()
            for value in self.eval_in(ref[1], env, depth):
                if kind == "attr":
                    out |= self.values.attribute(value, ref[2])
                else:
                    out |= self.values.elements(value, element_key)
            return out
        if kind == "coll" and env:
            # The elements as they are in this context, frozen into the container.
            refs = tuple(("vals", _frozen(self.eval_in(r, env, depth))) for r in ref[1])
            return {("coll", ("coll", refs, ref[2]))}
        if kind == "union":
            return {v for part in ref[1] for v in self.eval_in(part, env, depth)}
        if kind == "guard":
            # `if name is None: return ...` does not return when the call gave name a value.
            given = self.argument_given(env, ref[1]) if env else None
            return set() if given is not None and given == ref[2] else self.eval_in(ref[3], env, depth)
        if kind == "call":
            callees = self.eval_in(ref[1], env, depth)
            args = [frozenset(self.eval_in(a, env, depth)) for a in ref[2]]
            kwargs = {k: frozenset(self.eval_in(v, env, depth)) for k, v in ref[3]}
            out = set()
            for value in callees:
                if value[0] == "def" and self.scopes.get(value[1], {}).get("overloads"):
                    # The overloads its arguments select say what it returns, as out of context.
                    out |= self.declared.overload_result(value[1], ref[2], ref[3])
                elif value[0] == "def" and self.defs.get(value[1], {}).get("kind") in ("function", "lambda"):
                    out |= self.apply(value[1], args, kwargs, depth + 1, self.maybe_none(ref))
                elif value[0] == "returns":
                    out |= self.values.eval(value[1])
                elif value in FIRST_ARGUMENT_STANDS and args:
                    out |= args[0]
                elif value[0] == "builtin":
                    out |= self.values.builtin_result(value[1], ref[2])
                else:
                    out |= self.values.call_result(value)
            return self.declared.declared_call(callees, out)
        return set(self.values.eval(ref))

    def compute_name_in(self, ref: Any, env: dict[str, Any], depth: int) -> set[Value]:
        # A name of the context function: its parameters are this call's arguments.
        out: set[Value] = set()
        for r in self.names.binding_refs(ref):
            if r[0] == "param" and r[1] == env["func"]:
                index, name, default = r[2], r[3], r[4]
                if 0 <= index < len(env["args"]):
                    out |= env["args"][index]
                elif name in env["kwargs"]:
                    out |= env["kwargs"][name]
                elif default is not None:
                    out |= self.values.eval(default)
            elif r[0] not in STATED_KINDS:
                out |= self.eval_in(r, env, depth)
        return out

    def argument_given(self, env: dict[str, Any], name: str) -> bool | None:
        """Whether a call context gives parameter `name` a value (True) or leaves it None (False);
        None when it cannot tell (not a parameter, or a default other than None)."""
        func = self.defs.get(env["func"], {})
        accepts = func.get("accepts")
        if accepts is None or name not in func.get("params", []):
            return None
        positional = accepts["positional"]
        # An argument whose values are unknown (empty), or that may be None besides them, tells nothing.
        if name in positional and positional.index(name) < len(env["args"]):
            index = positional.index(name)
            return True if env["args"][index] and index not in env["unset"] else None
        if name in env["kwargs"]:
            return True if env["kwargs"][name] and name not in env["unset"] else None
        return False if name in accepts.get("none_defaults", []) else None

    def maybe_none(self, call: Any) -> frozenset[int | str]:
        """The arguments of a call ref (by index or keyword) that may be None whatever values they
        have: a parameter of the caller whose default is None (a call that leaves it out passes None
        on, as in `if prereleases is None: prereleases = ...` where the rebinding may be None too)."""
        out: set[int | str] = set()
        for slot, arg in [*enumerate(call[2]), *call[3]]:
            if arg[0] == "name" and any(
                r[0] == "param"
                and r[3] in self.defs.get(r[1], {}).get("accepts", {}).get("none_defaults", ())
                for r in self.names.binding_refs(arg)
            ):
                out.add(slot)
        return frozenset(out)


def _frozen(values: set[Value]) -> frozenset[Value]:
    """The element values a container frozen in a call context holds: more than MAX_VALUES, or
    containers nested past MAX_FROZEN_NESTING, are too imprecise to draw edges from and become the
    sentinel ("many", n), as a ref's values do."""
    kept = {value for value in values if _nesting(value) < MAX_FROZEN_NESTING}
    if len(kept) > MAX_VALUES:
        return frozenset({("many", len(values))})
    if len(kept) < len(values):
        kept.add(("many", len(values) - len(kept)))
    return frozenset(kept)


def _nesting(value: Value) -> int:
    """How many containers frozen in a call context a value is, one inside the other."""
    if value[0] != "coll" or value[1][0] != "coll":
        return 0
    return 1 + max((_nesting(v) for ref in value[1][1] if ref[0] == "vals" for v in ref[1]), default=0)



def context_env(context: tuple[Any, ...]) -> dict[str, Any]:
    """The environment of a call context (see `CallContexts.apply`) from its key."""
    return {
        "func": context[0],
        "args": list(context[1]),
        "kwargs": dict(context[2]),
        "unset": context[3],
        "key": context,
    }
