"""Shared test set-up.

Tests that need a service carry a marker (`docker`, `prefect_server`, `bwrap`, `node`, `browser`, `ssh`,
`postgres`); CI starts every one of those services, so none of them is skipped there: with CI set, a missing
service fails the test instead of skipping it.

Every session has its own slotrelay state folder (`state_home`: `SLOTRELAY_STATE_HOME`, exported so the
processes tests start inherit it): the PSMR store, audit logs and the sealing key of a test run never
mix with the user's, or with another session's.

Every test must also end the threads it starts (`no_thread_leaks`, as watchdog's suite does): a thread
left running keeps working during later tests, on state they share (files, ports, the global `random`
that hypothesis checks is left alone while it draws an example).

The fixtures of more than one folder live here too (the stub code model, the pen's sandbox backend, a
local HTTP host). A conftest is pytest's, never a library: what tests share besides fixtures is in
tests/support.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.ports import free_port
from harness.process_groups import stop_process_group
from harness.stub_model import StubModel
from slotrelay import fsio
from tests.support.ordering import heaviest_files_first
from tests.support.services import require_service
from tests.support.waiting import wait_until

# Real packages copied unmodified (tests/vendor/README.md): the change-loop tests run their suites in the
# sandbox, on a copy; they are not this project's tests.
collect_ignore = ["vendor"]
# How long a test's threads may take to end once it returns (a server's shutdown, a worker's last task).
THREAD_GRACE_S = 5.0
# Threads a library starts once per process and keeps for the process's life, shared by every caller
# (not per test): Prefect's two event loops (for its async calls and for run_coro_as_sync) and its
# batching workers for run logs and events, which the first flow run or API log starts.
PROCESS_WIDE_THREADS = frozenset(
    {"GlobalEventLoopThread", "RunSyncEventLoopThread", "APILogWorkerThread", "EventsWorkerThread"}
)
# The same, known by what they run: jedi (PSMR's slow pass) keeps one subprocess per Python environment
# for the process (`get_cached_default_environment`, cached ten minutes, so compiled modules are
# inspected outside this process), and this thread reads its stderr until jedi drops it.
PROCESS_WIDE_TARGETS = frozenset({"jedi.inference.compiled.subprocess._enqueue_output"})
# AnyIO's pool threads (`to_thread.run_sync`) idle ten seconds before they end, and end with their event
# loop's root task: one left over belongs to a loop still running, and a test's own loop left running
# would be reported itself (its thread), so a pool thread is never the leak.
ANYIO_WORKER = "anyio._backends._asyncio.WorkerThread"


@pytest.fixture(scope="session", autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This session's slotrelay state folder (the store, audit logs, sealing key), in the environment
    before any test runs so that every process a test starts inherits it; `PSMR_STORE` is cleared so a
    developer's own store is never used."""
    folder = tmp_path_factory.mktemp("slotrelay-state")
    saved = {key: os.environ.pop(key, None) for key in (fsio.STATE_HOME_ENV, "PSMR_STORE")}
    os.environ[fsio.STATE_HOME_ENV] = str(folder)
    yield folder
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _target(thread: threading.Thread) -> str | None:
    target = getattr(thread, "_target", None)  # private, but the one record of what a thread runs
    return f"{target.__module__}.{target.__qualname__}" if target is not None else None


def _process_wide(thread: threading.Thread) -> bool:
    if thread.name in PROCESS_WIDE_THREADS or _target(thread) in PROCESS_WIDE_TARGETS:
        return True
    if f"{type(thread).__module__}.{type(thread).__qualname__}" == ANYIO_WORKER:
        return True
    # The sandbox's backends are opened once per process and closed at exit (`close_backends`); the
    # docker backend's pool worker lives as long as its backend. A pool of a backend a test made itself
    # is not in `_opened` and must be closed by that test.
    backends = sys.modules.get("slotrelay.sandbox.backends")
    opened = backends._opened.values() if backends is not None else ()
    return any(getattr(getattr(backend, "pool", None), "_worker", None) is thread for backend in opened)


def _describe(thread: threading.Thread) -> str:
    where = _target(thread) or type(thread).__qualname__
    return f"{thread.name} ({where}, {'daemon' if thread.daemon else 'non-daemon'})"


@pytest.fixture(autouse=True)
def no_thread_leaks() -> Iterator[None]:
    """Fail a test that leaves a thread it started running (daemon or not) once it and its fixtures end.

    Threads of longer-lived fixtures (a module's or the session's server) start before this fixture's
    snapshot, and the process-wide ones above belong to no test.
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + THREAD_GRACE_S
    started = [t for t in threading.enumerate() if t not in before and not _process_wide(t)]
    for thread in started:
        if not isinstance(thread, threading._DummyThread):
            thread.join(timeout=max(deadline - time.monotonic(), 0))
    leaked = [thread for thread in started if thread.is_alive()]
    if leaked:
        pytest.fail(f"the test left {len(leaked)} thread(s) running: {', '.join(map(_describe, leaked))}")


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real Prefect API server (SQLite, temporary PREFECT_HOME) for the whole test session.

    Yields the API URL; the UI is served at the same address without `/api` (v1 at `/`, v2 at `/v2`).
    In-process Prefect calls see it through `temporary_settings`; tests that
    start subprocesses pass `PREFECT_API_URL` (also exported to `os.environ` here).
    Like a server slotrelay starts, it encrypts Block documents with the key its home's `.env` holds, which
    `migrated_home` copies with the database.
    """
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    from deployments.server import ENCRYPTION_KEY_NAME, api_answers, encryption_key

    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        ENCRYPTION_KEY_NAME: encryption_key(home),
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
        wait_until(lambda: api_answers(url) or server.poll() is not None, timeout=90,
                   what="the session's Prefect server to answer", interval=0.25,
                   details=lambda: f"see {home / 'server.log'}")
        if server.poll() is not None:
            pytest.fail(f"the Prefect server did not start; see {home / 'server.log'}")
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


# Fixtures of two folders' tests: the stub code model and the pen's sandbox backend (the pen's tests and
# tests/ui's pen decision form), and an HTTP host on 127.0.0.1 (the sandbox's network tests and the pen's
# allow-list test).
@pytest.fixture(scope="session")
def stub_server() -> Iterator[StubModel]:
    with StubModel() as stub:
        yield stub


@pytest.fixture
def stub(stub_server: StubModel) -> Iterator[StubModel]:
    stub_server.reset()
    yield stub_server
    stub_server.reset()


@pytest.fixture(scope="session")
def sandbox_backend() -> str:
    """The sandbox backend the pen's end-to-end tests run on: the real Docker one.

    `SLOTRELAY_PEN_TEST_BACKEND=bwrap` runs them on bwrap instead on a machine without Docker.
    """
    from slotrelay.sandbox import SandboxUnavailable, get_backend

    name = os.environ.get("SLOTRELAY_PEN_TEST_BACKEND", "docker")
    try:
        get_backend(name, lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the {name} sandbox cannot run python here: {missing.message}")
    return name



class HostLog:
    """The requests a `LocalHost` received (paths), so a test can tell what got out."""

    def __init__(self) -> None:
        self.paths: list[str] = []


@pytest.fixture(scope="session")
def local_host() -> Iterator[tuple[int, HostLog]]:
    """An HTTP server on 127.0.0.1 answering `hello from <path>`; yields its port and its request log."""
    log = HostLog()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            log.paths.append(self.path)
            body = f"hello from {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], log
    server.shutdown()
    server.server_close()



def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the processes the tests start, however the suite was started.

    The tests stop what they start with SIGINT, as a terminal's Ctrl-C does. A shell without job control
    starts a background command (`.ci/run &`) with SIGINT ignored, and an ignored signal stays ignored in
    every process started from it: `watch`, `psmr build --watch` and serve_site.py then never saw their
    stop (three tests waited out their deadlines, one failed).
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the files heaviest first (`heaviest_files_first`), and let hypothesis tests share the global
    `random` with Prefect's process-wide threads.

    hypothesis warns when the global `random` state moves while it draws an example, taking it for a
    strategy that calls `random`. In this process the state also moves under Prefect's own threads: the
    client's retry jitter, the log and event workers and the services loops draw from the global
    `random` (prefect.utilities.math), and they live for the whole session once a test has run a flow
    in-process. The warning then fires at random, and the replay that does not see it reports Flaky.
    """
    heaviest_files_first(items)
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(
                pytest.mark.filterwarnings(
                    "ignore:Do not use the `random` module inside strategies"
                    ":hypothesis.errors.HypothesisDeprecationWarning"
                )
            )
