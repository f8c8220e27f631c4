"""Where a checker message sits in its file: behind a guard against the name's absence, or inside an
`if __name__ == "__main__":` block.

pyflakes reports an undefined name that the code itself expects may be missing (IPython's
`get_ipython`, probed with `try: get_ipython except NameError: return`, or called inside a `try`
whose handler catches the NameError). Such a name is not a defect: the code runs either way. And a
module's demo block (`if __name__ == "__main__":`) redefines names on purpose; its messages are told
apart from the module's own.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

# Handlers that catch a NameError raised by an absent name.
CATCHES_NAME_ERROR = frozenset({"NameError", "Exception", "BaseException"})
# A probe for an optional name may guard with an import error too (`try: import IPython`).
CATCHES_PROBE = CATCHES_NAME_ERROR | {"ImportError", "ModuleNotFoundError"}


@dataclass
class FileContext:
    """The guarded spans and demo blocks of one file."""

    # Per try statement: its body's first and last line, the exceptions its handlers catch, the
    # first handler's line, and the names its body loads (what it may be probing for).
    tries: list[tuple[int, int, frozenset[str], int, frozenset[str]]] = field(default_factory=list)
    functions: list[tuple[int, int]] = field(default_factory=list)
    main_blocks: list[tuple[int, int]] = field(default_factory=list)

    def _function_at(self, line: int) -> tuple[int, int] | None:
        around = [f for f in self.functions if f[0] <= line <= f[1]]
        return max(around) if around else None

    def guard(self, name: str, line: int) -> str | None:
        """What guards a use of `name` at `line`, described; None if nothing does.

        A use inside a try body whose handler catches NameError is guarded; so is a use after a
        try, in the same function, whose body loads the name and whose handler catches its
        absence (the probe `try: name except NameError: return`).
        """
        for first, last, caught, handler_line, _ in self.tries:
            if first <= line <= last and caught & CATCHES_NAME_ERROR:
                return f"try/except {'/'.join(sorted(caught))} at line {handler_line}"
        here = self._function_at(line)
        for first, last, caught, handler_line, probed in self.tries:
            if line > last and name in probed and caught & CATCHES_PROBE and self._function_at(first) == here:
                return f"probed by try/except {'/'.join(sorted(caught))} at line {handler_line}"
        return None

    def in_main_block(self, line: int) -> bool:
        """True if the line is inside an `if __name__ == "__main__":` block."""
        return any(first <= line <= last for first, last in self.main_blocks)


def _caught(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return {"BaseException"}
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "") for t in types}


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def file_context(tree: ast.Module) -> FileContext:
    """The try statements (with the names their bodies load) and the demo blocks of a parsed file."""
    context = FileContext()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try | ast.TryStar) and node.handlers:
            caught = frozenset(set().union(*(_caught(h) for h in node.handlers)))
            probed = frozenset(
                n.id
                for stmt in node.body
                for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            )
            last = max(getattr(stmt, "end_lineno", stmt.lineno) or stmt.lineno for stmt in node.body)
            context.tries.append((node.body[0].lineno, last, caught, node.handlers[0].lineno, probed))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            context.functions.append((node.lineno, node.end_lineno or node.lineno))
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and _is_main_test(stmt.test):
            context.main_blocks.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
    return context
