"""Intent screening: the first gate of `pen.write`, before anything reaches the code model.

An intent is refused (MPP-E001) when it is empty, when it carries too little information to write
code from, or when it contains sensitive content. Secrets (keys, tokens, passwords, private keys)
are found by detect-secrets' plugins; personal ID numbers and card numbers by python-stdnum's
check-digit validators, so only numbers whose checksum holds count, not any long digit run.
The findings name the kind and where it is, never the secret itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType

from detect_secrets.core.scan import get_plugins
from detect_secrets.settings import default_settings
from stdnum import luhn
from stdnum.br import cpf
from stdnum.cn import ric
from stdnum.in_ import aadhaar
from stdnum.kr import rrn
from stdnum.us import ssn

from slotrelay.pen.errors import IntentRejected

MIN_INFORMATION = 3
MAX_INTENT_CHARS = 8000

_LATIN_WORD = re.compile(r"[^\W\d_]{2,}")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# Candidate numbers: digit runs, possibly grouped by spaces or dashes, possibly ending in an X
# (Chinese resident IDs). Only candidates whose check digits validate are reported.
_NUMBER_CANDIDATE = re.compile(r"(?<![\w-])\d[\d -]{7,22}[\dXx](?![\w-])")
_TOKEN = re.compile(r"\S{16,}")

# (what it is, stdnum module, digits it has once compacted)
_ID_VALIDATORS: tuple[tuple[str, ModuleType, tuple[int, ...]], ...] = (
    ("Chinese resident identity number", ric, (18,)),
    ("US social security number", ssn, (9,)),
    ("Indian Aadhaar number", aadhaar, (12,)),
    ("Brazilian CPF number", cpf, (11,)),
    ("South Korean resident registration number", rrn, (13,)),
)


@dataclass(frozen=True)
class Finding:
    """One sensitive thing found in an intent."""

    kind: str
    start: int
    end: int

    def to_json(self) -> dict[str, object]:
        """The finding as reported in the error details (position, never the value)."""
        return {"kind": self.kind, "start": self.start, "end": self.end}


def information_units(intent: str) -> int:
    """How much an intent says: distinct words of two letters or more, plus CJK characters / 2.

    Parameters:
        intent: the natural-language intent (any language).

    Returns:
        A count compared against `MIN_INFORMATION`.
    """
    words = {word.lower() for word in _LATIN_WORD.findall(intent) if not _CJK_CHAR.search(word)}
    cjk = len(set(_CJK_CHAR.findall(intent)))
    return len(words) + cjk // 2


def find_secrets(text: str) -> list[Finding]:
    """Secrets in `text` found by detect-secrets' plugins (default settings).

    Parameters:
        text: the text to scan, line by line.

    Returns:
        One finding per secret, with its detector's name.
    """
    findings: list[Finding] = []
    with default_settings():
        plugins = list(get_plugins())
        offset = 0
        for number, line in enumerate(text.splitlines() or [text], start=1):
            seen: set[str] = set()
            # Keyword plugins depend on the file type; a .py name makes `password = "..."` count too.
            for plugin in plugins:
                for secret in plugin.analyze_line(filename="intent.py", line=line, line_number=number) or ():
                    seen.add(secret.type)
            # The entropy plugins only look at quoted strings: offer each long token quoted as well.
            for match in _TOKEN.finditer(line):
                quoted = f'"{match.group(0).strip(chr(34) + chr(39))}"'
                for plugin in plugins:
                    if "Entropy" not in type(plugin).__name__:
                        continue
                    for secret in (
                        plugin.analyze_line(filename="intent.py", line=quoted, line_number=number) or ()
                    ):
                        seen.add(secret.type)
            findings.extend(Finding(kind, offset, offset + len(line)) for kind in sorted(seen))
            offset += len(line) + 1
    return findings


def find_personal_numbers(text: str) -> list[Finding]:
    """Personal ID numbers and payment card numbers whose check digits validate.

    Parameters:
        text: the text to scan.

    Returns:
        One finding per number, naming its kind and position.
    """
    findings: list[Finding] = []
    for match in _NUMBER_CANDIDATE.finditer(text):
        raw = match.group(0).strip()
        compact = re.sub(r"[ -]", "", raw)
        for kind, module, lengths in _ID_VALIDATORS:
            if len(compact) in lengths and module.is_valid(compact):
                # A bare 9-digit run is too often an ordinary number: SSNs only count in their own format.
                if module is ssn and not re.fullmatch(r"\d{3}-\d{2}-\d{4}", raw):
                    continue
                findings.append(Finding(kind, match.start(), match.end()))
                break
        else:
            if compact.isdigit() and 13 <= len(compact) <= 19 and luhn.is_valid(compact):
                findings.append(Finding("payment card number", match.start(), match.end()))
    return findings


def screen_intent(intent: str) -> None:
    """Refuse an intent that must not reach the code model.

    Parameters:
        intent: the natural-language intent of a `pen.write` request.

    Raises:
        IntentRejected: (MPP-E001) empty, too long, too little information, or sensitive content;
            `details` lists what was found.
    """
    if not intent or not intent.strip():
        raise IntentRejected("intent is empty", details={"reason": "empty"})
    if len(intent) > MAX_INTENT_CHARS:
        raise IntentRejected(
            f"intent is {len(intent)} characters long; at most {MAX_INTENT_CHARS} are accepted",
            details={"reason": "too_long"},
        )
    findings = find_secrets(intent) + find_personal_numbers(intent)
    if findings:
        kinds = sorted({finding.kind for finding in findings})
        raise IntentRejected(
            "intent contains sensitive content: " + ", ".join(kinds),
            details={"reason": "sensitive", "findings": [finding.to_json() for finding in findings]},
        )
    units = information_units(intent)
    if units < MIN_INFORMATION:
        raise IntentRejected(
            f"intent says too little to write code from ({units} distinct words; at least "
            f"{MIN_INFORMATION} needed)",
            details={"reason": "too_little_information", "information_units": units},
        )
