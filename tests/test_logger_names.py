"""A module logs under its own name, unless the name is a contract a handler is configured on."""

from __future__ import annotations

import importlib
import logging
import pkgutil
import signal
import sys

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


def _imported(module: str) -> object:
    """The module, imported with this process's SIGINT handler kept: deployments.fork_server_start, the
    warm processes' fork server's first module, makes Ctrl-C a no-op as it is imported, and pytest would
    then ignore Ctrl-C for the rest of its session."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return importlib.import_module(module)
    finally:
        signal.signal(signal.SIGINT, handler)


@pytest.mark.parametrize("module", _modules())
def test_a_module_logger_is_named_after_its_module(module: str) -> None:
    logger = getattr(_imported(module), "logger", None)
    if isinstance(logger, logging.Logger):
        assert logger.name == CONSOLE_NAMES.get(module, module)


def test_importing_the_fork_servers_first_module_leaves_this_process_its_ctrl_c() -> None:
    """deployments.fork_server_start makes SIGINT a no-op when imported, for the fork server alone: imported
    here it must not take Ctrl-C from pytest (and from whatever this worker runs after it)."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    sys.modules.pop("deployments.fork_server_start", None)
    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        _imported("deployments.fork_server_start")
        assert signal.getsignal(signal.SIGINT) is interrupt
    finally:
        signal.signal(signal.SIGINT, previous)
