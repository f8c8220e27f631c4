"""Intent screening: the first gate of `pen.write`, before anything reaches the code model.

An intent is refused (MPP-E001) when it is empty, when it carries too little information to write
code from, or when it contains sensitive content. Secrets (keys, tokens, passwords, private keys)
are found by detect-secrets' plugins; personal ID numbers (China, Korea, Japan, India, US, Brazil,
France, Spain, Germany, Italy), IBANs and card numbers by python-stdnum's check-digit validators, so
only numbers whose checksum holds count, not any long digit run.
The findings name the kind and where it is, never the secret itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType

from detect_secrets.settings import default_settings, get_plugins
from stdnum import iban, luhn
from stdnum.br import cpf
from stdnum.cn import ric
from stdnum.de import idnr
from stdnum.es import dni, nie
from stdnum.fr import nir
from stdnum.in_ import aadhaar
from stdnum.it import codicefiscale
from stdnum.jp import in_ as my_number
from stdnum.kr import rrn
from stdnum.us import ssn

from slotrelay.pen.errors import IntentRejected

MIN_INFORMATION = 3
MAX_INTENT_CHARS = 8000

_LATIN_WORD = re.compile(r"[^\W\d_]{2,}")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_TOKEN = re.compile(r"\S{16,}")


def _written(shape: str) -> re.Pattern[str]:
    # Bounded by ASCII letters and digits only: CJK text counts as a word character for \b and \w,
    # and IDs are written against it with no space ("身份证11010519491231002X的").
    return re.compile(rf"(?<![A-Za-z0-9]){shape}(?![A-Za-z0-9])")


# (what it is, how it is written, stdnum module). Each shape is the number as people write it
# (grouped by spaces, dots or dashes where that is usual); only a match whose check digits
# validate is reported, so an ordinary number of the same shape passes unless its digits happen
# to validate.
_PERSONAL_NUMBERS: tuple[tuple[str, re.Pattern[str], ModuleType], ...] = (
    ("Chinese resident identity number", _written(r"\d{6} ?\d{8} ?\d{3}[\dXx]"), ric),
    ("US social security number", _written(r"\d{3}-\d{2}-\d{4}"), ssn),
    ("Indian Aadhaar number", _written(r"\d{4}[ -]?\d{4}[ -]?\d{4}"), aadhaar),
    ("Japanese My Number", _written(r"\d{4}[ -]?\d{4}[ -]?\d{4}"), my_number),
    ("Brazilian CPF number", _written(r"\d{3}\.?\d{3}\.?\d{3}[-.]?\d{2}"), cpf),
    ("South Korean resident registration number", _written(r"\d{6}-?\d{7}"), rrn),
    (
        "French social security number (NIR)",
        _written(r"[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[ABab]) ?\d{3} ?\d{3} ?\d{2}"),
        nir,
    ),
    ("Spanish DNI", _written(r"\d{8}-?[A-Za-z]"), dni),
    ("Spanish NIE", _written(r"[XYZxyz]-?\d{7}-?[A-Za-z]"), nie),
    ("German tax ID (Steuer-ID)", _written(r"\d{2} ?\d{3} ?\d{3} ?\d{3}"), idnr),
    (
        "Italian codice fiscale",
        _written(
            r"[A-Za-z]{6}[0-9LMNP-Vlmnp-v]{2}[A-Za-z][0-9LMNP-Vlmnp-v]{2}[A-Za-z]"
            r"[0-9LMNP-Vlmnp-v]{3}[A-Za-z]"
        ),
        codicefiscale,
    ),
    # Printed in groups of four (the last shorter), or in one run; letters are upper case.
    ("IBAN", _written(r"[A-Z]{2}\d{2}(?:(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?|[A-Z0-9]{11,30})"), iban),
)
_CARD_CANDIDATE = _written(r"\d(?:[ -]?\d){12,18}")
# What `key=value` / `key: value` of a secret keyword holds when it is a password and not prose
# ("hash each password: use bcrypt") or code ("password=os.environ['PW']").
_CODE_CHARS = re.compile(r"[()\[\]{}]")


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

    Each line is scanned as Python (quoted values: `password = "..."`) and as YAML (unquoted ones:
    `password=Sup3rS3cr3tP4ss!`, `api_key: ...`); an unquoted value only counts when it looks like a
    password rather than words or code (see `_looks_like_a_password`).

    Parameters:
        text: the text to scan, line by line.

    Returns:
        One finding per secret, with its detector's name.
    """
    findings: list[Finding] = []
    with default_settings():
        plugins = list(get_plugins())
        # Only the keyword detector reads the file type; the others would repeat their first pass.
        keywords = [plugin for plugin in plugins if type(plugin).__name__ == "KeywordDetector"]
        offset = 0
        for number, line in enumerate(text.splitlines() or [text], start=1):
            seen: set[str] = set()
            # Keyword plugins depend on the file type; a .py name makes `password = "..."` count too.
            for plugin in plugins:
                for secret in plugin.analyze_line(filename="intent.py", line=line, line_number=number) or ():
                    seen.add(secret.type)
            # A .yaml name makes unquoted `password=...` and `password: ...` count.
            for plugin in keywords:
                for secret in (
                    plugin.analyze_line(filename="intent.yaml", line=line, line_number=number) or ()
                ):
                    if _looks_like_a_password(secret.secret_value or ""):
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


def _looks_like_a_password(value: str) -> bool:
    """An unquoted keyword value that is a password: one token of 8+ characters mixing at least two of
    lower case, upper case, digits and symbols (`_` is a letter of identifiers), and no brackets."""
    words = value.split()
    token = words[0].strip("'\"") if words else ""
    if len(token) < 8 or _CODE_CHARS.search(token):
        return False
    classes = [
        any(c.islower() for c in token),
        any(c.isupper() for c in token),
        any(c.isdigit() for c in token),
        any(not c.isalnum() and c != "_" for c in token),
    ]
    return sum(classes) >= 2


def find_personal_numbers(text: str) -> list[Finding]:
    """Personal ID numbers, IBANs and payment card numbers whose check digits validate.

    Parameters:
        text: the text to scan (any language; a number may touch CJK text with no space).

    Returns:
        One finding per number, naming its kind and position.
    """
    findings: list[Finding] = []
    taken: set[tuple[int, int]] = set()
    for kind, shape, module in _PERSONAL_NUMBERS:
        for match in _overlapping(shape, text):
            span = (match.start(), match.end())
            if span not in taken and module.is_valid(match.group(0)):
                taken.add(span)
                findings.append(Finding(kind, *span))
    for match in _overlapping(_CARD_CANDIDATE, text):
        compact = re.sub(r"[ -]", "", match.group(0))
        if (match.start(), match.end()) not in taken and luhn.is_valid(compact):
            findings.append(Finding("payment card number", match.start(), match.end()))
    return sorted(findings, key=lambda finding: finding.start)


def _overlapping(shape: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Every match of `shape` starting at any position, so a near miss cannot hide a number inside it."""
    found = []
    at = 0
    while (match := shape.search(text, at)) is not None:
        found.append(match)
        at = match.start() + 1
    return found


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
