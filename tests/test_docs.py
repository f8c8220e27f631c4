"""`mkdocs serve` answers with the documentation site (its strict build is checked by `make lint`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.support.processes import wait_while_running

REPO = Path(__file__).resolve().parents[1]


def test_mkdocs_serve_answers_with_the_site() -> None:
    """`.venv/bin/mkdocs serve`, the command README and the getting-started page give to read the docs."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "mkdocs", "serve", "--no-livereload", "-a", f"127.0.0.1:{port}"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def glossary() -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/glossary/", timeout=10) as answer:
                return str(answer.read().decode())
        except OSError:
            return ""

    try:
        page = wait_while_running(server, glossary, timeout=180, interval=0.2, what="mkdocs serve to answer")
        assert "MPP-E001" in page, page
    finally:
        server.terminate()
        server.wait(timeout=30)
