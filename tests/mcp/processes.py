"""`slotrelay mcp serve` as a real subprocess: start it, wait until it listens, stop it.

The server's stderr goes to a log file, not a pipe: a long-lived server that logs a lot must
never block on a pipe nobody reads.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import stop_process_group

SLOTRELAY = str(Path(sys.executable).with_name("slotrelay"))
READY = "PSMR MCP server at "


@dataclass
class ServerProcess:
    """A running `slotrelay mcp serve` and the file its stderr goes to."""

    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        """Everything the server wrote to stderr so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def start_server(args: list[str], *, cwd: Path, log: Path) -> ServerProcess:
    """Start `slotrelay mcp serve ARGS` in its own process group, stderr to `log`."""
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [SLOTRELAY, "mcp", "serve", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
        )
    return ServerProcess(process, log)


def wait_for_url(server: ServerProcess, timeout: float = 60) -> str:
    """The URL the server prints once it listens; fails with its output if it exits or stalls."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in server.output().splitlines():
            if READY in line:
                return line.split(READY, 1)[1].split()[0]
        if server.process.poll() is not None:
            break
        time.sleep(0.05)
    pytest.fail("the server did not start listening:\n" + server.output())


def stop_server(server: ServerProcess) -> str:
    """Stop the server (SIGINT, then SIGKILL after 10 s); returns its stderr."""
    if server.process.poll() is None:
        stop_process_group(server.process, signal.SIGINT, 10)
    return server.output()
