"""Run a package's pytest suite under a profile hook and write every caller -> callee pair it saw.

    python bench/psmr_runtime_trace.py TREE OUT.json PACKAGE_DIR TESTS_DIR [pytest args...]

Run by `bench/psmr_runtime_edges.py` with the bench venv's interpreter (stdlib and pytest only; it
imports nothing of slotrelay). A pair is recorded when the callee's code lies in PACKAGE_DIR and the
caller's (the frame the call was made from) in PACKAGE_DIR or TESTS_DIR. Python 3.11 has no
`sys.monitoring`, so the hook is `sys.setprofile` (and `threading.setprofile` for threads).

The caller is the frame the call was made from, looked through the standard library's own Python
code: a call that the standard library makes on the code's behalf (contextlib's `with` entering a
`@contextmanager` generator, `functools.cached_property`, json's `default=`, `unittest.mock`) is
the call of the nearest frame outside it. Any other library's frame (pytest, hypothesis) is a
caller outside the scope, and its calls are not recorded.

A generator's or coroutine's frame gets a `call` event each time it resumes; only its first entry
(the frame at its first `RESUME 0`) counts, from the frame that first ran it, which is nearly always
the one that called the generator function (Python reports no event when the generator is made).

Each pair is written with the caller's code (file, `co_qualname`, first line), the line of the call
in the caller, the callee's code, and how often it happened; the codes that ran at all are written
too, so the scorer can tell an edge whose ends never ran from one whose ends ran but never met.
"""

from __future__ import annotations

import dis
import json
import os
import sys
import sysconfig
import threading
from types import CodeType, FrameType
from typing import Any

RESUMABLE = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


def _first_resume(code: CodeType) -> int:
    for instruction in dis.get_instructions(code):
        if instruction.opname == "RESUME" and instruction.arg == 0:
            return instruction.offset
    return -2


def main(argv: list[str]) -> int:
    tree, out, package_dir, tests_dir, *pytest_args = argv
    package = os.path.realpath(package_dir) + os.sep
    tests = os.path.realpath(tests_dir) + os.sep
    stdlib = tuple(os.path.realpath(sysconfig.get_paths()[key]) + os.sep for key in ("stdlib", "platstdlib"))
    # Per code object: 0 outside, 1 in the tests, 2 in the package, 3 in the standard library.
    where: dict[CodeType, int] = {}
    # Per resumable code object in the package: the offset of its first entry.
    starts: dict[CodeType, int] = {}
    edges: dict[tuple[CodeType, int, CodeType], int] = {}

    def place(code: CodeType) -> int:
        found = where.get(code)
        if found is None:
            path = os.path.realpath(code.co_filename)
            found = where[code] = (
                2
                if path.startswith(package)
                else 1
                if path.startswith(tests)
                else 3
                if path.startswith(stdlib)
                else 0
            )
        return found

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if place(code) != 2:
            return
        if code.co_flags & RESUMABLE:
            start = starts.get(code)
            if start is None:
                start = starts[code] = _first_resume(code)
            if frame.f_lasti != start:
                return
        back = frame.f_back
        while back is not None and place(back.f_code) == 3:
            back = back.f_back
        if back is None or place(back.f_code) not in (1, 2):
            return
        key = (back.f_code, back.f_lineno or 0, code)
        edges[key] = edges.get(key, 0) + 1

    import pytest

    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        status = pytest.main([tests_dir, *pytest_args])
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def describe(code: CodeType) -> list[Any]:
        return [
            os.path.relpath(os.path.realpath(code.co_filename), tree),
            code.co_qualname,
            code.co_firstlineno,
        ]

    with open(out, "w", encoding="utf-8") as handle:
        json.dump(
            {
                "pytest_status": int(status),
                "edges": [[*describe(a), line, *describe(b), n] for (a, line, b), n in edges.items()],
                "ran": [describe(code) for code, place_of in where.items() if place_of in (1, 2)],
            },
            handle,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
