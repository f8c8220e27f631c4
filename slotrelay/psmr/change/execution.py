"""execution.run_tests: run pytest node ids inside slotrelay's sandbox, keep what ran.

The rule: CONTRACTS.md#running-tests.

Needs the `process-execution` capability. The tests are the request's pytest node ids, or the
delta's suggested validation. They run in the sandbox (`slotrelay.sandbox.run`: docker, or bwrap where
no daemon runs) with the workspace's source root and the host's pytest mounted read-only (both must
lie inside the operator's `SLOTRELAY_SANDBOX_ROOTS`), no network, and a time limit; nothing is
written back (no bytecode, no pytest cache).

While each test runs, a profiler inside the sandbox notes which functions of the source root were
called. Each test's outcome becomes evidence with authority `runtime:pytest`, stored per workspace
(`<store>/runtime/pytest/<ws_id>.json`) with the hashes of the files it observed; analysis.impact
shows it as runtime certainty for the symbols those tests reached, for as long as those files keep
the hashes the tests ran on, and query.evidence resolves its id.

A run keeps two records per workspace in its store: the latest run of each test (`runtime/pytest`, what impact
reports as runtime certainty while the files keep the hashes the test ran on) and every run's
evidence by id (`runtime/pytest-evidence`), so an `ev_…` id any answer handed out resolves in
query.evidence: one recorded at the current version of the workspace, or one whose files still have
the hashes it ran on (the only ones impact hands out later). Others are dropped when runs are added.

The sandbox's report is untrusted: the code under test runs in the same sandbox. Inside it, the tests
run in a child process and the outcomes are kept by the parent, out of the tests' reach. On the host
the report is parsed as data against `REPORT_SCHEMA`, only the tests asked for are kept (a node id
equal to or under a requested one, in a file of the workspace), and only files of the workspace are
hashed, through the build's reader (regular files inside the root, no FIFO or device, bounded).
The answer puts failures first, with the failed ids and the count of each outcome.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

import jsonschema

from slotrelay import sandbox
from slotrelay.psmr.change import delta as deltas
from slotrelay.psmr.errors import CapabilityDenied, ExecutionFailed, InvalidQuery, ObjectNotFound
from slotrelay.psmr.grants import Grants
from slotrelay.psmr.ops.observations import AUTHORITY, record_runs
from slotrelay.psmr.ops.queries import Answer
from slotrelay.psmr.workspace.build import NotSource, Unanalysable, read_artifact
from slotrelay.psmr.workspace.identity import sid, stable_id
from slotrelay.psmr.workspace.store import Store, Workspace
from slotrelay.validation_text import schema_problem

# The authority of the evidence a run records, and the two records it keeps per workspace in its store.

DEFAULT_TIMEOUT_S = 120
# The failed test ids an answer and a delta's run record list (the paged results list them all).
FAILED_SHOWN = 200
# How an answer orders its results: what needs attention first.
OUTCOME_ORDER = ("failed", "skipped", "passed")

# Runs in the sandbox as __main__; the runner calls main(inputs) and returns its value as JSON. The
# tests run in a child process (CHILD) that writes one JSON line per event to a pipe; the outcomes are
# kept here, in a process the code under test does not run in, so a conftest cannot reach them
# (through inspect.stack() or otherwise). What the child sends is parsed as data, line by line and
# bounded; the host checks the result again.
PYTEST_PROGRAM = """
import json
import os
import subprocess
import sys

EVENTS_MAX_BYTES = 64 * 1024 * 1024
LINE_MAX_BYTES = 4 * 1024 * 1024

CHILD = '''
import json
import os
import sys

sys.dont_write_bytecode = True
inputs = json.loads(sys.stdin.read())
report = os.fdopen(int(sys.argv[1]), "w", buffering=1)
sys.path[:0] = inputs["paths"]
sys.path.append(inputs["site"])
os.chdir(inputs["root"])
import pytest

prefix = inputs["root"].rstrip(os.sep) + os.sep
observed = set()
running = []


def send(event):
    print(json.dumps(event), file=report)


def profile(frame, event, arg):
    if event == "call" and running:
        code = frame.f_code
        if code.co_filename.startswith(prefix):
            observed.add((code.co_filename[len(prefix):], code.co_qualname))


class Observe:
    def pytest_collection_finish(self, session):
        send({"kind": "collected", "ids": [item.nodeid for item in session.items]})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        running.append(item.nodeid)
        observed.clear()
        sys.setprofile(profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            running.clear()
            send({"kind": "observed", "test": item.nodeid, "functions": sorted(observed)})

    def pytest_runtest_logreport(self, report):
        send({
            "kind": "report", "test": report.nodeid, "outcome": report.outcome, "when": report.when,
            "duration": round(report.duration, 4),
            "message": str(report.longrepr)[-2000:] if report.failed else None,
        })


args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", inputs["root"], *inputs["node_ids"]]
send({"kind": "exit", "code": int(pytest.main(args, plugins=[Observe()]))})
'''


def _outcome(event):
    duration = event.get("duration")
    message = event.get("message")
    return {
        "outcome": event["outcome"],
        "when": str(event.get("when"))[:20],
        "duration": duration if isinstance(duration, (int, float)) else 0,
        "message": message[-2000:] if isinstance(message, str) else None,
    }


def main(inputs):
    read_end, write_end = os.pipe()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    # The child's output goes to stderr: stdout carries only this program's result.
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(write_end)], stdin=subprocess.PIPE, stdout=2, stderr=2,
        pass_fds=(write_end,), env=env,
    )
    os.close(write_end)
    child.stdin.write(json.dumps(inputs).encode())
    child.stdin.close()
    outcomes, observed, collected, exit_code, read = {}, {}, [], None, 0
    with os.fdopen(read_end, "rb") as events:
        while read < EVENTS_MAX_BYTES:
            line = events.readline(LINE_MAX_BYTES)
            if not line:
                break
            read += len(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict) or not isinstance(event.get("test", ""), str):
                continue
            kind = event.get("kind")
            if kind == "report" and event.get("outcome") in ("passed", "failed", "skipped"):
                # The first outcome that is not a pass (setup, call or teardown) is the test's.
                test = event["test"]
                first = outcomes.get(test, {}).get("outcome") in (None, "passed")
                if first and (event.get("when") == "call" or event["outcome"] != "passed"):
                    outcomes[test] = _outcome(event)
            elif kind == "observed" and isinstance(event.get("functions"), list):
                observed[event["test"]] = {
                    tuple(f) for f in event["functions"]
                    if isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f)
                }
            elif kind == "collected" and isinstance(event.get("ids"), list):
                collected = [i for i in event["ids"] if isinstance(i, str)]
            elif kind == "exit" and isinstance(event.get("code"), int):
                exit_code = event["code"]
    child.wait()
    # A function is named once and tests refer to it by index: a suite of hundreds of tests reaching
    # the same functions would otherwise repeat the same names past the result's size limit.
    functions = sorted(set().union(*observed.values())) if observed else []
    index = {f: i for i, f in enumerate(functions)}
    return {
        "exit_code": child.returncode if exit_code is None else exit_code,
        "outcomes": outcomes,
        "collected": collected,
        "functions": functions,
        "observed": {k: sorted(index[f] for f in v) for k, v in observed.items()},
    }
"""
# What the host accepts of the sandbox's report; anything else is refused whole.
REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "exit_code": {"type": "integer"},
        "outcomes": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "outcome": {"enum": list(OUTCOME_ORDER)},
                    "when": {"type": "string", "maxLength": 20},
                    "duration": {"type": "number"},
                    "message": {"type": ["string", "null"], "maxLength": 2000},
                },
                "required": ["outcome", "when", "duration", "message"],
                "additionalProperties": False,
            },
        },
        "collected": {"type": "array", "items": {"type": "string"}},
        "functions": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
        },
        "observed": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        },
    },
    "required": ["exit_code", "outcomes", "collected", "functions", "observed"],
    "additionalProperties": False,
}
_REPORT = jsonschema.Draft202012Validator(REPORT_SCHEMA)


def _pytest_site() -> Path:
    spec = importlib.util.find_spec("pytest")
    if spec is None or spec.origin is None:
        raise ExecutionFailed("pytest is not installed in this environment; pip install pytest")
    return Path(spec.origin).resolve().parent.parent


def _node_ids(
    ws: Workspace, request: dict[str, Any], store: Store
) -> tuple[list[str], dict[str, Any] | None]:
    delta = deltas.load(store, ws, request["delta_id"]) if request.get("delta_id") else None
    node_ids = request.get("tests") or (delta["suggested_validation"]["pytest_node_ids"] if delta else [])
    if not node_ids:
        raise InvalidQuery(
            "execution.run_tests needs tests (pytest node ids such as tests/test_x.py::test_y) or a delta_id "
            "whose suggested validation names some"
        )
    for index, node_id in enumerate(node_ids):
        artifact = node_id.split("::", 1)[0]
        if artifact not in ws.files:
            raise ObjectNotFound(
                f"tests[{index}]: {artifact} is not a file of workspace {ws.workspace_id} "
                "(node ids are relative to its root, e.g. tests/test_x.py::test_y)"
            )
    return list(node_ids), delta


def asked_for(node_id: str, requested: list[str], files: dict[str, Any]) -> bool:
    """Whether a node id the sandbox reports is one of the tests asked for: equal to a requested id,
    or a test under it (`file.py::Class::test`, `test[param]`), in a file of the workspace."""
    if node_id.split("::", 1)[0] not in files:
        return False
    return any(node_id == r or node_id.startswith((f"{r}::", f"{r}[")) for r in requested)


def _symbol(ws: Workspace, artifact: str, qualname: str) -> str | None:
    entry = ws.files.get(artifact)
    if entry is None:
        return None
    module = entry["module"]
    node = sid(module if qualname == "<module>" else f"{module}.{qualname}")
    return node if node in ws.graph else None


def file_hashes(ws: Workspace, artifacts: set[str]) -> dict[str, str | None]:
    """The sha256 of files of the workspace as they are on disk, read as the build reads (a regular
    file inside the root, within the size limit); None for one that cannot be read so."""
    root = Path(ws.source_root).resolve()
    out: dict[str, str | None] = {}
    for artifact in sorted(artifacts):
        if artifact not in ws.files:
            continue
        try:
            out[artifact] = hashlib.sha256(read_artifact(root, artifact)).hexdigest()
        except (NotSource, Unanalysable):
            out[artifact] = None
    return out


def _report(result: sandbox.ExecutionResult) -> dict[str, Any]:
    """The sandbox's report, checked against REPORT_SCHEMA."""
    report = result.result
    error = jsonschema.exceptions.best_match(_REPORT.iter_errors(report))
    if error is not None:
        raise ExecutionFailed(
            f"the sandbox's test report is malformed ({schema_problem(error)[:200]}); nothing was "
            "recorded. The code under test may have written it: run fewer tests to find which"
        )
    checked: dict[str, Any] = report
    return checked


def _order(record: dict[str, Any]) -> tuple[int, str]:
    return OUTCOME_ORDER.index(record["status"]), record["test"]


def run_tests(ws: Workspace, request: dict[str, Any], store: Store, grants: Grants) -> Answer:
    """execution.run_tests: run the tests in the sandbox and record their outcomes as runtime evidence."""
    grants.require_execution("execution.run_tests")
    node_ids, delta = _node_ids(ws, request, store)
    result = _run_in_sandbox(ws, node_ids, timeout_s=request.get("timeout_s", DEFAULT_TIMEOUT_S))
    report = _report(result)
    now = deltas.now()
    records, ignored = _evidence_records(ws, report, node_ids, now)
    record_runs(ws, store, records)
    failed = [r["test"] for r in records if r["status"] == "failed"]
    summary = {
        "exit_code": report["exit_code"],
        "passed": report["exit_code"] == 0 and not failed,
        "counts": {o: sum(1 for r in records if r["status"] == o) for o in ("passed", "failed", "skipped")},
        "failed": failed[:FAILED_SHOWN],
        "failed_total": len(failed),
        "backend": result.backend,
        "duration_ms": result.duration_ms,
    }
    warnings = []
    if ignored:
        warnings.append(
            f"{ignored} reported result(s) for tests not asked for, or outside the workspace's files, were "
            "ignored"
        )
    if delta is not None:
        delta["runs"].append({"at": now, "tests": node_ids, **summary, "files": _delta_files(ws, delta)})
        deltas.save(store, ws, delta)
    return Answer(
        data={**summary, "delta_id": delta["delta_id"] if delta else None, "tests": node_ids},
        sections=[("results", records)],
        evidence_refs=[r["id"] for r in records],
        warnings=warnings,
    )


def _run_in_sandbox(ws: Workspace, node_ids: list[str], *, timeout_s: float) -> sandbox.ExecutionResult:
    """PYTEST_PROGRAM's run of the tests in the sandbox, once it returned a result to check.

    Raises:
        ExecutionFailed: no sandbox runs here, the tests timed out, or pytest did not run.
        CapabilityDenied: the sandbox policy does not admit the source root or pytest's folder.
    """
    root = Path(ws.source_root).resolve()
    site = _pytest_site()
    paths = sorted({str(root), str(root.parent)})
    limits = sandbox.SandboxLimits(
        timeout_ms=int(timeout_s * 1000),
        memory_mb=1024,
        fs={"allow_paths": [str(root), str(site)]},
    )
    inputs = {"root": str(root), "site": str(site), "paths": paths, "node_ids": node_ids}
    try:
        result = sandbox.run(PYTEST_PROGRAM, lang="python", limits=limits, inputs=inputs)
    except sandbox.SandboxUnavailable as exc:
        raise ExecutionFailed(
            f"no sandbox can run the tests here ({exc}); `slotrelay sandbox doctor` says why"
        ) from exc
    refused = [v.detail for v in result.violations if v.kind == "fs"]
    if refused:
        raise CapabilityDenied(
            f"the sandbox policy does not admit the folders the tests need ({'; '.join(refused)}); the "
            f"operator adds {root} and {site} to SLOTRELAY_SANDBOX_ROOTS"
        )
    if result.status == "timeout":
        raise ExecutionFailed(f"the tests did not finish within {limits.timeout_ms // 1000} s; select fewer")
    if not isinstance(result.result, dict):
        broken = "; ".join(v.detail for v in result.violations)
        raise ExecutionFailed(
            f"pytest did not run in the sandbox (status {result.status}, exit {result.exit_code}"
            f"{', ' + broken if broken else ''}): {result.stderr[-1500:]}"
        )
    return result


def _evidence_records(
    ws: Workspace, report: dict[str, Any], node_ids: list[str], now: str
) -> tuple[list[dict[str, Any]], int]:
    """One evidence record per test asked for in the checked report, failures first, with the symbols
    it reached and the hashes of the files it observed; and how many reported tests were ignored."""
    functions = [tuple(f) for f in report["functions"]]
    kept = {t: o for t, o in report["outcomes"].items() if asked_for(t, node_ids, ws.files)}
    ignored = len(report["outcomes"]) - len(kept)
    observed = {
        test: [functions[i] for i in report["observed"].get(test, []) if i < len(functions)] for test in kept
    }
    files_of = {
        test: sorted({a for a, _ in observed[test] if a in ws.files} | {test.split("::", 1)[0]})
        for test in kept
    }
    hashes = file_hashes(ws, {a for files in files_of.values() for a in files})
    records = []
    for node_id, outcome in kept.items():
        files = {a: hashes.get(a) for a in files_of[node_id]}
        records.append(
            {
                "id": stable_id("ev", AUTHORITY, node_id, outcome["outcome"], sorted(files.items())),
                "about": f"{node_id} {outcome['outcome']}",
                "test": node_id,
                "authority": AUTHORITY,
                "status": outcome["outcome"],
                "when": outcome["when"],
                "duration_s": outcome["duration"],
                "message": outcome["message"],
                "reached": sorted({s for a, q in observed[node_id] if (s := _symbol(ws, a, q))}),
                "files": files,
                "at": now,
                "version": ws.version,
            }
        )
    records.sort(key=_order)
    return records, ignored


def _delta_files(ws: Workspace, delta: dict[str, Any]) -> dict[str, str | None]:
    """The hashes of the delta's files as the tests ran on them (review compares them with the
    projected ones to know whether a run tested the applied change)."""
    return file_hashes(ws, set(delta["files"]))


