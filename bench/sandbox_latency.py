"""Sandbox latency: `print(1)` in python, end to end, on each way of running it.

Rows: a plain subprocess (no sandbox, the baseline), bwrap, docker with the container created on
the request path (pool size 0), `docker run --rm` through the CLI (for reference), and docker
from the pre-created pool (waiting for the pool to be ready before each run). Each is run 20
times: p50 and p95, and the ratio of p50 to the baseline's. Then 50 runs in a row from the pool
without waiting, which shows whether the background refill keeps up.

Run: .venv/bin/python bench/sandbox_latency.py   (needs the images: slotrelay sandbox build)
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from slotrelay.sandbox import SandboxLimits, images
from slotrelay.sandbox.bwrap_backend import BwrapBackend
from slotrelay.sandbox.docker_backend import DockerBackend

CODE = "print(1)"
ROUNDS = 20
IN_A_ROW = 50
console = Console()


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def timed(call: Callable[[], object], rounds: int, before: Callable[[], None] | None = None) -> list[float]:
    samples = []
    for _ in range(rounds):
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def checked(result) -> None:
    if result.status != "success" or result.stdout != "1\n":
        raise SystemExit(f"a benchmark run failed: {result}")


def main() -> None:
    limits = SandboxLimits(timeout_ms=10_000, memory_mb=256)
    rows: list[tuple[str, list[float]]] = []

    def plain() -> None:
        subprocess.run(["/usr/bin/python3", "-I", "-c", CODE], check=True, capture_output=True)

    rows.append(("plain subprocess (no sandbox)", timed(plain, ROUNDS)))

    bwrap = BwrapBackend()
    rows.append(
        ("bwrap", timed(lambda: checked(bwrap.run(CODE, lang="python", limits=limits, inputs=None)), ROUNDS))
    )

    cold = DockerBackend(pool_size=0)
    try:
        rows.append(
            (
                "docker, created per run (pool size 0)",
                timed(lambda: checked(cold.run(CODE, lang="python", limits=limits, inputs=None)), ROUNDS),
            )
        )
    finally:
        cold.close()

    image = images.image_tag("python")

    def docker_cli() -> None:
        subprocess.run(
            ["docker", "run", "--rm", "-i", "--network", "none", "--log-driver", "none", image],
            input=b'{"lang": "python", "code": "print(1)", "inputs": null, "marker": "m"}',
            check=True,
            capture_output=True,
        )

    rows.append(("`docker run --rm` (CLI, reference)", timed(docker_cli, ROUNDS)))

    pooled = DockerBackend(pool_size=2)
    try:
        shape = pooled.shape_for("python", limits, [])
        pooled.warm("python", limits)

        def pool_ready() -> None:
            deadline = time.monotonic() + 60
            while len(pooled.pool.ready(shape)) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)

        def from_pool() -> None:
            checked(pooled.run(CODE, lang="python", limits=limits, inputs=None))

        rows.append(("docker from the pool (pool ready)", timed(from_pool, ROUNDS, before=pool_ready)))
        pool_ready()
        warm_before, cold_before = pooled.pool.stats.warm, pooled.pool.stats.cold
        started = time.perf_counter()
        in_a_row = timed(from_pool, IN_A_ROW)
        total_s = time.perf_counter() - started
        warm = pooled.pool.stats.warm - warm_before
        cold_count = pooled.pool.stats.cold - cold_before
    finally:
        pooled.close()

    baseline = statistics.median(rows[0][1])
    table = Table(title=f"sandbox latency, python `{CODE}`, {ROUNDS} runs each (ms)")
    for column in ("how", "p50", "p95", "p50 / subprocess"):
        table.add_column(column, justify="left" if column == "how" else "right")
    for name, samples in rows:
        p50 = statistics.median(samples)
        table.add_row(name, f"{p50:.0f}", f"{percentile(samples, 0.95):.0f}", f"{p50 / baseline:.1f}x")
    console.print(table)
    console.print(
        f"{IN_A_ROW} runs in a row from the pool: {total_s:.1f} s in all, "
        f"p50 {statistics.median(in_a_row):.0f} ms, p95 {percentile(in_a_row, 0.95):.0f} ms, "
        f"{warm} handed out pre-created, {cold_count} created on the request path"
    )


if __name__ == "__main__":
    main()
