"""What a site's own source line says that the stored graph does not: a call that builds the
exception of a `raise`, and a definition that is an `@overload` stub.

The store records `raise ValueError("x")` as a `calls` edge to `ValueError` (the constructor runs,
so the edge is right about the call). It folds `@overload` stubs into their implementation only when
the decorator is spelled as it knows (`overload`, `typing.overload`): under another spelling
(`t.overload`) the stubs and their implementation are a `duplicate_definition` conflict whose symbol
points at the first stub. A person reads the first as "raises ValueError" and either kind of stubs
as one function. Both are read here from the lines the evidence points at, through the page's
`SourceFiles`: a file that changed since the build, or cannot be read, says nothing, and the stored
relation stands.

    in_raise(files, record)          the evidence's site is the exception of a raise statement
    definitions(files, records)      the definitions a symbol's evidence points at, stubs marked
    implementation(files, artifact, line)   the signature, docstring and raises of one def
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from psmr_view.source import SourceFiles

# A decorator line naming `overload`, bare or through a module (`typing.overload`, `t.overload`).
OVERLOAD = re.compile(rb"\s*@\s*(?:[A-Za-z_]\w*\s*\.\s*)*overload\s*(?:#.*)?")
DECORATOR = re.compile(rb"\s*@")
RAISE = re.compile(rb"\s*raise\s*")
# What the implicit-call evidence of `raise Cls` (no call syntax) says about itself.
IMPLICIT_RAISE = " (raise)"


def in_raise(files: SourceFiles, record: dict[str, Any]) -> bool:
    """True if an evidence record's site is the exception a `raise` statement raises: the text before
    the span on its line is the `raise` keyword alone (`raise Error(...)`, `raise mod.Error(...)`),
    or the record is the store's own implicit call of `raise Cls`."""
    if record["about"].endswith(IMPLICIT_RAISE):
        return True
    text = files.text(record["artifact"])
    if text.changed:
        return False
    span = record["span"]
    line = text.line(span["line"])
    return line is not None and RAISE.fullmatch(line[: span["col"]]) is not None


@dataclass
class Definition:
    """One `def` of a symbol: where it starts and whether it is an `@overload` stub."""

    evidence: str
    artifact: str
    line: int
    end_line: int
    stub: bool


@dataclass
class Definitions:
    """A symbol's definitions, in source order."""

    items: list[Definition] = field(default_factory=list)

    @property
    def stubs(self) -> list[Definition]:
        return [d for d in self.items if d.stub]

    @property
    def implementation(self) -> Definition | None:
        """The one definition that is not a stub, when every other is: `@overload` stubs and the
        function they describe are one function."""
        others = [d for d in self.items if not d.stub]
        return others[0] if len(others) == 1 and len(self.items) > 1 else None


def _is_stub(lines: list[bytes], line: int) -> bool:
    """True if one of the decorator lines right above line `line` (a `def`) names `overload`."""
    number = line - 1
    while number >= 1 and DECORATOR.match(lines[number - 1]):
        if OVERLOAD.fullmatch(lines[number - 1]):
            return True
        number -= 1
    return False


def definitions(files: SourceFiles, records: list[dict[str, Any]]) -> Definitions:
    """The definitions a symbol's `defines` evidence (or a duplicate_definition conflict's) points at.

    Parameters:
        files: the page's reader of the workspace's files.
        records: the evidence records, one per definition.

    Returns:
        The definitions in file and line order; none from a file that changed since the build.
    """
    found = Definitions()
    for record in records:
        text = files.text(record["artifact"])
        if text.changed or not text.lines:
            return Definitions()
        span = record["span"]
        found.items.append(
            Definition(
                record["id"],
                record["artifact"],
                span["line"],
                span["end_line"],
                _is_stub(text.lines, span["line"]),
            )
        )
    found.items.sort(key=lambda d: (d.artifact, d.line))
    return found


def overload_group(files: SourceFiles, conflict: dict[str, Any], records: dict[str, dict[str, Any]]) -> bool:
    """True if a duplicate_definition conflict is `@overload` stubs and their one implementation.

    Parameters:
        files: the page's reader of the workspace's files.
        conflict: the conflict item (its `evidence_refs` are its definitions).
        records: evidence records by id, holding the conflict's.
    """
    if conflict["kind"] != "duplicate_definition" or not conflict["evidence_refs"]:
        return False
    if any(ref not in records for ref in conflict["evidence_refs"]):
        return False
    return definitions(files, [records[ref] for ref in conflict["evidence_refs"]]).implementation is not None


@dataclass
class Implementation:
    """What a `def` says about itself: as the analysis reads a definition."""

    line: int
    signature: str
    docstring: str | None
    raises: list[str]
    decorators: list[str]


def implementation(files: SourceFiles, artifact: str, line: int) -> Implementation | None:
    """The `def` starting at `line` of `artifact`, read from the file; None if none starts there (the
    file changed) or the file does not parse."""
    text = files.text(artifact)
    if text.changed or not text.lines:
        return None
    try:
        tree = ast.parse(b"\n".join(text.lines), filename=artifact)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.lineno == line:
            returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
            raised = {
                ast.unparse(r.exc.func if isinstance(r.exc, ast.Call) else r.exc)
                for r in ast.walk(node)
                if isinstance(r, ast.Raise) and r.exc
            }
            return Implementation(
                line=line,
                signature=f"({ast.unparse(node.args)}){returns}",
                docstring=ast.get_docstring(node),
                raises=sorted(raised),
                decorators=[ast.unparse(d) for d in node.decorator_list],
            )
    return None
