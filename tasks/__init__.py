"""Prefect tasks wrapping core calls: node execution, routing, sandbox runs, code generation, alerts."""

# Every process that runs tasks runs the pen's steps as task runs, a chain's pen node included.
from tasks import pen  # noqa: F401
