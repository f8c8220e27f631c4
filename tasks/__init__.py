"""Prefect tasks wrapping core calls: a chain node (`node.py`); the pen's steps, a person's decision on a
pen and the registry review's check and verdict (`pen.py`)."""

# Every process that runs tasks runs the pen's steps as task runs, a chain's pen node included.
from tasks import pen  # noqa: F401
