"""References by name: every place a source text still names an identifier, as code or in a string.

A rename, a removal or a signature change is only safe when nothing still names the old symbol in a
way the graph cannot see: a call through an untyped receiver (`self._registry.get_or_retrieve(...)`),
an attribute read (`handler = obj.get_or_retrieve`), a name, an import, or, only as a hint, a string
or docstring (`getattr(obj, "get_or_retrieve")`). delta.propose lists the code references as
possibly affected (and renames them on request), delta.validate checks that none is left, and
`edit_reference` edits one by its position. One scan serves all three.

Positions are those of the workspace's spans: a 1-based line and `ast`'s 0-based column in UTF-8
bytes, of where the reference starts (for a call, where its callee starts), and, for code, of the
identifier itself (`name_line`, `name_col`), which is what a rename edits.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass
from typing import Any

# How a reference names the identifier: called, read as an attribute or a name, imported, or
# written inside a string literal (docstrings included).
CODE_KINDS = ("call", "attribute", "name", "import")
TEXT_SHOWN = 200


@dataclass(frozen=True)
class Reference:
    """One place a text names an identifier."""

    artifact: str
    name: str
    kind: str
    line: int
    col: int
    name_line: int
    name_col: int
    scope: str
    text: str
    # An attribute of something (`x.name`, `x.name()`), rather than a bare name; for an import, the
    # absolute module it imports from.
    on_receiver: bool = False
    source: str | None = None
    # What the attribute is taken from, when its receiver is a chain of names from a module-level
    # binding: the imported module's path with the rest of the chain (`T.Operator` with `from sqlparse
    # import tokens as T`: `sqlparse.tokens.Operator`), or VALUE for a module-level binding of a value.
    receiver: str | None = None

    def item(self) -> dict[str, Any]:
        """The reference as a JSON item, with a `site` key other lists can match on."""
        return {**asdict(self), "site": f"{self.artifact}:{self.line}:{self.col}"}


def _line_text(lines: list[str], line: int) -> str:
    return lines[line - 1].strip()[:TEXT_SHOWN] if 1 <= line <= len(lines) else ""


def _identifier_end(node: ast.Attribute, name: str) -> tuple[int, int]:
    """The position of an attribute's identifier: it ends the node."""
    end_line = node.end_lineno or node.lineno
    end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset
    return end_line, end_col - len(name.encode("utf-8"))


VALUE = "<value>"


def _chain(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"] for a chain of attributes on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def _module_bindings(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """The names a module binds at its own level: an import to what it imports (a dotted path), any
    other binding to VALUE."""
    out = {name: VALUE for name in bound_names(tree.body)}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Import) and getattr(node, "col_offset", 1) == 0:
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = alias.name
                else:
                    out[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.col_offset == 0:
            base = absolute_module(node, module, is_package)
            for alias in node.names:
                out[alias.asname or alias.name] = f"{base}.{alias.name}"
    return out


class _Scanner(ast.NodeVisitor):
    def __init__(
        self, artifact: str, module: str, names: frozenset[str], lines: list[str], bindings: dict[str, str]
    ) -> None:
        self.artifact = artifact
        self.names = names
        self.lines = lines
        self.bindings = bindings
        self.scope = [module]
        self.found: list[Reference] = []
        self.callees: set[int] = set()
        # Every name the text binds anywhere: a bare name bound in the file is taken to mean that binding.
        self.bound: set[str] = set()
        self.words = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\b")

    def _add(self, name: str, kind: str, node: ast.AST, at: tuple[int, int], **extra: Any) -> None:
        line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0)
        self.found.append(
            Reference(
                artifact=self.artifact,
                name=name,
                kind=kind,
                line=line,
                col=col,
                name_line=at[0],
                name_col=at[1],
                scope=".".join(self.scope),
                text=_line_text(self.lines, line),
                **extra,
            )
        )

    def _nested(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.bound.add(node.name)
        for decorator in node.decorator_list:
            self.visit(decorator)
        if isinstance(node, ast.ClassDef):
            for item in [*node.bases, *node.keywords]:
                self.visit(item)
        else:
            self.visit(node.args)
            if node.returns is not None:
                self.visit(node.returns)
        self.scope.append(node.name)
        for statement in node.body:
            self.visit(statement)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _nested

    def _receiver(self, node: ast.Attribute) -> str | None:
        chain = _chain(node.value)
        if chain is None or chain[0] not in self.bindings:
            return None
        root = self.bindings[chain[0]]
        return VALUE if root == VALUE else ".".join([root, *chain[1:]])

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in self.names:
            self.callees.add(id(func))
            at = _identifier_end(func, func.attr)
            self._add(func.attr, "call", node, at, on_receiver=True, receiver=self._receiver(func))
        elif isinstance(func, ast.Name) and func.id in self.names:
            self.callees.add(id(func))
            self._add(func.id, "call", node, (func.lineno, func.col_offset))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in self.names and id(node) not in self.callees and isinstance(node.ctx, ast.Load):
            at = _identifier_end(node, node.attr)
            self._add(node.attr, "attribute", node, at, on_receiver=True, receiver=self._receiver(node))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.bound.add(node.id)
        elif node.id in self.names and id(node) not in self.callees:
            self._add(node.id, "name", node, (node.lineno, node.col_offset))

    def visit_arg(self, node: ast.arg) -> None:
        self.bound.add(node.arg)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bound.add(node.name)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            self.bound.add(alias.asname or alias.name)
            if alias.name in self.names:
                source = absolute_module(node, self.scope[0], self.artifact.endswith("__init__.py"))
                self._add(alias.name, "import", node, (alias.lineno, alias.col_offset), source=source)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            for match in self.words.finditer(node.value):
                self._add(match.group(1), "string", node, (node.lineno, node.col_offset))


def scan(text: str, artifact: str, module: str, names: set[str] | frozenset[str]) -> list[Reference]:
    """Every reference to one of `names` in a source text, in source order.

    Parameters:
        text: the source.
        artifact: its path in the workspace.
        module: its module name (the scope of what is not inside a definition).
        names: the identifiers to look for.

    Returns:
        The references; none for a text that does not parse (the build lists it as a syntax error).
        A bare name (called or not) that the text binds somewhere is taken to mean that binding and
        left out.
    """
    wanted = frozenset(n for n in names if n.isidentifier())
    if not wanted or not any(n in text for n in wanted):
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    bindings = _module_bindings(tree, module, artifact.endswith("__init__.py"))
    scanner = _Scanner(artifact, module, wanted, text.splitlines(), bindings)
    scanner.visit(tree)
    bare = ("name", "call")
    found = [r for r in scanner.found if r.on_receiver or r.kind not in bare or r.name not in scanner.bound]
    return sorted(found, key=lambda r: (r.line, r.col, r.name_line, r.name_col, r.kind))


def at(text: str, artifact: str, module: str, name: str, line: int, col: int) -> Reference | None:
    """The code reference to `name` starting at (line, col), as spans give positions, if any."""
    for reference in scan(text, artifact, module, {name}):
        if reference.kind in CODE_KINDS and (reference.line, reference.col) == (line, col):
            return reference
    return None


def absolute_module(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a `from ... import` reads from, relative imports resolved against `module`."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
    return ".".join(base + ([node.module] if node.module else []))


def _bind_target(target: ast.expr, into: set[str]) -> None:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            into.add(node.id)


def bound_names(body: list[ast.stmt]) -> dict[str, int]:
    """The names a block binds at its own level (definitions, imports, assignments, loop and `with`
    targets, also inside `if`/`try`/`for`/`while`/`with` blocks, not inside nested definitions), each
    with the first line binding it."""
    found: dict[str, int] = {}

    def note(name: str, line: int) -> None:
        found.setdefault(name, line)

    def visit(statements: list[ast.stmt]) -> None:
        for statement in statements:
            names: set[str] = set()
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(statement.name)
            elif isinstance(statement, ast.Import | ast.ImportFrom):
                for alias in statement.names:
                    if alias.name != "*":
                        names.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    _bind_target(target, names)
            elif isinstance(statement, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
                _bind_target(statement.target, names)
            elif isinstance(statement, ast.With | ast.AsyncWith):
                for item in statement.items:
                    if item.optional_vars is not None:
                        _bind_target(item.optional_vars, names)
            for name in names:
                note(name, statement.lineno)
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(statement, field, None)
                if isinstance(inner, list) and not isinstance(
                    statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                ):
                    visit(inner)
            for handler in getattr(statement, "handlers", []):
                if handler.name:
                    note(handler.name, handler.lineno)
                visit(handler.body)

    visit(body)
    return found
