"""Watch mode: time from an agent's failed output slot to the alert file, median of 20.

A real local Prefect server is started here (temporary PREFECT_HOME, free port), and `slotrelay watch`
serves one chain `ext (external) -> work`. Each sample writes ext's input slot (new content), then a
`failed` output slot whose error type the chain handles by `fail`; the sensor hands it over to a run
at ext, whose node task applies the error type and writes the alert. Measured: the write of the failed
slot to the alert file appearing. Baseline for the same machine: `bench/routing_latency.py`'s
"API-created run -> Running" (a flow run's start by the runner dominates).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SAMPLES = 20
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_chain(folder: Path) -> Path:
    (folder / "steps.py").write_text("def work(data):\n    return data\n")
    always = {"field": "status", "operator": "equals", "value": "completed"}
    chain = {
        "chain_id": "alert-latency",
        "nodes": [
            {"node_id": "seed", "output_slot": {"slot_id": "seed", "path": "slots/seed_output.json"},
             "executor": {"kind": "python", "callable": "steps:work"}},
            {"node_id": "ext", "input_slot": {"slot_id": "ext-in", "path": "slots/ext_input.json"},
             "output_slot": {"slot_id": "ext", "path": "slots/ext_output.json"},
             "executor": {"kind": "external"}},
            {"node_id": "work", "input_slot": {"slot_id": "work-in", "path": "slots/work_input.json"},
             "output_slot": {"slot_id": "work", "path": "slots/work_output.json"},
             "executor": {"kind": "python", "callable": "steps:work"}},
        ],
        "routes": [{"route_id": "seed-to-ext", "from_node": "seed", "to_node": "ext", "condition": always},
                   {"route_id": "ext-to-work", "from_node": "ext", "to_node": "work", "condition": always}],
        "error_types": [{"error_type": "bad", "handling": "fail"}],
    }
    path = folder / "node_chain.json"
    path.write_text(json.dumps(chain))
    return path


def write_atomic(path: Path, document: dict) -> None:
    staged = path.with_name(f"{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    staged.write_text(json.dumps(document))
    os.replace(staged, path)


def main() -> None:
    from deployments.server import start_server

    home = Path(tempfile.mkdtemp(prefix="slotrelay-alert-bench-"))
    server = start_server(port=free_port(), home=home / "prefect")
    folder = home / "chain"
    (folder / "slots").mkdir(parents=True)
    chain = write_chain(folder)
    env = {**os.environ, "PREFECT_API_URL": server.api_url}
    log = (home / "watch.log").open("w")
    watch = subprocess.Popen([sys.executable, "-m", "slotrelay.cli", "watch", str(chain)], cwd=ROOT, env=env,
                             stdout=log, stderr=subprocess.STDOUT)
    samples: list[float] = []
    try:
        deadline = time.monotonic() + 120
        while "watching" not in (home / "watch.log").read_text():
            if time.monotonic() > deadline or watch.poll() is not None:
                raise SystemExit("watch did not start")
            time.sleep(0.1)
        alerts = folder / "alerts"
        for i in range(SAMPLES):
            before = len(list(alerts.glob("alert-*.json"))) if alerts.exists() else 0
            write_atomic(folder / "slots" / "ext_input.json",
                         {"status": "pending", "from_node": "seed", "route_id": "seed-to-ext",
                          "data": {"i": i}})
            time.sleep(0.05)
            began = time.monotonic()
            write_atomic(folder / "slots" / "ext_output.json",
                         {"node_id": "ext", "status": "failed", "data": {},
                          "error": {"error_type": "bad", "message": f"sample {i}"}})
            while (len(list(alerts.glob("alert-*.json"))) if alerts.exists() else 0) == before:
                if time.monotonic() - began > 120:
                    raise SystemExit(f"no alert for sample {i}")
                time.sleep(0.01)
            samples.append(time.monotonic() - began)
            print(f"sample {i + 1}: {samples[-1]:.2f} s", flush=True)
    finally:
        watch.send_signal(signal.SIGINT)
        watch.wait(timeout=120)
        server.stop()
    ordered = sorted(samples)
    print(f"failed slot -> alert file, {len(samples)} samples: median {statistics.median(samples):.2f} s, "
          f"min {ordered[0]:.2f} s, p90 {ordered[int(0.9 * (len(ordered) - 1))]:.2f} s, max "
          f"{ordered[-1]:.2f} s")


if __name__ == "__main__":
    main()
