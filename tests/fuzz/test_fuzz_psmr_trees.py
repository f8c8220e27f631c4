"""Fuzzing `psmr build` with hostile source trees (issue 11): it never raises and never reads outside
the analysed root.

hypothesis draws small trees of odd names (any Unicode but `/` and NUL, dots, spaces, keywords),
deep folders, and files that are valid Python, syntax errors, bad encodings and NUL bytes, deeply
nested expressions, literals above the size limit, FIFOs, folders named `x.py`, and symlinks: to
another file of the tree, to themselves, dangling, to a secret file and a folder outside the root,
and to /etc/passwd. Every example is built into a store outside the tree; an audit hook records
every file the process opens, and none may lie outside the root and the store (grimp's child reads
only a copy the build wrote). The secret's text must not appear in the summary or the store.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from slotrelay.psmr.workspace.build import build
from slotrelay.psmr.workspace.store import Store

SECRET = "SECRET-outside-the-root-5d1f"
LIMIT = 4096
_opened: list[str] | None = None


def _record_opens(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], str | bytes):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_record_opens)

names = st.one_of(
    st.sampled_from(
        ["mod", "__init__", "class", "__main__", "a b", "-x", "x.y", "ü", "日本語", "\u202eevil", "1st"]
    ),
    st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1, max_size=12
    ),
).filter(lambda name: name not in (".", "..") and len(os.fsencode(name)) < 200)

programs = st.sampled_from(
    [
        "import os\nfrom . import sibling\nfrom .. import beyond_the_top\n",
        "from pkg import *\n__all__ = ['\\x00tuple', 'x']\n",
        "class A(B, metaclass=M):\n    def m(self):\n        return super().m()\n",
        "@decorator(*args)\ndef f(*a, **k):\n    return lambda: f(f)\n",
        "x = 10**400\ny = 123456789012345678901234567890\n",
        "def f(:\n",
        "\tif x:\n  return\n",
        "async def g():\n    async with a as b:\n        yield await b\n",
        "getattr(obj, name)()\neval('x')\nexec(code)\n__import__(name)\n",
    ]
)


def nested(depth: int, form: str) -> str:
    """An expression or block nested `depth` levels deep."""
    if form == "parens":
        return "x = " + "(" * depth + "1" + ")" * depth + "\n"
    if form == "lists":
        return "x = " + "[" * depth + "]" * depth + "\n"
    if form == "attrs":
        return "x = a" + ".b" * depth + "\n"
    if form == "calls":
        return "x = " + "f(" * depth + ")" * depth + "\n"
    if form == "sum":
        return "x = " + "+".join(["1"] * depth) + "\n"
    return "".join(" " * i + "if x:\n" for i in range(depth)) + " " * depth + "pass\n"


contents = st.one_of(
    programs.map(str.encode),
    st.text(max_size=200).map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.binary(max_size=200),
    st.sampled_from([b"\xef\xbb\xbfx = 1\n", b"# -*- coding: latin-1 -*-\nx = '\xe9'\n", b"x = 1\x00\n"]),
    st.builds(
        nested,
        st.sampled_from([50, 99, 200, 900, 3000, 20000]),
        st.sampled_from(["parens", "lists", "attrs", "calls", "sum", "ifs"]),
    ).map(str.encode),
    st.just(b"X = '" + b"a" * (LIMIT + 1) + b"'\n"),
)
kinds = st.one_of(
    st.tuples(st.just("file"), contents),
    st.tuples(
        st.sampled_from(["fifo", "folder", "link_secret", "link_outside_dir", "link_passwd", "link_self"]),
        st.none(),
    ),
    st.tuples(st.just("link_tree"), st.integers(0, 20)),
)
entries = st.lists(
    st.tuples(st.lists(names, max_size=4), names, st.booleans(), kinds), min_size=1, max_size=12
)


def make_tree(root: Path, outside: Path, drawn: list) -> None:
    """Create the drawn entries under root; an entry that clashes with an earlier one is left out."""
    made: list[Path] = []
    for folders, name, is_package, (kind, arg) in drawn:
        folder = root.joinpath(*folders)
        path = folder / ("__init__.py" if is_package else f"{name}.py")
        if os.path.lexists(path):
            continue  # writing to an earlier FIFO would block this test, not the build
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if kind == "file":
                path.write_bytes(arg)
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "folder":
                path.mkdir()
            elif kind == "link_secret":
                path.symlink_to(outside / "secret.py")
            elif kind == "link_outside_dir":
                (folder / name).symlink_to(outside, target_is_directory=True)
            elif kind == "link_passwd":
                path.symlink_to("/etc/passwd")
            elif kind == "link_self":
                path.symlink_to(path.name)
            elif kind == "link_tree":
                target = made[arg % len(made)] if made else folder / "missing.py"
                path.symlink_to(os.path.relpath(target, folder))
        except (OSError, ValueError):
            continue
        made.append(path)


@pytest.mark.timeout(300)
@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(drawn=entries)
# A tree with nothing to analyse: the workspace has no graph parts.
@example(drawn=[([], "mod", False, ("fifo", None))])
def test_build_never_raises_and_never_reads_outside_the_root(drawn: list) -> None:
    global _opened
    with tempfile.TemporaryDirectory(prefix="psmr-fuzz-") as tmp:
        base = Path(tmp).resolve()
        root, outside, store = base / "tree", base / "outside", base / "store"
        root.mkdir()
        outside.mkdir()
        (outside / "secret.py").write_text(f"SECRET = {SECRET!r}\n")
        (outside / "more.py").write_text(f"MORE = {SECRET!r}\n")
        make_tree(root, outside, drawn)
        _opened = []
        try:
            summary = build(root, store=store, max_file_bytes=LIMIT)
            ws = Store.open(store).load(summary["workspace_id"])
        finally:
            opened, _opened = _opened, None
        read_outside = [p for p in opened if Path(os.path.realpath(p)).is_relative_to(outside)]
        assert read_outside == []
        assert ws.version == summary["version"]
        assert SECRET not in repr(summary)
        assert not any(SECRET.encode() in p.read_bytes() for p in store.rglob("*") if p.is_file())
