"""L1 and L2: what must hold before a chain's flow starts, and before `watch` or `up` watches it.

L1 (dependencies): the Python version, the packages the engine and the chain's executors need, the
`.env` (python-dotenv) with every variable the chain lists in `required_env`, and for pen nodes a
sandbox (a Docker daemon that answers, or bwrap). L2 (paths): every
slot folder exists (created if missing), is reached without following a link and is writable, and the
routing ledger and engine log are regular files where they exist. Anything missing stops the start with one
line per problem saying what to install or fix; nothing has run yet.

`prepared_chain` loads, validates and checks a chain once per process: `slotrelay run` does it before
it starts a flow run, and the flow run in the same process takes the same chain instead of doing it
again (a flow run in a process of its own, on a worker or a runner, does it there).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import sys
import threading
from pathlib import Path
from typing import Any

from dotenv import load_dotenv

from slotrelay import fsio
from slotrelay.chain.executors import EXECUTORS
from slotrelay.chain.executors.deploy.preload import preload
from slotrelay.chain.ledger import LEDGER_FILE_NAME
from slotrelay.chain.models import Chain
from slotrelay.chain.schema import load_chain
from slotrelay.chain.slots import walked
from slotrelay.errors import EnvironmentMissing

MIN_PYTHON = (3, 11)
ENGINE_PACKAGES = {
    "prefect": "prefect",
    "watchdog": "watchdog",
    "jsonschema": "jsonschema",
    "dotenv": "python-dotenv",
    "networkx": "networkx",
    "pydantic": "pydantic",
}


def dependency_problems(chain: Chain) -> list[str]:
    """L1: the Python version, packages (engine and the chain's executor kinds) and `.env` variables."""
    problems = []
    if sys.version_info < MIN_PYTHON:
        problems.append(
            f"Python {'.'.join(map(str, MIN_PYTHON))}+ is needed, this is {sys.version.split()[0]}")
    for module, package in ENGINE_PACKAGES.items():
        if importlib.util.find_spec(module) is None:
            problems.append(f"package {package} is not installed: pip install {package}")
    for kind in sorted({node.executor.kind for node in chain.nodes}):
        module = EXECUTORS[kind].partition(":")[0]
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            problems.append(f"executor kind {kind!r} needs module {module}, which is not installed")
    for env_file in (chain.base_dir / ".env", Path.cwd() / ".env"):
        if env_file.is_file():
            load_dotenv(env_file, override=False)
    for name in chain.required_env:
        if not os.environ.get(name):
            problems.append(f"{name} is not set: add it to {chain.base_dir / '.env'} or the environment")
    return problems


def sandbox_problems(chain: Chain) -> list[str]:
    """L1 for pen nodes: their code runs in a sandbox, so a Docker daemon must answer or bwrap exist."""
    if not any(node.executor.kind == "pen" for node in chain.nodes):
        return []
    from slotrelay.sandbox.daemon import docker_client
    from slotrelay.sandbox.errors import SandboxUnavailable

    try:
        docker_client(timeout=5).close()
        return []
    except SandboxUnavailable:
        pass
    if shutil.which("bwrap"):
        return []
    return [("pen nodes run generated code in a sandbox: no Docker daemon answers (start dockerd) "
            "and bwrap is not installed (apt-get install bubblewrap)")]


def slot_folders(chain: Chain) -> list[Path]:
    """Every folder a slot, babel log, alert or log of the chain lives in."""
    folders = {chain.alerts_dir, chain.logs_dir}
    for node in chain.nodes:
        for slot in (node.input_slot, node.output_slot):
            if slot is None:
                continue
            folders.add(chain.resolve(slot.path).parent)
            if slot.babel_path:
                folders.add(chain.resolve(slot.babel_path).parent)
    return sorted(folders)


def engine_files(chain: Chain) -> list[Path]:
    """The files the engine itself keeps beside the slots: the routing ledger and the engine log."""
    return [chain.work_dir / LEDGER_FILE_NAME, chain.logs_dir / "engine.log"]


def path_problems(chain: Chain) -> list[str]:
    """L2: create every slot folder and prove it writable with a real write, each reached through fsio
    (no link followed); and refuse an engine file that is there as a link, a FIFO or a folder."""
    problems = []
    for folder in slot_folders(chain):
        try:
            with fsio.open_dir(fsio.FS_ROOT, walked(folder), create=True) as checked:
                # Created and removed, never synced: the probe proves the folder takes a new file.
                probe = f".slotrelay-probe-{os.getpid()}-{threading.get_ident()}.tmp"
                os.close(checked.open_append(probe))
                checked.unlink(probe)
        except fsio.RefusedPath as refused:
            problems.append(f"slot folder {folder} is refused: {refused.filename} is {refused.strerror}")
        except OSError as denied:
            problems.append(f"slot folder {folder} is not writable: {denied.strerror}")
    for path in engine_files(chain):
        info = _lstat(path)
        if info is not None and not stat.S_ISREG(info.st_mode):
            problems.append(f"{path} is {fsio.kind_of(info.st_mode)}, not a regular file: it is not followed"
                            " or written through")
    return problems


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def preflight(chain: Chain) -> None:
    """Run L1 then L2.

    Raises:
        EnvironmentMissing: every problem found, one line `cannot start: ...` each.
    """
    problems = (dependency_problems(chain) + sandbox_problems(chain)) or path_problems(chain)
    if problems:
        raise EnvironmentMissing("\n".join(f"cannot start: {problem}" for problem in problems))
    preload(chain)


def preflight_chains(chains: list[Chain]) -> None:
    """Run L1 then L2 for every chain `watch` or `up` is to watch, before anything starts.

    Raises:
        EnvironmentMissing: every problem of every chain, one line `cannot start: <chain file>: ...` each.
    """
    lines: list[str] = []
    for chain in chains:
        try:
            preflight(chain)
        except EnvironmentMissing as missing:
            where = chain.source or chain.chain_id
            lines.extend(line.replace("cannot start: ", f"cannot start: {where}: ", 1)
                         for line in missing.message.splitlines())
    if lines:
        raise EnvironmentMissing("\n".join(lines))


_prepared: dict[tuple[Any, ...], Chain] = {}
_prepared_lock = threading.Lock()


def prepared_chain(path: str | Path, **folders: Any) -> Chain:
    """The chain at `path`, loaded, validated and checked (L1, L2) once per process and file version.

    Parameters:
        path: the chain file.
        folders: `load_chain`'s folders (`slots_root`, `alerts_dir`, `logs_dir`).

    Raises:
        ChainError: the file is not a valid chain (exit 2).
        EnvironmentMissing: L1 or L2 does not hold (exit 3).
    """
    resolved = Path(path).resolve()
    try:
        version = os.stat(resolved)
        key: tuple[Any, ...] = (resolved, version.st_mtime_ns, version.st_size, version.st_ino,
                                tuple(sorted((k, str(v)) for k, v in folders.items())))
    except OSError:
        return _checked(load_chain(path, **folders))
    with _prepared_lock:
        if key not in _prepared:
            _prepared[key] = _checked(load_chain(path, **folders))
        return _prepared[key]


def _checked(chain: Chain) -> Chain:
    preflight(chain)
    return chain
