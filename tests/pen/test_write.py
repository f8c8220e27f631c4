"""`slotrelay pen write | decide | review | audit verify` end to end: the stub code model on
127.0.0.1 and the real sandbox. Each error code is reached for real, each final action's files are
checked on disk (nothing left after erase), and the audit log verifies after every scenario."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.stub_model import SUM_CODE, Reply, completion
from slotrelay import fsio
from slotrelay.audit_log import AuditLog, sha256_text
from slotrelay.cli import app
from slotrelay.pen import store
from slotrelay.pen.manifest import validate_manifest
from tests.support.pen_output_contract import (
    AUDIT_KEYS,
    EXECUTION_KEYS,
    EXTENSION,
    OUTPUT_KEYS,
    assert_output_shape,
    decision_of,
)
from tests.support.services import require_service

pytestmark = pytest.mark.docker

INTENT = "sum the numbers in the input list"
runner = CliRunner()


@pytest.fixture
def pen(root: Path, stub, sandbox_backend: str, monkeypatch):
    """Runs `slotrelay pen ...` in-process against the stub model and the real sandbox."""
    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    monkeypatch.setenv("SLOTRELAY_MODEL_TIMEOUT_S", "5")

    def call(*args: str, backend: bool = True) -> tuple[int, dict]:
        extra = ["--backend", sandbox_backend] if backend else []
        result = runner.invoke(app, ["pen", *args, "--root", str(root), "--json", *extra])
        try:
            body = json.loads(result.stdout)
        except ValueError:
            raise AssertionError(
                f"not JSON (exit {result.exit_code}): {result.stdout!r} {result.stderr!r}"
            ) from None
        return result.exit_code, body

    return call


def _files(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text(errors="replace")
        for path in root.rglob("*")
        if path.is_file()
    }


def _policy(root: Path, persona: str, policy: dict) -> None:
    folder = root / ".github" / "persona-brain" / persona
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pen-policy.json").write_text(json.dumps(policy))


def test_the_output_model_holds_the_seeds_keys_and_no_other() -> None:
    # The answers add one key to these, `x-slotrelay` (assert_output_shape checks every answer).
    from slotrelay.pen.models import EXTENSION_KEY, AuditRef, Execution, PenOutput

    assert set(PenOutput.model_fields) == OUTPUT_KEYS
    assert set(Execution.model_fields) == EXECUTION_KEYS and set(AuditRef.model_fields) == AUDIT_KEYS
    assert EXTENSION_KEY == EXTENSION


def test_keep_writes_the_seed_output_and_the_private_folder(pen, root, stub, sandbox_backend) -> None:
    code, body = pen("write", "--persona", "p1", INTENT, "--input", '{"numbers": [1, 2, 3]}')
    assert code == 0, body
    # The seed's keys and x-slotrelay; a `decision` key beside them broke the contract (seen failing on main).
    assert_output_shape(body)
    assert body["pen_id"].startswith("MPP-p1-") and body["pen_id"].endswith("-001")
    assert body["code"].strip() == SUM_CODE.strip() and body["lang"] == "python"
    assert body["execution"]["status"] == "success" and body["execution"]["result"] == {"total": 6}
    assert body["suggestion"] == "keep"  # the stub model's answer
    assert body["audit"]["intent_hash"] == sha256_text(INTENT)
    assert body["audit"]["code_hash"] == sha256_text(body["code"])
    assert decision_of(body)["final_action"] == "keep" and decision_of(body)["state"] == "kept"
    folder = root / ".github/persona-brain/p1/pen-private" / body["pen_id"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "code.py",
        "execution.json",
        "output.json",
        "request.json",
    ]
    assert (
        json.loads((folder / "output.json").read_text())["audit"]["syslog_id"] == body["audit"]["syslog_id"]
    )
    assert not (store.staging_dir(root, body["pen_id"])).exists()
    log = AuditLog(root)
    call = [r for r in log.records() if r["event"] == "call"]
    assert (
        len(call) == 1
        and call[0]["syslog_id"] == body["audit"]["syslog_id"]
        and call[0]["final_action"] == "keep"
    )
    states = [r["to"] for r in log.records_of(body["pen_id"]) if r["event"] == "transition"]
    assert states == ["draft", "executing", "completed", "kept"]
    code, report = pen("audit", "verify", backend=False)
    assert code == 0 and report["ok"] and report["records"] == 5
    # Rewriting history (say, the final action) is caught.
    log_path = AuditLog(root).path
    log_path.write_text(log_path.read_text().replace('"final_action": "keep"', '"final_action": "erase"'))
    code, report = pen("audit", "verify", backend=False)
    assert code == 1 and not report["ok"] and "changed" in report["problems"][0]["problem"]


def test_erase_leaves_only_the_audit_record(pen, root, stub) -> None:
    stub.default_code = (
        "def main(inputs):\n    return {'marker': 'ERASE-ME-' + str(len(inputs['numbers']))}\n"
    )
    code, body = pen(
        "write", "--persona", "p1", INTENT, "--input", '{"numbers": [4, 5]}', "--persist-hint", "erase"
    )
    assert code == 0, body
    assert body["execution"]["result"] == {"marker": "ERASE-ME-2"}
    assert decision_of(body) == {
        "final_action": "erase",
        "state": "erased",
        "decided_by": "persist_hint",
        "location": None,
    }
    files = _files(root) | {f"state/{name}": text for name, text in _files(fsio.tree_state(root)).items()}
    assert not any(name.startswith((".github", "factory", "state/pen-staging")) for name in files), files
    everything = "\n".join(files.values())
    assert "ERASE-ME" not in everything and INTENT not in everything and "numbers" not in everything
    assert sha256_text(INTENT) in files["state/pen-audit.jsonl"]


def test_share_then_review_accept_and_reject(pen, root, stub) -> None:
    stub.suggestion = "share"
    code, body = pen(
        "write",
        "--persona",
        "p1",
        INTENT,
        "--input",
        '{"numbers": [1, 2, 3]}',
        "--task-category",
        "data-process",
    )
    assert code == 0 and decision_of(body)["state"] == "shared", body
    pen_id = body["pen_id"]
    inbox = root / "factory/module-registry/inbox" / pen_id
    manifest = json.loads((inbox / "manifest.json").read_text())
    validate_manifest(manifest)
    assert manifest["test_examples"] == [{"input": {"numbers": [1, 2, 3]}, "expected": {"total": 6}}]
    assert manifest["dependencies"] == [] and manifest["persona_id"] == "p1"

    code, reviewed = pen("review", pen_id, "accept")
    assert code == 0, reviewed
    assert reviewed["state"] == "accepted" and reviewed["review"]["passed"]
    assert reviewed["review"]["tests"][0]["got"] == {"total": 6}
    assert (
        not inbox.exists() and (root / "factory/module-registry/accepted" / pen_id / "review.json").is_file()
    )
    code, again = pen("review", pen_id, "reject")
    assert code == 2 and again["error"]["code"] == "PEN_ILLEGAL_TRANSITION"

    # A second tool whose example no longer holds: it cannot be accepted, and rejection is MPP-E006.
    code, body = pen("write", "--persona", "p1", INTENT, "--input", '{"numbers": [2, 2]}')
    pen_id = body["pen_id"]
    manifest_path = root / "factory/module-registry/inbox" / pen_id / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["test_examples"].append({"input": {"numbers": [1]}, "expected": {"total": 2}})
    manifest_path.write_text(json.dumps(manifest))
    code, refused = pen("review", pen_id, "accept")
    assert code == 2 and "checks failed" in refused["error"]["message"]
    code, rejected = pen("review", pen_id, "reject")
    assert code == 1 and rejected["error"]["code"] == "MPP-E006" and rejected["state"] == "rejected"
    assert [t["passed"] for t in rejected["review"]["tests"]] == [True, False]
    notice = json.loads((root / ".github/persona-brain/p1/pen-notices" / f"{pen_id}.json").read_text())
    assert notice["error"]["code"] == "MPP-E006"
    assert (root / "factory/module-registry/rejected" / pen_id / "manifest.json").is_file()

    # Code changed after it was audited: the review flags it and it cannot be accepted.
    code, body = pen("write", "--persona", "p1", INTENT, "--input", '{"numbers": [9]}')
    code_path = root / "factory/module-registry/inbox" / body["pen_id"] / "code.py"
    code_path.write_text(code_path.read_text() + "# harmless-looking change\n")
    code, refused = pen("review", body["pen_id"], "accept")
    assert code == 2 and "checks failed" in refused["error"]["message"]
    review = json.loads((code_path.parent / "review.json").read_text())
    assert [f["kind"] for f in review["static_findings"]] == ["integrity"] and review["tests"][0]["passed"]
    assert pen("review", body["pen_id"], "reject")[0] == 1

    # Code edited so it no longer parses cannot be screened: its examples are not run at all.
    code, body = pen("write", "--persona", "p1", INTENT, "--input", '{"numbers": [8]}')
    code_path = root / "factory/module-registry/inbox" / body["pen_id"] / "code.py"
    code_path.write_text("def main(inputs:\n    return {'total': 8}\n")
    code, refused = pen("review", body["pen_id"], "accept")
    assert code == 2 and "checks failed" in refused["error"]["message"]
    review = json.loads((code_path.parent / "review.json").read_text())
    assert [f["kind"] for f in review["static_findings"]] == ["integrity", "unparsable"]
    assert [(t["status"], t["got"], t["passed"]) for t in review["tests"]] == [("not_run", None, False)]
    assert pen("review", body["pen_id"], "reject")[0] == 1

    # Sharing would publish the inputs as a test example: a personal ID number in them keeps it private.
    code, body = pen(
        "write", "--persona", "p1", INTENT, "--input", '{"numbers": [1], "owner": "11010519491231002X"}'
    )
    assert code == 0 and decision_of(body)["final_action"] == "keep", body
    assert "share refused: Chinese resident identity number" in decision_of(body)["decided_by"]

    # Observation: the reviewer keeps an eye on it; it leaves the inbox for its own bucket.
    code, body = pen("write", "--persona", "p1", INTENT, "--input", '{"numbers": [3]}')
    code, observed = pen("review", body["pen_id"], "observation")
    assert code == 0 and observed["state"] == "observation", observed
    assert (root / "factory/module-registry/observation" / body["pen_id"] / "review.json").is_file()
    assert not any((root / "factory/module-registry/inbox").iterdir())
    assert pen("audit", "verify", backend=False)[0] == 0


def test_review_of_a_hand_broken_manifest_names_the_file(pen, root, stub) -> None:
    code, body = pen(
        "write", "--persona", "p1", INTENT, "--input", '{"numbers": [1]}', "--persist-hint", "share"
    )
    assert code == 0 and decision_of(body)["state"] == "shared", body
    manifest_path = root / "factory/module-registry/inbox" / body["pen_id"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text('{"pen_id": ')
    code, broken = pen("review", body["pen_id"], "accept")
    assert code == 2 and broken["error"]["message"].startswith(f"{manifest_path}: not JSON")
    del manifest["copyright"]
    manifest_path.write_text(json.dumps(manifest))
    code, broken = pen("review", body["pen_id"], "accept")
    assert code == 2 and broken["error"]["message"] == (
        f"{manifest_path}: invalid share manifest: $: 'copyright' is a required property"
    )
    # Nothing moved: the pen is still shared, waiting for a review of a valid manifest.
    assert [r["to"] for r in AuditLog(root).records_of(body["pen_id"]) if r["event"] == "transition"][-1] == (
        "shared"
    )


def test_a_person_decides_later_and_decisions_are_final(pen, root, stub) -> None:
    _policy(root, "p2", {"mode": "person"})
    code, body = pen("write", "--persona", "p2", INTENT, "--input", '{"numbers": [7]}')
    assert code == 0 and decision_of(body)["final_action"] is None, body
    assert decision_of(body)["state"] == "completed"
    pen_id = body["pen_id"]
    assert (store.staging_dir(root, pen_id) / "code.py").is_file()
    # A folder already where the pen would go is never overwritten; the pen keeps waiting.
    blocker = root / ".github/persona-brain/p2/pen-private" / pen_id
    blocker.mkdir(parents=True)
    code, clash = pen("decide", pen_id, "keep", backend=False)
    assert code == 1 and clash["error"]["message"] == (
        f"{blocker} exists already: a pen's folder is never overwritten"
    )
    assert (store.staging_dir(root, pen_id) / "code.py").is_file()
    code, decided = pen("decide", pen_id, "share", backend=False)
    assert code == 0 and decision_of(decided)["state"] == "shared", decided
    assert decided["audit"]["syslog_id"] == body["audit"]["syslog_id"]
    assert (root / "factory/module-registry/inbox" / pen_id / "manifest.json").is_file()
    code, again = pen("decide", pen_id, "erase", backend=False)
    assert code == 2 and again["error"]["code"] == "PEN_ILLEGAL_TRANSITION"
    assert "is shared: it cannot become erased" in again["error"]["message"]
    code, missing = pen("decide", "MPP-p2-20200101-001", "keep", backend=False)
    assert code == 2 and missing["error"]["code"] == "PEN_NOT_FOUND"
    _policy(root, "p3", {"mode": "fixed", "action": "share"})
    stub.default_code = "def main(inputs):\n    raise ValueError('bad input')\n"
    code, body = pen("write", "--persona", "p3", INTENT, "--input", '{"numbers": [7]}')
    assert code == 1 and body["execution"]["status"] == "error" and "bad input" in body["execution"]["stderr"]
    assert decision_of(body)["final_action"] == "keep"  # a failed run is never shared


def test_the_program_may_read_its_environment_which_holds_nothing_of_the_hosts(
    pen, stub, monkeypatch
) -> None:
    # The static screen lets environment access pass because the sandbox's environment is clean.
    monkeypatch.setenv("SLOTRELAY_MODEL_API_KEY", "sk-host-secret")
    stub.default_code = "import os\ndef main(inputs):\n    return dict(os.environ)\n"
    code, body = pen("write", "--persona", "p1", INTENT, "--persist-hint", "erase")
    assert code == 0, body
    environment = body["execution"]["result"]
    assert "PATH" in environment
    assert not any(name.startswith("SLOTRELAY_MODEL") for name in environment)
    assert "sk-host-secret" not in json.dumps(environment)


def test_e001_nothing_reaches_the_model(pen, root, stub) -> None:
    code, body = pen("write", "--persona", "p1", "deploy with key AKIAIOSFODNN7EXAMPLE to the bucket")
    assert code == 2 and body["error"]["code"] == "MPP-E001"
    assert body["error"]["details"]["findings"][0]["kind"] == "AWS Access Key"
    assert body["audit"]["syslog_id"] and body["audit"]["code_hash"] is None
    code, body = pen("write", "--persona", "p1", "   ")
    assert code == 2 and body["error"]["code"] == "MPP-E001"
    assert stub.requests == []
    calls = [r for r in AuditLog(root).records() if r["event"] == "call"]
    assert [c["status"] for c in calls] == ["MPP-E001", "MPP-E001"]
    assert "AKIAIOSFODNN7EXAMPLE" not in AuditLog(root).path.read_text()


def test_e003_refusal_and_server_errors(pen, root, stub) -> None:
    stub.script.append(Reply(body=completion(None, refusal="I can't help with that.")))
    code, body = pen("write", "--persona", "p1", INTENT)
    assert code == 1 and body["error"]["code"] == "MPP-E003" and "refused" in body["error"]["message"]
    stub.script.extend([Reply(status=500, body={"error": "llama runner process has terminated"})] * 3)
    code, body = pen("write", "--persona", "p1", INTENT)
    assert code == 1 and body["error"]["code"] == "MPP-E003" and "llama runner" in body["error"]["message"]
    staging = fsio.tree_state(root) / "pen-staging"
    assert not staging.exists() or not any(staging.iterdir())


def _states(root: Path, pen_id: str) -> list[str]:
    return [r["to"] for r in AuditLog(root).records_of(pen_id) if r["event"] == "transition"]


def test_a_failed_pen_is_erased_and_its_error_answer_names_it(pen, root, stub) -> None:
    # Error answers carried no pen_id, and a failed pen stayed `draft` or `executing` for ever (seen
    # failing on main).
    code, body = pen("write", "--persona", "p1", "deploy with key AKIAIOSFODNN7EXAMPLE to the bucket")
    assert code == 2 and body["error"]["code"] == "MPP-E001", body
    refused = body["pen_id"]
    assert refused and refused.startswith("MPP-p1-") and _states(root, refused) == ["draft", "erased"]
    stub.script.append(Reply(body=completion(None, refusal="I can't help with that.")))
    code, body = pen("write", "--persona", "p1", INTENT)
    assert code == 1 and body["error"]["code"] == "MPP-E003" and body["pen_id"], body
    assert _states(root, body["pen_id"]) == ["draft", "erased"]
    erased = next(r for r in AuditLog(root).records_of(body["pen_id"]) if r.get("to") == "erased")
    assert (erased["decided_by"], erased["error_code"], erased["final_action"]) == (
        "pen (MPP-E003)", "MPP-E003", "erase")
    # Refused by the sandbox while running: erased from `executing`.
    code, body = pen("write", "--persona", "p1", INTENT, "--fs", "/etc")
    assert code == 1 and body["error"]["code"] == "MPP-E005", body
    assert _states(root, body["pen_id"]) == ["draft", "executing", "erased"]
    # The human form names the pen too.
    failed = runner.invoke(app, ["pen", "write", "--persona", "p1", INTENT, "--fs", "/etc",
                                 "--root", str(root)])
    assert failed.exit_code == 1 and "  pen_id: MPP-p1-" in failed.stderr, failed.stderr
    # An erased pen has nothing to decide; the refusal names it as well.
    code, again = pen("decide", body["pen_id"], "keep", backend=False)
    assert code == 2 and again["error"]["code"] == "PEN_ILLEGAL_TRANSITION"
    assert again["pen_id"] == body["pen_id"]
    assert "is erased: it cannot become kept" in again["error"]["message"]
    # An error before a pen was claimed has none.
    code, body = pen("write", "--persona", "p/1", INTENT)
    assert code == 2 and body["error"]["code"] == "PEN_INVALID_REQUEST" and body["pen_id"] is None
    assert pen("audit", "verify", backend=False)[0] == 0


LOOPS_FOREVER = (
    "import sys\n"
    "def main(inputs):\n"
    "    print('started on', inputs['numbers'], flush=True)\n"
    "    print('still working', file=sys.stderr, flush=True)\n"
    "    while True:\n"
    "        pass\n"
)


def test_e004_a_timeout_is_an_output_the_persona_decides_on(pen, root, stub) -> None:
    # MPP-E004 raised as the answer: no output, the code destroyed, no decision (seen failing on main).
    stub.default_code = LOOPS_FOREVER
    code, body = pen("write", "--persona", "p1", INTENT, "--input", '{"numbers": [4]}', "--timeout-ms", "700")
    assert code == 1 and "error" not in body, body  # exit 1: the program did not succeed
    assert_output_shape(body)
    assert body["code"].strip() == LOOPS_FOREVER.strip() and body["lang"] == "python"
    execution = body["execution"]
    assert execution["status"] == "timeout" and execution["result"] is None
    assert execution["stdout"].strip() == "started on [4]" and "still working" in execution["stderr"]
    assert execution["duration_ms"] >= 700
    assert body["audit"]["code_hash"] == sha256_text(body["code"])
    assert body["x-slotrelay"]["error"]["code"] == "MPP-E004"
    # The persona decides as on any result: the default policy takes the suggestion (the stub model's).
    assert body["suggestion"] == "keep"
    assert decision_of(body) == {
        "final_action": "keep",
        "state": "kept",
        "decided_by": "policy:suggestion",
        "location": str(root / ".github/persona-brain/p1/pen-private" / body["pen_id"]),
    }
    kept = root / ".github/persona-brain/p1/pen-private" / body["pen_id"]
    assert json.loads((kept / "execution.json").read_text())["status"] == "timeout"
    log = AuditLog(root)
    transitions = [r for r in log.records_of(body["pen_id"]) if r["event"] == "transition"]
    assert [r["to"] for r in transitions] == ["draft", "executing", "completed", "kept"]
    assert (transitions[2]["execution_status"], transitions[2]["error_code"]) == ("timeout", "MPP-E004")
    call = next(r for r in log.records_of(body["pen_id"]) if r["event"] == "call")
    assert (call["status"], call["execution_error"], call["final_action"]) == (
        "completed", "MPP-E004", "keep")
    assert log.verify().ok

    # A person's policy: the timed-out pen waits, and the person erases it.
    _policy(root, "p2", {"mode": "person"})
    code, body = pen("write", "--persona", "p2", INTENT, "--input", '{"numbers": [5]}', "--timeout-ms", "700")
    assert code == 1 and body["execution"]["status"] == "timeout", body
    assert decision_of(body)["state"] == "completed" and decision_of(body)["final_action"] is None
    code, decided = pen("decide", body["pen_id"], "erase", backend=False)
    assert code == 0 and decision_of(decided)["state"] == "erased", decided
    assert decided["execution"]["status"] == "timeout"
    assert decided["x-slotrelay"]["error"]["code"] == "MPP-E004"


def test_e005_static_and_at_run_time(pen, root, stub) -> None:
    stub.default_code = "import socket\ndef main(inputs):\n    return socket.gethostname()\n"
    code, body = pen("write", "--persona", "p1", INTENT)
    assert code == 1 and body["error"]["code"] == "MPP-E005", body
    assert body["error"]["details"]["stage"] == "static"
    pen_id = [r for r in AuditLog(root).records() if r["event"] == "call"][-1]["pen_id"]
    # Refused before running: the pen never reached `executing`, and it is erased, not left a draft.
    assert [r["to"] for r in AuditLog(root).records_of(pen_id) if r["event"] == "transition"] == [
        "draft", "erased"]

    # The code names no path, but the request asks the sandbox for a host path outside its roots.
    stub.default_code = "def main(inputs):\n    return 1\n"
    code, body = pen("write", "--persona", "p1", INTENT, "--fs", "/etc")
    assert code == 1 and body["error"]["code"] == "MPP-E005", body
    assert body["error"]["details"]["stage"] == "runtime"


def test_the_network_allow_list_admits_its_host_and_refuses_the_rest(pen, stub, local_host) -> None:
    port, log = local_host
    fetch = (
        "import urllib.error, urllib.request\n"
        "def fetch(url):\n"
        "    try:\n"
        "        with urllib.request.urlopen(url, timeout=10) as answer:\n"
        "            return answer.status, answer.read().decode()\n"
        "    except urllib.error.HTTPError as error:\n"
        "        return error.code, str(error.reason)\n"
    )
    allow = ["--network", f"localhost:{port}", "--persist-hint", "erase"]
    stub.default_code = (
        fetch + f"def main(inputs):\n    return fetch('http://localhost:{port}/from-the-pen')\n"
    )
    code, body = pen("write", "--persona", "p1", INTENT, *allow)
    assert code == 0, body
    assert body["execution"]["result"] == [200, "hello from /from-the-pen"] and "/from-the-pen" in log.paths

    # A URL the code names outside the list is refused before anything runs.
    stub.default_code = fetch + f"def main(inputs):\n    return fetch('http://127.0.0.1:{port}/by-ip')\n"
    code, body = pen("write", "--persona", "p1", INTENT, *allow)
    assert code == 1 and body["error"]["code"] == "MPP-E005", body
    assert body["error"]["details"]["stage"] == "static"

    # One the screen cannot see (built at run time) is refused by the sandbox's egress proxy.
    stub.default_code = fetch + (
        f"def main(inputs):\n    return fetch('http' + '://' + '127.0.0.1:{port}' + '/built-by-ip')\n"
    )
    code, body = pen("write", "--persona", "p1", INTENT, *allow)
    assert code == 1 and body["error"]["code"] == "MPP-E005", body
    assert body["error"]["details"]["stage"] == "runtime"
    assert any(f"127.0.0.1:{port}" in v["detail"] for v in body["error"]["details"]["violations"])
    assert "/by-ip" not in log.paths and "/built-by-ip" not in log.paths


def test_e002_when_no_sandbox_can_start(root, stub, tmp_path) -> None:
    # A separate process whose Docker daemon address leads nowhere: the docker backend cannot start.
    env = {
        **os.environ,
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
        "SLOTRELAY_MODEL_BASE_URL": stub.base_url,
        "SLOTRELAY_MODEL_NAME": "stub-coder",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "slotrelay.cli",
            "pen",
            "write",
            "--persona",
            "p1",
            INTENT,
            "--backend",
            "docker",
            "--root",
            str(root),
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    body = json.loads(done.stdout)
    assert done.returncode == 3 and body["error"]["code"] == "MPP-E002", done.stderr
    assert "docker" in body["error"]["message"]
    assert [r["status"] for r in AuditLog(root).records() if r["event"] == "call"] == ["MPP-E002"]


def test_an_unknown_backend_from_the_environment_is_bad_input(pen, stub, monkeypatch) -> None:
    monkeypatch.setenv("SLOTRELAY_SANDBOX_BACKEND", "podman")
    code, body = pen("write", "--persona", "p1", INTENT, backend=False)
    assert code == 2 and body["error"] == {
        "code": "PEN_INVALID_REQUEST",
        "message": "sandbox: backend: 'podman' is not one of docker, bwrap",
    }


def test_node_and_shell_programs(pen, stub) -> None:
    stub.default_code = (
        "module.exports = (inputs) => ({ total: inputs.numbers.reduce((a, b) => a + b, 0) });\n"
    )
    code, body = pen(
        "write", "--persona", "p1", INTENT, "--lang", "node", "--input", '{"numbers": [1, 2, 3]}'
    )
    assert code == 0 and body["lang"] == "node", body
    assert body["execution"]["result"] == {"total": 6}
    stub.default_code = 'numbers=$(cat)\necho "got $numbers" >&2\necho \'{"lines": 1}\'\n'
    code, body = pen("write", "--persona", "p1", INTENT, "--lang", "shell", "--input", '{"numbers": [1]}')
    assert code == 0 and body["lang"] == "shell", body
    assert (
        body["execution"]["result"] == {"lines": 1} and 'got {"numbers": [1]}' in body["execution"]["stderr"]
    )


def test_invalid_requests_name_the_field(pen, root, stub) -> None:
    code, body = pen("write", "--persona", "p1", INTENT, "--lang", "cobol")
    assert code == 2 and "options.sandbox.lang" in body["error"]["message"]
    code, body = pen("write", "--persona", "p/1", INTENT)
    assert code == 2 and "context.persona_id" in body["error"]["message"]
    # Options only the sandbox can judge are refused before a pen_id is claimed or the model is asked.
    code, body = pen("write", "--persona", "p1", INTENT, "--network", "10.0.0.1")
    assert code == 2 and body["error"]["code"] == "PEN_INVALID_REQUEST"
    assert body["error"]["message"] == (
        "invalid pen.write request: options.sandbox.network.allow: '10.0.0.1' is an IP address; "
        "list hosts by name"
    )
    code, body = pen("write", "--persona", "p1", INTENT, "--fs", "data/in.csv")
    assert (
        code == 2
        and "options.sandbox.fs.allow_paths: 'data/in.csv' is not an absolute path"
        in (body["error"]["message"])
    )
    assert stub.requests == [] and not fsio.tree_state(root).exists()
    code = runner.invoke(app, ["pen", "write", "--persona", "p1", INTENT, "--backend", "podman"]).exit_code
    assert code == 2 and stub.requests == []
    missing = runner.invoke(app, ["pen", "audit", "verify", "--root", str(root / "typo")])
    assert missing.exit_code == 2 and missing.stderr == (
        f"PEN_INVALID_REQUEST: --root: {root / 'typo'} does not exist "
        "(create the folder first, or name the pen's folder)\n"
    )
    # A persona policy that breaks its schema is named by file and field.
    _policy(root, "p4", {"mode": "fixed"})
    code, body = pen("write", "--persona", "p4", INTENT)
    assert code == 2 and body["error"]["message"].endswith(
        "pen-policy.json: not a valid persona policy: mode 'fixed' needs an 'action' (erase, keep or share)"
    )


def _no_tmp_files(root: Path) -> list[str]:
    return [str(path) for folder in (root, fsio.tree_state(root)) for path in folder.rglob("*.tmp")]


def test_regression_a_lone_surrogate_in_the_result_is_replaced_and_the_pen_finishes(pen, root, stub) -> None:
    # `return {'s': '\ud800'}` crashed `pen write --json` with a UnicodeEncodeError, leaving the pen
    # completed with execution.json.tmp, no call record, and PEN_NOT_FOUND on `pen decide`.
    stub.default_code = "def main(inputs):\n    return {'s': '\\ud800'}\n"
    code, body = pen("write", "--persona", "p1", INTENT, "--persist-hint", "keep")
    assert code == 0, body
    assert body["execution"]["result"] == {"s": "\ufffd"} and decision_of(body)["state"] == "kept"
    folder = root / ".github/persona-brain/p1/pen-private" / body["pen_id"]
    assert json.loads((folder / "execution.json").read_text(encoding="utf-8"))["result"] == {"s": "\ufffd"}
    # A shell program's result is its last stdout line: the same replacement applies.
    stub.default_code = 'echo \'{"s": "\\ud800"}\'\n'
    _policy(root, "p2", {"mode": "person"})
    code, body = pen("write", "--persona", "p2", INTENT, "--lang", "shell")
    assert code == 0 and body["execution"]["result"] == {"s": "\ufffd"}, body
    code, decided = pen("decide", body["pen_id"], "erase", backend=False)
    assert code == 0 and decision_of(decided)["state"] == "erased", decided
    assert _no_tmp_files(root) == []
    assert [c["status"] for c in AuditLog(root).records() if c["event"] == "call"] == [
        "completed",
        "completed",
    ]
    assert pen("audit", "verify", backend=False)[0] == 0


def test_regression_a_run_that_fails_after_completing_is_erased_not_left_completed(pen, root, stub) -> None:
    code, first = pen(
        "write", "--persona", "p5", INTENT, "--input", '{"numbers": [1]}', "--persist-hint", "erase"
    )
    assert code == 0, first
    following = first["pen_id"][:-3] + "002"
    blocker = root / ".github/persona-brain/p5/pen-private" / following
    blocker.mkdir(parents=True)
    (blocker / "mine.txt").write_text("not the pen's")
    code, body = pen(
        "write", "--persona", "p5", INTENT, "--input", '{"numbers": [1]}', "--persist-hint", "keep"
    )
    assert (
        code == 1
        and body["error"]["message"] == f"{blocker} exists already: a pen's folder is never overwritten"
    )
    states = [r["to"] for r in AuditLog(root).records_of(following) if r["event"] == "transition"]
    assert states == ["draft", "executing", "completed", "erased"]
    assert (blocker / "mine.txt").read_text() == "not the pen's"
    assert not (store.staging_dir(root, following)).exists() and _no_tmp_files(root) == []
    code, again = pen("decide", following, "keep", backend=False)
    assert code == 2 and again["error"]["code"] == "PEN_ILLEGAL_TRANSITION", again
    assert pen("audit", "verify", backend=False)[0] == 0


def test_regression_a_request_with_a_lone_surrogate_is_refused_by_field(pen, root, stub) -> None:
    code, body = pen("write", "--persona", "p1", INTENT, "--input", '{"name": "\\udc80"}')
    assert code == 2 and body["error"]["code"] == "PEN_INVALID_REQUEST", body
    assert body["error"]["details"]["fields"] == [
        "context.upstream_inputs: holds text that is not valid Unicode (a lone surrogate)"
    ]
    assert stub.requests == [] and not fsio.tree_state(root).exists()


@pytest.mark.parametrize(
    "command",
    [
        ["write", "--persona", "p1", INTENT],
        ["decide", "MPP-p1-20261130-001", "keep"],
        ["review", "MPP-p1-20261130-001", "accept"],
        ["audit", "verify"],
    ],
)
def test_regression_a_root_that_is_a_file_or_missing_is_refused_and_never_created(
    tmp_path: Path, command: list[str]
) -> None:
    # A file gave a traceback; a missing root was created silently.
    a_file = tmp_path / "root.txt"
    a_file.write_text("not a folder")
    for root, problem in (
        (a_file, f"--root: {a_file} is not a folder"),
        (tmp_path / "typo", f"--root: {tmp_path / 'typo'} does not exist"),
    ):
        done = runner.invoke(app, ["pen", *command, "--root", str(root), "--json"])
        assert done.exit_code == 2, done.output
        body = json.loads(done.stdout)
        assert body["error"]["code"] == "PEN_INVALID_REQUEST" and body["error"]["message"].startswith(problem)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root.txt"]


@pytest.mark.bwrap
def test_regression_a_read_only_root_is_a_clear_error(tmp_path: Path, stub) -> None:
    # Run under bwrap so the folder is a read-only mount: root bypasses file modes, not EROFS.
    if shutil.which("bwrap") is None:
        require_service(False, "bwrap is not installed")
    # A read-only root is refused at once; a writable root whose state folder is read-only (the pen
    # keeps its ids and audit log there) fails before the model is asked.
    read_only, writable, state = tmp_path / "ro", tmp_path / "rw", tmp_path / "state"
    for folder in (read_only, writable, state):
        folder.mkdir()
    env = {
        **os.environ,
        "SLOTRELAY_MODEL_BASE_URL": stub.base_url,
        "SLOTRELAY_MODEL_NAME": "stub-coder",
        fsio.STATE_HOME_ENV: str(state),
    }
    slotrelay = str(Path(sys.executable).with_name("slotrelay"))
    mounts = ["--ro-bind", str(read_only), str(read_only), "--ro-bind", str(state), str(state)]
    for root, code, message in (
        (read_only, 2, f"PEN_INVALID_REQUEST: --root: {read_only} is not writable"),
        (writable, 1, f"PEN_RUN_FAILED: the pen cannot write its state for the root {writable}"),
    ):
        done = subprocess.run(
            [
                "bwrap",
                "--dev-bind",
                "/",
                "/",
                *mounts,
                "--",
                slotrelay,
                "pen",
                "write",
                "--persona",
                "p1",
                INTENT,
                "--root",
                str(root),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == code, done.stderr
        assert done.stderr.startswith(message) and "Traceback" not in done.stderr, done.stderr
    assert stub.requests == []


def test_the_steps_run_in_their_one_order_through_the_installed_runner(
    root: Path, model, sandbox_backend: str, monkeypatch
) -> None:
    from slotrelay.pen import steps, write
    from slotrelay.psmr.analysis.effects import effects

    ran: list[str] = []

    def recording(step, run):
        ran.append(step.name)
        return step.call(run)

    monkeypatch.setattr(steps, "_runner", recording)
    outcome = write(
        {"intent": INTENT, "context": {"persona_id": "p9", "upstream_inputs": {"numbers": [1, 2]}}},
        root=root,
        model=model,
        effect_screen=effects,
        backend=sandbox_backend,
    )
    assert outcome.output.execution.result == {"total": 3}
    assert ran == [
        "screen-intent",
        "generate-code",
        "static-screen",
        "sandbox-run",
        "suggest",
        "persona-decision",
        "stage",
    ]
