"""A module logs under its own name, unless the name is a contract a handler is configured on."""

from __future__ import annotations

import importlib
import logging
import pkgutil

import pytest

PACKAGES = ("slotrelay", "flows", "tasks", "deployments", "blocks", "psmr_mcp", "psmr_view")
# `watch` and `up` put a console handler on the "slotrelay" logger (slotrelay.commands.server): what
# the Prefect shell says while they serve is shown there only under that name.
CONSOLE_NAMES = {
    "deployments.pool": "slotrelay.pool",
    "deployments.serve": "slotrelay.serve",
    "deployments.warm": "slotrelay.warm",
}


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        names.append(package)
        names += [m.name for m in pkgutil.walk_packages(root.__path__, f"{package}.")]
    return names


@pytest.mark.parametrize("module", _modules())
def test_a_module_logger_is_named_after_its_module(module: str) -> None:
    logger = getattr(importlib.import_module(module), "logger", None)
    if isinstance(logger, logging.Logger):
        assert logger.name == CONSOLE_NAMES.get(module, module)
