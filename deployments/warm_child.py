"""The child side of a warm process (deployments/warm.py): import first, then run one flow run handed over.

A warm process is started ahead of need with the environment Prefect's runner gives its child (the
pool computes it once: the settings in force, the watcher's environment, and Prefect's child flags),
applied before Prefect is imported, so Prefect reads its settings from it once, off the hot path. It
imports Prefect's flow engine and the served flow, opens an API client, says `ready` on its pipe, and
blocks until the pool hands it a flow run. It then does what the child of Prefect's
`run_flow_in_subprocess` does (Prefect 3.9.1, `prefect.flow_engine`): take the run's one-shot
control-channel variables and run the existing flow run in-process under `handle_engine_signals`. It
runs that one flow run and exits, so its exit code means what a runner's child's exit code means.

Where this differs from Prefect's child, and why it is the same run:
- the settings are not read again at hand-off (~0.3 s of pydantic on this machine): the environment
  they come from was set when the process started and the pool's does not change;
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

The module imports nothing heavy at its top: `multiprocessing` imports it in the fresh interpreter to
find `wait_and_run`, and the import cost belongs inside it, before `ready`.
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


def _left_to_the_pool(signum: int, frame: FrameType | None) -> None:
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
    signal.signal(signal.SIGINT, _left_to_the_pool)
    for key in remove_env:
        os.environ.pop(key, None)
    os.environ.update(env)
    from prefect.context import SyncClientContext
    from prefect.engine import handle_engine_signals
    from prefect.flow_engine import run_flow

    from slotrelay.chain.schema import warm_up

    flow = load_entrypoint(entrypoint)
    warm_up(chains)
    # Imported on first use, on the hot path otherwise: by a deployment run's suspension observer, and
    # by the task runner's first submit.
    prefect_compat.import_run_observers()
    importlib.import_module("prefect.task_engine")
    importlib.import_module("anyio._backends._asyncio")
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
