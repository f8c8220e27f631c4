"""The child side of a warm process (deployments/warm.py): import first, then run one flow run handed over.

A warm process is started ahead of need. It imports Prefect's flow engine and the served flow, says
`ready` on its pipe, and blocks until the pool hands it a flow run. It then does what the child of
Prefect's `run_flow_in_subprocess` does (Prefect 3.9.1, `prefect.flow_engine`): take the one-shot
control-channel variables, apply the run's environment, open a settings context from it, and run the
existing flow run in-process under `handle_engine_signals`. It runs that one flow run and exits, so
its exit code means what a runner's child's exit code means.

Why one run per process: Prefect keeps a flow run's control session (the channel through which the
runner says "cancel" before it sends SIGTERM) in module globals that it configures once per process
(`prefect._internal.control_listener.configure_from_env`); a second run in the same process would have
no working cancellation channel.

The module imports nothing heavy at its top: `multiprocessing` imports it in the fresh interpreter to
find `wait_and_run`, and the import cost belongs inside it, before `ready`.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun

READY = "ready"


@dataclass(frozen=True)
class HandOff:
    """What the pool sends a warm process: the flow run and the environment Prefect's runner gives its child.

    Attributes:
        flow_run: the flow run to execute (already claimed by the pool: Pending, then Submitting).
        startup_env: the control channel's one-shot variables (port and token).
        env: the run's environment, applied before the settings are read.
        remove_env: variables to drop from the environment first.
        context: the parent's serialized Prefect context (`prefect.context.serialize_context`).
    """

    flow_run: FlowRun
    startup_env: dict[str, str]
    env: dict[str, str]
    remove_env: frozenset[str] = field(default_factory=frozenset)
    context: dict[str, Any] = field(default_factory=dict)


def load_entrypoint(entrypoint: str) -> Any:
    """The object `module.path:attribute` names (the served flow)."""
    module_name, _, attribute = entrypoint.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def _warm_up() -> None:
    """Do now what a flow run's start would otherwise do first in this process (measured: ~0.1 s).

    A client's API version check runs once per process (Prefect caches it), and a deployment's flow run
    starts Prefect's suspension observer on its own event loop, whose modules are imported on first use.
    """
    importlib.import_module("prefect._internal.observers")
    importlib.import_module("anyio._backends._asyncio")
    from prefect.context import SyncClientContext

    with SyncClientContext.get_or_create():
        pass


def _settings_env() -> dict[str, str]:
    """The environment variables Prefect's settings are read from (`PREFECT__…` ones are not settings)."""
    return {k: v for k, v in os.environ.items() if k.startswith("PREFECT_") and not k.startswith("PREFECT__")}


def wait_and_run(connection: Connection, entrypoint: str) -> None:
    """Import the flow engine and the flow, say ready, then run the one flow run handed over (if any).

    Parameters:
        connection: this process's end of the pool's pipe.
        entrypoint: `module:flow` of the flow the pool serves.
    """
    from prefect._internal.control_listener import configure_from_env
    from prefect.context import SettingsContext, get_settings_context
    from prefect.engine import handle_engine_signals
    from prefect.flow_engine import run_flow
    from prefect.settings import Settings

    flow = load_entrypoint(entrypoint)
    _warm_up()
    settings_read_from = _settings_env()
    connection.send(READY)
    try:
        hand_off: HandOff = connection.recv()
    except EOFError:
        return  # the pool closed: nothing to run
    connection.close()
    # The order of Prefect's own child: the control variables are consumed before anything else reads
    # the environment, then the run's environment is applied and the settings are read from it.
    os.environ.update(hand_off.startup_env)
    configure_from_env()
    for key in hand_off.remove_env:
        os.environ.pop(key, None)
    os.environ.update(hand_off.env)
    # Prefect's child reads its settings again from the run's environment (~0.3 s of pydantic here);
    # the settings this process read at start are those when no PREFECT_ setting changed since.
    settings: AbstractContextManager[object] = nullcontext()
    if _settings_env() != settings_read_from:
        settings = SettingsContext(profile=get_settings_context().profile, settings=Settings())
    with settings, handle_engine_signals(hand_off.flow_run.id):
        outcome = run_flow(flow, flow_run=hand_off.flow_run, context=hand_off.context)
        if asyncio.iscoroutine(outcome):
            asyncio.run(outcome)
