"""The pen's closed sets of words, each defined once as a str enum: final actions and verdicts.

The pen's models, the CLI's choices and the Prefect forms all derive from these. The module imports
nothing of the pen, so `slotrelay --help` builds its choices without loading it.
"""

from __future__ import annotations

from enum import StrEnum


class PenAction(StrEnum):
    """What becomes of a completed pen: its files erased, kept by the persona, or shared for review."""

    erase = "erase"
    keep = "keep"
    share = "share"


class Verdict(StrEnum):
    """A registry reviewer's answer on a shared pen."""

    accept = "accept"
    reject = "reject"
    observation = "observation"
