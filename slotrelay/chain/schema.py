"""Loading and validating a chain file: JSON Schema first, then the models, then the graph.

Order matters for the messages: jsonschema reports every structural problem with its JSON path;
the pydantic models then catch what the schema cannot say; the graph checks (slotrelay.chain.graph)
run only on a chain that parsed. A chain file is input and may be hostile: bytes that are not UTF-8,
numbers Python will not convert, `NaN`, and nesting deeper than MAX_NESTING are refused with a
problem like any other, and messages are cut to MAX_MESSAGE_CHARS.

`schema.json` is generated from the models and committed: `python -m slotrelay.chain.schema`
rewrites it, and a test checks that it is current.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaViolation
from jsonschema.exceptions import best_match
from pydantic import ValidationError

from slotrelay.chain.errors import ChainValidationError, Problem
from slotrelay.chain.graph import graph_problems, printable
from slotrelay.chain.models import Chain
from slotrelay.validation_text import json_path

SCHEMA_PATH = Path(__file__).with_name("schema.json")
MAX_NESTING = 64
"""Deepest nesting of objects and arrays accepted; a real chain needs under 10 (recursion stops near 1000)."""
MAX_MESSAGE_CHARS = 300
"""Longest problem message; a message quoting a megabyte of the file is cut."""
SCHEMA_VALID_KEPT = 64
"""How many documents that passed the JSON Schema this process remembers (by digest)."""

# Digests of documents that passed the JSON Schema, oldest first. The schema check is a pure function of
# the document and costs ~2.5 ms a node (250 ms for a 100-node chain, the largest part of a run's start);
# a process that runs the same chain again (a warm process, `watch`, a bench) checks it once.
_schema_valid: OrderedDict[bytes, None] = OrderedDict()


def generate_schema() -> dict[str, Any]:
    """The JSON Schema of a chain file, from the pydantic models."""
    schema = Chain.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://slotrelay.dev/schema/node_chain.json"
    return schema


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def _schema_problem(violation: SchemaViolation) -> Problem:
    # A oneOf/anyOf failure says only "not valid under any schema": report the branch meant. The
    # `null` alternative of an optional object is never meant; a branch whose `kind` matched is.
    while violation.context:
        branches: dict[Any, list[SchemaViolation]] = {}
        for error in violation.context:
            branches.setdefault(error.relative_schema_path[0], []).append(error)
        branches = {k: v for k, v in branches.items()
                    if not any(e.validator == "type" and e.validator_value == "null" for e in v)}
        if not branches:
            break
        mismatched = [v for v in branches.values() if any(e.validator == "const" for e in v)]
        matched = [v for v in branches.values() if not any(e.validator == "const" for e in v)]
        if mismatched and not matched:
            consts = [e for v in mismatched for e in v if e.validator == "const"]
            allowed = ", ".join(json.dumps(e.validator_value) for e in consts)
            return Problem(consts[0].json_path, f"{json.dumps(consts[0].instance)} is not one of {allowed}")
        candidates = [e for v in (matched if mismatched else branches.values()) for e in v]
        deepest = max(len(e.absolute_path) for e in candidates)
        candidates = [e for e in candidates if len(e.absolute_path) == deepest]
        # "not of type 'string'" (the free-text alternative) says less than the object's own error.
        violation = best_match([e for e in candidates if e.validator != "type"] or candidates)
    return Problem(violation.json_path, violation.message)


def _problem(path: str, message: str) -> Problem:
    return Problem(printable(path, limit=MAX_MESSAGE_CHARS), printable(message, limit=MAX_MESSAGE_CHARS))


def _too_deep(document: Any) -> str | None:
    """The JSON path of the first object or array nested deeper than MAX_NESTING, or None.

    Iterative on purpose: the check must hold on documents deep enough to overflow a recursion.
    """
    pending: list[tuple[Any, tuple[Any, ...]]] = [(document, ())]
    while pending:
        value, location = pending.pop()
        if isinstance(value, dict | list):
            if len(location) >= MAX_NESTING:
                return json_path(location)
            children = value.items() if isinstance(value, dict) else enumerate(value)
            pending.extend((child, (*location, key)) for key, child in children)
    return None


def _schema_problems(document: Any) -> list[Problem]:
    """The JSON Schema's problems with a document; none for a document this process saw pass."""
    digest = hashlib.sha256(json.dumps(document).encode()).digest()
    if digest in _schema_valid:
        _schema_valid.move_to_end(digest)
        return []
    violations = sorted(_validator().iter_errors(document), key=lambda v: v.json_path)
    problems = [_problem(p.path, p.message) for p in map(_schema_problem, violations)]
    if not problems:
        _schema_valid[digest] = None
        if len(_schema_valid) > SCHEMA_VALID_KEPT:
            _schema_valid.popitem(last=False)
    return problems


def validate_document(document: Any, *, source: str = "<chain>") -> Chain:
    """Validate a parsed chain document and build the `Chain`.

    Parameters:
        document: the parsed JSON.
        source: name of the file, for messages.

    Returns:
        The chain (not yet bound to a file; see `load_chain`).

    Raises:
        ChainValidationError: every problem found, each with its JSON path.
    """
    deep = _too_deep(document)
    if deep is not None:
        raise ChainValidationError(source, [_problem(deep, f"nested more than {MAX_NESTING} levels deep")])
    problems = _schema_problems(document)
    if problems:
        raise ChainValidationError(source, problems)
    try:
        chain = Chain.model_validate(document)
    except ValidationError as invalid:
        problems = [_problem(json_path(e["loc"]), e["msg"]) for e in invalid.errors()]
        raise ChainValidationError(source, problems) from None
    problems = [_problem(p.path, p.message) for p in graph_problems(chain)]
    if problems:
        raise ChainValidationError(source, problems)
    return chain


def load_chain(
    path: str | Path,
    *,
    slots_root: str | Path | None = None,
    alerts_dir: str | Path | None = None,
    logs_dir: str | Path | None = None,
) -> Chain:
    """Read, validate and bind a chain file.

    Parameters:
        path: the `node_chain.json`.
        slots_root: folder relative slot paths resolve against (default: the chain file's folder).
        alerts_dir: where alerts go (default: `alerts/` in the slots root).
        logs_dir: where the engine log and run summaries go (default: `logs/` in the slots root).

    Returns:
        The validated chain, bound to its file and slots root.

    Raises:
        ChainValidationError: the file is missing, not UTF-8 JSON, or invalid (every problem listed).
    """
    path = Path(path)
    document = _parse(path)
    chain = validate_document(document, source=str(path))
    return chain.bind(
        source=path,
        slots_root=Path(slots_root) if slots_root else None,
        alerts_dir=Path(alerts_dir) if alerts_dir else None,
        logs_dir=Path(logs_dir) if logs_dir else None,
    )


def warm_up(paths: Iterable[str | Path]) -> None:
    """Check these chain files now, so that loading them later in this process skips the JSON Schema.

    For a process started ahead of the run it will make (a warm process, deployments/warm_child.py):
    its first load of a chain otherwise pays the whole schema check (~2.5 ms a node) and the first-use
    compilation of what the models use (soupsieve's patterns for deploy nodes' feature points,
    ~0.4 s) on the run's path. A file that changes afterwards is checked again when it is loaded; a
    file that does not load is left for the run to report.
    """
    for path in paths:
        try:
            load_chain(path)
        except ChainValidationError:
            continue


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _parse(path: Path) -> Any:
    """The file's JSON document; every way it can fail is one problem at `$`."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as unreadable:
        problem = _problem("$", f"cannot read the file: {unreadable.strerror}")
        raise ChainValidationError(source, [problem]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        line = raw.count(b"\n", 0, bad.start) + 1
        where = f"byte 0x{raw[bad.start]:02x} at line {line} (offset {bad.start})"
        raise ChainValidationError(source, [_problem("$", f"not UTF-8 text: {where}")]) from None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as bad:
        reason = f"{bad.msg} at line {bad.lineno} column {bad.colno}"
    except RecursionError:
        reason = f"nested too deeply (the limit is {MAX_NESTING} levels)"
    except ValueError as bad:
        # int() refuses numbers of more than sys.get_int_max_str_digits() digits (4300 by default).
        reason = str(bad).split(";")[0]
    raise ChainValidationError(source, [_problem("$", f"not valid JSON: {reason}")])


if __name__ == "__main__":
    SCHEMA_PATH.write_text(json.dumps(generate_schema(), indent=2, ensure_ascii=False) + "\n",
                           encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")
