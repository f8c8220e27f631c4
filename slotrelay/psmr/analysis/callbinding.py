"""Bind a call's arguments to a function's parameters, as Python does, on libcst nodes.

`delta.propose` uses it to rewrite each call site of a changed signature (the argument bound to an
old parameter moves to the new parameter the map names; new parameters get the map's value), and
`delta.validate` to check that every call site binds to the signature it will meet. A call that
spreads `*args` or `**kwargs` cannot be bound statically: it is `Unbindable`, reported for review,
never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import libcst as cst


class BindError(ValueError):
    """The call does not bind: a missing required argument, an unknown keyword, too many positionals."""


class Unbindable(ValueError):
    """The call spreads `*args`/`**kwargs`, so what binds where is only known at run time."""


class Unmapped(ValueError):
    """The call gives an argument that the new signature has no place for and the map does not drop."""


@dataclass(frozen=True)
class Param:
    """One parameter: `kind` is posonly, pos (positional or keyword), kwonly, var (*a) or varkw (**k);
    `default` is the default's source text, or None."""

    name: str
    kind: str
    default: str | None

    @property
    def has_default(self) -> bool:
        """True if a call may leave the parameter out."""
        return self.default is not None or self.kind in ("var", "varkw")


def parse_parameters(text: str) -> tuple[cst.Parameters, cst.Annotation | None]:
    """Parse a parameter list such as `a, b=1, *, c` (optionally followed by `-> T`).

    Raises:
        libcst.ParserSyntaxError: the text is not a parameter list.
    """
    inner, arrow, returns = text.strip().removeprefix("(").partition("->")
    inner = inner.strip().removesuffix(")")
    head = f"def _({inner})" + (f" -> {returns.strip()}" if arrow else "") + ": pass\n"
    node = cst.parse_statement(head)
    assert isinstance(node, cst.FunctionDef)
    return node.params, node.returns


def params_of(parameters: cst.Parameters, *, bound_first: bool) -> list[Param]:
    """The parameters in binding order; the first is dropped when the call binds it (self, cls)."""

    def make(param: cst.Param, kind: str) -> Param:
        default = None if param.default is None else cst.Module(body=[]).code_for_node(param.default)
        return Param(param.name.value, kind, default)

    out = [make(p, "posonly") for p in parameters.posonly_params]
    out += [make(p, "pos") for p in parameters.params]
    if isinstance(parameters.star_arg, cst.Param):
        out.append(make(parameters.star_arg, "var"))
    out += [make(p, "kwonly") for p in parameters.kwonly_params]
    if parameters.star_kwarg is not None:
        out.append(make(parameters.star_kwarg, "varkw"))
    if bound_first and out and out[0].kind in ("posonly", "pos"):
        out = out[1:]
    return out


def bind(call: cst.Call, params: list[Param]) -> dict[str, tuple[cst.Arg, bool]]:
    """Which argument of the call each parameter receives, and whether it came positionally.

    Raises:
        Unbindable: the call spreads `*args` or `**kwargs`.
        BindError: the call would raise TypeError against these parameters.
    """
    if any(arg.star for arg in call.args):
        raise Unbindable("the call spreads *args or **kwargs")
    positional_params = [p for p in params if p.kind in ("posonly", "pos")]
    has_var = any(p.kind == "var" for p in params)
    has_varkw = any(p.kind == "varkw" for p in params)
    bound: dict[str, tuple[cst.Arg, bool]] = {}
    positional = [arg for arg in call.args if arg.keyword is None]
    for index, arg in enumerate(positional):
        if index < len(positional_params):
            bound[positional_params[index].name] = (arg, True)
        elif not has_var:
            raise BindError(
                f"takes {len(positional_params)} positional arguments but {len(positional)} given"
            )
    by_name = {p.name: p for p in params}
    for arg in call.args:
        if arg.keyword is None:
            continue
        name = arg.keyword.value
        param = by_name.get(name)
        if param is None or param.kind in ("posonly", "var", "varkw"):
            if has_varkw and (param is None or param.kind == "posonly"):
                continue
            raise BindError(f"got an unexpected keyword argument {name!r}")
        if name in bound:
            raise BindError(f"got multiple values for argument {name!r}")
        bound[name] = (arg, False)
    missing = [p.name for p in params if p.kind in ("posonly", "pos", "kwonly") and not p.has_default]
    missing = [name for name in missing if name not in bound]
    if missing:
        raise BindError(f"missing required argument{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    return bound


def remap_call(
    call: cst.Call, old: list[Param], new: list[Param], parameter_map: dict[str, dict[str, Any]]
) -> cst.Call:
    """The call rewritten for the new parameters.

    Each new parameter takes the argument the old call bound to the parameter the map names
    (`{"from": old_name}`; by default the same name), or the map's expression (`{"value": "..."}`).
    When the call left that old parameter to its default and the new parameter has none, the old
    default is written out, so the call keeps its meaning.
    Arguments stay positional while the new parameter is positional and no earlier one was left out;
    the rest are passed by keyword, in the order the call wrote them (so they are evaluated in the
    same order), new ones last. An argument keeps its own layout (line breaks, comments) and only
    changes its keyword. A call whose arguments would not change is returned as it is.

    Raises:
        Unbindable: the call spreads `*args` or `**kwargs`.
        BindError: the call does not bind to the old parameters.
        Unmapped: the call gives an argument to an old parameter that no new parameter takes and
            the map does not drop (`{"drop": true}` under the old name).
    """
    bound = bind(call, old)
    old_by_name = {p.name: p for p in old}
    old_names = set(old_by_name)
    order = {id(arg): index for index, arg in enumerate(call.args)}
    positional: list[cst.Arg] = []
    keyword: list[tuple[float, cst.Arg]] = []
    taken: set[str] = set()
    gap = False
    for param in new:
        if param.kind in ("var", "varkw"):
            continue
        source = parameter_map.get(param.name) or ({"from": param.name} if param.name in old_names else None)
        arg: cst.Arg | None = None
        was_positional = True
        if source and "value" in source:
            arg = cst.Arg(value=cst.parse_expression(source["value"]))
        elif source and source.get("from") in bound:
            taken.add(source["from"])
            arg, was_positional = bound[source["from"]]
        elif source and not param.has_default and old_by_name[source["from"]].default is not None:
            arg = cst.Arg(value=cst.parse_expression(old_by_name[source["from"]].default or ""))
        if arg is None:
            gap = True
            continue
        if param.kind == "posonly" or (param.kind == "pos" and not gap and was_positional):
            positional.append(arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT))
        else:
            gap = True
            keyword.append((order.get(id(arg), len(order) + len(keyword)), _by_keyword(arg, param.name)))
    unmapped = sorted(set(bound) - taken - {n for n, s in parameter_map.items() if s.get("drop")})
    if unmapped:
        raise Unmapped(
            f"the call gives {', '.join(unmapped)}, which no new parameter takes; name it in parameter_map "
            'as the source of a new parameter ({"from": ...}), or drop it ({"drop": true} under its name)'
        )
    args = positional + [arg for _, arg in sorted(keyword, key=lambda item: item[0])]
    if _same(call.args, args):
        return call
    return call.with_changes(args=_with_commas(args, trailing=call.args[-1].comma if call.args else None))


def _by_keyword(arg: cst.Arg, name: str) -> cst.Arg:
    if arg.keyword is not None:
        return arg.with_changes(keyword=cst.Name(name))
    no_space = cst.SimpleWhitespace("")
    return arg.with_changes(
        keyword=cst.Name(name), equal=cst.AssignEqual(whitespace_before=no_space, whitespace_after=no_space)
    )


def _same(before: Sequence[cst.Arg], after: list[cst.Arg]) -> bool:
    def shape(args: Any) -> list[tuple[str | None, str]]:
        return [
            (a.keyword.value if a.keyword else None, cst.Module(body=[]).code_for_node(a.value)) for a in args
        ]

    return shape(before) == shape(after)


def _with_commas(args: list[cst.Arg], *, trailing: Any) -> list[cst.Arg]:
    """Each argument followed by another keeps the comma it had (and so its line break), or gets `, `;
    the last gets the call's trailing comma, if the call had one."""
    out = []
    for index, arg in enumerate(args):
        if index == len(args) - 1:
            comma = trailing if isinstance(trailing, cst.Comma) else cst.MaybeSentinel.DEFAULT
        else:
            comma = (
                arg.comma
                if isinstance(arg.comma, cst.Comma)
                else cst.Comma(cst.SimpleWhitespace(""), cst.SimpleWhitespace(" "))
            )
        out.append(arg.with_changes(comma=comma))
    return out
