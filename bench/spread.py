"""Medians with their spread, for benches that compare variants run in the same process.

Variants are interleaved (A, B, C, A, B, C, ...) so load that comes and goes on a shared machine
hits all of them alike, instead of one block of runs getting a quiet minute and the next a busy one.
Each median is reported with its interquartile range, and a comparison whose spread is wider than
the gap it measures says so rather than printing a ratio that looks exact.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable


def interleaved(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Run every variant once per round, in turn, `rounds` times.

    Parameters:
        variants: name -> a call that runs the variant once and returns its own measured time.
        rounds: how many times each variant runs.

    Returns:
        name -> the times, in the order they were taken.
    """
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            samples[name].append(run())
    return samples


def quartiles(samples: list[float]) -> tuple[float, float, float]:
    """The first quartile, the median and the third quartile."""
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, median, q3


def described(samples: list[float], scale: float = 1.0, digits: int = 0) -> str:
    """`median (IQR q1-q3)`, each multiplied by `scale` (1000 turns seconds into ms)."""
    q1, median, q3 = (value * scale for value in quartiles(samples))
    return f"{median:.{digits}f} (IQR {q1:.{digits}f}-{q3:.{digits}f})"


def ratio(samples: list[float], reference: list[float]) -> str:
    """The ratio of two medians, with the range the quartiles allow (worst q3/q1 to best q1/q3)."""
    q1, median, q3 = quartiles(samples)
    r1, reference_median, r3 = quartiles(reference)
    return f"{median / reference_median:.2f}x ({q1 / r3:.2f}-{q3 / r1:.2f})"


def spread_note(samples: list[float], reference: list[float], what: str) -> str | None:
    """A warning when either variant's IQR is wider than the gap between the two medians, else None."""
    q1, median, q3 = quartiles(samples)
    r1, reference_median, r3 = quartiles(reference)
    gap = abs(median - reference_median)
    spread = max(q3 - q1, r3 - r1)
    if spread > gap:
        return (f"{what}: the spread (IQR {spread * 1000:.1f} ms) is wider than the gap it measures "
                f"({gap * 1000:.1f} ms)")
    return None


def goal_note(samples: list[float], goal: float, what: str) -> str:
    """Whether the median meets `goal`, and whether the spread is wider than the distance to it."""
    q1, median, q3 = quartiles(samples)
    met = "meets" if median <= goal else "misses"
    line = f"{what}: median {median * 1000:.1f} ms {met} the goal of {goal * 1000:.0f} ms"
    if q1 <= goal <= q3:
        line += " (the goal lies inside the IQR: the spread is wider than the gap, so this is not settled)"
    return line
