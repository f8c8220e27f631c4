"""Every delta operation keeps the file's layout: each is applied to a real file (a copy of the vendored
sqlparse 0.6.1) through propose, validate, preview and apply, and the files written are compared
byte for byte with the expected ones, `tests/psmr/layout/<case>/<file>.expected` (issue 31: a
`change_signature` collapsed a four-line signature onto one line, a `replace_body` left trailing
whitespace).

The expected files were written by hand from the originals: each differs from its original only where
the operation says. `PSMR_LAYOUT_WRITE=1` writes what the operations give instead, for review.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import Grants, build_workspace, call

VENDORED = Path(__file__).resolve().parents[1] / "vendor" / "sqlparse"
EXPECTED = Path(__file__).resolve().parent / "layout"

# A body with a blank line and a comment line, written as an agent sends it (not indented).
BODY = (
    "funcs = (funcs,) if not isinstance(funcs, (list, tuple)) else funcs\n"
    "\n"
    "# Each matcher is negated: the first token no function matches is the one returned.\n"
    "funcs = [lambda tk, func=func: not func(tk) for func in funcs]\n"
    "return self._token_matching(funcs, idx)\n"
)
METHOD = (
    "def branches(self):\n"
    '    """How many WHEN parts the statement has."""\n'
    "    cases = self.get_cases()\n"
    "\n"
    "    return len(cases)\n"
)
FUNCTION = "def is_quoted(val):\n    quoted = val[:1] in ('\"', \"'\", '`')\n\n    return quoted\n"
CASES: dict[str, list[dict[str, Any]]] = {
    # A parameter list written one a line (grouping.py) and one broken after `(` (__init__.py).
    "signatures": [
        {
            "op": "change_signature",
            "target": "sqlparse.engine.grouping._group",
            "parameters": "tlist, cls, match, valid_prev=lambda t: True, valid_next=lambda t: True, "
            "post=None, extend=True, recurse=True, depth=0, limit=None",
        },
        {
            "op": "change_signature",
            "target": "sqlparse.parse",
            "parameters": "sql: str, encoding: str | None = None, *, strict: bool = False",
        },
    ],
    # A method's body, a method added to a class, a function added after another.
    "bodies": [
        {"op": "replace_body", "target": "sqlparse.sql.TokenList.token_not_matching", "body": BODY},
        {"op": "add_symbol", "module": "sqlparse.sql", "parent": "sqlparse.sql.Case", "source": METHOD},
        {
            "op": "add_symbol",
            "module": "sqlparse.utils",
            "after": "sqlparse.utils.remove_quotes",
            "source": FUNCTION,
        },
    ],
    # A function imported by name in another module.
    "rename": [{"op": "rename_symbol", "target": "sqlparse.utils.remove_quotes", "new_name": "unquote"}],
    # A call site moved to a new function, and unresolved references edited by position: a call over
    # two lines given new arguments, an attribute written another way.
    "references": [
        {
            "op": "add_symbol",
            "module": "sqlparse.formatter",
            "after": "sqlparse.formatter.validate_options",
            "source": "def checked_options(options):\n    return validate_options(options)\n",
        },
        {
            "op": "move_call_site",
            "evidence_id": "<format calls validate_options>",
            "new_callee": "sqlparse.formatter.checked_options",
            "expression": "formatter.checked_options",
        },
        {
            "op": "edit_reference",
            "file": "sqlparse/engine/grouping.py",
            "line": 339,
            "column": 20,
            "name": "token_not_matching",
            "arguments": "lambda tk: tk.is_newline or imt(tk, t=T.Comment), idx=tidx",
        },
        {
            "op": "edit_reference",
            "file": "sqlparse/filters/reindent.py",
            "line": 179,
            "column": 15,
            "name": "within",
            "expression": "sql.Token.within.__get__(tlist)",
        },
    ],
}


def _ok(operation: str, request: dict[str, Any], store: Path, **kwargs: Any) -> dict[str, Any]:
    answer = call(operation, request, store=store, **kwargs)
    assert answer["status"] == "ok", answer.get("error")
    return dict(answer["data"])


def _call_site(store: Path, ws: str, caller: str, callee: str) -> str:
    request = {"workspace_id": ws, "anchor": {"kind": "symbol", "value": caller}, "relations": ["calls"]}
    sliced = _ok("query.subgraph", {**request, "depth": 1}, store)
    return str(next(e for e in sliced["edges"] if e["target"] == f"semantic:{callee}")["evidence_refs"][0])


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_operation_keeps_the_layout_of_a_real_file(tmp_path: Path, case: str) -> None:
    root = tmp_path / "sqlparse"
    shutil.copytree(VENDORED, root, ignore=shutil.ignore_patterns("__pycache__"))
    store = tmp_path / "store"
    ws = build_workspace(root, store=store)["workspace_id"]
    operations = [
        {**op, "evidence_id": _call_site(store, ws, "sqlparse.format", "sqlparse.formatter.validate_options")}
        if op.get("evidence_id") == "<format calls validate_options>"
        else op
        for op in CASES[case]
    ]
    delta = _ok("delta.propose", {"workspace_id": ws, "intent": case, "operations": operations}, store)
    request = {"workspace_id": ws, "delta_id": delta["delta_id"]}
    # Only the layout is under test: a site left to review is accepted.
    validated = call("delta.validate", {**request, "accept_review": True}, store=store)
    assert validated["status"] == "ok", validated.get("data", {}).get("checks")
    _ok("projection.preview", request, store)
    written = _ok("projection.apply", request, store, grants=Grants.of(write_roots=[root]))
    files = sorted(f["file"] for f in written["files"])
    expected = EXPECTED / case
    if os.environ.get("PSMR_LAYOUT_WRITE"):
        for artifact in files:
            (expected / artifact).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / artifact, expected / f"{artifact}.expected")
    kept = sorted(
        p.relative_to(expected).as_posix().removesuffix(".expected") for p in expected.rglob("*.expected")
    )
    assert files == kept
    for artifact in files:
        assert (root / artifact).read_bytes() == (expected / f"{artifact}.expected").read_bytes(), artifact
        lines = (root / artifact).read_text().splitlines()
        assert not [n for n, line in enumerate(lines, 1) if line != line.rstrip()], artifact
