"""The local Prefect API server slotrelay runs its flows against.

Runs go to a real server, never to Prefect's ephemeral API (measured on Prefect 3.9.1: a temporary
server per process costs ~9 s and loses most task-run records at exit). `require_api` finds the server
a command was given, else PREFECT_API_URL's, else the one holding the current folder's home, when one
answers there; with `start=True` it else starts `prefect server start` in the background on 127.0.0.1
with SQLite under the current folder's PREFECT_HOME (`.slotrelay/prefect`). `start_server(database=...)`
(`slotrelay up --database`) puts the server on PostgreSQL through asyncpg instead; a
PREFECT_API_DATABASE_CONNECTION_URL already in the environment does the same.

One server to a home: a server's home holds its SQLite database, and two servers writing one database
(or serving one set of runs twice) is what the lock prevents. `start_server` takes an exclusive
`flock` on `<home>/server.lock` and hands the locked descriptor to the server process, so the lock is
held exactly as long as that process lives, whoever started it (`slotrelay up`, or `slotrelay run`
leaving it in the background), and is released by the kernel however it ends. The file also says who
holds it (`HomeHolder`), for the refusal's message and for `up` to reuse a server `run` left running.

The server encrypts stored Block documents with PREFECT_SERVER_ENCRYPTION_KEY. The key belongs to the
data it encrypts, so it lives in the server's home, in `<home>/.env` (mode 0600): generated on the home's
first start and reused by every start after it, from whatever folder (`up --home` from two projects reads
the same blocks). A home started before the key moved there takes the one the current folder's `.env`
holds, the folder such a start kept it in.

Contract for callers (`slotrelay run`, `slotrelay up`, `watch`, `decide`, the MCP engine tools):
- `start_server` returns a `ServerHandle`; `handle.stop()` ships this process's queued run logs, then
  ends the server and its process group. It raises `HomeInUse` when another server holds the home.
- `require_api` is the one place a command's Prefect API address is worked out; it returns an `Api`
  that answers and never writes PREFECT_API_URL into `os.environ`. With `start=True` it leaves a
  server it started running, detached, so the next command reuses it; its log is `<home>/server.log`.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from dotenv import dotenv_values, set_key

from slotrelay.errors import EnvironmentMissing

# Relative to the current folder: a user's project keeps its own server home, and `.env` its key.
HOME_FOLDER = Path(".slotrelay") / "prefect"
ENV_FILE_NAME = ".env"
LOCK_NAME = "server.lock"
# What a lock record is read as: one short JSON object.
LOCK_RECORD_LIMIT = 4096
# Hosts of an API address that `require_api` may start a server on (it binds 127.0.0.1).
STARTABLE_HOSTS = ("127.0.0.1", "localhost")
ENCRYPTION_KEY_NAME = "PREFECT_SERVER_ENCRYPTION_KEY"
DATABASE_URL_NAME = "PREFECT_API_DATABASE_CONNECTION_URL"
# Prefect 3 reads the newer name first: a value left there would win over --database.
DATABASE_URL_NAMES = ("PREFECT_SERVER_DATABASE_CONNECTION_URL", DATABASE_URL_NAME)


class ServerStartError(EnvironmentMissing):
    """The Prefect server did not start or did not answer on /api/health in time."""

    code = "PREFECT_SERVER_UNAVAILABLE"


class HomeInUse(EnvironmentMissing):
    """Another Prefect server holds this home (its lock): a second one would share its database."""

    code = "HOME_IN_USE"


def default_home() -> Path:
    """The server home of the current folder: `.slotrelay/prefect` in it."""
    return Path.cwd() / HOME_FOLDER


@dataclass(frozen=True)
class HomeHolder:
    """What `<home>/server.lock` says about the server holding the home.

    Attributes:
        pid: the server process (leader of its process group), once started.
        api_url: its API address.
        started_by: `up` (stopped with that `up`) or `run` (left running in the background).
    """

    pid: int | None
    api_url: str | None
    started_by: str | None

    def refusal(self, home: Path) -> str:
        """Why a second server cannot start on `home`, and what to do instead."""
        if self.started_by == "run":
            who = "started by `slotrelay run` and left running in the background"
            instead = (f"`slotrelay up --port {loopback_port(self.api_url or '') or '?'}` uses it; or stop "
                       f"it (kill -- -{self.pid or 'PID'})")
        else:
            who = "started by `slotrelay up`"
            instead = "stop that `up` (Ctrl-C in its terminal)"
        return (f"{home} is the home of the Prefect server at {self.api_url or '(starting)'} (pid "
                f"{self.pid or '?'}, {who}): a second server would share its database. Use that server "
                f"(export PREFECT_API_URL={self.api_url}), {instead}, or give --home another folder.")


def _read_holder(fd: int) -> HomeHolder:
    """The record of the lock file open at `fd`; what it does not hold (a server starting) is None."""
    try:
        record = json.loads(os.pread(fd, LOCK_RECORD_LIMIT, 0) or b"{}")
    except ValueError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    pid, url, by = record.get("pid"), record.get("api_url"), record.get("started_by")
    return HomeHolder(pid if isinstance(pid, int) else None, url if isinstance(url, str) else None,
                      by if isinstance(by, str) else None)


def _open_lock(home: Path, *, create: bool) -> int:
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    return os.open(home / LOCK_NAME, flags, 0o600)


def home_holder(home: Path) -> HomeHolder | None:
    """The server holding `home`, or None when no live process holds its lock."""
    try:
        fd = _open_lock(home, create=False)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        return None
    finally:
        os.close(fd)  # a shared lock taken here goes with it


def _lock_home(home: Path) -> int:
    """Take `home`'s lock for a new server: the locked descriptor, to hand to the server process.

    Raises:
        HomeInUse: another process holds it.
    """
    fd = _open_lock(home, create=True)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(fd)
        os.close(fd)
        raise HomeInUse(holder.refusal(home)) from None
    return fd


def _write_holder(fd: int, holder: HomeHolder) -> None:
    record = json.dumps({"pid": holder.pid, "api_url": holder.api_url, "started_by": holder.started_by})
    os.ftruncate(fd, 0)
    os.pwrite(fd, record.encode(), 0)


@dataclass
class ServerHandle:
    """A Prefect server process this module started.

    Attributes:
        process: the `prefect server start` process (leader of its own process group).
        api_url: the API address, `http://host:port/api`.
        ui_url: the UI address, `http://host:port`.
        home: the PREFECT_HOME the server uses.
        log_path: where the server's output goes.
    """

    process: subprocess.Popen[bytes]
    api_url: str
    ui_url: str
    home: Path
    log_path: Path

    def stop(self, *, timeout: float = 20.0) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL if it has not ended in `timeout` s.

        Run logs of this process are shipped in the background: when Prefect is loaded, the queued
        ones are sent first (up to 5 s), so they are not lost with the server.
        """
        if self.process.poll() is not None:
            return
        if "prefect" in sys.modules:
            from prefect.logging.handlers import APILogWorker

            APILogWorker.drain_all(timeout=5)
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass


def api_answers(api_url: str, *, timeout: float = 2.0) -> bool:
    """Whether a Prefect API answers 200 on `<api_url>/health`."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as answer:
            return answer.status == 200
    except OSError:
        return False


def encryption_key(home: Path) -> str:
    """The PREFECT_SERVER_ENCRYPTION_KEY of the server whose home is `home`, kept in `<home>/.env`.

    A home without one takes the key of the current folder's `.env` (where a start before the key moved
    to the home left it: its blocks were encrypted with that key), else a new one; either is written into
    the home's file.

    Parameters:
        home: the server's PREFECT_HOME.

    Returns:
        A Fernet key (url-safe base64 of 32 random bytes).
    """
    kept = home / ENV_FILE_NAME
    key = _key_in(kept)
    if key is None:
        key = _key_in(Path.cwd() / ENV_FILE_NAME) or base64.urlsafe_b64encode(os.urandom(32)).decode()
        # python-dotenv writes a new file (mode 0600, as mkstemp makes it) and renames it over the name:
        # a link put there is replaced, never written through.
        set_key(str(kept), ENCRYPTION_KEY_NAME, key, quote_mode="never")
    return key


def _key_in(env_file: Path) -> str | None:
    """The encryption key a `.env` holds, if it is a regular file (not a link) holding one."""
    if env_file.is_symlink() or not env_file.is_file():
        return None
    return dotenv_values(env_file).get(ENCRYPTION_KEY_NAME) or None


def server_database(url: str) -> str:
    """The SQLAlchemy URL the Prefect server takes for `url`: PostgreSQL through asyncpg, or SQLite.

    Parameters:
        url: `postgresql+asyncpg://user:password@host:port/db` (`postgresql://` is read as the same),
            or `sqlite+aiosqlite:///path/prefect.db`.

    Returns:
        The URL with its driver spelled out.

    Raises:
        ValueError: another scheme, or no host or database; the message hides the password.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(
            f"{url!r} is not a database URL (postgresql+asyncpg://user:password@host:port/db)") from None
    shown = parsed.render_as_string(hide_password=True)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+asyncpg"):
        if not parsed.host or not parsed.database:
            raise ValueError(f"{shown}: a PostgreSQL URL needs a host and a database name")
        return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    if parsed.drivername in ("sqlite", "sqlite+aiosqlite"):
        return parsed.set(drivername="sqlite+aiosqlite").render_as_string(hide_password=False)
    raise ValueError(
        f"{shown}: the Prefect server keeps its data in PostgreSQL (postgresql+asyncpg://) or SQLite")


def start_server(
    *,
    host: str = "127.0.0.1",
    port: int = 4200,
    home: Path | None = None,
    ready_timeout: float = 90.0,
    detach: bool = False,
    database: str | None = None,
) -> ServerHandle:
    """Start `prefect server start` in the background, holding `home`'s lock, and wait until its API answers.

    Parameters:
        host: interface to bind; keep 127.0.0.1 (the server has no authentication).
        port: TCP port.
        home: PREFECT_HOME (SQLite database, server log, lock); default: the current folder's.
        ready_timeout: seconds to wait for /api/health.
        detach: when True the server outlives this process (`slotrelay run` leaves it for the UI and
            the next run; it ignores the caller's Ctrl-C).
        database: the server's database URL (see `server_database`); None: PREFECT_API_DATABASE_CONNECTION_URL
            from the environment, else SQLite in `home`.

    Returns:
        A handle whose `stop()` ends the server.

    Raises:
        HomeInUse: another server holds `home`.
        ServerStartError: the process exited or did not answer in `ready_timeout` seconds.
    """
    home = home or default_home()
    home.mkdir(parents=True, exist_ok=True)
    api_url = f"http://{host}:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        ENCRYPTION_KEY_NAME: encryption_key(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
        "PREFECT_SERVER_API_HOST": host,
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_UI_API_URL": api_url,
    }
    env.pop("PREFECT_API_URL", None)
    if database is not None:
        for name in DATABASE_URL_NAMES:
            env.pop(name, None)
        env[DATABASE_URL_NAME] = server_database(database)
    log_path = home / "server.log"
    lock = _lock_home(home)
    try:
        holder = HomeHolder(None, api_url, "run" if detach else "up")
        _write_holder(lock, holder)
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # Its own session: the caller's Ctrl-C does not reach it, and stop() can end the whole group.
                start_new_session=True,
                # The locked descriptor: the home stays locked as long as the server process lives.
                pass_fds=(lock,),
            )
        _write_holder(lock, HomeHolder(process.pid, api_url, holder.started_by))
    finally:
        os.close(lock)
    handle = ServerHandle(process, api_url, f"http://{host}:{port}", home, log_path)
    deadline = time.monotonic() + ready_timeout
    while not api_answers(api_url, timeout=1.0):
        if process.poll() is not None:
            raise ServerStartError(
                f"`prefect server start` exited with code {process.returncode}; see {log_path}")
        if time.monotonic() > deadline:
            handle.stop()
            raise ServerStartError(
                f"the Prefect server did not answer {api_url}/health in {ready_timeout:.0f} s; "
                f"see {log_path}")
        time.sleep(0.25)
    return handle


def loopback_port(api_url: str) -> int | None:
    """The port of an `http://127.0.0.1:port/api` address (one slotrelay may start a server on), else None."""
    parsed = urllib.parse.urlsplit(api_url)
    with contextlib.suppress(ValueError):
        if parsed.scheme == "http" and parsed.hostname in STARTABLE_HOSTS and parsed.port:
            return parsed.port
    return None


LOCAL_API = "http://127.0.0.1:4200/api"


@dataclass(frozen=True)
class Api:
    """The Prefect API a command talks to.

    Attributes:
        url: its address, `http://host:port/api`; it answered when `require_api` returned.
        source: where the address came from, for a message (`--api-url`, `PREFECT_API_URL`, ...).
        started: the server started for it by `require_api(start=True)`, else None.
    """

    url: str
    source: str
    started: ServerHandle | None = None


def require_api(url: str | None = None, *, source: str = "--api-url", home: Path | None = None,
                start: bool = False) -> Api:
    """The Prefect API that answers, for a command: the one place its address is worked out.

    In order: `url` (a command's flag), else PREFECT_API_URL, else the server holding `home`, else
    127.0.0.1:4200. An address that was given (the flag, PREFECT_API_URL) is the only one tried. With
    `start`, a server is started when none answers: on the given address's port when it is one of
    127.0.0.1, else on 127.0.0.1:4200, and left running, detached, for the UI and the next run.

    PREFECT_API_URL is never written to `os.environ`: a command runs what needs the API under
    `prefect.settings.temporary_settings(updates={PREFECT_API_URL: api.url})`, so nothing of one
    command outlives it in the process (a test suite, an MCP server).

    Parameters:
        url: the address a command was given, tried first and alone.
        source: what gave `url`, named when it does not answer.
        home: PREFECT_HOME whose server is looked for and started (default: the current folder's).
        start: start a server when none answers.

    Raises:
        EnvironmentMissing: no API answers (and none may be started there); code PREFECT_SERVER_UNAVAILABLE.
        HomeInUse: with `start`, the server holding `home` does not answer, and another cannot start on it.
        ServerStartError: with `start`, no server answers and none could be started.
    """
    home = home or default_home()
    if url is None and os.environ.get("PREFECT_API_URL"):
        url, source = os.environ["PREFECT_API_URL"], "PREFECT_API_URL"
    if url:
        candidates = [(url, source)]
        port = loopback_port(url)
    else:
        holder = home_holder(home)
        candidates = [(holder.api_url, f"the server of {home}")] if holder and holder.api_url else []
        candidates.append((LOCAL_API, "the default"))
        port = loopback_port(LOCAL_API)
    for candidate, named in candidates:
        if api_answers(candidate):
            return Api(candidate, named)
    if start and port:
        handle = start_server(port=port, home=home, detach=True)
        return Api(handle.api_url, "started here", handle)
    tried, named = candidates[0]
    raise EnvironmentMissing(
        f"no Prefect server answers at {tried} ({named}); start one with `slotrelay up`, or point "
        "PREFECT_API_URL (or a command's --api-url) at a running one", code="PREFECT_SERVER_UNAVAILABLE")
