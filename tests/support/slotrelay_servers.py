"""A `slotrelay` server (`mcp serve`, `psmr view`) as a real subprocess: start it, wait until it listens, stop
it.

The server's stderr goes to a log file, not a pipe: a long-lived server that logs a lot must
never block on a pipe nobody reads.
"""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.commands import SLOTRELAY
from harness.process_groups import stop_process_group
from tests.support.processes import wait_while_running

READY = "PSMR MCP server at "


@dataclass
class ServerProcess:
    """A running `slotrelay` server, the file its stderr goes to, and the text it prints before its URL."""

    process: subprocess.Popen[bytes]
    log: Path
    ready: str = READY

    def output(self) -> str:
        """Everything the server wrote to stderr so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def start_server(
    args: list[str],
    *,
    cwd: Path | None,
    log: Path,
    command: tuple[str, ...] = ("mcp", "serve"),
    ready: str = READY,
) -> ServerProcess:
    """Start `slotrelay COMMAND ARGS` (`mcp serve` by default) in its own process group, stderr to `log`.

    Parameters:
        cwd: the working folder (None: this process's).
        ready: the text the server prints just before its URL once it listens.
    """
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [SLOTRELAY, *command, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
        )
    return ServerProcess(process, log, ready)


def wait_for_url(server: ServerProcess, timeout: float = 60) -> str:
    """The URL the server prints once it listens; fails with its output if it exits or stalls."""

    def url() -> str | None:
        for line in server.output().splitlines():
            if server.ready in line:
                return line.split(server.ready, 1)[1].split()[0]
        return None

    return wait_while_running(server.process, url, timeout=timeout, what="the server to listen",
                              log=server.log)


def stop_server(server: ServerProcess) -> str:
    """Stop the server (SIGINT, then SIGKILL after 10 s); returns its stderr."""
    if server.process.poll() is None:
        stop_process_group(server.process, signal.SIGINT, 10)
    return server.output()
