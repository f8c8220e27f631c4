"""`slotrelay up` as its tests run it: started from a folder with its output in a log, waited on (its log
in the failure when it exits first), stopped as Ctrl-C stops it, and a Prefect home for it whose
database is already migrated."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.processes import wait_while_running


def start_up(args: list[str], *, cwd: Path, log: Path) -> subprocess.Popen:
    """`slotrelay up ARGS` from `cwd`, with no PREFECT_API_URL, its output (both streams) in `log`."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    with log.open("w") as handle:
        return subprocess.Popen([sys.executable, "-m", "slotrelay.cli", "up", *args], cwd=cwd,
                                env={**env, "COLUMNS": "250"}, stdout=handle, stderr=subprocess.STDOUT)


def wait_for_up(condition, timeout: float, what: str, process: subprocess.Popen, log: Path) -> None:
    """Wait until `condition()` holds; fail, showing `log`, if `slotrelay up` exits or `timeout` passes."""
    wait_while_running(process, condition, timeout=timeout, what=what, log=log, interval=0.25)


def interrupt_up(process: subprocess.Popen) -> int:
    """Stop `slotrelay up` as Ctrl-C does and return its exit code (killed, and the test errs, after 180
    s)."""
    process.send_signal(signal.SIGINT)
    try:
        return process.wait(timeout=180)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


def migrated_home(folder: Path) -> Path:
    """A PREFECT_HOME holding a copy of the session server's database, schema already migrated, and of
    its encryption key (`.env`): a server started on it reads the blocks the session server saved.

    Migrating a fresh SQLite database is about half of a server start (measured on an idle machine:
    8.5 s to ready from an empty home, 4.0 s from a migrated one), all of it CPU, which a loaded CI
    machine stretches several times. The copy goes through SQLite's backup API, consistent while the server
    writes.
    """
    from deployments.server import ENV_FILE_NAME

    folder.mkdir(parents=True)
    shutil.copyfile(Path(os.environ["PREFECT_HOME"]) / ENV_FILE_NAME, folder / ENV_FILE_NAME)
    source = sqlite3.connect(Path(os.environ["PREFECT_HOME"]) / "prefect.db")
    target = sqlite3.connect(folder / "prefect.db")
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    return folder
