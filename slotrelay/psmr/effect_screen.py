"""A static screen of one code string, for the magic pen: which imports and calls reach the outside world.

    effects("import subprocess as sp\\nsp.run(['ls'])")
    -> [Effect(kind="subprocess", target="subprocess", via="import", line=1, ...),
        Effect(kind="subprocess", target="subprocess.run", via="call", line=2, ...)]

It runs the same fast pass and resolver as a workspace build on a one-module tree, so aliases,
`from x import y`, `getattr(mod, "name")` and functions passed around resolve as they do there. Calls it
cannot resolve with a dynamic cause (computed getattr, `__import__` of a variable, eval/exec) are reported
as `dynamic`; a source that does not parse yields one `unparsable` effect, so a caller that blocks on any
effect blocks on it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from slotrelay.psmr.effects import classify
from slotrelay.psmr.extract import extract
from slotrelay.psmr.link import Linker

MODULE = "__screen__"
_DYNAMIC_REASONS = frozenset({"dynamic_getattr", "dynamic_import", "dynamic_eval", "dynamic_exec"})


@dataclass(frozen=True)
class Effect:
    """One import or call with an outside effect, with its source span (1-based lines, 0-based columns)."""

    kind: str
    target: str
    via: str
    line: int
    col: int
    end_line: int
    end_col: int


def effects(source: str) -> list[Effect]:
    """The network, subprocess, file, environment and dynamic-code effects of a Python source string.

    Parameters:
        source: Python code (a module's text).

    Returns:
        Effects sorted by position: `via` is `import`, `call`, or `parse` (for `unparsable`).
    """
    facts = extract(source, MODULE)
    if facts["syntax_error"]:
        line, col, end_line, end_col = facts["syntax_error"]["span"]
        return [Effect("unparsable", "syntax_error", "parse", line, col, end_line, end_col)]
    found: set[Effect] = set()
    for item in facts["imports"]:
        for target in (item["module"], f"{item['module']}.{item['name']}" if item["name"] else None):
            kind = classify(target) if target else None
            if kind and target:
                found.add(Effect(kind, target, "import", *item["span"]))
                break
    link = Linker({MODULE: facts}).run()
    for index, site in enumerate(facts["calls"]):
        for target in link.targets.get((MODULE, index), []):
            kind = classify(target.target)
            if kind:
                found.add(Effect(kind, target.target, "call", *site["span"]))
    for item in facts["unknowns"]:
        if item["reason"] in _DYNAMIC_REASONS:
            found.add(Effect("dynamic", item["detail"], "call", *item["span"]))
    return sorted(found, key=lambda e: (e.line, e.col, e.via, e.target))
