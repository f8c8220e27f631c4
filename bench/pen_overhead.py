"""What the pen costs apart from the model: intent -> result with a stub model that answers at once.

Twenty `pen.write` calls (erase, so each leaves only its audit record) on the real sandbox, p50 and
p95 of each phase: screening (intent + static screen), model (two round trips to the stub on
127.0.0.1), sandbox, persistence (pen_id, audit records, state transitions, files). The baseline,
run in the same process, is `slotrelay.sandbox.run` of the same code with the same inputs: the
ratio says how much slower a pen call is than the bare sandbox run it wraps.

    .venv/bin/python bench/pen_overhead.py [--calls 20] [--backend docker|bwrap]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.stub_model import SUM_CODE, StubModel
from slotrelay import sandbox
from slotrelay.pen import ModelSettings, write
from slotrelay.psmr.analysis.effects import effects

INPUTS = {"numbers": list(range(100))}
PHASES = ("screening", "model", "sandbox", "persistence")
console = Console()


def percentile(values: list[float], share: float) -> float:
    """The value below which `share` of the sorted values lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--backend", default=None, help="sandbox backend (default: the first usable)")
    args = parser.parse_args()

    baseline: list[float] = []
    totals: list[float] = []
    phases: dict[str, list[float]] = {phase: [] for phase in PHASES}
    with StubModel() as stub, tempfile.TemporaryDirectory() as root:
        settings = ModelSettings(base_url=stub.base_url, model="stub", timeout_s=10)
        request = {
            "intent": "sum the numbers in the input list",
            "context": {"persona_id": "bench", "upstream_inputs": INPUTS},
            "options": {"persist_hint": "erase", "sandbox": {"timeout_ms": 10000}},
        }
        # Warm up: the sandbox's pool, imports, the stub's first connection.
        for _ in range(2):
            sandbox.run(SUM_CODE, inputs=INPUTS, backend=args.backend)
            write(request, root=root, model=settings, effect_screen=effects, backend=args.backend)
        with console.status("running") as status:
            for index in range(args.calls):
                status.update(f"call {index + 1}/{args.calls}")
                start = time.perf_counter()
                result = sandbox.run(SUM_CODE, inputs=INPUTS, backend=args.backend)
                baseline.append((time.perf_counter() - start) * 1000)
                assert result.result == {"total": sum(INPUTS["numbers"])}, result
                start = time.perf_counter()
                outcome = write(
                    request, root=root, model=settings, effect_screen=effects, backend=args.backend
                )
                totals.append((time.perf_counter() - start) * 1000)
                assert outcome.output.execution.result == {"total": sum(INPUTS["numbers"])}
                for phase in PHASES:
                    phases[phase].append(outcome.timings.get(phase, 0.0))
        backend = result.backend

    table = Table(title=f"pen.write overhead, {args.calls} calls, {backend} sandbox, stub model (ms)")
    table.add_column("what")
    table.add_column("p50", justify="right")
    table.add_column("p95", justify="right")
    table.add_column("share of pen p50", justify="right")
    total_p50 = statistics.median(totals)
    for phase in PHASES:
        p50 = statistics.median(phases[phase])
        table.add_row(phase, f"{p50:.1f}", f"{percentile(phases[phase], 0.95):.1f}", f"{p50 / total_p50:.0%}")
    other = [t - sum(phases[p][i] for p in PHASES) for i, t in enumerate(totals)]
    table.add_row(
        "other (validation, client setup)",
        f"{statistics.median(other):.1f}",
        f"{percentile(other, 0.95):.1f}",
        f"{statistics.median(other) / total_p50:.0%}",
    )
    table.add_row("[bold]pen.write total[/]", f"{total_p50:.1f}", f"{percentile(totals, 0.95):.1f}", "100%")
    base_p50 = statistics.median(baseline)
    table.add_row("baseline: sandbox.run alone", f"{base_p50:.1f}", f"{percentile(baseline, 0.95):.1f}", "")
    console.print(table)
    overhead = total_p50 - base_p50
    console.print(
        f"pen / bare sandbox run: {total_p50 / base_p50:.2f}x; the pen adds {overhead:.1f} ms at p50 "
        f"(of which model round trips {statistics.median(phases['model']):.1f} ms)"
    )


if __name__ == "__main__":
    main()
