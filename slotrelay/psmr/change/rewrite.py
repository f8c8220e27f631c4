"""Edits of one Python file on its concrete syntax tree (libcst), so formatting and comments stay.

A `FilePlan` collects what a delta does to one file, each edit keyed by the source position the
workspace's evidence gives (line, 0-based column in characters): definitions to change, call sites to
rewrite, names to rename, statements to add. `render` applies the whole plan in one pass over the
original tree, so edits of several operations compose without positions going stale. Nothing here
matches text: every edit replaces a node the parser found at that position.

Evidence spans come from `ast`, whose columns count UTF-8 bytes; `char_column` converts them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import (
    CodePosition,
    CodeRange,
    GlobalScope,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    ScopeProvider,
)

Position = tuple[int, int]
DefEdit = Callable[[cst.FunctionDef | cst.ClassDef], cst.FunctionDef | cst.ClassDef]
CallEdit = Callable[[cst.Call], cst.Call]
# Expressions that bind tighter than any operator: written in place of a reference as they are.
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


class RewriteError(ValueError):
    """A plan that does not fit its file: a position with no node of the expected kind."""


def char_column(text: str, line: int, byte_col: int) -> int:
    """The character column of a byte column (as `ast` reports it) on a 1-based line of text."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return byte_col
    return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


@dataclass
class FilePlan:
    """What to do to one file; positions are (line, character column) of the original text."""

    defs: dict[Position, list[DefEdit]] = field(default_factory=dict)
    calls: dict[Position, list[CallEdit]] = field(default_factory=dict)
    names: dict[Position, str] = field(default_factory=dict)
    globals: dict[str, str] = field(default_factory=dict)
    local_imports: dict[Position, tuple[str, str]] = field(default_factory=dict)
    # (module-level name bound to a module, attribute path below it, old, new): `sql.Old` -> `sql.New`.
    attributes: list[tuple[str, tuple[str, ...], str, str]] = field(default_factory=list)
    appended: list[tuple[Position | None, str]] = field(default_factory=list)
    # A name or attribute starting at a position, by the identifier it ends with -> what replaces it.
    references: dict[Position, tuple[str, cst.BaseExpression]] = field(default_factory=dict)

    def on_def(self, position: Position, edit: DefEdit) -> None:
        """Change the definition starting at position (its `def`/`class` keyword)."""
        self.defs.setdefault(position, []).append(edit)

    def on_call(self, position: Position, edit: CallEdit) -> None:
        """Change the call whose expression starts at position."""
        self.calls.setdefault(position, []).append(edit)

    def rename(self, position: Position, new: str) -> None:
        """Rename the identifier starting at position."""
        self.names[position] = new

    def replace_reference(self, position: Position, name: str, expression: cst.BaseExpression) -> None:
        """Replace the name, or the attribute ending with `name`, that starts at position (the
        innermost one, if attributes of that name nest there), parenthesised unless an atom."""
        if not isinstance(expression, _ATOMS) and not expression.lpar:
            expression = expression.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        self.references[position] = (name, expression)

    def rename_global(self, old: str, new: str) -> None:
        """Rename a module-level name everywhere the module uses it (scope analysis) and in `__all__`."""
        self.globals[old] = new

    def rename_local_import(self, position: Position, old: str, new: str) -> None:
        """Rename the uses of a name an import statement inside a function binds (the statement at
        position), as libcst's scope analysis finds them."""
        self.local_imports[position] = (old, new)

    def rename_module_attribute(self, binding: str, path: tuple[str, ...], old: str, new: str) -> None:
        """Rename `binding.<path>.old` to `binding.<path>.new` wherever the module-level `binding` (an
        imported module) is used, as libcst's scope analysis finds its uses (a local of the same name
        is another binding, left alone)."""
        self.attributes.append((binding, path, old, new))

    def add(self, source: str, *, after: Position | None = None) -> None:
        """Add statements after the top-level or class-level definition at `after`, else at the end."""
        self.appended.append((after, source))

    def empty(self) -> bool:
        """True when the plan changes nothing."""
        return not (
            self.defs
            or self.calls
            or self.names
            or self.globals
            or self.local_imports
            or self.attributes
            or self.appended
            or self.references
        )


class _Rewriter(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, plan: FilePlan) -> None:
        super().__init__()
        self.plan = plan
        self.done: set[tuple[str, Position]] = set()
        self.added_after = {after: source for after, source in plan.appended if after is not None}
        # Strings naming a renamed global (`__all__` entries, string annotations): position -> new text.
        self.strings: dict[Position, str] = {}

    def _start(self, node: cst.CSTNode) -> Position:
        where: CodeRange = self.get_metadata(PositionProvider, node)
        return where.start.line, where.start.column

    def _reference(self, position: Position, name: str) -> cst.BaseExpression | None:
        wanted = self.plan.references.get(position)
        if wanted is None or wanted[0] != name or ("reference", position) in self.done:
            return None
        self.done.add(("reference", position))
        return wanted[1]

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        position = self._start(original)
        if position in self.plan.names:
            self.done.add(("name", position))
            updated = updated.with_changes(value=self.plan.names[position])
        replacement = self._reference(position, original.value)
        return updated if replacement is None else replacement

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        replacement = self._reference(self._start(original), original.attr.value)
        return updated if replacement is None else replacement

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        # Only strings _mark_globals found name a global: `__all__` entries and string annotations.
        position = self._start(original)
        if position in self.strings:
            return updated.with_changes(
                value=f"{updated.prefix}{updated.quote}{self.strings[position]}{updated.quote}"
            )
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        position = self._start(original)
        for edit in self.plan.calls.get(position, []):
            self.done.add(("call", position))
            updated = edit(updated)
        return updated

    def _leave_def(
        self, original: cst.CSTNode, updated: cst.FunctionDef | cst.ClassDef
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        position = self._start(original)
        for edit in self.plan.defs.get(position, []):
            self.done.add(("def", position))
            updated = edit(updated)
        if position in self.added_after:
            self.done.add(("after", position))
            added = spaced_like(_statements(self.added_after[position]), updated, indented=position[1] > 0)
            return cst.FlattenSentinel([updated, *added])
        return updated

    def leave_FunctionDef(
        self, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        return self._leave_def(original, updated)

    def leave_ClassDef(
        self, original: cst.ClassDef, updated: cst.ClassDef
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        return self._leave_def(original, updated)


class _BareBlankLines(cst.CSTTransformer):
    def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine) -> cst.EmptyLine:
        if updated.comment is not None:
            return updated
        return updated.with_changes(indent=False, whitespace=cst.SimpleWhitespace(""))


def placed(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """Statements parsed on their own, made ready to sit in an indented block: a blank line between
    them stays blank (written at the block's indentation, it would end in spaces)."""
    out = []
    for statement in statements:
        visited = statement.visit(_BareBlankLines())
        assert isinstance(visited, cst.BaseStatement)  # the transformer only touches blank lines
        out.append(visited)
    return out


def spaced_like(
    statements: list[cst.BaseStatement], neighbour: cst.BaseStatement, *, indented: bool
) -> list[cst.BaseStatement]:
    """Statements to add beside a definition, the first preceded by as many blank lines as that
    definition is (two at module level and one in a class where it has none), so an added function
    is set apart as its neighbours are."""
    if not statements:
        return statements
    blank = [line for line in getattr(neighbour, "leading_lines", ()) if line.comment is None]
    if not blank:
        blank = [cst.EmptyLine(indent=False)] * (1 if indented else 2)
    spacing = [line.with_changes(indent=False, whitespace=cst.SimpleWhitespace("")) for line in blank]
    first = statements[0]
    own = [line for line in getattr(first, "leading_lines", ()) if line.comment is not None]
    return [first.with_changes(leading_lines=[*spacing, *own]), *statements[1:]]


def _statements(source: str) -> list[cst.BaseStatement]:
    return placed(list(cst.parse_module(source).body))


def _elements(params: cst.Parameters) -> list[tuple[str, int, cst.CSTNode]]:
    """The parts of a parameter list in source order, each as (field, index in it, node)."""
    out: list[tuple[str, int, cst.CSTNode]] = [
        ("posonly_params", i, p) for i, p in enumerate(params.posonly_params)
    ]
    if isinstance(params.posonly_ind, cst.ParamSlash):
        out.append(("posonly_ind", -1, params.posonly_ind))
    out += [("params", i, p) for i, p in enumerate(params.params)]
    if isinstance(params.star_arg, cst.Param | cst.ParamStar):
        out.append(("star_arg", -1, params.star_arg))
    out += [("kwonly_params", i, p) for i, p in enumerate(params.kwonly_params)]
    if params.star_kwarg is not None:
        out.append(("star_kwarg", -1, params.star_kwarg))
    return out


def _bare(whitespace: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """A separator's whitespace without the comment or blank lines it carried."""
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return whitespace.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return whitespace


def _key(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Param):
        return node.name.value
    if isinstance(node, cst.Arg) and node.keyword is not None:
        return node.keyword.value
    return None


def _relaid(
    olds: list[cst.CSTNode], news: list[cst.CSTNode], before: cst.BaseParenthesizableWhitespace
) -> list[cst.CSTNode]:
    """New list elements (parameters or arguments) with the separators of the old ones: a kept
    element (same name) keeps the separator written after it, comment included, another takes the
    separator found at its position (or the last one), and the last element keeps the old trailing
    comma and the whitespace before the closing parenthesis."""
    commas = [getattr(node, "comma", None) for node in olds[:-1]]
    separators = [_bare(c.whitespace_after) for c in commas if isinstance(c, cst.Comma)] or [_bare(before)]
    kept = {
        key: comma
        for node, comma in zip(olds[:-1], commas, strict=True)
        if (key := _key(node)) is not None and isinstance(comma, cst.Comma)
    }
    last = olds[-1]
    out = []
    for position, node in enumerate(news):
        closing = position == len(news) - 1
        if closing:
            comma = getattr(last, "comma", cst.MaybeSentinel.DEFAULT)
        else:
            own = kept.get(_key(node) or "")
            comma = own or cst.Comma(whitespace_after=separators[min(position, len(separators) - 1)])
        edits: dict[str, Any] = {"comma": comma}
        for trailing in ("whitespace_after_param", "whitespace_after_arg"):
            if hasattr(node, trailing):
                edits[trailing] = (
                    getattr(last, trailing, cst.SimpleWhitespace("")) if closing else cst.SimpleWhitespace("")
                )
        out.append(node.with_changes(**edits))
    return out


def laid_out_like(
    old: cst.Parameters, before: cst.BaseParenthesizableWhitespace, new: cst.Parameters
) -> cst.Parameters:
    """New parameters written in the layout of the old ones when those span several lines (see
    `_relaid`); a list on one line is left as given."""
    code = cst.Module(body=[]).code_for_node
    olds, news = _elements(old), _elements(new)
    if not olds or not news or "\n" not in code(before) + code(old):
        return new
    placed_nodes = _relaid([n for _, _, n in olds], [n for _, _, n in news], before)
    changes: dict[str, Any] = {}
    for (name, index, _), node in zip(news, placed_nodes, strict=True):
        if index < 0:
            changes[name] = node
        else:
            changes.setdefault(name, list(getattr(new, name)))[index] = node
    return new.with_changes(**{k: tuple(v) if isinstance(v, list) else v for k, v in changes.items()})


def arguments_laid_out_like(old: cst.Call, args: list[cst.Arg]) -> list[cst.Arg]:
    """New arguments for a call, written in the layout of its old ones when those span several
    lines (see `_relaid`); otherwise as given."""
    code = cst.Module(body=[]).code_for_node
    if (
        not old.args
        or not args
        or "\n" not in code(old.whitespace_before_args) + "".join(map(code, old.args))
    ):
        return args
    relaid = _relaid(list(old.args), list(args), old.whitespace_before_args)
    return [a for a in relaid if isinstance(a, cst.Arg)]


def _mark_globals(wrapper: MetadataWrapper, plan: FilePlan, rewriter: _Rewriter) -> None:
    """Position every use of the module-level names to rename, as libcst's scope analysis finds them."""
    scopes = wrapper.resolve(ScopeProvider)
    positions = wrapper.resolve(PositionProvider)
    module_scope = next((s for s in scopes.values() if isinstance(s, GlobalScope)), None)
    if module_scope is None:
        return
    bindings = [
        (assignment, old, new) for old, new in plan.globals.items() for assignment in module_scope[old]
    ]
    for scope in set(scopes.values()):
        if scope is None:
            continue
        for position, (old, new) in plan.local_imports.items():
            for assignment in scope[old] if scope is not module_scope and old in scope else []:
                node = getattr(assignment, "node", None)
                if node is not None and positions[node].start == CodePosition(*position):
                    bindings.append((assignment, old, new))
    _mark_attributes(wrapper, module_scope, plan)
    for assignment, old, new in bindings:
        for access in assignment.references:
            where = positions[access.node].start
            if isinstance(access.node, cst.Name):
                plan.names.setdefault((where.line, where.column), new)
            elif isinstance(access.node, cst.SimpleString) and isinstance(access.node.evaluated_value, str):
                rewriter.strings[(where.line, where.column)] = _renamed_annotation(
                    access.node.evaluated_value, old, new
                )
    for statement in wrapper.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not (
                isinstance(small, cst.Assign | cst.AugAssign)
                and any(
                    isinstance(t, cst.Name) and t.value == "__all__"
                    for t in (
                        [x.target for x in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    )
                )
                and isinstance(small.value, cst.List | cst.Tuple)
            ):
                continue
            for element in small.value.elements:
                value = element.value
                if isinstance(value, cst.SimpleString) and value.evaluated_value in plan.globals:
                    where = positions[value].start
                    rewriter.strings[(where.line, where.column)] = plan.globals[value.evaluated_value]


def _mark_attributes(wrapper: MetadataWrapper, module_scope: GlobalScope, plan: FilePlan) -> None:
    """Position the attribute to rename in every `binding.<path>.old` the plan's module bindings reach."""
    if not plan.attributes:
        return
    positions = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    for binding, path, old, new in plan.attributes:
        for assignment in module_scope[binding]:
            for access in assignment.references:
                node: cst.CSTNode = access.node
                for part in (*path, old):
                    parent = parents.get(node)
                    if not isinstance(parent, cst.Attribute) or parent.value is not node:
                        break
                    if parent.attr.value != part:
                        break
                    node = parent
                else:
                    assert isinstance(node, cst.Attribute)  # the loop ran at least once, on an Attribute
                    where = positions[node.attr].start
                    plan.names.setdefault((where.line, where.column), new)


class _RenameNames(cst.CSTTransformer):
    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.new) if updated.value == self.old else updated


def _renamed_annotation(text: str, old: str, new: str) -> str:
    """A string annotation (`"List[Segment]"`) with the name renamed, edited on its own syntax tree."""
    expression = cst.parse_expression(text)
    renamed = expression.visit(_RenameNames(old, new))
    assert isinstance(renamed, cst.BaseExpression)  # a renamer neither removes nor flattens
    return cst.Module(body=[]).code_for_node(renamed)


def _render_whole(text: str, plan: FilePlan) -> str:
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise RewriteError(f"the file does not parse ({exc.message} at line {exc.raw_line})") from exc
    # The tree comes straight from the parser, so no node appears twice in it: libcst's defensive deep
    # copy (a sixth of a large signature change's CPU) would copy it for nothing.
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    rewriter = _Rewriter(plan)
    if plan.globals or plan.local_imports or plan.attributes:
        _mark_globals(wrapper, plan, rewriter)
    new = wrapper.visit(rewriter)
    wanted = (
        {("def", p) for p in plan.defs}
        | {("call", p) for p in plan.calls}
        | {("name", p) for p in plan.names}
        | {("after", p) for p, _ in plan.appended if p is not None}
        | {("reference", p) for p in plan.references}
    )
    missing = sorted(wanted - rewriter.done, key=lambda item: item[1])
    if missing:
        kind, (line, col) = missing[0]
        raise RewriteError(f"no {kind} at line {line}, column {col} (the file changed since the build?)")
    return new.code


def statement_ranges(text: str, lines: set[int]) -> list[tuple[int, int, bool]]:
    """The smallest statements holding the given lines, as (first, last, indented): a top-level
    statement, or a member of a (nested) class, never a piece of a function. Decorators are included;
    statements sharing a line are merged.

    Raises:
        RewriteError: the text does not parse.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise RewriteError(f"the file does not parse ({exc.msg} at line {exc.lineno})") from exc
    found: list[tuple[int, int, bool]] = []

    def walk(body: list[ast.stmt], indented: bool) -> None:
        spans: list[tuple[int, int, ast.stmt]] = []
        for statement in body:
            start = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])
            end = statement.end_lineno or statement.lineno
            if spans and start <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(end, spans[-1][1]), spans[-1][2])
            else:
                spans.append((start, end, statement))
        for start, end, statement in spans:
            held = {line for line in lines if start <= line <= end}
            if not held:
                continue
            inner = statement.body if isinstance(statement, ast.ClassDef) else []
            first_member = min((m.lineno for m in inner), default=end + 1)
            if (
                inner
                and min(held) > first_member - 1
                and all(any(m.lineno <= line <= (m.end_lineno or m.lineno) for m in inner) for line in held)
            ):
                walk(inner, True)
            else:
                found.append((start, end, indented))

    walk(tree.body, False)
    return found


def _shifted(plan: FilePlan, first: int, last: int, *, offset: int = 0) -> FilePlan:
    """The part of a plan inside lines first..last, with lines counted from first (after `offset`
    header lines)."""

    def inside(p: Position) -> bool:
        return first <= p[0] <= last

    def shift(p: Position) -> Position:
        return p[0] - first + 1 + offset, p[1]

    return FilePlan(
        defs={shift(p): e for p, e in plan.defs.items() if inside(p)},
        calls={shift(p): e for p, e in plan.calls.items() if inside(p)},
        names={shift(p): n for p, n in plan.names.items() if inside(p)},
        local_imports={shift(p): r for p, r in plan.local_imports.items() if inside(p)},
        appended=[(shift(p), src) for p, src in plan.appended if p is not None and inside(p)],
        references={shift(p): r for p, r in plan.references.items() if inside(p)},
    )


# An indented member is parsed under this header; its lines keep their own indentation.
_HEADER = "if True:\n"


def _render_unit(lines: list[str], first: int, last: int, indented: bool, plan: FilePlan) -> str:
    chunk = "".join(lines[first - 1 : last])
    if not indented:
        return _render_whole(chunk, _shifted(plan, first, last))
    rendered = _render_whole(_HEADER + chunk, _shifted(plan, first, last, offset=1))
    return rendered.removeprefix(_HEADER)


def render(text: str, plan: FilePlan) -> str:
    """The file's text with the plan applied.

    Only the top-level statements holding an edit are parsed and rewritten (libcst over a whole large
    module is what a delta would spend its time on); a plan renaming a module-level name, or an
    attribute of an imported module, needs the module's scopes, so the whole file is rewritten then.
    Definitions to add at the end are appended after two blank lines.

    Parameters:
        text: the original source.
        plan: the edits, positioned on `text`.

    Returns:
        The new source.

    Raises:
        RewriteError: the text does not parse, or a planned position holds no node of that kind.
        libcst.ParserSyntaxError: source given to add does not parse.
    """
    if plan.globals or plan.attributes:
        new = _render_whole(text, plan)
    else:
        lines = text.splitlines(keepends=True)
        wanted = {p[0] for p in [*plan.defs, *plan.calls, *plan.names, *plan.local_imports, *plan.references]}
        wanted |= {p[0] for p, _ in plan.appended if p is not None}
        ranges = statement_ranges(text, wanted)
        outside = sorted(line for line in wanted if not any(a <= line <= b for a, b, _ in ranges))
        if outside:
            raise RewriteError(f"no statement at line {outside[0]} (the file changed since the build?)")
        parts, cursor = [], 1
        for first, last, indented in ranges:
            parts.append("".join(lines[cursor - 1 : first - 1]))
            parts.append(_render_unit(lines, first, last, indented, plan))
            cursor = last + 1
        parts.append("".join(lines[cursor - 1 :]))
        new = "".join(parts)
    for after, source in plan.appended:
        if after is None:
            _statements(source)
            new = new.rstrip("\n") + "\n\n\n" + source.strip("\n") + "\n"
    return new


def calls_at(text: str, positions: set[Position]) -> dict[Position, list[cst.Call]]:
    """The call nodes starting at the given positions, innermost first (`f(x).g()` starts where
    `f(x)` does), parsing only the statements that hold them."""
    lines = text.splitlines(keepends=True)
    found: dict[Position, list[tuple[tuple[int, int], cst.Call]]] = {}
    for first, last, indented in statement_ranges(text, {p[0] for p in positions}):
        header = _HEADER if indented else ""
        wrapper = MetadataWrapper(
            cst.parse_module(header + "".join(lines[first - 1 : last])), unsafe_skip_copy=True
        )
        shift = first - 1 - (1 if indented else 0)
        for node, where in wrapper.resolve(PositionProvider).items():
            key = (where.start.line + shift, where.start.column)
            if isinstance(node, cst.Call) and key in positions:
                found.setdefault(key, []).append(((where.end.line, where.end.column), node))
    return {key: [call for _, call in sorted(calls, key=lambda c: c[0])] for key, calls in found.items()}
