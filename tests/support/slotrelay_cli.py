"""The `slotrelay` command as a subprocess with the session's environment, `psmr call`'s envelope, and an
MCP SDK client of `slotrelay mcp serve` over stdio (the SDK hands a stdio server only a few variables,
so the session's environment is passed whole)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from harness.commands import SLOTRELAY

# Any single command: a timeout turns a hang into a failure instead of a stuck suite.
COMMAND_TIMEOUT_S = 180


def slotrelay(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`slotrelay ARGS` as a subprocess with the session's environment (plus `env`)."""
    return subprocess.run(
        [SLOTRELAY, *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        check=False,
    )


def psmr_call(operation: str, request: dict[str, Any], *flags: str) -> dict[str, Any]:
    """`slotrelay psmr call OPERATION REQUEST FLAGS`: the envelope it prints (never a traceback)."""
    done = slotrelay("psmr", "call", operation, json.dumps(request), *flags)
    assert "Traceback" not in done.stderr, done.stderr
    return dict(json.loads(done.stdout))


def mcp_client(root: Path, *flags: str) -> Client:
    """An MCP SDK client of `slotrelay mcp serve --workspace ROOT FLAGS` over stdio."""
    args = ["mcp", "serve", "--workspace", str(root), *flags]
    return Client(StdioServerParameters(command=SLOTRELAY, args=args, cwd=root, env=dict(os.environ)))
