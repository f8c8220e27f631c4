"""A real package with its own tests for the change tools: sqlparse 0.6.1, vendored unmodified in
`tests/vendor/sqlparse/` (where it comes from: `tests/vendor/README.md`).

A test works on a copy in its own temporary folder; the vendored files are never edited. The change
the tests make is one a maintainer could: `sqlparse.utils.imt(token, i=None, m=None, t=None)`, the
helper behind every token test of the grouping engine, gets keyword-only parameters with names
that say what they hold. It is called at 16 sites in two modules (positionally from a lambda, by
keyword in any order, across two lines, from nested functions and methods).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

VENDORED = Path(__file__).resolve().parents[1] / "vendor" / "sqlparse"

IMT = "sqlparse.utils.imt"
IMT_SITES = 16
IMT_FILES = ["sqlparse/engine/grouping.py", "sqlparse/sql.py", "sqlparse/utils.py"]
SIGNATURE: dict[str, Any] = {
    "op": "change_signature",
    "target": IMT,
    "parameters": "token, *, instance=None, match=None, types=None",
}
# Every call site passes what it gave i, m and t to the parameter that now holds it.
MAPPED: dict[str, Any] = {
    **SIGNATURE,
    "parameter_map": {"instance": {"from": "i"}, "match": {"from": "m"}, "types": {"from": "t"}},
}
# The body, written as it will sit in the function (the docstring's lines keep their indentation).
NEW_BODY = '''"""Whether a token is an instance of a class, matches a (ttype, values) pattern or has a ttype.

    :param token: the token, or None
    :param instance: Class or Tuple/List of Classes
    :param match: Tuple of TokenType & Value. Can be list of Tuple for multiple
    :param types: TokenType or Tuple/List of TokenTypes
    :return:  bool
    """
if token is None:
    return False
if instance and isinstance(token, instance):
    return True
if match:
    if isinstance(match, list):
        if any(token.match(*pattern) for pattern in match):
            return True
    elif token.match(*match):
        return True
if types:
    if isinstance(types, list):
        if any(token.ttype in ttype for ttype in types):
            return True
    elif token.ttype in types:
        return True
return False
'''
BODY: dict[str, Any] = {"op": "replace_body", "target": IMT, "body": NEW_BODY}
INTENT = "imt takes keyword-only instance, match and types instead of i, m and t"

# sqlparse's own suite, less its three tests that assert wall-clock time (under a second each:
# test_nested_paren_within_cap_under_1s, test_nested_case_within_cap_under_1s,
# test_unterminated_quotes_format_under_1s): under the sandbox's profiler on a loaded machine they
# measure the machine, not the change. 537 tests: 535 pass (one of them an xpass), 2 are xfail.
OWN_SUITE = [
    *(f"tests/{p.name}" for p in sorted((VENDORED / "tests").glob("test_*.py")) if "dos" not in p.name),
    *(
        f"tests/test_dos_prevention.py::TestDoSPrevention::{name}"
        for name in (
            "test_large_tuple_list_performance",
            "test_deeply_nested_groups_limited",
            "test_very_large_token_list_limited",
            "test_normal_sql_still_works",
            "test_reasonable_tuple_list_works",
        )
    ),
]


def copy_sqlparse(into: Path) -> Path:
    """A copy of the vendored sqlparse (package, tests, licence) under `into/sqlparse`; returns it."""
    root = into / "sqlparse"
    shutil.copytree(VENDORED, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def snapshot(root: Path) -> dict[str, str]:
    """Every Python file's text under root, outside dot-folders (to prove nothing was written)."""
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*.py"))
        if not any(part.startswith(".") for part in p.relative_to(root).parts)
    }
