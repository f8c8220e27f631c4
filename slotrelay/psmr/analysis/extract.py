"""The fast pass: one Python file's source to its facts (definitions, bindings, calls, state access).

Facts are file-local plain data (refs frozen to tuples), so the store caches them by content hash and a
rebuild re-parses only changed files; `slotrelay.psmr.analysis.link` resolves them across files afterwards.
Expressions become small symbolic references ("refs"), evaluated later, never guessed here:

    ["name", scope, id(, which)] a name looked up from a scope (LEGB, class scopes skipped inside functions);
                                 `which`: the indexes of the scope's bindings of id that reach this use,
                                 when only straight-line code of the scope bound it before
    ["attr", ref, name]          an attribute of what ref denotes
    ["attrs", ref, prefix, rest] `getattr(ref, prefix + rest)`: the attributes whose names rest's
                                 constants complete, or any named with the prefix (none for the
                                 prefix "", `getattr(ref, rest)`)
    ["call", ref, [args], {kw}]  the result of calling ref
    ["sub", ref, key] / ["iter", ref]   an element of a container (at a constant key, or None) / of an
    iteration ["coll", [refs], [keys]]     a literal container holding these values (a dict's constant keys,
    else None) ["union", [refs]]            any of these (conditional expression, `or`)
    ["def", qualname]            a definition in this file (function, class, lambda)
    ["deco", [refs], ref]        a definition passed through decorators, innermost last
    ["imp", dotted] / ["from", module, name]   what an import binds
    ["param", func, index, name, default, classes]   a parameter, bound to arguments at link time;
                                 classes: its annotation's classes (only their instances flow in), or None
    ["annot", ref]               an instance of the class an annotation names
    ["typed", ref]               what an annotation declares (ref: `slotrelay.psmr.analysis.typerefs`)
    ["returns", typed]           a callable an annotation declares (`Callable[[..], R]`): its call
                                 returns what typed declares
    ["alias", typed]             a module's type alias (`Interval = tuple[A, B]`): an annotation naming it
                                 declares what `typed` does
    ["cast", typed, ref]         `typing.cast(T, x)`: what T declares, or x where T names none of the tree's
    ["op", [[ref, [names]], ..]] the result of an operator: the first of the named dunders each
                                 operand's class defines, called
    ["narrowcls", ref, [refs]]   ref where `issubclass(ref, classes)` holds (inside the `if` body)
    ["fixture", module, name]    a test's parameter: what the pytest fixture of that name gives
    ["narrow", ref, [refs]]      ref where `isinstance(ref, classes)` holds (inside the `if` body)
    ["without", ref, [sentinel]] ref where `ref is not sentinel` holds (see `extract_narrowing`)
    ["unlike", ref, [refs]]      ref where `isinstance(ref, classes)` fails (the `else` branch)
    ["rows", ref]                a test parameter's values `@pytest.mark.parametrize` lists (ref's elements)
    ["guard", name, none, ref]   a value returned where parameter `name` is None (none=True) or is not
    ["prop", qualname]           a method made a property (@property, @x.setter, @cached_property)
    ["self", class] / ["cls", class] / ["super", class]   first parameter of a method, super()
    ["varargs", func]            a `*args` parameter: a tuple of the arguments past the named ones
    ["const", key]               a str or int constant argument (a key for `d.get(key)`), denoting nothing
    ["unk", reason]              something dynamic the analysis refuses to guess

Besides call sites, the facts list the calls Python makes without call syntax ("implicit"): `for`
(`__iter__`/`__next__`), `with` (`__enter__`/`__exit__`), `raise Cls` (the constructor), every
attribute read or write outside call position (a property's getter or setter, when the linker finds one),
operators (`op`: `a + b`, `x[k]`, `k in x`, `==` and its reflected dunder on the right, f-strings,
`await`, a truth test `if x`/`not x`/`x and y`, pytest's `raises(E, match=...)` formatting the E; the
dunders in `slotrelay.psmr.analysis.typerefs`), class statements (`classdef`: the metaclass's
`__new__`/`__init__`, the bases' `__init_subclass__`), `from m import x` (`import`: a module `__getattr__`)
and a value used as a key (`key`: `d[k]`, `k in d`, `d.get(k)`, `{k: v}`, `{k}`, `set(xs)`, with the container
as `receiver`). `yield from x` and `"sep".join(x)` iterate x.

A file that does not parse yields facts with `syntax_error` set and nothing else.

The walk (`FileExtractor`) is built of one walker per part of the language, each in its module:
`extract_scopes` (the facts being filled, scopes and bindings), `extract_refs` (expressions to refs),
`extract_implicit` (calls without call syntax, state reads and writes), `extract_defs` (functions,
classes, parameters, pytest's values), `extract_bindings` (imports, assignments), `extract_calls`
(call sites) and `extract_flow` (branches, loops, `with`, returns; the narrowing of
`extract_narrowing`).
"""


from __future__ import annotations

import ast
import warnings
from typing import Any

from slotrelay.psmr.analysis.extract_bindings import module_base
from slotrelay.psmr.analysis.extract_calls import CallWalker
from slotrelay.psmr.analysis.extract_defs import DefinitionWalker, is_overload
from slotrelay.psmr.analysis.extract_flow import FlowWalker
from slotrelay.psmr.analysis.extract_scopes import span
from slotrelay.psmr.analysis.facts_version import FACTS_VERSION

__all__ = ["FileExtractor", "extract", "freeze", "is_overload", "module_base", "span"]


class FileExtractor(FlowWalker, DefinitionWalker, CallWalker):
    """Walks one module's AST and fills the facts dict (see the module docstring)."""


_CONTAINERS = (list, dict)


def freeze(ref: Any) -> Any:
    """A hashable copy of a ref (lists become tuples, keyword dicts sorted pairs)."""
    # Leaves (names, numbers) are returned in place, without a call each: most of a ref is leaves.
    if isinstance(ref, list):
        return tuple([freeze(r) if isinstance(r, _CONTAINERS) else r for r in ref])
    if isinstance(ref, dict):
        return tuple(sorted([(k, freeze(v) if isinstance(v, _CONTAINERS) else v) for k, v in ref.items()]))
    return ref


def extract(source: str, module: str, *, is_package: bool = False) -> dict[str, Any]:
    """Facts of one module's source (see the module docstring for the ref language).

    Parameters:
        source: the file's text.
        module: its dotted module name relative to the analysed root.
        is_package: True for an `__init__.py` (relative imports start at the module itself).

    Returns:
        The facts (plain data, refs as tuples); on a syntax error only `syntax_error` and the module
        record.
    """
    base: dict[str, Any] = {
        "version": FACTS_VERSION,
        "module": module,
        "is_package": is_package,
        "lines": source.count("\n") + 1,
    }
    tree = _parse(source, base)
    if not isinstance(tree, ast.Module):
        return tree
    walker = FileExtractor(module, is_package=is_package, lines=source.splitlines())
    try:
        walker.visit(tree)
    except RecursionError:
        return _too_deep(base)
    return {**base, "syntax_error": None, **_frozen(walker)}


def _parse(source: str, base: dict[str, Any]) -> ast.Module | dict[str, Any]:
    """A module's syntax tree, or its facts when it does not parse."""
    try:
        # Invalid escapes etc. warn at parse time; they say nothing about structure.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except RecursionError:
        return _too_deep(base)
    except (SyntaxError, ValueError) as exc:
        # SyntaxError columns are 1-based; spans here are 0-based like the AST's.
        line = getattr(exc, "lineno", None) or 1
        col = max((getattr(exc, "offset", None) or 1) - 1, 0)
        end_line = getattr(exc, "end_lineno", None) or line
        end_col = max((getattr(exc, "end_offset", None) or col + 1) - 1, col)
        return {**base, "syntax_error": {"message": str(exc), "span": [line, col, end_line, end_col]}}


def _too_deep(base: dict[str, Any]) -> dict[str, Any]:
    # The parser and the walker recurse once per level of nesting: a deeper file (a 100k-term
    # expression) is an unknown of its own, not a crash.
    return {
        **base,
        "syntax_error": {
            "message": "nested too deeply to analyse (Python's recursion limit)",
            "span": [1, 0, base["lines"], 0],
            "reason": "nesting_too_deep",
        },
    }


def _frozen(walker: FileExtractor) -> dict[str, Any]:
    """The facts a walk filled, refs frozen (tuples), so the resolver hashes them as they are."""
    return {
        "defs": [
            {**d, **{k: freeze(d[k]) for k in ("bases", "metaclass") if k in d}} if "bases" in d else d
            for d in walker.defs
        ],
        "scopes": {
            q: {
                **info,
                **{k: freeze(info[k]) for k in ("returns", "yields", "annotated", "overloads") if k in info},
            }
            for q, info in walker.scopes.items()
        },
        "bindings": {
            q: {n: freeze(refs) for n, refs in names.items()} for q, names in walker.bindings.items()
        },
        "instance_attrs": {
            c: {n: freeze(refs) for n, refs in names.items()} for c, names in walker.instance_attrs.items()
        },
        "calls": [
            {
                **site,
                "callee": freeze(site["callee"]),
                "args": freeze(site["args"]),
                "kwargs": {k: freeze(v) for k, v in site["kwargs"].items()},
                **({"spread": freeze(site["spread"])} if "spread" in site else {}),
            }
            for site in walker.calls
        ],
        "state": [{**access, "ref": freeze(access["ref"])} for access in walker.state],
        "imports": walker.imports,
        "stars": walker.stars,
        "exports": walker.exports,
        "unknowns": walker.unknowns,
        "withs": [{**w, "ref": freeze(w["ref"])} for w in walker.withs],
        "stores": [[freeze(base), attr, freeze(value)] for base, attr, value in walker.stores],
        "implicit": [
            {**i, **{k: freeze(i[k]) for k in ("ref", "receiver", "after") if k in i}}
            for i in walker.implicit
        ],
    }
