"""Code an agent sends in a delta (bodies, definitions, parameter lists, expressions), bounded and
parsed where a crash is an error reply before the server's own parser sees it.

libcst's native parser recurses on nesting: 5,000 nested parentheses crash the process (SIGSEGV)
and a 3,000-deep chain of conditional expressions takes seconds. So every snippet of a propose
request is checked in two steps before the planner parses it:

1. CPython's own parser (`ast`), which refuses what it cannot nest (a SyntaxError, RecursionError or
   MemoryError, never a crash), then the depth of the tree it built, at most MAX_NESTING levels;
2. libcst, in a child process, on every snippet exactly as the planner will parse it: a parser that
   dies there is an error reply naming the field, and the server lives.

What passes both is what the planner parses in process (the same parser on the same text).
The request's size was bounded before (`request_limits`).
"""

from __future__ import annotations

import ast
import json
import signal
import subprocess
import sys
import textwrap
from typing import Any

from slotrelay.psmr.errors import ExecutionFailed, InvalidQuery, PolicyBlocked

MAX_NESTING = 200
PARSE_TIMEOUT_S = 60
# Runs in the child: parses each snippet as the planner does, and says "parsed" or "refused" for each
# before parsing the next, so a crash is pinned to the snippet that caused it.
_PROGRAM = """
import json, sys
import libcst as cst
from slotrelay.psmr.analysis.callbinding import parse_parameters
for kind, text in json.load(sys.stdin):
    try:
        if kind == "module":
            cst.parse_module(text)
        elif kind == "parameters":
            parse_parameters(text)
        else:
            cst.parse_expression(text)
        print("parsed", flush=True)
    except (cst.ParserSyntaxError, RecursionError, MemoryError):
        print("refused", flush=True)
"""


def agent_code(operations: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Every piece of code in a list of delta operations, as (field, kind, text) with the text as the
    planner parses it; kind is `module`, `parameters` or `expression`."""
    found: list[tuple[str, str, str]] = []
    for index, op in enumerate(operations):
        where = f"operations[{index}]"
        if isinstance(op.get("body"), str):
            found.append((f"{where}.body", "module", textwrap.dedent(op["body"])))
        if isinstance(op.get("source"), str):
            found.append((f"{where}.source", "module", textwrap.dedent(op["source"])))
        if isinstance(op.get("parameters"), str):
            found.append((f"{where}.parameters", "parameters", op["parameters"]))
        if isinstance(op.get("expression"), str):
            found.append((f"{where}.expression", "expression", op["expression"]))
        if isinstance(op.get("arguments"), str):
            found.append((f"{where}.arguments", "expression", f"_({op['arguments']})"))
        for name, source in (op.get("parameter_map") or {}).items():
            if isinstance(source, dict) and isinstance(source.get("value"), str):
                found.append((f"{where}.parameter_map.{name}.value", "expression", source["value"]))
    return found


def _probe(kind: str, text: str) -> str:
    """The snippet as a module CPython can parse (a parameter list inside a definition)."""
    if kind == "parameters":
        inner, arrow, returns = text.strip().removeprefix("(").partition("->")
        inner = inner.strip().removesuffix(")")
        return f"def _({inner})" + (f" -> {returns.strip()}" if arrow else "") + ": pass\n"
    return text if kind == "module" else f"({text}\n)"


def nesting(tree: ast.AST) -> int:
    """The depth of a syntax tree (walked without recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def bounded(where: str, kind: str, text: str) -> None:
    """Refuse a snippet nested past what the parsers take, before libcst sees it.

    Raises:
        PolicyBlocked: nested deeper than MAX_NESTING levels (or than CPython's parser goes).
        InvalidQuery: not Python at all.
    """
    too_deep = PolicyBlocked(
        f"{where} nests deeper than {MAX_NESTING} levels, the limit for code sent in a delta; "
        "write it flatter (intermediate names)"
    )
    try:
        tree = ast.parse(_probe(kind, text))
    except (RecursionError, MemoryError) as exc:
        raise too_deep from exc
    except SyntaxError as exc:
        if "too many nested" in (exc.msg or ""):
            raise too_deep from exc
        raise InvalidQuery(f"{where} does not parse: {exc.msg} at line {exc.lineno}") from exc
    except ValueError as exc:  # a NUL byte
        raise InvalidQuery(f"{where} does not parse: {exc}") from exc
    if nesting(tree) > MAX_NESTING:
        raise too_deep


def isolated_parse(snippets: list[tuple[str, str, str]]) -> None:
    """Parse the snippets with libcst in a child process; a crash or hang there is an error reply.

    Raises:
        PolicyBlocked: the parser died on a snippet (named) or ran past PARSE_TIMEOUT_S.
        ExecutionFailed: the child could not be started.
    """
    if not snippets:
        return
    payload = json.dumps([[kind, text] for _, kind, text in snippets])
    # -P: the current folder (an analysed tree, often) is not put on the child's path, so a `libcst.py`
    # there is not what it imports.
    try:
        done = subprocess.run(
            [sys.executable, "-P", "-c", _PROGRAM],
            input=payload,
            capture_output=True,
            text=True,
            timeout=PARSE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise PolicyBlocked(
            f"parsing the code of the operations took longer than {PARSE_TIMEOUT_S} s; send less or "
            "flatter code"
        ) from exc
    except OSError as exc:
        raise ExecutionFailed(f"could not start the parser process ({exc})") from exc
    answered = done.stdout.split()
    if done.returncode == 0 and len(answered) == len(snippets):
        return
    where = snippets[min(len(answered), len(snippets) - 1)][0]
    how = (
        f"signal {signal.Signals(-done.returncode).name}"
        if done.returncode < 0 and -done.returncode in signal.valid_signals()
        else f"exit {done.returncode}"
    )
    raise PolicyBlocked(
        f"{where}: the parser died on it ({how}); nothing was proposed. Send simpler code"
    )


def check(operations: list[dict[str, Any]]) -> None:
    """Bound, then parse in a child process, every piece of code of a propose request's operations.

    Raises:
        PolicyBlocked: a snippet nested too deep, or one the parser died or hung on.
        InvalidQuery: a snippet that is not Python.
    """
    snippets = agent_code(operations)
    for where, kind, text in snippets:
        bounded(where, kind, text)
    isolated_parse(snippets)
