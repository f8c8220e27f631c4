"""A small real package with its own tests, built from strings, for the change tools.

`wrap_line` is called from eleven places in four modules (positionally, by keyword, from a method,
from a module-level constant, from the tests); `shout` is imported under its own name into two other
modules and re-exported by the package, for the rename across modules.
"""

from __future__ import annotations

from pathlib import Path

FILES = {
    "textkit/__init__.py": '''"""A tiny text toolkit."""

from textkit.style import shout
from textkit.wrap import wrap_line

__all__ = ["shout", "wrap_line"]
''',
    "textkit/wrap.py": '''"""Wrapping text into lines."""


def wrap_line(text, width=20):
    """Cut text into lines of at most width characters."""
    words = text.split()
    lines, current = [], ""
    for word in words:
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    if current:
        lines.append(current)
    return lines


def banner(title):
    # A framed title, ten characters wide.
    return ["*" * 10] + wrap_line(title, 10) + ["*" * 10]
''',
    "textkit/style.py": '''"""Styles of text."""

from textkit.wrap import wrap_line


def shout(text):
    """Upper-case every line."""
    return [line.upper() for line in wrap_line(text)]


def whisper(text, width=30):
    return [line.lower() for line in wrap_line(text, width)]
''',
    "textkit/report.py": '''"""Reports built from wrapped text."""

from textkit import style
from textkit.style import shout
from textkit.wrap import wrap_line

HEADER = wrap_line("monthly report", width=40)


def paragraph(text):
    return "\\n".join(wrap_line(text))


def narrow(text):
    return wrap_line(text, width=8)


def indented(text, margin):
    return [margin + line for line in wrap_line(text, 12)]


def loud(text):
    return shout(text) + style.whisper(text)


class Page:
    """A page of a report."""

    def __init__(self, width):
        self.width = width

    def lines(self, text):
        return wrap_line(text, self.width)
''',
    "tests/__init__.py": "",
    "tests/test_textkit.py": """from textkit import shout, wrap_line
from textkit.report import HEADER, Page, indented, loud, narrow, paragraph
from textkit.wrap import banner


def test_wrap_line():
    assert wrap_line("a bb ccc dddd", 6) == ["a bb", "ccc", "dddd"]
    assert wrap_line("one two", width=3) == ["one", "two"]


def test_report():
    assert paragraph("one two") == "one two"
    assert narrow("alpha beta gamma") == ["alpha", "beta", "gamma"]
    assert indented("x y", "> ") == ["> x y"]
    assert HEADER == ["monthly report"]
    assert Page(5).lines("ab cd ef") == ["ab cd", "ef"]


def test_styles():
    assert shout("hi there") == ["HI THERE"]
    assert loud("Hi") == ["HI", "hi"]
    assert banner("hello")[1] == "hello"
""",
}


def make_textkit(root: Path) -> Path:
    """Write the package and its tests under root; returns root."""
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def snapshot(root: Path) -> dict[str, str]:
    """Every Python file's text under root (to prove nothing was written)."""
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))}
