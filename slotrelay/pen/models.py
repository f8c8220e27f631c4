"""Pydantic models of the MPP-001 contract: `pen.write`'s input and output.

The contract: CONTRACTS.md#pen-request and #pen-output.

Field names, literals and defaults are the seed's. Unknown keys are errors, so a typo in a request
cannot pass silently. `parse_request` turns validation errors into `InvalidPenRequest` naming each field.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slotrelay.pen.errors import InvalidPenRequest
from slotrelay.pen.terms import PenAction
from slotrelay.validation_text import model_problems

Lang = Literal["python", "node", "shell"]
PersistHint = Literal["auto", "erase", "keep", "share"]
ExecutionStatus = Literal["success", "error", "timeout"]

# A persona id becomes part of pen_id and of folder names: keep it to a safe, unambiguous alphabet.
PERSONA_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.]{0,63}$"

FILE_SUFFIX: dict[str, str] = {"python": "py", "node": "js", "shell": "sh"}

# The output's one key beyond the contract's (CONTRACTS.md#pen-output): what slotrelay adds, the
# decision carried out, where the configuration came from, and the MPP code a completed run recorded.
EXTENSION_KEY = "x-slotrelay"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NetworkAllow(_Strict):
    """`network: {allow: [...]}`: the host names the program may reach."""

    allow: list[str]


class FsAllow(_Strict):
    """`fs: {allow_paths: [...]}`: the paths the program may read."""

    allow_paths: list[str]


class SandboxOptions(_Strict):
    """`options.sandbox` of the request, with the seed's defaults (CONTRACTS.md#pen-request)."""

    lang: Lang = "python"
    timeout_ms: int = Field(default=30000, ge=50, le=3_600_000)
    memory_mb: int = Field(default=512, ge=32, le=65536)
    network: Literal["none"] | NetworkAllow = "none"
    fs: Literal["none", "tmp"] | FsAllow = "tmp"


class PenOptions(_Strict):
    """`options` of the request."""

    sandbox: SandboxOptions = Field(default_factory=SandboxOptions)
    persist_hint: PersistHint = "auto"


class PenContext(_Strict):
    """`context` of the request: who holds the pen and what came from upstream."""

    task_category: str | None = None
    persona_id: str = Field(pattern=PERSONA_PATTERN)
    upstream_inputs: Any = None


class PenRequest(_Strict):
    """The whole `pen.write` input."""

    intent: str
    context: PenContext
    options: PenOptions = Field(default_factory=PenOptions)


class Execution(_Strict):
    """`execution` of the output: what the sandbox reported."""

    status: ExecutionStatus
    stdout: str = ""
    stderr: str = ""
    result: Any = None
    duration_ms: int = 0


class AuditRef(_Strict):
    """`audit` of the output: the call's audit record id and the hashes it holds."""

    syslog_id: str
    intent_hash: str
    code_hash: str | None = None


class PenOutput(_Strict):
    """The whole `pen.write` output (CONTRACTS.md#pen-output): the contract's keys and no other.

    What slotrelay adds goes under `EXTENSION_KEY` when the output is handed out (`PenOutcome.to_json`).
    """

    pen_id: str
    code: str
    lang: Lang
    execution: Execution
    suggestion: PenAction
    audit: AuditRef


def parse_request(data: Any) -> PenRequest:
    """Validate a `pen.write` input object.

    Parameters:
        data: the decoded JSON object (or an existing `PenRequest`).

    Returns:
        The validated request with defaults filled in.

    Raises:
        InvalidPenRequest: naming every field that is missing, unknown or of the wrong type.
    """
    if isinstance(data, PenRequest):
        return data
    try:
        request = PenRequest.model_validate(data)
    except ValidationError as exc:
        problems = model_problems(exc)
        raise InvalidPenRequest(
            "invalid pen.write request: " + "; ".join(problems), details={"fields": problems}
        ) from exc
    problems = _unwritable_fields(request)
    if problems:
        raise InvalidPenRequest(
            "invalid pen.write request: " + "; ".join(problems), details={"fields": problems}
        )
    return request


def _unwritable_fields(request: PenRequest) -> list[str]:
    """Fields the pen could not write to request.json: a lone surrogate (JSON can escape one, and a
    command line can carry one from bytes that are not UTF-8), or nesting too deep to serialise."""
    problems = []
    sandbox = request.options.sandbox
    for name, value in (
        ("intent", request.intent),
        ("context.task_category", request.context.task_category),
        ("context.upstream_inputs", request.context.upstream_inputs),
        (
            "options.sandbox.network",
            sandbox.network.model_dump() if isinstance(sandbox.network, NetworkAllow) else None,
        ),
        ("options.sandbox.fs", sandbox.fs.model_dump() if isinstance(sandbox.fs, FsAllow) else None),
    ):
        try:
            # As the pen's store writes it (default=str), so what it can write passes.
            json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:
            problems.append(f"{name}: holds text that is not valid Unicode (a lone surrogate)")
        except RecursionError:
            problems.append(f"{name}: nested too deeply")
        except ValueError as exc:
            problems.append(f"{name}: not JSON ({exc})")
    return problems
