"""The child side of a warm process (deployments/warm.py): import first, then run one flow run handed over.

A warm process is forked, ahead of need, from a fork server that has imported Prefect's flow engine and
the served flow once (`PRELOAD`; multiprocessing's `forkserver`): a warm process then costs a fork and
its own warm-up, not a Python start and Prefect's import (1.4 CPU-s on this machine). It applies the
environment Prefect's runner gives its child (the pool computes it once: the settings in force, the
watcher's environment, and Prefect's child flags) and builds Prefect's settings from it again, as the
fork server imported Prefect under the watcher's own environment (a `watch` that found its folder's
server holds its API address in its settings, not in its environment). It then opens an API client,
says `ready` on its pipe, and blocks until the pool hands it a flow run. It then does what the child of
Prefect's `run_flow_in_subprocess` does (Prefect 3.9.1, `prefect.flow_engine`): take the run's one-shot
control-channel variables and run the existing flow run in-process under `handle_engine_signals`. It
runs that one flow run and exits, so its exit code means what a runner's child's exit code means.

Where this differs from Prefect's child, and why it is the same run:
- the settings are not read again at hand-off: the environment they come from was set when the
  process started and the pool's does not change;
- no serialized context is passed: the runner's serializes only its settings (it runs no flow), which
  the environment already carries, and hydrating it would build the settings and an unused API client
  again (~0.1 s);
- the flow run uses the API client opened at warm-up (Prefect's `SyncClientContext`, which a run reuses
  when one is open, as a subflow does): its connection is open and its API version check done.

Why one run per process: Prefect keeps a flow run's control session (the channel through which the
runner says "cancel" before it sends SIGTERM) in module globals that it configures once per process
(`prefect_compat.configure_control_listener`); a second run in the same process would have
no working cancellation channel.

A warm process takes no Ctrl-C (SIGINT) of its own: it shares the process group of the `watch` that
started it, which receives SIGINT from a terminal or from `slotrelay up` stopping it, and its pool stops
it (an idle one reads end-of-file on its pipe, a running one is cancelled through Prefect's
cancellation, control channel then SIGTERM). Interrupted instead, each idle one died with a
`KeyboardInterrupt` traceback on the terminal of a clean Ctrl-C.

The module imports nothing heavy at its top: the fork server imports `PRELOAD`, and a process started
without it (a fresh interpreter) pays the import inside `wait_and_run`, before `ready`.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import FrameType
from typing import TYPE_CHECKING, Any

from deployments import prefect_compat

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun

READY = "ready"


@dataclass(frozen=True)
class HandOff:
    """What the pool sends a warm process: the flow run and the variables Prefect's runner sets for this run.

    Attributes:
        flow_run: the flow run to execute (already claimed by the pool: Pending, then Submitting).
        control_env: the control channel's one-shot variables (port and token).
        run_env: the run's own variables (its deployment's name).
    """

    flow_run: FlowRun
    control_env: dict[str, str]
    run_env: dict[str, str]


# What a warm process imports before `ready`, imported once by the fork server (with the served flow's
# module): Prefect's flow engine and what a run would import on its hot path otherwise (a deployment
# run's suspension observer, the task runner's first submit).
PRELOAD = ("prefect.engine", "prefect.flow_engine", "prefect.task_engine",
           prefect_compat.RUN_OBSERVERS_MODULE, "anyio._backends._asyncio", "slotrelay.chain.schema")


def left_to_the_pool(signum: int, frame: FrameType | None) -> None:
    """SIGINT: nothing here; the pool stops this process (module docstring).

    A handler rather than SIG_IGN: an ignored signal stays ignored in the programs a node's executor
    starts, a handled one is reset to its default there.
    """


def load_entrypoint(entrypoint: str) -> Any:
    """The object `module.path:attribute` names (the served flow)."""
    module_name, _, attribute = entrypoint.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def wait_and_run(
    connection: Connection, entrypoint: str, env: dict[str, str], remove_env: list[str], chains: list[str]
) -> None:
    """Apply the run environment, import the flow engine and the flow, say ready, then run the one flow run
    handed over (if any).

    Parameters:
        connection: this process's end of the pool's pipe.
        entrypoint: `module:flow` of the flow the pool serves.
        env: the environment of Prefect's flow-run child, applied before Prefect is imported.
        remove_env: variables to drop from the environment first.
        chains: the chain files the pool's runs may load, checked ahead (`slotrelay.chain.schema.warm_up`).
    """
    signal.signal(signal.SIGINT, left_to_the_pool)
    for key in remove_env:
        os.environ.pop(key, None)
    os.environ.update(env)
    for module in PRELOAD:
        importlib.import_module(module)
    from prefect.context import SyncClientContext, refresh_global_settings_context
    from prefect.engine import handle_engine_signals
    from prefect.flow_engine import run_flow

    from slotrelay.chain.schema import warm_up

    refresh_global_settings_context()
    flow = load_entrypoint(entrypoint)
    warm_up(chains)
    with SyncClientContext.get_or_create():
        connection.send(READY)
        try:
            hand_off: HandOff = connection.recv()
        except EOFError:
            return  # the pool closed: nothing to run
        connection.close()
        # As in Prefect's child: the control variables are consumed before anything else reads them.
        os.environ.update(hand_off.control_env)
        prefect_compat.configure_control_listener()
        os.environ.update(hand_off.run_env)
        with handle_engine_signals(hand_off.flow_run.id):
            outcome = run_flow(flow, flow_run=hand_off.flow_run)
            if asyncio.iscoroutine(outcome):
                asyncio.run(outcome)
