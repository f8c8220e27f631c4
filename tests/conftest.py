"""Shared test set-up.

Tests that need a service carry a marker (`docker`, `prefect_server`, `bwrap`, `node`, `browser`, `ssh`,
`postgres`); CI starts every one of those services, so none of them is skipped there: with CI set, a missing
service fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI") == "true"


def require_service(available: bool, why: str) -> None:
    """Skip a test whose service is missing on a developer's machine; fail it in CI."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"CI must provide this service: {why}")
    pytest.skip(why)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process_group(process: subprocess.Popen, first: signal.Signals, timeout: float) -> None:
    """Send `first` to the process group led by `process`; SIGKILL the group if it is not gone in `timeout`
    s."""
    os.killpg(process.pid, first)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def http_status(url: str) -> int:
    """The HTTP status `url` answers with, or 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return answer.status
    except OSError:
        return 0


def wait_for_up(condition, timeout: float, what: str, process: subprocess.Popen, log: Path) -> None:
    """Wait until `condition()` holds; fail, showing `log`, if `slotrelay up` exits or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(
                f"`slotrelay up` exited with {process.returncode} waiting for {what}:\n{log.read_text()}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}:\n{log.read_text()}")
        time.sleep(0.25)


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
    """A PREFECT_HOME holding a copy of the session server's database, schema already migrated.

    Migrating a fresh SQLite database is about half of a server start (measured on an idle machine:
    8.5 s to ready from an empty home, 4.0 s from a migrated one), all of it CPU, which a loaded CI
    machine stretches several times. The copy goes through SQLite's backup API, consistent while the server
    writes.
    """
    folder.mkdir(parents=True)
    source = sqlite3.connect(Path(os.environ["PREFECT_HOME"]) / "prefect.db")
    target = sqlite3.connect(folder / "prefect.db")
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    return folder


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real Prefect API server (SQLite, temporary PREFECT_HOME) for the whole test session.

    Yields the API URL; the UI is served at the same address without `/api` (v1 at `/`, v2 at `/v2`).
    In-process Prefect calls see it through `temporary_settings`; tests that
    start subprocesses pass `PREFECT_API_URL` (also exported to `os.environ` here).
    """
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
        # The UI is served too; without this its pages would call the API at the default port 4200.
        "PREFECT_UI_API_URL": url,
    }
    env.pop("PREFECT_API_URL", None)
    log = (home / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Prefect server did not start; see {home / 'server.log'}")
            time.sleep(0.25)
        saved = {key: os.environ.get(key) for key in ("PREFECT_API_URL", "PREFECT_HOME")}
        os.environ["PREFECT_API_URL"] = url
        os.environ["PREFECT_HOME"] = str(home)
        with temporary_settings(updates={PREFECT_API_URL: url, PREFECT_HOME: str(home)}):
            yield url
            # Run logs are shipped in the background: send them before the server goes away.
            APILogWorker.drain_all(timeout=5)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    finally:
        stop_process_group(server, signal.SIGTERM, 20)
        log.close()
