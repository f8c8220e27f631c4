"""Sandbox latency: `print(1)` in python, end to end, on each way of running it, interleaved.

Variants, each run once per round in turn (A, B, C, ...): a plain subprocess (no sandbox, the
baseline), bwrap, docker from the pool of started containers (the pool is let refill before each
run, outside the timing), docker with the container created and started on the request path (pool
size 0), and `docker run --rm` through the CLI (the reference a user would reach for). Each row is
the median with its interquartile range, and the ratio to the baseline and to `docker run --rm` with
the range the quartiles allow; a comparison whose spread is wider than its gap says so. Then 50 runs in
a row from the pool without waiting, which shows whether the background refill keeps up.

Run: .venv/bin/python bench/sandbox_latency.py [--rounds 30]   (needs the images: slotrelay sandbox build)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table
from spread import described, goal_note, interleaved, ratio, spread_note

from slotrelay.sandbox import SandboxLimits, images
from slotrelay.sandbox.bwrap_backend import BwrapBackend
from slotrelay.sandbox.docker_backend import DockerBackend

CODE = "print(1)"
GOAL_S = 0.040
IN_A_ROW = 50
console = Console()


def timed(call: Callable[[], object], before: Callable[[], None] | None = None) -> Callable[[], float]:
    """A variant: `before` (untimed), then `call`, returning the seconds `call` took."""

    def run() -> float:
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        return time.perf_counter() - started

    return run


def checked(result) -> None:
    if result.status != "success" or result.stdout != "1\n":
        raise SystemExit(f"a benchmark run failed: {result}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="runs of each variant (default 30)")
    rounds = parser.parse_args().rounds
    limits = SandboxLimits(timeout_ms=10_000, memory_mb=256)
    image = images.image_tag("python")
    bwrap = BwrapBackend()
    cold = DockerBackend(pool_size=0)
    pooled = DockerBackend(pool_size=2)
    try:
        shape = pooled.shape_for("python", limits, [])
        pooled.warm("python", limits)

        def pool_ready() -> None:
            deadline = time.monotonic() + 60
            while len(pooled.pool.ready(shape)) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)

        def plain() -> None:
            subprocess.run(["/usr/bin/python3", "-I", "-c", CODE], check=True, capture_output=True)

        def docker_cli() -> None:
            subprocess.run(
                ["docker", "run", "--rm", "-i", "--network", "none", "--log-driver", "none", image],
                input=b'{"lang": "python", "code": "print(1)", "inputs": null, "marker": "m"}',
                check=True,
                capture_output=True,
            )

        variants = {
            "plain subprocess (no sandbox, baseline)": timed(plain),
            "bwrap": timed(lambda: checked(bwrap.run(CODE, lang="python", limits=limits, inputs=None))),
            "docker from the pool of started containers": timed(
                lambda: checked(pooled.run(CODE, lang="python", limits=limits, inputs=None)),
                before=pool_ready
            ),
            "docker, created and started per run (pool size 0)": timed(
                lambda: checked(cold.run(CODE, lang="python", limits=limits, inputs=None))
            ),
            "`docker run --rm` (CLI, reference)": timed(docker_cli),
        }
        for run in variants.values():  # one untimed round: images in the page cache, imports done
            run()
        samples = interleaved(variants, rounds)

        pool_ready()
        warm_before, cold_before = pooled.pool.stats.warm, pooled.pool.stats.cold
        started = time.perf_counter()
        in_a_row = [
            timed(lambda: checked(pooled.run(CODE, lang="python", limits=limits, inputs=None)))()
            for _ in range(IN_A_ROW)
        ]
        total_s = time.perf_counter() - started
        warm = pooled.pool.stats.warm - warm_before
        cold_count = pooled.pool.stats.cold - cold_before
    finally:
        pooled.close()
        cold.close()

    names = list(samples)
    baseline, pool, reference = samples[names[0]], samples[names[2]], samples[names[4]]
    table = Table(title=f"sandbox latency, python `{CODE}`, {rounds} interleaved rounds (ms)")
    for column in ("how", "median (IQR)", "vs subprocess", "vs docker run --rm"):
        table.add_column(column, justify="left" if column == "how" else "right")
    for name, times in samples.items():
        table.add_row(name, described(times, 1000), ratio(times, baseline), ratio(times, reference))
    console.print(table)
    console.print(goal_note(pool, GOAL_S, "docker from the pool"))
    for note in (
        spread_note(pool, reference, "pool vs docker run --rm"),
        spread_note(pool, samples[names[3]], "pool vs created per run"),
        spread_note(pool, baseline, "pool vs subprocess"),
    ):
        if note:
            console.print(f"[yellow]{note}[/]")
    console.print(
        f"{IN_A_ROW} runs in a row from the pool: {total_s:.1f} s in all, median "
        f"{statistics.median(in_a_row) * 1000:.0f} ms, max {max(in_a_row) * 1000:.0f} ms, "
        f"{warm} handed out started ahead, {cold_count} created on the request path"
    )


if __name__ == "__main__":
    main()
