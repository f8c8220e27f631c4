"""What a static screen finds in one code string, and the shape of a screen: shared by the pen and PSMR.

The pen refuses generated code by what it does to the world (network, subprocess, file, environment,
dynamic code); PSMR's analyzer finds that (`slotrelay.psmr.analysis.effects.effects`, the resolver of a
workspace build run on one module). Neither package imports the other: the caller that starts a pen (the CLI,
the MCP server, the flows) hands it PSMR's screen as an `EffectScreen`, so the type lives here, below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Effect:
    """One import or call with an outside effect, with its source span (1-based lines, 0-based columns).

    Attributes:
        kind: network, subprocess, file, environment, dynamic, or unparsable (the source does not parse).
        target: the import path it reaches (`subprocess.run`, `<builtin>.open`).
        via: `import`, `call`, or `parse` (for `unparsable`).
    """

    kind: str
    target: str
    via: str
    line: int
    col: int
    end_line: int
    end_col: int


class EffectScreen(Protocol):
    """A screen of one Python source string: its effects, sorted by position."""

    def __call__(self, source: str) -> list[Effect]: ...
