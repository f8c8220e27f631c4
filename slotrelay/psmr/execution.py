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
the hashes the tests ran on.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from slotrelay import sandbox
from slotrelay.psmr import delta as deltas
from slotrelay.psmr.build import NotSource, Unanalysable, read_artifact
from slotrelay.psmr.errors import CapabilityDenied, ExecutionFailed, InvalidQuery, ObjectNotFound
from slotrelay.psmr.grants import Grants
from slotrelay.psmr.graph import sid, stable_id
from slotrelay.psmr.observations import AUTHORITY, RUNTIME_KIND
from slotrelay.psmr.queries import Answer
from slotrelay.psmr.store import Store, Workspace

DEFAULT_TIMEOUT_S = 120

# Runs inside the sandbox as __main__; the runner calls main(inputs) and returns its value as JSON.
PYTEST_PROGRAM = """
import os
import sys

sys.dont_write_bytecode = True
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"


def main(inputs):
    root = inputs["root"]
    sys.path[:0] = inputs["paths"]
    sys.path.append(inputs["site"])
    os.chdir(root)
    import pytest

    prefix = root.rstrip(os.sep) + os.sep
    observed = {}
    outcomes = {}
    current = []

    def profile(frame, event, arg):
        if event == "call" and current:
            code = frame.f_code
            if code.co_filename.startswith(prefix):
                observed[current[0]].add((code.co_filename[len(prefix):], code.co_qualname))

    class Observe:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            current.append(item.nodeid)
            observed.setdefault(item.nodeid, set())
            sys.setprofile(profile)
            try:
                yield
            finally:
                sys.setprofile(None)
                current.clear()

        def pytest_runtest_logreport(self, report):
            if report.when == "call" or report.outcome != "passed":
                previous = outcomes.get(report.nodeid, {}).get("outcome")
                if previous in (None, "passed"):
                    outcomes[report.nodeid] = {
                        "outcome": report.outcome, "when": report.when, "duration": round(report.duration, 4),
                        "message": str(report.longrepr)[-2000:] if report.failed else None,
                    }

    args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", root, *inputs["node_ids"]]
    code = pytest.main(args, plugins=[Observe()])
    # A function is named once and tests refer to it by index: a suite of hundreds of tests reaching
    # the same functions would otherwise repeat the same names past the result's size limit.
    functions = sorted(set().union(*observed.values()))
    index = {f: i for i, f in enumerate(functions)}
    return {
        "exit_code": int(code),
        "outcomes": outcomes,
        "functions": functions,
        "observed": {k: sorted(index[f] for f in v) for k, v in observed.items()},
    }
"""


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


def _hash(root: Path, artifact: str) -> str | None:
    """The sha256 of a file of the tree, read as the build reads it; None when it cannot be read (a
    file outside the root, a FIFO): such a record never matches the file's current hash."""
    try:
        return hashlib.sha256(read_artifact(root, artifact)).hexdigest()
    except (NotSource, Unanalysable):
        return None


def _symbol(ws: Workspace, artifact: str, qualname: str) -> str | None:
    entry = ws.files.get(artifact)
    if entry is None:
        return None
    module = entry["module"]
    node = sid(module if qualname == "<module>" else f"{module}.{qualname}")
    return node if node in ws.graph else None


def run_tests(ws: Workspace, request: dict[str, Any], store: Store, grants: Grants) -> Answer:
    """execution.run_tests: run the tests in the sandbox and record their outcomes as runtime evidence."""
    grants.require_execution("execution.run_tests")
    node_ids, delta = _node_ids(ws, request, store)
    root = Path(ws.source_root).resolve()
    site = _pytest_site()
    paths = sorted({str(root), str(root.parent)})
    limits = sandbox.SandboxLimits(
        timeout_ms=int(request.get("timeout_s", DEFAULT_TIMEOUT_S) * 1000),
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
    functions = [tuple(f) for f in result.result["functions"]]
    records = []
    hashes: dict[str, str | None] = {}
    for node_id, outcome in sorted(result.result["outcomes"].items()):
        observed = [functions[i] for i in result.result["observed"].get(node_id, [])]
        reached = sorted({s for artifact, q in observed if (s := _symbol(ws, artifact, q))})
        files = sorted({artifact for artifact, _ in observed if artifact in ws.files})
        for artifact in files + [node_id.split("::", 1)[0]]:
            if artifact not in hashes:
                hashes[artifact] = _hash(root, artifact)
        records.append(
            {
                "id": stable_id("ev", AUTHORITY, node_id, sorted(hashes.items())),
                "about": f"{node_id} {outcome['outcome']}",
                "test": node_id,
                "authority": AUTHORITY,
                "status": outcome["outcome"],
                "duration_s": outcome["duration"],
                "message": outcome["message"],
                "reached": reached,
                "files": {a: hashes[a] for a in files + [node_id.split("::", 1)[0]]},
                "at": deltas.now(),
            }
        )
    stored = store.get_json(RUNTIME_KIND, ws.workspace_id) or {}
    stored.update({r["test"]: r for r in records})
    store.put_json(RUNTIME_KIND, ws.workspace_id, stored)
    passed = result.result["exit_code"] == 0
    summary = {
        "exit_code": result.result["exit_code"],
        "passed": passed,
        "counts": {o: sum(1 for r in records if r["status"] == o) for o in ("passed", "failed", "skipped")},
        "backend": result.backend,
        "duration_ms": result.duration_ms,
    }
    if delta is not None:
        delta["runs"].append({"at": deltas.now(), "tests": node_ids, **summary})
        deltas.save(store, ws, delta)
    return Answer(
        data={**summary, "delta_id": delta["delta_id"] if delta else None, "tests": node_ids},
        sections=[("results", records)],
        evidence_refs=[r["id"] for r in records],
    )
