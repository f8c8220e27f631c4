"""analysis.findings: confirmed defects, anomalies and hotspots, kept in three lists that never merge.

Confirmed defects and anomalies come from pyflakes (a maintained checker), split by message class:
a defect is code that fails or misbehaves when it runs (undefined name, return outside a function, a
format string with the wrong arguments); an anomaly is suspicious but legal (unused import, redefined
name). An import made to re-export (listed in `__all__`, from inside the package in its
`__init__.py`, or `import x as x`) is not an unused import. An undefined name the code guards
against (`try: ... except NameError`, or probed before use, see `guards`) is an anomaly labelled
`guarded_name` with `guarded_by`, not a defect. Anomalies inside `if __name__ == "__main__":` blocks
(demo code redefining names) are labelled `main_block` and listed after the module's own. Hotspots
are measures of the graph and history: fan-in, fan-out, size and git churn over thresholds. Per-file
checker output is cached in the store by the file's content key.
"""

from __future__ import annotations

import ast
import subprocess
import warnings
from collections import Counter
from typing import Any

from pyflakes import checker

from slotrelay.psmr.ops.guards import file_context
from slotrelay.psmr.ops.slicing import CODE_KINDS
from slotrelay.psmr.workspace.build import artifact_text
from slotrelay.psmr.workspace.identity import sid, stable_id
from slotrelay.psmr.workspace.store import Store, Workspace

DEFECTS = frozenset(
    {
        "UndefinedName",
        "UndefinedLocal",
        "UndefinedExport",
        "DuplicateArgument",
        "ReturnOutsideFunction",
        "YieldOutsideFunction",
        "ContinueOutsideLoop",
        "BreakOutsideLoop",
        "DefaultExceptNotLast",
        "TwoStarredExpressions",
        "TooManyExpressionsInStarredAssignment",
        "IfTuple",
        "AssertTuple",
        "IsLiteral",
        "InvalidPrintSyntax",
        "RaiseNotImplemented",
        "PercentFormatMissingArgument",
        "PercentFormatPositionalCountMismatch",
        "PercentFormatExpectedMapping",
        "PercentFormatExpectedSequence",
        "PercentFormatInvalidFormat",
        "PercentFormatUnsupportedFormatCharacter",
        "StringDotFormatMissingArgument",
        "StringDotFormatInvalidFormat",
        "FutureFeatureNotDefined",
        "LateFutureImport",
    }
)
THRESHOLDS = {"fan_in": 15, "fan_out": 25, "lines": 120, "churn": 10}
# Anomalies by label, the module's own first: an agent reads the real ones before demo code.
LABEL_ORDER = (None, "guarded_name", "main_block")
# Checker output per file content key, with where each message sits (guards, demo blocks).
CACHE = "cache/pyflakes-context-2"


def _check_file(source: str, artifact: str) -> list[dict[str, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(source, filename=artifact)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None) or 1
            return [{"rule": "SyntaxError", "message": str(exc), "line": line, "col": 0}]
        found = checker.Checker(tree, filename=artifact)
    context = file_context(tree)
    exported = _reexport_lines(tree, artifact)
    messages = []
    for m in found.messages:
        if type(m).__name__ == "UnusedImport" and m.lineno in exported:
            continue
        item = {
            "rule": type(m).__name__,
            "message": m.message % m.message_args,
            "line": m.lineno,
            "col": getattr(m, "col", 0),
        }
        if item["rule"] == "UndefinedName":
            guard = context.guard(m.message_args[0], m.lineno)
            if guard:
                item["guarded_by"] = guard
        if context.in_main_block(m.lineno):
            item["in_main_block"] = True
        messages.append(item)
    return messages


def _reexport_lines(tree: ast.Module, artifact: str) -> set[int]:
    """The lines of imports made to re-export on purpose, which are not unused: in a package's
    `__init__.py`, an import from inside the package (relative, or under its own name); anywhere,
    `import x as x` / `from m import y as y` (the explicit re-export of PEP 484). Names listed in
    `__all__` pyflakes already counts as used."""
    parts = artifact.split("/")
    package = parts[-2] if parts[-1] == "__init__.py" and len(parts) > 1 else None
    lines = set()
    for node in tree.body:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        explicit = all(alias.asname == alias.name for alias in node.names)
        inside = package is not None and isinstance(node, ast.ImportFrom) and (
            node.level > 0 or (node.module or "").split(".")[0] == package
        )
        if explicit or inside:
            lines.add(node.lineno)
    return lines


def _kind(message: dict[str, Any]) -> str:
    # A guarded name is expected to be missing at times: suspicious, not a failure.
    if (message["rule"] in DEFECTS or message["rule"] == "SyntaxError") and not message.get("guarded_by"):
        return "confirmed_defect"
    return "anomaly"


def _label(message: dict[str, Any], kind: str) -> str | None:
    # A demo block's anomalies are labelled apart from the module's own (its defects stay defects:
    # they fail when the block runs).
    if kind != "anomaly":
        return None
    if message.get("in_main_block"):
        return "main_block"
    return "guarded_name" if message.get("guarded_by") else None


def _enclosing(ws: Workspace, artifact: str, line: int) -> str:
    best, best_size = None, None
    for node, data in ws.graph.nodes(data=True):
        if data.get("artifact") != artifact or data["kind"] not in CODE_KINDS or not data.get("span"):
            continue
        start, end = data["span"][0], data["span"][2]
        if start <= line <= end and (best_size is None or end - start < best_size):
            best, best_size = node, end - start
    return best or sid(ws.files[artifact]["module"])


def checker_findings(ws: Workspace, store: Store) -> dict[str, list[dict[str, Any]]]:
    """pyflakes' messages over every file, as confirmed defects and anomalies.

    Anomalies come unlabelled first (the module's own), then those labelled `guarded_name`, then
    `main_block` (demo code), each group by file and line.
    """
    found: dict[str, list[dict[str, Any]]] = {"confirmed_defect": [], "anomaly": []}
    for artifact, entry in sorted(ws.files.items()):
        messages = store.get_json(CACHE, entry["key"])
        if messages is None:
            source = artifact_text(ws.source_root, artifact) or ""
            messages = _check_file(source, artifact)
            store.put_json(CACHE, entry["key"], messages)
        for m in messages:
            kind = _kind(m)
            label = _label(m, kind)
            item = {
                "id": stable_id("fd", artifact, m["line"], m["rule"], m["message"]),
                "kind": kind,
                "rule": f"pyflakes:{m['rule']}",
                "message": m["message"],
                "artifact": artifact,
                "span": {"line": m["line"], "col": m["col"]},
                "subject": _enclosing(ws, artifact, m["line"]),
                "authority": "checker:pyflakes",
                **({"guarded_by": m["guarded_by"]} if m.get("guarded_by") else {}),
                **({"label": label} if label else {}),
            }
            found[kind].append(item)
    for items in found.values():
        items.sort(
            key=lambda f: (
                LABEL_ORDER.index(f.get("label")),
                f["artifact"],
                f["span"]["line"],
                f["span"]["col"],
                f["id"],
            )
        )
    return found


def churn(ws: Workspace) -> dict[str, int]:
    """Commits touching each file over the last 500 commits (empty outside git)."""
    done = subprocess.run(
        [
            "git",
            "-C",
            ws.source_root,
            "log",
            "-n",
            "500",
            "--format=",
            "--name-only",
            "--relative",
            "--",
            ".",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {}
    return dict(Counter(line for line in done.stdout.splitlines() if line in ws.files))


def hotspots(ws: Workspace) -> list[dict[str, Any]]:
    """Symbols and files past a threshold of fan-in, fan-out, size or churn, by measure."""
    graph = ws.graph
    out = []
    for node, data in graph.nodes(data=True):
        if data["kind"] not in CODE_KINDS - {"module"}:
            continue
        measures = {
            "fan_in": len({u for u, _, k in graph.in_edges(node, keys=True) if k == "calls"}),
            "fan_out": len({v for _, v, k in graph.out_edges(node, keys=True) if k == "calls"}),
            "lines": data.get("lines", 0),
        }
        over = {k: v for k, v in measures.items() if v >= THRESHOLDS[k]}
        if over:
            out.append(
                {
                    "id": stable_id("fd", node, "hotspot"),
                    "kind": "hotspot",
                    "rule": "+".join(sorted(over)),
                    "message": ", ".join(f"{k} {v} >= {THRESHOLDS[k]}" for k, v in sorted(over.items())),
                    "artifact": data.get("artifact"),
                    "span": {"line": data["span"][0], "col": data["span"][1]},
                    "subject": node,
                    "measures": measures,
                    "authority": "graph",
                }
            )
    for artifact, count in sorted(churn(ws).items()):
        if count >= THRESHOLDS["churn"]:
            module = sid(ws.files[artifact]["module"])
            out.append(
                {
                    "id": stable_id("fd", artifact, "churn"),
                    "kind": "hotspot",
                    "rule": "churn",
                    "message": f"{count} commits touch this file",
                    "artifact": artifact,
                    "span": {"line": 1, "col": 0},
                    "subject": module,
                    "measures": {"churn": count},
                    "authority": "git",
                }
            )
    return sorted(out, key=lambda f: (f["artifact"] or "", f["span"]["line"], f["id"]))


def all_findings(ws: Workspace, store: Store) -> dict[str, list[dict[str, Any]]]:
    """Every kind of finding (`FINDING_KINDS`), each sorted by file and line."""
    return {**checker_findings(ws, store), "hotspot": hotspots(ws)}
