"""The static binder agrees with Python: for generated signatures and calls, `bind` refuses exactly the
calls `inspect.Signature.bind` refuses, and binds the rest the same way."""

from __future__ import annotations

import inspect

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotrelay.psmr.analysis.callbinding import (
    BindError,
    Unmapped,
    bind,
    params_of,
    parse_parameters,
    remap_call,
)

NAMES = ("a", "b", "c", "d")


@st.composite
def signatures(draw: st.DrawFn) -> str:
    names = draw(st.permutations(NAMES))
    kinds = draw(st.lists(st.sampled_from(["pos", "posdef", "kw", "kwdef"]), min_size=1, max_size=4))
    positional = [k for k in kinds if k.startswith("pos")]
    keyword = [k for k in kinds if k.startswith("kw")]
    # Python wants defaulted positionals last; sort them so every drawn list is a valid signature.
    positional.sort(key=lambda k: k == "posdef")
    parts, index = [], 0
    for kind in positional:
        parts.append(names[index] + ("=0" if kind == "posdef" else ""))
        index += 1
    if draw(st.booleans()) and positional:
        parts.insert(draw(st.integers(1, len(positional))), "/")
    if keyword:
        parts.append("*")
        for kind in keyword:
            parts.append(names[index] + ("=0" if kind == "kwdef" else ""))
            index += 1
    return ", ".join(parts)


@st.composite
def calls(draw: st.DrawFn) -> str:
    positional = draw(st.integers(0, 4))
    keywords = draw(st.lists(st.sampled_from(NAMES + ("z",)), unique=True, max_size=4))
    return ", ".join([str(i + 1) for i in range(positional)] + [f"{k}={k!r}" for k in keywords])


def _python(signature: str, arguments: str) -> dict[str, object] | None:
    namespace: dict[str, object] = {}
    exec(f"def f({signature}): pass", namespace)  # noqa: S102 - a generated parameter list, nothing else
    try:
        return dict(eval(f"_sig.bind({arguments})", {"_sig": inspect.signature(namespace["f"])}).arguments)
    except TypeError:
        return None


@settings(max_examples=400, deadline=None)
@given(signatures(), calls())
def test_bind_agrees_with_python(signature: str, arguments: str) -> None:
    params = params_of(parse_parameters(signature)[0], bound_first=False)
    call = cst.parse_expression(f"f({arguments})")
    assert isinstance(call, cst.Call)
    expected = _python(signature, arguments)
    try:
        bound = bind(call, params)
    except BindError:
        assert expected is None, (signature, arguments)
        return
    assert expected is not None, (signature, arguments)
    assert {name: cst.Module([]).code_for_node(arg.value) for name, (arg, _) in bound.items()} == {
        name: repr(value) if isinstance(value, str) else str(value) for name, value in expected.items()
    }


def test_remap_moves_arguments_and_writes_out_defaults() -> None:
    old = params_of(parse_parameters("text, width=20")[0], bound_first=False)
    new = params_of(parse_parameters("text, columns, *, indent=''")[0], bound_first=False)
    mapping = {"columns": {"from": "width"}}

    def remap(source: str) -> str:
        call = cst.parse_expression(source)
        assert isinstance(call, cst.Call)
        return cst.Module([]).code_for_node(remap_call(call, old, new, mapping))

    assert remap("f(t)") == "f(t, 20)"
    assert remap("f(t, 8)") == "f(t, 8)"
    assert remap("f(t, width=8)") == "f(t, columns=8)"
    # Keywords stay keywords, in the order the call wrote them (they are evaluated in that order).
    assert remap("f(width=8, text=t)") == "f(columns=8, text=t)"


def _remap(old: str, new: str, mapping: dict[str, dict[str, object]], source: str) -> str:
    call = cst.parse_expression(source)
    assert isinstance(call, cst.Call)
    before = params_of(parse_parameters(old)[0], bound_first=False)
    after = params_of(parse_parameters(new)[0], bound_first=False)
    return cst.Module([]).code_for_node(remap_call(call, before, after, mapping))


def test_an_argument_with_nowhere_to_go_is_refused_unless_dropped() -> None:
    """sqlparse's `imt(token, i=None, m=None, t=None)` made keyword-only under new names: without a
    map, `i=` and `t=` would silently vanish from every call."""
    old, new = "token, i=None, m=None, t=None", "token, *, instance=None, match=None, types=None"
    with pytest.raises(Unmapped, match="gives i, t"):
        _remap(old, new, {}, "imt(tk, i=A, t=B)")
    assert _remap(old, new, {}, "imt(tk)") == "imt(tk)"
    mapping: dict[str, dict[str, object]] = {"instance": {"from": "i"}, "types": {"from": "t"}}
    with pytest.raises(Unmapped, match="gives m"):
        _remap(old, new, mapping, "imt(tk, i, m, t)")
    assert _remap(old, new, {**mapping, "m": {"drop": True}}, "imt(tk, i, m, t)") == (
        "imt(tk, instance=i, types=t)"
    )


def test_a_remapped_call_keeps_its_layout_and_comments() -> None:
    old, new = "token, i=None, m=None, t=None", "token, *, instance=None, match=None, types=None"
    mapping: dict[str, dict[str, object]] = {"instance": {"from": "i"}, "types": {"from": "t"}}
    split = "imt(token, i=(Function, Identifier),\n    t=T.Literal)"
    assert (
        _remap(old, new, mapping, split)
        == "imt(token, instance=(Function, Identifier),\n    types=T.Literal)"
    )
    commented = "imt(\n    tk,\n    t=B,  # the types\n    i=A,\n)"
    assert (
        _remap(old, new, mapping, commented) == "imt(\n    tk,\n    types=B,  # the types\n    instance=A,\n)"
    )
