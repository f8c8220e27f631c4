"""The share manifest of MPP-001 (CONTRACTS.md#share-manifest): built from the pen's run, checked against
`manifest.schema.json` (JSON Schema 2020-12, with jsonschema).

The pen fills it itself: io_contract from the shapes of the inputs and of the result,
dependencies from the code's imports (non-standard-library modules, with the versions installed
where the pen runs), test_examples from the run (its inputs and the result it produced).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from functools import cache
from importlib import metadata, resources
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

from slotrelay.pen.errors import InvalidPenRequest
from slotrelay.pen.intent_screen import find_personal_numbers, find_secrets
from slotrelay.pen.json_shape import document_schema
from slotrelay.pen.models import Lang, PenOutput, PenRequest
from slotrelay.timestamps import now_iso
from slotrelay.validation_text import json_path, schema_problem

COPYRIGHT = "国作登字-2026-A-00037559"
_NODE_REQUIRE = re.compile(r"""(?:require\(\s*|from\s+)['"]([^'"./][^'"]*)['"]""")
_NODE_BUILTINS = frozenset(
    {
        "fs",
        "path",
        "os",
        "util",
        "events",
        "stream",
        "crypto",
        "zlib",
        "assert",
        "buffer",
        "readline",
        "process",
        "url",
        "querystring",
        "string_decoder",
        "timers",
        "perf_hooks",
        "worker_threads",
    }
)


@cache
def manifest_schema() -> dict[str, Any]:
    """The manifest's JSON Schema, as shipped in the package."""
    text = resources.files("slotrelay.pen").joinpath("manifest.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_manifest(manifest: Any, *, source: str | None = None) -> None:
    """Check a manifest against the schema.

    Parameters:
        manifest: the decoded manifest.
        source: the file it was read from, named in the error.

    Raises:
        InvalidPenRequest: naming the file, and each failing JSON path and why.
    """
    validator = Draft202012Validator(manifest_schema(), format_checker=FormatChecker())
    errors = sorted(validator.iter_errors(manifest), key=lambda error: list(error.absolute_path))
    if errors:
        problems = [schema_problem(error, path=json_path) for error in errors]
        where = f"{source}: " if source else ""
        raise InvalidPenRequest(
            f"{where}invalid share manifest: " + "; ".join(problems), details={"fields": problems}
        )


def code_dependencies(code: str, lang: Lang) -> list[str]:
    """`pkg@version` for each third-party module the code imports.

    Parameters:
        code: the program's source.
        lang: its language.

    Returns:
        Sorted `distribution@version` strings; `name@unknown` when the module is not installed here.
    """
    modules: set[str] = set()
    if lang == "python":
        try:
            tree = ast.parse(code)
        except SyntaxError:
            return []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
        modules -= set(sys.stdlib_module_names)
        distributions = metadata.packages_distributions()
        found: set[str] = set()
        for module in modules:
            for dist in distributions.get(module, [module]):
                try:
                    found.add(f"{dist}@{metadata.version(dist)}")
                except metadata.PackageNotFoundError:
                    found.add(f"{dist}@unknown")
        return sorted(found)
    if lang == "node":
        names = {name.removeprefix("node:") for name in _NODE_REQUIRE.findall(code)}
        return sorted(f"{name}@unknown" for name in names - _NODE_BUILTINS if not name.startswith("node:"))
    return []


def summarise_intent(intent: str) -> str:
    """One sentence saying what the tool does: the intent's first sentence, at most 200 characters."""
    first = re.split(r"(?<=[.!?。！？])\s*", intent.strip(), maxsplit=1)[0].strip()
    return first if len(first) <= 200 else first[:197] + "..."


def build_manifest(request: PenRequest, output: PenOutput) -> dict[str, Any]:
    """The manifest of a pen being shared, checked against the schema.

    Parameters:
        request: the pen's request.
        output: the pen's output (its execution is the test example).

    Returns:
        The manifest.

    Raises:
        InvalidPenRequest: when the result does not make a valid manifest, or the test example would
            publish sensitive content (secrets, personal ID or card numbers in the inputs or result).
    """
    inputs = request.context.upstream_inputs
    use_cases = [request.intent.strip()]
    if request.context.task_category:
        use_cases.append(f"task category: {request.context.task_category}")
    manifest = {
        "pen_id": output.pen_id,
        "persona_id": request.context.persona_id,
        "intent_summary": summarise_intent(request.intent),
        "use_cases": use_cases,
        "io_contract": {
            "input_schema": document_schema(inputs),
            "output_schema": document_schema(output.execution.result),
        },
        "dependencies": code_dependencies(output.code, output.lang),
        "test_examples": [{"input": inputs, "expected": output.execution.result}],
        "shared_at": now_iso(),
        "copyright": COPYRIGHT,
    }
    validate_manifest(manifest)
    found = sensitive_examples(inputs, output.execution.result)
    if found:
        raise InvalidPenRequest(
            "cannot share: the test example (the run's inputs and result) contains sensitive content: "
            + ", ".join(found),
            details={"reason": "sensitive_example", "kinds": found},
        )
    return manifest


def sensitive_examples(inputs: Any, result: Any) -> list[str]:
    """Kinds of sensitive content in a run's inputs and result, which sharing would publish as a test example.

    Parameters:
        inputs: the run's upstream_inputs.
        result: the run's result.

    Returns:
        The kinds found (secrets, personal ID or card numbers), sorted; empty when none.
    """
    text = json.dumps({"input": inputs, "expected": result}, ensure_ascii=False, default=str, indent=1)
    return sorted({finding.kind for finding in find_secrets(text) + find_personal_numbers(text)})
