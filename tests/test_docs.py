"""The documentation site builds with `mkdocs build --strict`: a broken link, a missing anchor, a page
left out of the nav or a reference page the code can no longer generate fails the build."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("getting-started", "chain-engine", "beyond", "benchmarks", "glossary"):
        assert (site / page / "index.html").is_file(), page
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "slotrelay psmr call" in cli and "slotrelay sandbox doctor" in cli
    errors = (site / "reference" / "errors" / "index.html").read_text()
    assert "MPP-E006" in errors and "WORKSPACE_NOT_FOUND" in errors and "identity_mismatch" in errors
    tools = (site / "reference" / "mcp-tools" / "index.html").read_text()
    assert "psmr_semantic_diff" in tools
    assert '"$defs"' in (site / "reference" / "chain-schema" / "index.html").read_text().replace("&quot;",
                                                                                                 '"')


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
    try:
        deadline = time.monotonic() + 180
        page = ""
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/glossary/", timeout=10) as answer:
                    page = answer.read().decode()
                break
            except OSError:
                time.sleep(0.2)
        assert "MPP-E001" in page, f"mkdocs serve exited {server.poll()} or did not answer"
    finally:
        server.terminate()
        server.wait(timeout=30)
