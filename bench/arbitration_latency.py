"""L5 latency: from a decision submitted (`retry`) to the paused node running again, median of 10.

On a real local Prefect server started here. The baseline is a bare Prefect flow that pauses with
`pause_flow_run(wait_for_input=...)` at the same poll interval and runs a task when resumed; the
chain engine adds what it does around the pause (alert file updates, a new task run of the node).
Both run as subprocesses (like a real `slotrelay run`); the decision comes from this process
through the API, as `slotrelay decide` sends it.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SAMPLES = 10

FLAKY = f'''
import time
from pathlib import Path
STARTS = Path(__file__).with_name("starts.txt")

def flaky(data):
    with STARTS.open("a") as handle:
        handle.write(f"{{time.time()}}\\n")
    if len(STARTS.read_text().splitlines()) <= {SAMPLES}:
        raise RuntimeError("not yet")
    return {{}}
'''

BARE = f'''
import sys, time
from pathlib import Path
from prefect import flow, task
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.runtime import flow_run
from flows.arbitration import POLL_SECONDS

STARTS = Path(sys.argv[1])

class Decision(RunInput):
    decision: str

@task
def mark():
    with STARTS.open("a") as handle:
        handle.write(f"{{time.time()}}\\n")

@flow(name="bare-pause")
def bare():
    STARTS.with_name("flow_run_id").write_text(str(flow_run.id))
    mark()
    for i in range({SAMPLES}):
        pause_flow_run(wait_for_input=Decision, timeout=600, poll_interval=POLL_SECONDS, key=f"k-{{i}}")
        mark()

bare()
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def lines(path: Path) -> list[float]:
    return [float(x) for x in path.read_text().split()] if path.exists() else []


def measure(run: subprocess.Popen, starts: Path, flow_run_id: callable, console: Console,
            label: str) -> list[float]:
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run

    latencies = []
    with get_client(sync_client=True) as client, console.status(label) as status:
        for i in range(SAMPLES):
            status.update(f"{label}: decision {i + 1} of {SAMPLES}")
            deadline = time.monotonic() + 120
            while True:
                if run.poll() is not None:
                    raise RuntimeError(f"{label} ended early: {run.stderr.read()[-2000:]}")
                run_id = flow_run_id()
                if run_id and len(lines(starts)) == i + 1 and client.read_flow_run(run_id).state.is_paused():
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{label} did not pause")
                time.sleep(0.05)
            submitted = time.time()
            resume_flow_run(run_id, run_input={"decision": "retry"})
            while len(lines(starts)) < i + 2:
                time.sleep(0.01)
            latencies.append(lines(starts)[i + 1] - submitted)
    run.wait(timeout=120)
    return latencies


def main() -> None:
    console = Console()
    home = Path(tempfile.mkdtemp(prefix="slotrelay-latency-"))
    from deployments.server import start_server

    with console.status("starting a Prefect server for the benchmark"):
        server = start_server(port=free_port(), home=home / "prefect")
    env = {**os.environ, "PREFECT_API_URL": server.api_url, "PYTHONPATH": str(ROOT)}
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        bare_dir = home / "bare"
        bare_dir.mkdir()
        (bare_dir / "bare.py").write_text(BARE)
        bare_starts = bare_dir / "starts.txt"
        bare = subprocess.Popen([sys.executable, str(bare_dir / "bare.py"), str(bare_starts)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        bare_id = bare_dir / "flow_run_id"
        baseline = measure(bare, bare_starts, lambda: bare_id.read_text() if bare_id.exists() else None,
                           console, "bare Prefect pause")

        chain_dir = home / "chain"
        chain_dir.mkdir()
        (chain_dir / "steps.py").write_text(FLAKY)
        (chain_dir / "node_chain.json").write_text(json.dumps({
            "chain_id": "latency", "pause_timeout_seconds": 600,
            "nodes": [{"node_id": "flaky", "input_slot": None,
                       "output_slot": {"slot_id": "flaky", "path": "slots/flaky.json"},
                       "executor": {"kind": "python", "callable": "steps:flaky"}}],
        }))
        engine = subprocess.Popen(
            [str(Path(sys.executable).with_name("slotrelay")), "run", str(chain_dir / "node_chain.json"),
                                   "--json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True)

        def alert_run_id() -> str | None:
            alerts = sorted((chain_dir / "alerts").glob("alert-*.json"))
            return json.loads(alerts[-1].read_text())["flow_run_id"] if alerts else None

        chain = measure(engine, chain_dir / "starts.txt", alert_run_id, console, "slotrelay decision")
        base = statistics.median(baseline)
        table = Table(title=f"decision submitted -> node running again (median of {SAMPLES})")
        for column in ("variant", "median s", "min s", "max s", "ratio to bare pause"):
            table.add_column(column, justify="left" if column == "variant" else "right")
        for name, values in (("bare Prefect pause + task", baseline), ("slotrelay retry decision", chain)):
            table.add_row(name, f"{statistics.median(values):.3f}", f"{min(values):.3f}",
                          f"{max(values):.3f}",
                          f"{statistics.median(values) / base:.2f}x")
        console.print(table)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
