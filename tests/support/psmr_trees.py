"""Source trees built from strings for the PSMR tests (tests/psmr, and tests/hostile's on PSMR's
input), as griffe builds its test packages in memory."""

from __future__ import annotations

from pathlib import Path


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write {relative path: text} under root and return root."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# A call whose target depends on what flows into a parameter: `describe` calls `area` on its argument,
# and `run` passes it a Circle (a change passing a Square makes `shape.area()` reach Square.area too).
SHAPES = {
    "app/__init__.py": "",
    "app/shapes.py": """
class Circle:
    def area(self):
        return 3


class Square:
    def area(self):
        return 4
""",
    "app/report.py": "def describe(shape):\n    return shape.area()\n",
    "app/main.py": """from app.report import describe
from app.shapes import Circle


def run():
    return describe(Circle())
""",
}
