"""L3 checks: structured checks the engine runs, free-text checks a slot attests, the identity check.

A structured check is a small JSON object (`{"path_exists": "data.scan_file"}`,
`{"field_equals": ["status", "completed"]}`, `{"json_schema": "schemas/scan.json"}`). A free-text
check (the seed's "确认 WebSearch 工具可用") cannot be run by the engine; it holds only when the slot
document attests it: `"checks": {"<the same text>": true}`. Relative file paths resolve against the
chain's work folder (slots) or, for JSON Schemas, the chain file's folder.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from slotrelay.chain.models import Chain, Check, FieldEqualsCheck, JsonSchemaCheck, Node, PathExistsCheck
from slotrelay.validation_text import json_path, schema_problem

_MISSING = object()


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: whether it held, and why not."""

    ok: bool
    reason: str


def field_value(document: Any, field: str) -> Any:
    """The value at a dotted path (`data.items.0.name`), or `MISSING` when any step is absent."""
    current = document
    for step in field.split("."):
        if isinstance(current, dict) and step in current:
            current = current[step]
        elif isinstance(current, list) and step.isdigit() and int(step) < len(current):
            current = current[int(step)]
        else:
            return _MISSING
    return current


def is_missing(value: Any) -> bool:
    """Whether `field_value` found nothing."""
    return value is _MISSING


def run_check(check: Check, document: dict[str, Any], *, chain: Chain) -> CheckResult:
    """Run one check against a slot document.

    Parameters:
        check: a free-text or structured check.
        document: the slot document (output slot, or input slot for pre checks).
        chain: the chain, for resolving relative paths.

    Returns:
        Whether it held, with the reason when it did not.
    """
    if isinstance(check, str):
        attested = (document.get("checks") or {}).get(check) if isinstance(document.get("checks"),
                                                                           dict) else None
        if attested is True:
            return CheckResult(True, "attested")
        return CheckResult(False, f"free-text check not attested in the slot's \"checks\": {check!r}")
    if isinstance(check, PathExistsCheck):
        value = field_value(document, check.path_exists)
        if is_missing(value) or not isinstance(value, str):
            return CheckResult(False, f"{check.path_exists} is missing or not a path")
        try:
            path = chain.resolve(value)
            if not path.exists():
                return CheckResult(False, f"{check.path_exists} = {value!r}: no such file")
            readable = os.access(path, os.R_OK)
        except (OSError, ValueError) as unusable:  # a NUL byte, a name too long: what an agent wrote
            return CheckResult(False,
                               f"{check.path_exists} = {value[:200]!r}: not a usable path ({unusable})")
        if not readable:
            return CheckResult(False, f"{check.path_exists} = {value!r}: not readable")
        return CheckResult(True, "exists")
    if isinstance(check, FieldEqualsCheck):
        field, expected = check.field_equals
        value = field_value(document, field)
        if is_missing(value):
            return CheckResult(False, f"{field} is missing")
        if value != expected:
            return CheckResult(False, f"{field} is {value!r}, expected {expected!r}")
        return CheckResult(True, "equal")
    return _json_schema_check(check, document, chain=chain)


# A schema file's validator (or why it is unusable), by the file's path and version: checking a schema
# against the meta-schema costs more than most validations, and a chain checks the same few on every node.
_validators: dict[tuple[str, int, int, int], Draft202012Validator | str] = {}
_validators_lock = threading.Lock()


def _validator(schema_path: Path) -> Draft202012Validator | str:
    """The schema file's validator, compiled once per version of the file; or why it is unusable."""
    try:
        version = os.stat(schema_path)
    except OSError as unusable:
        return str(unusable)
    key = (str(schema_path), version.st_mtime_ns, version.st_size, version.st_ino)
    with _validators_lock:
        found = _validators.get(key)
    if found is not None:
        return found
    try:
        schema = json.loads(schema_path.read_text(encoding="utf-8"))
        compiled: Draft202012Validator | str = Draft202012Validator(schema)
        Draft202012Validator.check_schema(schema)
    except (OSError, json.JSONDecodeError, SchemaError) as unusable:
        compiled = str(unusable)
    with _validators_lock:
        _validators[key] = compiled
    return compiled


def _json_schema_check(check: JsonSchemaCheck, document: dict[str, Any], *, chain: Chain) -> CheckResult:
    schema_path = Path(check.json_schema)
    if not schema_path.is_absolute():
        schema_path = chain.base_dir / schema_path
    validator = _validator(schema_path)
    if isinstance(validator, str):
        return CheckResult(False, f"schema {check.json_schema} unusable: {validator}")
    errors = sorted(validator.iter_errors(document), key=lambda e: e.json_path)
    if errors:
        return CheckResult(False, "; ".join(schema_problem(e, path=json_path) for e in errors[:3]))
    return CheckResult(True, "valid")


def failed_checks(checks: list[Check], document: dict[str, Any], *, chain: Chain) -> list[str]:
    """The reasons of every check that did not hold (empty when all held)."""
    failures = []
    for check in checks:
        result = run_check(check, document, chain=chain)
        if not result.ok:
            failures.append(result.reason)
    return failures


def identity_problems(node: Node, document: dict[str, Any]) -> list[str]:
    """The identity check: the slot's node_id is the node's; capabilities used are declared, none
    forbidden."""
    problems = []
    if document.get("node_id") != node.node_id:
        problems.append(f"slot node_id is {document.get('node_id')!r}, expected {node.node_id!r}")
    used = document.get("capabilities_used") or []
    if not isinstance(used, list) or not all(isinstance(c, str) for c in used):
        return [*problems, "capabilities_used is not a list of strings"]
    forbidden = sorted(set(used) & set(node.forbidden_capabilities))
    if forbidden:
        problems.append(f"forbidden capabilities used: {', '.join(forbidden)}")
    undeclared = sorted(set(used) - set(node.capabilities) - set(forbidden))
    if undeclared:
        problems.append(f"capabilities used but not declared: {', '.join(undeclared)}")
    return problems
