"""The one timestamp the product writes into its records: slots, babel lines, alerts, audit records,
pen manifests. The current UTC time, ISO-8601 to the millisecond with its offset."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    """The current UTC time, ISO-8601 with an offset."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")
