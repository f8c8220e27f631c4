"""Where `slotrelay mcp serve`'s cold start goes: the CPU time of each step to the first answer, in one
fresh process per run, in the order the server takes them (the CLI, the parse of serve's options, the
SDK and PSMR's imports, made as `serve` makes them, under `frozen_imports`, the check of the built
workspace at start, the tool surface, the first `psmr_query_search`), and whether networkx or
jsonschema was imported on the way (neither should be). `--collected` imports the SDK with the
collector on, as the server did before `frozen_imports`.

CPU time, not wall time, so that other work on a shared machine inflates the figures less; each run
is a new interpreter (imports are cold, bytecode caches warm), the median of `--runs` is printed.
The workspace is a copy of an installed package (rich), built once before the runs.

    .venv/bin/python bench/mcp_cold_steps.py [--runs 5] [--collected]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from mcp_latency import PACKAGE, _copy_package

from slotrelay import fsio
from slotrelay.psmr import api

# Run in a fresh interpreter: each line after the first is one step, timed from the step before.
STEPS = '''
import sys, time
from pathlib import Path
spent, last = [], time.process_time()
def step():
    global last
    now = time.process_time(); spent.append((now - last) * 1000); last = now
import typer, typer.main; step()
import slotrelay.cli
serve = typer.main.get_command(slotrelay.cli.app).get_command(None, "mcp").get_command(None, "serve"); step()
root = Path(sys.argv[1])
serve.make_context("serve", ["--workspace", str(root)]); step()
from contextlib import nullcontext
from slotrelay.commands.mcp import frozen_imports
with nullcontext() if sys.argv[2] == "collected" else frozen_imports():
    import mcp.server.lowlevel, mcp.server.stdio, mcp_types; step()
    import anyio, psmr_mcp, psmr_mcp.transports, psmr_mcp.engine_tools; step()
registry = psmr_mcp.WorkspaceRegistry([root])
registry.build(root, at_startup=True); step()
from psmr_mcp.server import ToolSurface
surface = ToolSurface(registry); step()
for _ in range(2):
    answer = anyio.run(surface.call, "psmr_query_search", {"text": "Console"}, None)
    assert answer["status"] == "ok", answer
    step()
print(" ".join(f"{ms:.1f}" for ms in spent))
print(" ".join(sorted({"networkx", "jsonschema"} & sys.modules.keys())) or "-")
'''
NAMES = (
    "typer",
    "slotrelay.cli and the mcp serve command",
    "parsing serve's options (typer builds a pydantic TypeAdapter per option)",
    "the MCP SDK (mcp.server.lowlevel, its stdio transport, mcp_types)",
    "psmr_mcp and PSMR's read side",
    "checking the built workspace at start",
    "the tool surface (schemas, argument validators)",
    "the first psmr_query_search (loads the graph)",
    "a second psmr_query_search",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes to take the median of")
    parser.add_argument("--collected", action="store_true",
                        help="import the SDK with the cyclic garbage collector on (as before frozen_imports)")
    arguments = parser.parse_args()
    imports = "collected" if arguments.collected else "frozen"
    with tempfile.TemporaryDirectory(prefix="psmr-mcp-steps-") as scratch:
        # The bench's store and keys live in its scratch folder, never in the user's state folder.
        os.environ[fsio.STATE_HOME_ENV] = str(Path(scratch) / "state")
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        root = _copy_package(Path(scratch))
        api.build_workspace(root)
        runs = []
        for _ in range(arguments.runs + 1):  # the first writes the bytecode caches: not counted
            done = subprocess.run([sys.executable, "-c", STEPS, str(root), imports], env=env,
                                  capture_output=True, text=True, check=True)
            timings, loaded = done.stdout.splitlines()
            runs.append([float(ms) for ms in timings.split()])
    load = os.getloadavg()[0]
    print(f"{PACKAGE}: CPU ms per step, median of {arguments.runs} fresh processes, the SDK's import "
          f"{imports} (load average {load:.1f})")
    for index, name in enumerate(NAMES):
        print(f"{statistics.median(run[index] for run in runs[1:]):8.0f}  {name}")
    print(f"networkx or jsonschema imported on the way: {loaded}")


if __name__ == "__main__":
    main()
