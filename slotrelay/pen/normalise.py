"""What the screens read: text in one canonical form, each character traced to its place in the original.

An ID number or a password can be written so that it looks the same to a person and different to
a pattern: full-width or Arabic-Indic digits, a no-break space between groups, a zero-width space
or a soft hyphen inside. The screens match the canonical form and report positions in the text
as it was written, so a finding still points at what the person typed.

The canonical form, per character cluster (a character and the combining marks after it):
- NFKC (full-width letters, digits and punctuation become ASCII; `＝` is `=`, `：` is `:`);
- format characters (Unicode category Cf: zero-width space and joiners, soft hyphen, word joiner,
  byte-order mark, bidirectional controls) are removed;
- every other space character (no-break, narrow no-break, em, ideographic, ...) is a plain space;
- every decimal digit of any script (Arabic-Indic, Devanagari, ...) is its ASCII digit.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Normalised:
    """Canonical text, and for each of its characters the span of the original it came from.

    Parameters:
        text: the canonical form.
        spans: `spans[i]` is the (start, end) in the original of `text[i]`'s cluster.
        length: the original's length.
    """

    text: str
    spans: tuple[tuple[int, int], ...]
    length: int

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original that `text[start:end]` was made from."""
        if start >= end:
            at = self.spans[start][0] if start < len(self.spans) else self.length
            return at, at
        return self.spans[start][0], self.spans[end - 1][1]


def normalise(text: str) -> Normalised:
    """The canonical form of `text` (see the module docstring), traced to the original.

    Parameters:
        text: any text (an intent, a line of a run's inputs).

    Returns:
        The canonical text with each character's original span.
    """
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    for start, end in _clusters(text):
        for char in unicodedata.normalize("NFKC", text[start:end]):
            canonical = _canonical_char(char)
            out.append(canonical)
            spans.extend([(start, end)] * len(canonical))
    return Normalised("".join(out), tuple(spans), len(text))


def _canonical_char(char: str) -> str:
    if unicodedata.category(char) == "Cf":
        return ""
    if char.isspace() and char not in "\n\r\t":
        return " "
    digit = unicodedata.decimal(char, None)
    return str(digit) if digit is not None else char


def _clusters(text: str) -> list[tuple[int, int]]:
    """Spans of each character with the combining marks that follow it (NFKC composes within one)."""
    clusters: list[tuple[int, int]] = []
    for at, char in enumerate(text):
        if clusters and unicodedata.combining(char):
            clusters[-1] = (clusters[-1][0], at + 1)
        else:
            clusters.append((at, at + 1))
    return clusters
