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
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.ports import free_port
from harness.process_groups import stop_process_group
from slotrelay import fsio
from tests.support.ordering import heaviest_files_first

# Real packages copied unmodified (tests/vendor/README.md): the change-loop tests run their suites in the
# sandbox, on a copy; they are not this project's tests.
collect_ignore = ["vendor"]
IN_CI = os.environ.get("CI") == "true"
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


def require_service(available: bool, why: str) -> None:
    """Skip a test whose service is missing on a developer's machine; fail it in CI."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"CI must provide this service: {why}")
    pytest.skip(why)


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


def http_status(url: str) -> int:
    """The HTTP status `url` answers with, or 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return answer.status
    except OSError:
        return 0


def recorded_task_runs(flow_run_ids: list, count: int, timeout: float = 120) -> list:
    """The task runs of these flow runs once the server holds `count` of them, each in a final state.

    The server records task runs from their events, after the flow run has ended and in batches: a
    task run can be on record from its first (Pending) event, still carrying Prefect's default name
    (`node-4e1`) before the event that renames it to its node_id is recorded. Reading names only
    once every run is final reads the names a person sees in the UI.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    in_runs = FlowRunFilter(id=FlowRunFilterId(any_=[str(i) for i in flow_run_ids]))
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(flow_run_filter=in_runs, limit=max(200, 2 * count))
            if len(runs) >= count and all(r.state is not None and r.state.is_final() for r in runs):
                return runs
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout} s waiting for {count} final task runs; the server "
                            f"has {sorted((r.name, r.state_type) for r in runs)}")
            time.sleep(0.25)


def latest_artifact(key: str) -> str | None:
    """The data of the newest artifact of this key on the server, or None.

    A pen's artifact key comes from its pen id (`pen-execution-mpp-p1-20261203-001`), which restarts at
    001 in each test's own pen root: a test that shares the server with an earlier one of the same
    persona finds that one's artifact under the same key, so the newest is the test's own.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
                                      sort=ArtifactSort.CREATED_DESC, limit=1)
    return found[0].data if found else None


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

    from deployments.server import ENCRYPTION_KEY_NAME, encryption_key

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
