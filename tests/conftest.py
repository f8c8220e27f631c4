"""Shared test set-up.

Tests that need a service carry a marker (`docker`, `prefect_server`, `bwrap`, `node`); CI starts
every one of those services, so none of them is skipped there: with CI set, a missing service fails
the test instead of skipping it.
"""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI") == "true"


def require_service(available: bool, why: str) -> None:
    """Skip a test whose service is missing on a developer's machine; fail it in CI."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"CI must provide this service: {why}")
    pytest.skip(why)
