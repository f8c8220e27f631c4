"""A Quick run: a flow run of a served chain deployment created through the API (as the UI's Quick run
creates one, default parameters) -> Completed, in CPU-seconds and wall time.

Two `slotrelay watch` processes on one real Prefect server started here (temporary PREFECT_HOME, free
port), each watching its own one-hop chain:
- runner: `watch --warm 0`: the run waits for the runner's poll and a new `python -m prefect.engine`;
- warm: `watch --warm 1`: the runner's poll hands it to the idle warm process (deployments/warm.py).

The variants are interleaved (runner, warm, runner, warm, ...), one run at a time, each started once its
`watch` is quiet again (the warm one: its replacement ready). For each run:
- wall: the run's creation to its Completed state, from the server's record;
- CPU to Completed: the `watch` process and all its descendants (with the children each has reaped),
  from the creation request to Completed;
- CPU to quiet: the same until the `watch` is ready for the next run (the warm pool's replacement has
  imported Prefect and the chain flow; the runner's child has exited);
- server CPU: the Prefect server's process tree over the same span (the API calls either path makes).

    nice .venv/bin/python bench/quick_run.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
# The harness's helpers are imported from the repository's root.
sys.path.insert(0, str(ROOT))

from harness.load import tree_cpu
from harness.ports import free_port
from harness.waiting import wait_for

console = Console()


@dataclass
class Variant:
    """One `slotrelay watch` process and the Quick runs measured through it."""

    name: str
    warm: int
    folder: Path
    samples: list[dict[str, float]] = field(default_factory=list)

    def start(self, api_url: str) -> None:
        from harness.chains import make_chain, start_watch_warm

        self.chain = make_chain(self.folder, self.name, 1)
        self.log = self.folder / "watch.log"
        self.process = start_watch_warm(self.chain, self.warm, api_url, self.log)
        self.tree = psutil.Process(self.process.pid)

    def quiet(self) -> bool:
        """Ready for the next run: the warm pool has a process idle, the runner no child left."""
        if self.process.poll() is not None:
            raise RuntimeError(f"watch ({self.name}) ended:\n{self.log.read_text()}")
        text = self.log.read_text()
        if f"deployment chain/{self.name} ready" not in text:
            return False
        if self.warm:
            return len(re.findall(r"warm process \d+ ready", text)) > text.count("runs in warm process")
        return not self.tree.children(recursive=True)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(120)

    def quick_run(self, client: Any, server: psutil.Process) -> None:
        wait_for(self.quiet, 180, f"{self.name} quiet")
        deployment = client.read_deployment_by_name(f"chain/{self.name}")
        cpu, server_cpu = tree_cpu(self.tree), tree_cpu(server)
        run = client.create_flow_run_from_deployment(deployment.id)
        run = wait_for(lambda: final(client, run.id), 180, f"{self.name} run {run.id} to end")
        done_cpu = tree_cpu(self.tree)
        if not run.state.is_completed():
            raise RuntimeError(f"{self.name}: run {run.id} ended {run.state.name}\n{self.log.read_text()}")
        wait_for(self.quiet, 180, f"{self.name} quiet again")
        self.samples.append({
            "wall": (run.state.timestamp - run.created).total_seconds(),
            "cpu_completed": done_cpu - cpu,
            "cpu_quiet": tree_cpu(self.tree) - cpu,
            "server_cpu": tree_cpu(server) - server_cpu,
            "warm": float(f"flow run {run.id} runs in warm process" in self.log.read_text()),
        })


def final(client: Any, flow_run_id: Any) -> Any:
    run = client.read_flow_run(flow_run_id)
    return run if run.state is not None and run.state.is_final() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="Quick runs per variant")
    args = parser.parse_args()

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from deployments.server import start_server

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="slotrelay-quick-run-") as tmp:
        work = Path(tmp)
        server = start_server(port=free_port(), home=work / "prefect-home")
        variants = [Variant("runner", 0, work / "runner"), Variant("warm", 1, work / "warm")]
        try:
            for variant in variants:
                variant.start(server.api_url)
            # The settings Prefect read at its import name no API (it would start an ephemeral server).
            with temporary_settings({PREFECT_API_URL: server.api_url}), \
                    get_client(sync_client=True) as client:
                for _ in range(args.rounds):
                    for variant in variants:
                        variant.quick_run(client, psutil.Process(server.process.pid))
        finally:
            for variant in variants:
                variant.stop()
            server.stop()
    load_after = os.getloadavg()

    table = Table(title=f"Quick run -> Completed, median (min-max) of {args.rounds}")
    table.add_column("variant")
    for column in ("wall s", "CPU-s to Completed", "CPU-s to quiet", "server CPU-s", "in a warm process"):
        table.add_column(column, justify="right")
    for variant in variants:
        cells = []
        for key in ("wall", "cpu_completed", "cpu_quiet", "server_cpu"):
            values = [s[key] for s in variant.samples]
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        cells.append(f"{sum(s['warm'] for s in variant.samples):.0f}/{len(variant.samples)}")
        table.add_row(variant.name, *cells)
    console.print(table)
    console.print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}")


if __name__ == "__main__":
    main()
