"""Every private Prefect name slotrelay reaches is still where deployments/prefect_compat.py reaches it.

Fails the moment a Prefect release moves, renames or changes the call of one of them, before a user's
warm run or served runner does; and fails when a module other than prefect_compat reaches one.
"""

from __future__ import annotations

import importlib
import inspect
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from deployments import prefect_compat

ROOT = Path(__file__).resolve().parents[1]
# How each callable is called in prefect_compat: the parameters it must accept by name or position.
CALLED_WITH = {
    "FlowRunExecutorContext": [],
    "FlowRunExecutorContext.create_executor": ["self", "flow_run", "starter"],
    "StateProposer.propose_pending": ["self", "flow_run"],
    "ProcessHandle": ["_process"],
    "CancellationManager.cancel_all": ["self"],
    "configure_from_env": [],
    "ScheduledRunPoller._get_scheduled_flow_runs": ["self"],
}
PRIVATE_REACH = re.compile(r"prefect(\.\w+)*\._\w+|\._(scheduled_run_poller|cancellation_manager)\b")


@pytest.mark.parametrize(("module", "path"), prefect_compat.REACHED)
def test_each_private_name_reached_is_still_there(module: str, path: str) -> None:
    found: object = importlib.import_module(module)
    for name in filter(None, path.split(".")):
        assert hasattr(found, name), f"Prefect {version('prefect')} has no {module}.{path} ({name} is gone)"
        found = getattr(found, name)
    if path in CALLED_WITH:
        parameters = list(inspect.signature(found).parameters)  # type: ignore[arg-type]
        assert parameters[: len(CALLED_WITH[path])] == CALLED_WITH[path], (module, path, parameters)


def test_the_poller_and_the_cancellation_manager_are_where_the_runner_and_context_keep_them() -> None:
    from prefect.runner import Runner
    from prefect.runner._flow_run_executor import FlowRunExecutorContext

    assert "self._scheduled_run_poller" in inspect.getsource(Runner)
    assert "self._cancellation_manager" in inspect.getsource(FlowRunExecutorContext)
    assert "self.control_channel" in inspect.getsource(FlowRunExecutorContext)


def test_the_installed_prefect_is_in_the_range_pyproject_pins() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [prefect] = [Requirement(r) for r in pyproject["project"]["dependencies"] if r.startswith("prefect")]
    assert version("prefect") in prefect.specifier
    # The pin allows one minor release: the one this test has checked.
    assert re.fullmatch(r">=3\.\d+(\.\d+)?,<3\.\d+|<3\.\d+,>=3\.\d+(\.\d+)?", str(prefect.specifier))


def test_no_other_module_reaches_a_private_prefect_name() -> None:
    found = []
    for folder in ("slotrelay", "flows", "tasks", "deployments", "blocks", "psmr_mcp", "psmr_view"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "prefect_compat.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if PRIVATE_REACH.search(code) and "prefect_compat" not in code:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "reach Prefect's private names through deployments/prefect_compat.py:\n" + "\n".join(found)
