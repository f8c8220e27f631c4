"""The public names of the core's packages are pinned, as httpx pins its own (tests/test_exported_members.py).

A name added to or dropped from a package's `__all__` fails here until this list says so too: the change
is then a decision, visible in review, not an accident of an import.
"""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "slotrelay.chain": [
        "EXECUTORS",
        "Chain",
        "ChainError",
        "ChainValidationError",
        "ErrorType",
        "ExecutionContext",
        "Node",
        "NodeError",
        "NodeOutcome",
        "NodeOutput",
        "NodeState",
        "Problem",
        "Route",
        "RouteDecision",
        "evaluate_routes",
        "input_slot_document",
        "input_slot_path",
        "load_chain",
        "output_slot_path",
        "route_finished",
        "validate_document",
    ],
    "slotrelay.pen": [
        "AuditReport",
        "ModelSettings",
        "PenAction",
        "PenError",
        "PenOutcome",
        "PenOutput",
        "PenRequest",
        "ReviewOutcome",
        "Verdict",
        "decide",
        "parse_request",
        "review",
        "verify_audit",
        "write",
    ],
    "slotrelay.sandbox": [
        "BACKENDS",
        "LANGUAGES",
        "DaemonEndpoint",
        "ExecutionResult",
        "FsAllowPaths",
        "NetworkAllow",
        "SandboxError",
        "SandboxImageError",
        "SandboxLimits",
        "SandboxRequestError",
        "SandboxSettings",
        "SandboxUnavailable",
        "Truncated",
        "Violation",
        "doctor",
        "get_backend",
        "run",
    ],
    "slotrelay.psmr": ["OPERATIONS", "Grants", "PsmrError", "build_workspace", "call", "list_workspaces"],
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_public_names_are_the_pinned_ones_and_each_imports(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__ == PUBLIC[package]
    # `from package import *` reads each name of `__all__` this way.
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not define: {missing}"


def test_the_pen_lists_the_names_its_api_defines() -> None:
    # The pen spells its names out so that listing them does not load it; they must stay its api's.
    from slotrelay.pen import api

    assert api.__all__ == PUBLIC["slotrelay.pen"]
