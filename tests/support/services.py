"""A test that needs a service the machine may lack (Docker, a Prefect server, bwrap, Node, a browser, sshd,
PostgreSQL): skipped on a developer's machine without it, failed in CI, which provides every one."""

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
