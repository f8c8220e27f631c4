"""How the host and the in-sandbox runner talk: one JSON document in on stdin, a result trailer out.

In: the runner reads all of stdin as `{"lang", "code", "inputs", "marker"}`; code goes on stdin
rather than as an argument because arguments fail above 128 KiB.
Out: the program's stdout and stderr pass through untouched; after the program ends the runner
writes `"\\n" + marker + json(result) + "\\n"` on stdout. The host strips that trailer (wherever it
lands: a background child may still print after it), so stdout is exactly what the program printed. The marker
is a fresh random token per run; a program that forges it only changes its own result, which it controls
anyway.

Output is capped while it streams: `CappedCapture` keeps the first `limit` bytes, counts and
discards the rest (the reader must keep draining, or killing the sandbox hangs), and keeps a
tail window large enough to find the trailer.

Everything that leaves here is valid Unicode: output bytes are decoded with U+FFFD for what is not
UTF-8, and a lone surrogate in the result (JSON may escape one, `"\\ud800"`, which no UTF-8 writer
can encode) becomes U+FFFD too (`valid_text`), so no caller crashes writing or printing it.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from slotrelay.sandbox.limits import ExecutionResult, SandboxLimits, Truncated, Violation

RESULT_MAX_BYTES = 1 << 20
# json.loads joins an escaped surrogate pair into one character, so any surrogate left is lone.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def new_marker() -> str:
    """A fresh token that opens the result trailer of one run."""
    return f"@@slotrelay-result-{secrets.token_hex(16)}@@"


def encode_request(*, lang: str, code: str, inputs: Any, marker: str) -> bytes:
    """The runner's stdin for one run.

    Raises:
        TypeError: the inputs are not JSON-serializable.
    """
    return json.dumps({"lang": lang, "code": code, "inputs": inputs, "marker": marker}).encode()


def valid_text(value: Any) -> Any:
    """A parsed JSON value with every lone surrogate, in strings and keys, replaced by U+FFFD.

    Parameters:
        value: what `json.loads` returned.

    Returns:
        An equal value, except that every string in it can be encoded as UTF-8.

    Raises:
        RecursionError: the value is nested about as deep as the recursion limit.
    """
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [valid_text(item) for item in value]
    if isinstance(value, dict):
        return {valid_text(key): valid_text(item) for key, item in value.items()}
    return value


@dataclass
class CappedCapture:
    """One output stream: the first `limit` bytes, a byte count, and the last `tail_size` bytes."""

    limit: int
    tail_size: int = RESULT_MAX_BYTES + 256
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        """Take one chunk: keep what fits under the cap, remember the tail, count the rest."""
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        self.total += len(chunk)
        self.tail += chunk
        if len(self.tail) > self.tail_size:
            del self.tail[: len(self.tail) - self.tail_size]


@dataclass
class Outcome:
    """The program's visible output and its result, decoded from the captures."""

    stdout: str
    stderr: str
    result: Any
    stdout_truncated: bool
    stderr_truncated: bool
    violations: list[Violation]


def decode_output(stdout: CappedCapture, stderr: CappedCapture, marker: str) -> Outcome:
    """Split the result trailer from stdout and apply the caps to what the program printed.

    Parameters:
        stdout: the captured stdout, trailer included.
        stderr: the captured stderr.
        marker: the token of this run's trailer.

    Returns:
        The visible output, the decoded result (None when the program wrote none) and the
        violations: output cut at a cap, or a result that was not valid JSON or too large.
    """
    violations: list[Violation] = []
    result: Any = None
    program_bytes = stdout.total
    visible = bytes(stdout.head)
    opener = b"\n" + marker.encode()
    at = stdout.tail.rfind(opener)
    end = stdout.tail.find(b"\n", at + len(opener)) if at >= 0 else -1
    if end >= 0:
        try:
            result = valid_text(json.loads(bytes(stdout.tail[at + len(opener) : end])))
        except ValueError:
            violations.append(Violation(kind="result", detail="the result trailer is not valid JSON"))
        except RecursionError:
            violations.append(Violation(kind="result", detail="the result is nested too deeply to read"))
        # Output written after the trailer (a callback, a background child) is the program's too.
        start = stdout.total - len(stdout.tail) + at
        after = bytes(stdout.tail[end + 1 :])
        program_bytes = stdout.total - (end + 1 - at)
        visible = (bytes(stdout.head[:start]) + after)[: stdout.limit]
    elif stdout.total > len(stdout.tail) and marker.encode() in stdout.tail:
        violations.append(Violation(kind="result", detail=f"the result exceeds {RESULT_MAX_BYTES} bytes"))
    stdout_cut = program_bytes > stdout.limit
    stderr_cut = stderr.total > stderr.limit
    for name, cut, cap, total in (
        ("stdout", stdout_cut, stdout.limit, program_bytes),
        ("stderr", stderr_cut, stderr.limit, stderr.total),
    ):
        if cut:
            violations.append(
                Violation(kind="output", detail=f"{name} cut at {cap} bytes of {total} written")
            )
    return Outcome(
        stdout=visible.decode("utf-8", "replace"),
        stderr=bytes(stderr.head).decode("utf-8", "replace"),
        result=result,
        stdout_truncated=stdout_cut,
        stderr_truncated=stderr_cut,
        violations=violations,
    )


def execution_result(
    stdout: CappedCapture,
    stderr: CappedCapture,
    marker: str,
    *,
    exit_code: int,
    timed_out: bool,
    limits: SandboxLimits,
    duration_ms: int,
    backend: str,
    out_of_memory: bool = False,
    refusals: list[Violation] | None = None,
) -> ExecutionResult:
    """One run's result from its captures and how it ended, the same way on every backend.

    Parameters:
        exit_code: the program's exit; a negative one (ended by signal N) is reported as 128 + N.
        timed_out: it was killed at the deadline.
        out_of_memory: it was killed over its memory limit (only the docker backend can tell).
        refusals: the egress proxy's refused connections.
    """
    outcome = decode_output(stdout, stderr, marker)
    violations = list(outcome.violations)
    if timed_out:
        violations.insert(
            0, Violation(kind="timeout", detail=f"killed at the {limits.timeout_ms} ms deadline")
        )
    if out_of_memory:
        violations.insert(
            0, Violation(kind="memory", detail=f"killed: out of memory ({limits.memory_mb} MB)")
        )
    violations += refusals or []
    status = "timeout" if timed_out else "success" if exit_code == 0 and not out_of_memory else "error"
    return ExecutionResult(
        status=status,
        exit_code=exit_code if exit_code >= 0 else 128 - exit_code,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        result=outcome.result,
        duration_ms=duration_ms,
        violations=violations,
        backend=backend,
        truncated=Truncated(stdout=outcome.stdout_truncated, stderr=outcome.stderr_truncated),
    )
