"""A remote deploy's SSH client, loaded while the run starts instead of inside the deploy task.

asyncssh, with the cryptography it loads and the shared libraries it probes for, takes 0.1 s to
import in a quiet small process and 0.5 s or more inside a loaded run process: more than a whole
deploy of 50 pages. Imported by the deploy task itself it sits on the run's path. `preload` starts that
import in a background thread when a chain about to run has a deploy node whose target is a remote
(its `<ssh>_HOST` set), so it overlaps with the run's start (Prefect's import, the API calls and the
other nodes); a chain without one loads nothing, and loading a chain or a flow module never does.

The deploy imports the same module when it runs: if the preload has not finished by then, Python's
import lock makes the deploy wait for it; it is never imported twice. A preload that fails says
nothing: the deploy's own import reports the problem when the node runs.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Mapping

from slotrelay.chain.models import Chain, DeployExecutor

REMOTE_SUPPORT = "slotrelay.chain.executors.deploy.ssh"
_started = threading.Event()


def needs_remote(chain: Chain, env: Mapping[str, str]) -> bool:
    """Whether one of the chain's deploy nodes has a target that is a remote under `env`."""
    return any(
        target.ssh and env.get(f"{target.ssh}_HOST", "").strip()
        for node in chain.nodes if isinstance(node.executor, DeployExecutor)
        for target in node.executor.target_specs
    )


def _load() -> None:
    try:
        importlib.import_module(REMOTE_SUPPORT)
    except ImportError:
        return


def preload(chain: Chain) -> threading.Thread | None:
    """Start importing the SSH client in the background if the chain deploys to a remote.

    Parameters:
        chain: the chain about to run (its `.env` already loaded into the environment, as preflight does).

    Returns:
        The loading thread, or None when there is nothing to load (no remote target, or already loaded
        or loading in this process).
    """
    if REMOTE_SUPPORT in sys.modules or _started.is_set() or not needs_remote(chain, os.environ):
        return None
    _started.set()
    thread = threading.Thread(target=_load, name="slotrelay-deploy-preload", daemon=True)
    thread.start()
    return thread
