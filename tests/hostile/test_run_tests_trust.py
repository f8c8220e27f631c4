"""execution.run_tests trusts only what it asked for (issue 29 item 4): a conftest of the tree under
test reaches up the stack for the runner's outcomes, and writes into whatever report channel it can
find, to add `/etc/hostname::x` and `/dev/zero::x` as passed tests. Neither is reported, recorded or
hashed, and the host never reads /dev/zero (before, it read it until MemoryError)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import Grants, build_workspace, call
from slotrelay.psmr.ops.observations import EVIDENCE_KIND, RUNTIME_KIND
from slotrelay.psmr.workspace.store import Store
from slotrelay.sandbox import SandboxUnavailable, get_backend
from tests.support.psmr_trees import write_tree
from tests.support.services import require_service

FAKES = ("/etc/hostname::x", "/dev/zero::x")
CONFTEST = """
import inspect
import json
import sys

FAKES = ("/etc/hostname::x", "/dev/zero::x")


def pytest_runtest_setup(item):
    # The runner's outcomes, wherever a frame up the stack holds them.
    for info in inspect.stack():
        outcomes = info.frame.f_locals.get("outcomes")
        if isinstance(outcomes, dict):
            for fake in FAKES:
                outcomes[fake] = {"outcome": "passed", "when": "call", "duration": 0.0, "message": None}
    # Any report channel of the process running the tests.
    report = getattr(sys.modules.get("__main__"), "report", None)
    if report is not None:
        for fake in FAKES:
            event = {"kind": "report", "test": fake, "outcome": "passed", "when": "call", "duration": 0}
            print(json.dumps(event), file=report, flush=True)
        observed = [["/etc/hostname", "x"], ["/dev/zero", "y"], ["../../../../../dev/zero", "z"]]
        print(json.dumps({"kind": "observed", "test": FAKES[1], "functions": observed}), file=report)
"""
FILES = {
    "kit/__init__.py": "",
    "kit/calc.py": "def add(a, b):\n    return a + b\n",
    "tests/__init__.py": "",
    "tests/conftest.py": CONFTEST,
    "tests/test_calc.py": "from kit.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}


def _docker() -> None:
    try:
        get_backend("docker", lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the docker sandbox cannot run python here: {missing.message}")


@pytest.mark.docker
def test_a_conftest_cannot_add_tests_or_make_the_host_read_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _docker()
    root = write_tree(tmp_path / "proj", FILES)
    store = tmp_path / "store"
    ws = build_workspace(root, store=store)["workspace_id"]
    site = Path(pytest.__file__).resolve().parent.parent
    monkeypatch.setenv("SLOTRELAY_SANDBOX_ROOTS", f"{root}:{site}")
    ran: dict[str, Any] = call(
        "execution.run_tests",
        {"workspace_id": ws, "tests": ["tests/test_calc.py"]},
        store=store,
        grants=Grants.of(process_execution=True),
    )
    assert ran["status"] == "ok", ran["error"]
    data = ran["data"]
    assert [r["test"] for r in data["results"]] == ["tests/test_calc.py::test_add"]
    assert data["counts"] == {"passed": 1, "failed": 0, "skipped": 0} and data["passed"]
    [record] = data["results"]
    assert set(record["files"]) == {"kit/calc.py", "tests/test_calc.py"}
    assert record["reached"] == ["semantic:kit.calc.add", "semantic:tests.test_calc.test_add"]
    assert any("not asked for" in w for w in ran["warnings"])
    # Nothing of theirs was stored as evidence either.
    the_store = Store.open(store)
    for kind in (RUNTIME_KIND, EVIDENCE_KIND):
        stored = the_store.get_json(kind, ws)
        assert stored and not any(fake in str(stored) for fake in FAKES)
        assert "/etc/hostname" not in str(stored) and "/dev/zero" not in str(stored)
