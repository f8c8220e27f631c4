"""Intent screening, pen_id allocation under concurrency, the section 5 state machine, the
hash-chained audit log (tampering detected) and the share manifest's schema."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from slotrelay.audit_log import AuditLog
from slotrelay.pen.errors import IllegalTransition, IntentRejected, InvalidPenRequest
from slotrelay.pen.ids import allocate_pen_id, parse_pen_id
from slotrelay.pen.intent_screen import screen_intent
from slotrelay.pen.manifest import build_manifest, code_dependencies, validate_manifest
from slotrelay.pen.models import parse_request
from slotrelay.pen.run import PenRun
from slotrelay.pen.states import current_state, transition


@pytest.mark.parametrize(
    ("intent", "reason", "kind"),
    [
        ("", "empty", None),
        ("   \n", "empty", None),
        ("do it", "too_little_information", None),
        ("求和", "too_little_information", None),
        ("list my s3 buckets with AKIAIOSFODNN7EXAMPLE", "sensitive", "AWS Access Key"),
        (
            "post to slack with xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "sensitive",
            "Slack Token",
        ),
        ('connect using password = "Xk9mQ2vL7pR4zz" and list users', "sensitive", "Secret Keyword"),
        ("sign with -----BEGIN RSA PRIVATE KEY----- and upload", "sensitive", "Private Key"),
        (
            "call the api with token 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a now",
            "sensitive",
            "Hex High Entropy String",
        ),
        ("查询身份证 11010519491231002X 的持有人信息", "sensitive", "Chinese resident identity number"),
        ("look up the person with SSN 536-22-1234 in the list", "sensitive", "US social security number"),
        ("charge card 4111 1111 1111 1111 for the order", "sensitive", "payment card number"),
    ],
)
def test_intent_screening_refuses(intent, reason, kind) -> None:
    with pytest.raises(IntentRejected) as caught:
        screen_intent(intent)
    assert caught.value.code == "MPP-E001"
    assert caught.value.details["reason"] == reason
    if kind:
        assert kind in {finding["kind"] for finding in caught.value.details["findings"]}
        # Findings locate the secret but never repeat it.
        assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(caught.value.to_json())


@pytest.mark.parametrize(
    "intent",
    [
        "sum the numbers in the input list",
        "求和输入列表中的数字",
        "count the words longer than 100000000 characters",
        "parse dates like 2026-11-30 and sort them",
        "format the order id 110105194912310021 as a label",  # fails the check digit: not an ID
    ],
)
def test_intent_screening_passes(intent) -> None:
    screen_intent(intent)


def test_pen_ids_unique_with_concurrent_writers(tmp_path: Path) -> None:
    # Two processes and eight threads each, all claiming ids at once for the same persona and day.
    script = (
        "import sys, concurrent.futures as f\n"
        "from slotrelay.pen.ids import allocate_pen_id\n"
        "with f.ThreadPoolExecutor(8) as pool:\n"
        "    ids = list(pool.map(lambda _: allocate_pen_id(sys.argv[1], 'p1'), range(40)))\n"
        "print('\\n'.join(ids))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    ids = [line for proc in procs for line in proc.communicate(timeout=60)[0].split()]
    assert all(proc.returncode == 0 for proc in procs)
    assert len(ids) == 80 and len(set(ids)) == 80
    numbers = sorted(parse_pen_id(pen_id)[2] for pen_id in ids)
    assert numbers == list(range(1, 81))
    persona, day, _ = parse_pen_id(ids[0])
    assert persona == "p1" and len(day) == 8


def test_bad_pen_ids_and_personas_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidPenRequest):
        allocate_pen_id(tmp_path, "../evil")
    with pytest.raises(InvalidPenRequest):
        parse_pen_id("MPP-p1-2026-1")


def test_state_machine_enforced_and_recorded(tmp_path: Path) -> None:
    log = AuditLog(tmp_path)
    with pytest.raises(IllegalTransition, match="does not exist yet"):
        transition(log, "MPP-p1-20261130-001", "completed")
    for state in ("draft", "executing", "completed", "shared", "reviewed", "accepted"):
        transition(log, "MPP-p1-20261130-001", state)
    assert current_state(log, "MPP-p1-20261130-001") == "accepted"
    with pytest.raises(IllegalTransition, match="is accepted: it cannot become rejected"):
        transition(log, "MPP-p1-20261130-001", "rejected")
    transition(log, "MPP-p1-20261130-002", "draft")
    with pytest.raises(IllegalTransition, match="allowed next: erased, executing"):
        transition(log, "MPP-p1-20261130-002", "kept")
    records = [r for r in log.records() if r["event"] == "transition"]
    assert [r["to"] for r in records] == [
        "draft",
        "executing",
        "completed",
        "shared",
        "reviewed",
        "accepted",
        "draft",
    ]
    assert log.verify().ok


def test_audit_chain_survives_concurrent_appends_and_detects_tampering(tmp_path: Path) -> None:
    log = AuditLog(tmp_path)
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda n: log.append("call", pen_id=f"MPP-p1-20261130-{n:03d}", status="completed"), range(40)
            )
        )
    report = log.verify()
    assert report.ok and report.records == 40
    lines = log.path.read_text().splitlines()

    # A changed field is detected at its line.
    changed = json.loads(lines[10])
    changed["status"] = "MPP-E005"
    log.path.write_text("\n".join(lines[:10] + [json.dumps(changed)] + lines[11:]) + "\n")
    problems = log.verify().problems
    assert problems and problems[0]["line"] == 11 and "changed" in problems[0]["problem"]

    # A deleted record breaks the chain at the next line.
    log.path.write_text("\n".join(lines[:20] + lines[21:]) + "\n")
    problems = log.verify().problems
    assert {p["line"] for p in problems} == {21}

    # Cutting the tail leaves a valid chain, but not the head's.
    log.path.write_text("\n".join(lines[:30]) + "\n")
    problems = log.verify().problems
    assert len(problems) == 1 and "cut off" in problems[0]["problem"]

    # The untouched log verifies again: the check has no memory of earlier runs.
    log.path.write_text("\n".join(lines) + "\n")
    assert log.verify().ok


def _run(tmp_path: Path, inputs, result, code: str) -> tuple:
    from slotrelay.pen.models import Execution, PenOutput

    request = parse_request(
        {
            "intent": "Sum the numbers. Then stop.",
            "context": {"persona_id": "p1", "task_category": "data-process", "upstream_inputs": inputs},
        }
    )
    run = PenRun(
        root=tmp_path,
        request=request,
        pen_id="MPP-p1-20261130-001",
        intent_hash="0" * 64,
        started_at="2026-11-30T00:00:00+00:00",
        code=code,
        execution=Execution(status="success", result=result, duration_ms=3),
        suggestion="share",
    )
    output: PenOutput = run.output("SL-1")
    return request, output


def test_manifest_is_filled_from_the_run_and_checked_by_its_schema(tmp_path: Path) -> None:
    code = (
        "import json\nimport jsonschema\nfrom collections import Counter\ndef main(inputs):\n    return 1\n"
    )
    request, output = _run(tmp_path, {"numbers": [1, 2.5]}, {"total": 3.5}, code)
    manifest = build_manifest(request, output)
    assert manifest["intent_summary"] == "Sum the numbers."
    assert manifest["use_cases"] == ["Sum the numbers. Then stop.", "task category: data-process"]
    assert manifest["io_contract"]["input_schema"]["properties"]["numbers"] == {
        "type": "array",
        "items": {"type": "number"},
    }
    assert manifest["io_contract"]["output_schema"]["properties"]["total"] == {"type": "number"}
    assert manifest["test_examples"] == [{"input": {"numbers": [1, 2.5]}, "expected": {"total": 3.5}}]
    from importlib.metadata import version

    assert manifest["dependencies"] == [f"jsonschema@{version('jsonschema')}"]
    assert manifest["copyright"] == "国作登字-2026-A-00037559"
    broken = {**manifest, "copyright": "someone else", "extra": 1}
    del broken["test_examples"]
    with pytest.raises(InvalidPenRequest) as caught:
        validate_manifest(broken)
    message = caught.value.message
    assert "test_examples" in message and "$.copyright" in message and "extra" in message


def test_dependencies_of_node_code() -> None:
    code = "const fs = require('fs');\nconst _ = require('lodash');\nimport x from 'node:path';\n"
    assert code_dependencies(code, "node") == ["lodash@unknown"]


def test_state_index_follows_the_log_and_disagreement_is_reported(tmp_path: Path) -> None:
    from slotrelay.pen import verify_audit

    log = AuditLog(tmp_path)
    for state in ("draft", "executing", "completed"):
        transition(log, "MPP-p1-20261130-001", state)
    index = log.folder / "pen-states/MPP-p1-20261130-001.json"
    assert json.loads(index.read_text())["state"] == "completed"
    assert verify_audit(tmp_path).ok
    # Someone edits the index to skip a step: the log still decides in verify.
    index.write_text(json.dumps({"state": "shared", "seq": 3, "hash": "x"}))
    problems = verify_audit(tmp_path).problems
    assert problems == [
        {"line": None, "problem": "state index of MPP-p1-20261130-001 disagrees with the audit log"}
    ]
    # Without an index entry the state comes from the log.
    index.unlink()
    assert current_state(log, "MPP-p1-20261130-001") == "completed"


def test_suggestion_from_the_model_or_the_rule(stub, model) -> None:
    from harness.stub_model import Reply, completion
    from slotrelay.pen.model_client import ChatClient
    from slotrelay.pen.models import Execution
    from slotrelay.pen.suggest import suggest

    request = parse_request(
        {
            "intent": "sum the numbers in the input list",
            "context": {"persona_id": "p1", "upstream_inputs": {"numbers": [1]}},
        }
    )
    ok = Execution(status="success", result={"total": 1})
    with ChatClient(model) as client:
        stub.suggestion = "I would SHARE it."
        assert suggest(client, request, ok) == ("share", "model")
        stub.script.append(Reply(body=completion("no opinion")))
        assert suggest(client, request, ok) == ("share", "rule")  # inputs turned into a result: reusable
        stub.script.extend([Reply(status=503, body={"error": "overloaded"})] * 3)
        assert suggest(client, request, Execution(status="error", stderr="boom")) == ("erase", "rule")
    bare = parse_request({"intent": "print the current date", "context": {"persona_id": "p1"}})
    assert suggest(None, bare, Execution(status="success", stdout="2026-11-30\n")) == ("keep", "rule")
    assert suggest(None, bare, Execution(status="success")) == ("erase", "rule")


def test_lock_is_reentrant_across_log_objects_of_one_file(tmp_path: Path) -> None:
    # Two AuditLog objects for the same root in one thread must not deadlock on the file lock.
    outer, inner = AuditLog(tmp_path), AuditLog(tmp_path)
    with outer.locked():
        transition(inner, "MPP-p1-20261130-001", "draft")
        outer.append("call", pen_id="MPP-p1-20261130-001")
    assert outer.verify().ok and outer.verify().records == 2
