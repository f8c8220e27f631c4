"""Deploy time: 50 files of 10 KiB to a remote over SSH, next to `scp -r` of the same files to the same host.

A private sshd on 127.0.0.1 (harness/deploy_sshd.py: Debian's openssh-server, a non-root user,
keys made for the run). Each round runs every way once, in turn (the machine's load moves, the ways
see the same load), each into a fresh remote folder unless said otherwise:

- `scp -r` of the folder holding the 50 files (the baseline: OpenSSH's own client, one connection);
- warm: the deploy node called in this process (asyncssh already imported, as in a warm process): a
  first release, every file sent over SFTP, proven by one remote `sha256sum`, `current` switched;
- warm, again: the same files to the same folder, a release whose files are all hard links to the
  one before (nothing sent but the links);
- warm, C + B + sitemap + URL check of every file (the seed's whole step but the feature points);
- inside a run: a real `slotrelay run` of a one-deploy-node chain against the same sshd, on a Prefect
  server started here; the time is the deploy task's own, from its Prefect task run (Running to
  Completed: the executor's imports, asyncssh's included, the slot reads and writes), not the process's.

Then the rollback: a deploy whose URL check fails right after the switch, ROUNDS times; the time is the
switch back of the target (the node's message says it, measured around the switch back itself).

The ratio is each row's median over the baseline's. Run: PYTHONPATH=$PWD .venv/bin/python
bench/deploy_bench.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness.commands import SLOTRELAY

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.deploy_site import deploy, serving
from harness.deploy_sshd import Sshd, running_sshd
from harness.ports import free_port
from slotrelay.chain.errors import NodeError

FILES = 50
FILE_BYTES = 10 * 1024
console = Console(width=150)



def make_site(base: Path) -> list[str]:
    """FILES pages of FILE_BYTES each under base/site/, returned as paths relative to base."""
    listed = []
    for number in range(FILES):
        relative = f"site/page-{number:02d}.html"
        body = f"<!doctype html><title>Page {number}</title><h1>Page {number}</h1>".encode()
        (base / relative).parent.mkdir(parents=True, exist_ok=True)
        (base / relative).write_bytes(body + os.urandom(FILE_BYTES).hex().encode()[: FILE_BYTES - len(body)])
        listed.append(relative)
    return listed


def task_seconds(api_url: str, flow_run_id: str, name: str) -> float:
    """The duration of a flow run's task run (Running to its final state), once the server has it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    in_run = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
    deadline = time.monotonic() + 120
    with temporary_settings(updates={PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        while True:
            runs = [r for r in client.read_task_runs(flow_run_filter=in_run) if r.name == name]
            if runs and runs[0].state is not None and runs[0].state.is_final() and runs[0].end_time:
                assert runs[0].state.is_completed(), runs[0].state
                assert runs[0].start_time is not None
                return (runs[0].end_time - runs[0].start_time).total_seconds()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server did not record the task run {name} of {flow_run_id}")
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="slotrelay-deploy-bench-"))
    from deployments.server import start_server

    with console.status("starting a Prefect server and an sshd for the benchmark"):
        server = start_server(port=free_port(), home=home / "prefect")
    try:
        with running_sshd() as sshd:
            rows, rollbacks = measure(sshd, home, server.api_url, args.rounds)
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
    report(rows, rollbacks, args.rounds)


def measure(sshd: Sshd, home: Path, api_url: str, rounds: int) -> tuple[dict[str, list[float]], list[float]]:
    base = home / "chain"
    listed = make_site(base)
    sshd.folder("bench")
    fresh_count = iter(range(1_000_000))

    def fresh() -> Path:
        return sshd.folder(f"bench/{next(fresh_count)}")

    def scp() -> float:
        target = fresh()
        started = time.perf_counter()
        subprocess.run(
            ["scp", "-r", "-q", "-i", str(sshd.key), "-P", str(sshd.port), "-o", "BatchMode=yes",
             "-o", f"UserKnownHostsFile={sshd.known_hosts}", "-o", "StrictHostKeyChecking=yes",
             str(base / "site"), f"{sshd.user}@127.0.0.1:{target}/"],
            check=True,
        )
        return time.perf_counter() - started

    def warm(target: Path, *, whole: bool = False, url: str | None = None) -> float:
        os.environ.pop("BENCH_C_URL", None)
        os.environ.update(sshd.env("BENCH_C", target, url=url))
        spec: dict = {"files": listed, "targets": [{"name": "C", "ssh": "BENCH_C"}], "feature_points": None}
        if whole:
            spec["targets"].append({"name": "B", "folder": str(home / f"mirror-{target.name}")})
            spec["sitemap"] = {"path": "site/sitemap.xml", "site_url": "https://example.org/"}
        started = time.perf_counter()
        deploy(base, **spec)
        return time.perf_counter() - started

    again = fresh()
    warm(again)
    chain = home / "run-chain"
    (chain / "site").mkdir(parents=True)
    for relative in listed:
        shutil.copyfile(base / relative, chain / relative)
    (chain / "node_chain.json").write_text(json.dumps({
        "chain_id": "deploy-bench", "version": "0.1",
        "nodes": [{"node_id": "deploy", "input_slot": None,
                   "output_slot": {"slot_id": "deploy", "path": "slots/deploy_output.json"},
                   "executor": {"kind": "deploy", "files": listed,
                                "targets": [{"name": "C", "ssh": "BENCH_C"}],
                                "feature_points": None}}],
        "routes": [], "error_types": []}))

    processes: list[float] = []

    def inside_a_run() -> float:
        env = {**os.environ, **sshd.env("BENCH_C", fresh()), "PREFECT_API_URL": api_url}
        env.pop("BENCH_C_URL", None)
        started = time.perf_counter()
        done = subprocess.run([SLOTRELAY, "run", str(chain / "node_chain.json"), "--json"], env=env,
                              capture_output=True, text=True, check=True, timeout=600)
        processes.append(time.perf_counter() - started)
        summary = json.loads(done.stdout)
        assert summary["nodes"]["deploy"]["state"] == "Completed", summary
        return task_seconds(api_url, summary["flow_run_id"], "deploy")

    ways: dict[str, Callable[[], float]] = {
        "scp -r (baseline)": scp,
        "warm: a first release (every file sent)": lambda: warm(fresh()),
        "warm, again: the same files (all hard-linked)": lambda: warm(again),
        "warm: C + B mirror + sitemap + URL check of every file": lambda: served_whole(warm, fresh),
        "inside a run: the deploy task of `slotrelay run`": inside_a_run,
    }
    inside_a_run()  # the first run of a new server creates its flow and task records
    processes.clear()
    samples: dict[str, list[float]] = {name: [] for name in ways}
    with console.status("measuring") as status:
        for number in range(rounds):
            for name, way in ways.items():
                status.update(f"round {number + 1}/{rounds}: {name}")
                samples[name].append(way())
    console.print(f"the whole `slotrelay run` process of the inside-a-run rows: median "
                  f"{statistics.median(processes):.2f} s (Prefect's start and the server's records included)")
    return samples, {"C over SSH": rollbacks(sshd, base, listed, fresh, rounds),
                     "C a local folder": folder_rollbacks(home, base, listed, rounds)}


def served_whole(warm: Callable[..., float], fresh: Callable[[], Path]) -> float:
    target = fresh()
    with serving(target / "current") as url:
        return warm(target, whole=True, url=url)


def switched_back_ms(base: Path, listed: list[str], target: dict) -> float:
    """A deploy whose URL check fails right after the switch: how long its switch back took."""
    try:
        deploy(base, files=listed, targets=[target], feature_points=None, url_retry={"total": 0})
    except NodeError as failed:
        found = re.search(r"switched back in ([0-9.]+) ms", failed.message)
        assert found, failed.message
        return float(found.group(1))
    raise AssertionError(f"the URL check of target {target['name']} did not fail")


def rollbacks(sshd: Sshd, base: Path, listed: list[str], fresh: Callable[[], Path],
              rounds: int) -> list[float]:
    """Milliseconds of each switch back of a remote C after a URL check failed right after the switch."""
    taken = []
    for _ in range(rounds):
        target = fresh()
        os.environ.update(sshd.env("BENCH_C", target))
        os.environ.pop("BENCH_C_URL", None)
        deploy(base, files=listed, targets=[{"name": "C", "ssh": "BENCH_C"}], feature_points=None)
        with serving(target / "current", refused={f"/{listed[-1]}"}) as url:
            os.environ["BENCH_C_URL"] = url
            taken.append(switched_back_ms(base, listed, {"name": "C", "ssh": "BENCH_C"}))
    return taken


def folder_rollbacks(home: Path, base: Path, listed: list[str], rounds: int) -> list[float]:
    """The same with C a local folder served at its base_url."""
    taken = []
    for number in range(rounds):
        folder = home / f"folder-c-{number}"
        deploy(base, files=listed, targets=[{"name": "C", "folder": str(folder)}], feature_points=None)
        with serving(folder / "current", refused={f"/{listed[-1]}"}) as url:
            target = {"name": "C", "folder": str(folder), "base_url": url}
            taken.append(switched_back_ms(base, listed, target))
    return taken


def report(rows: dict[str, list[float]], rollbacks: dict[str, list[float]], rounds: int) -> None:
    baseline = statistics.median(rows["scp -r (baseline)"])
    table = Table(title=f"deploy of {FILES} files x {FILE_BYTES // 1024} KiB to sshd on 127.0.0.1, "
                        f"{rounds} rounds (ms)")
    for column in ("way", "median", "min", "max", "ratio to scp -r"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for name, samples in rows.items():
        median = statistics.median(samples)
        table.add_row(name, f"{median * 1000:.0f}", f"{min(samples) * 1000:.0f}",
                      f"{max(samples) * 1000:.0f}", f"{median / baseline:.2f}x")
    console.print(table)
    for kind, taken in rollbacks.items():
        console.print(f"rollback, {kind} (the switch back after a failed URL check): median "
                      f"{statistics.median(taken):.1f} ms, min {min(taken):.1f}, max {max(taken):.1f}")
    load = os.getloadavg()
    console.print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
                  f"on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
