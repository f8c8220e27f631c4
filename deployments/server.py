"""The local Prefect API server slotrelay runs its flows against.

Runs go to a real server, never to Prefect's ephemeral API (measured on Prefect 3.9.1: a temporary
server per process costs ~9 s and loses most task-run records at exit). `ensure_server` reuses the
server at PREFECT_API_URL when one answers there, else starts `prefect server start` in the
background on 127.0.0.1 with SQLite under the project's PREFECT_HOME (`.slotrelay/prefect`).
`start_server(database=...)` (`slotrelay up --database`) puts the server on PostgreSQL through asyncpg
instead; a PREFECT_API_DATABASE_CONNECTION_URL already in the environment does the same.

The server encrypts stored Block secrets with PREFECT_SERVER_ENCRYPTION_KEY. That key lives in the
project's `.env` (git-ignored): it is generated on first start and reused afterwards, so secrets
stored by one server start can be read by the next.

Contract for callers (`slotrelay run`, `slotrelay up`):
- `start_server` returns a `ServerHandle`; `handle.stop()` ships this process's queued run logs, then
  ends the server and its process group.
- `ensure_server` returns an API URL (`http://host:port/api`) and leaves a server it started running,
  detached, so the next command reuses it; its log is `<home>/server.log`.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from dotenv import dotenv_values, set_key

from slotrelay.errors import EnvironmentMissing

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_HOME = PROJECT_ROOT / ".slotrelay" / "prefect"
ENV_FILE = PROJECT_ROOT / ".env"
ENCRYPTION_KEY_NAME = "PREFECT_SERVER_ENCRYPTION_KEY"
DATABASE_URL_NAME = "PREFECT_API_DATABASE_CONNECTION_URL"
# Prefect 3 reads the newer name first: a value left there would win over --database.
DATABASE_URL_NAMES = ("PREFECT_SERVER_DATABASE_CONNECTION_URL", DATABASE_URL_NAME)


class ServerStartError(EnvironmentMissing):
    """The Prefect server did not start or did not answer on /api/health in time."""

    code = "PREFECT_SERVER_UNAVAILABLE"


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


def encryption_key(env_file: Path = ENV_FILE) -> str:
    """The project's PREFECT_SERVER_ENCRYPTION_KEY, generated into `env_file` on first use.

    Parameters:
        env_file: the project's `.env` (git-ignored).

    Returns:
        A Fernet key (url-safe base64 of 32 random bytes).
    """
    key = dotenv_values(env_file).get(ENCRYPTION_KEY_NAME) if env_file.exists() else None
    if key:
        return key
    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    env_file.touch(mode=0o600, exist_ok=True)
    set_key(str(env_file), ENCRYPTION_KEY_NAME, key, quote_mode="never")
    return key


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
    home: Path = DEFAULT_HOME,
    ready_timeout: float = 90.0,
    detach: bool = False,
    database: str | None = None,
) -> ServerHandle:
    """Start `prefect server start` in the background and wait until its API answers.

    Parameters:
        host: interface to bind; keep 127.0.0.1 (the server has no authentication).
        port: TCP port.
        home: PREFECT_HOME (SQLite database, server log).
        ready_timeout: seconds to wait for /api/health.
        detach: when True the server outlives this process (it ignores the caller's Ctrl-C).
        database: the server's database URL (see `server_database`); None: PREFECT_API_DATABASE_CONNECTION_URL
            from the environment, else SQLite in `home`.

    Returns:
        A handle whose `stop()` ends the server.

    Raises:
        ServerStartError: the process exited or did not answer in `ready_timeout` seconds.
    """
    home.mkdir(parents=True, exist_ok=True)
    api_url = f"http://{host}:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        ENCRYPTION_KEY_NAME: encryption_key(),
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
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # Its own session: the caller's Ctrl-C does not reach it, and stop() can end the whole group.
            start_new_session=True,
        )
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
    if detach:
        (home / "server.pid").write_text(f"{process.pid}\n")
    return handle


def ensure_server(*, host: str = "127.0.0.1", port: int = 4200, home: Path = DEFAULT_HOME) -> str:
    """An API URL that answers: PREFECT_API_URL's server, or one started here and left running.

    Parameters:
        host: interface for a server started here.
        port: port for a server started here (also checked first: a server from an earlier run).
        home: PREFECT_HOME for a server started here.

    Returns:
        The API URL, also exported as PREFECT_API_URL in `os.environ` for this process and its children.

    Raises:
        ServerStartError: no server answers and none could be started.
    """
    configured = os.environ.get("PREFECT_API_URL")
    candidates = [configured] if configured else []
    candidates.append(f"http://{host}:{port}/api")
    for url in candidates:
        if api_answers(url):
            os.environ["PREFECT_API_URL"] = url
            return url
    handle = start_server(host=host, port=port, home=home, detach=True)
    os.environ["PREFECT_API_URL"] = handle.api_url
    return handle.api_url
