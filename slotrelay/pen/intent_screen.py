"""Intent screening: the first gate of `pen.write`, before anything reaches the code model.

An intent is refused (MPP-E001) when it is empty, when it carries too little information to write
code from, or when it contains sensitive content. Secrets (keys, tokens, private keys, quoted
passwords) are found by detect-secrets' plugins, unquoted `password=...` pairs by the password
words of every language below; personal ID numbers (China, Korea, Japan, India, US, Brazil,
France, Spain, Germany, Italy), IBANs and card numbers by python-stdnum's check-digit validators, so
only numbers whose checksum holds count, not any long digit run. Everything is screened in a
normalised form (`slotrelay.pen.normalise`: NFKC, no invisible characters, one kind of space, ASCII
digits), and each ID is tried with each separator people put between its groups.
The findings name the kind and where it is, never the secret itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from detect_secrets.plugins.keyword import DENYLIST
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
from slotrelay.pen.normalise import normalise

MIN_INFORMATION = 3
MAX_INTENT_CHARS = 8000
SECRET_KEYWORD = "Secret Keyword"

_LATIN_WORD = re.compile(r"[^\W\d_]{2,}")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_TOKEN = re.compile(r"\S{16,}")


# How the groups of an ID may be separated: each shape is tried with each of these in turn, and
# always with none (one separator kind a number: "536 22 1234", "536.22.1234", "536221234").
SEPARATORS = ("-", " ", ".", "/")
_OPTIONAL, _REQUIRED = "<s>", "<g>"


@dataclass(frozen=True)
class IdShape:
    """One way an ID number is written, as a regular expression over the normalised text.

    In `shape`, `<s>` stands for an optional separator between groups and `<g>` for a required
    one; both become the separator of the pass (see SEPARATORS). A shape with `context` counts
    only when the text also says what the number is (a bare nine-digit SSN is any nine-digit
    number otherwise: a byte count, an order id).

    Parameters:
        kind: what the number is, as findings name it.
        shape: the regular expression, with separator placeholders.
        is_valid: the check of the number without its separators (python-stdnum's).
        context: a pattern the text must also contain, or None.
    """

    kind: str
    shape: str
    is_valid: Callable[[str], bool]
    context: re.Pattern[str] | None = None

    def patterns(self) -> list[re.Pattern[str]]:
        """The shape once per separator."""
        return [
            _written(self.shape.replace(_OPTIONAL, f"(?:{re.escape(s)})?").replace(_REQUIRED, re.escape(s)))
            for s in SEPARATORS
        ]


def _written(shape: str) -> re.Pattern[str]:
    # Bounded by ASCII letters and digits only: CJK text counts as a word character for \b and \w,
    # and IDs are written against it with no space ("身份证11010519491231002X的").
    return re.compile(rf"(?<![A-Za-z0-9]){shape}(?![A-Za-z0-9])")


def _card_number_is_valid(number: str) -> bool:
    return 13 <= len(number) <= 19 and luhn.is_valid(number)


_SSN_CONTEXT = re.compile(r"(?<![A-Za-z])(?:ssn|social security)(?![A-Za-z])", re.IGNORECASE)
_ALNUM = "[A-Z0-9]"
# Only a match whose check digits validate is reported, so an ordinary number of the same shape
# passes unless its digits happen to validate.
_ID_SHAPES: tuple[IdShape, ...] = (
    IdShape("Chinese resident identity number", r"\d{6}<s>\d{8}<s>\d{3}[\dXx]", ric.is_valid),
    IdShape("US social security number", r"\d{3}<g>\d{2}<g>\d{4}", ssn.is_valid),
    IdShape("US social security number", r"\d{9}", ssn.is_valid, context=_SSN_CONTEXT),
    IdShape("Indian Aadhaar number", r"\d{4}<s>\d{4}<s>\d{4}", aadhaar.is_valid),
    IdShape("Japanese My Number", r"\d{4}<s>\d{4}<s>\d{4}", my_number.is_valid),
    # Written 390.533.447-12: dots, then a dash before the check digits.
    IdShape("Brazilian CPF number", r"\d{3}<s>\d{3}<s>\d{3}(?:<s>|-)\d{2}", cpf.is_valid),
    IdShape("South Korean resident registration number", r"\d{6}<s>\d{7}", rrn.is_valid),
    IdShape(
        "French social security number (NIR)",
        r"[12]<s>\d{2}<s>\d{2}<s>(?:\d{2}|2[ABab])<s>\d{3}<s>\d{3}<s>\d{2}",
        nir.is_valid,
    ),
    IdShape("Spanish DNI", r"\d{8}<s>[A-Za-z]", dni.is_valid),
    IdShape("Spanish NIE", r"[XYZxyz]<s>\d{7}<s>[A-Za-z]", nie.is_valid),
    IdShape("German tax ID (Steuer-ID)", r"\d{2}<s>\d{3}<s>\d{3}<s>\d{3}", idnr.is_valid),
    IdShape(
        "Italian codice fiscale",
        r"[A-Za-z]{6}[0-9LMNP-Vlmnp-v]{2}[A-Za-z][0-9LMNP-Vlmnp-v]{2}[A-Za-z][0-9LMNP-Vlmnp-v]{3}[A-Za-z]",
        codicefiscale.is_valid,
    ),
    # Printed in groups of four (the last shorter), or in one run; letters are upper case.
    IdShape(
        "IBAN",
        rf"[A-Z]{{2}}\d{{2}}(?:(?:<g>{_ALNUM}{{4}}){{2,7}}(?:<g>{_ALNUM}{{1,3}})?|{_ALNUM}{{11,30}})",
        iban.is_valid,
    ),
    # Printed in groups of four or more digits (4-4-4-4, Amex's 4-6-5), the last maybe shorter, or in
    # one run: "3.14159265358979" is a number, not a card.
    IdShape("payment card number", r"\d{4,19}(?:<s>\d{4,15}){0,4}(?:<s>\d{1,3})?", _card_number_is_valid),
)
_SHAPE_PATTERNS = tuple((shape, shape.patterns()) for shape in _ID_SHAPES)
_SEPARATOR_CHARS = re.compile("[" + re.escape("".join(SEPARATORS)) + "]")
_DOTTED_QUAD = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})")
_DECIMAL_BEFORE = re.compile(r"\d[.,]")
_DECIMAL_AFTER = re.compile(r"[.,]\d")

# The words that name a password, in English and in the languages of the IDs above (Chinese,
# Korean, Japanese, Hindi, Portuguese, French, Spanish, German; Italian writes "password"), beside
# detect-secrets' own list (api_key, secret, ...).
_PASSWORD_WORDS = (
    "password", "passwd", "passphrase", "passcode", "pass", "pwd",
    "密码", "密碼", "口令",
    "비밀번호", "패스워드", "암호",
    "パスワード", "暗証番号",
    "पासवर्ड",
    "senha",
    "mot de passe", "mdp",
    "contraseña", "contrasena", "clave",
    "passwort", "kennwort",
)  # fmt: skip
# A password word, found on its own first (a scan linear in the text); what follows it is then
# read from there: the rest of a snake_case or kebab-case name (password_hash, db-pass-2), then
# `=`, `:` or `: `, then the value. Every part is bounded, so no text makes the scan quadratic.
_PASSWORD_WORD = re.compile(
    "|".join(sorted({*DENYLIST, *_PASSWORD_WORDS}, key=len, reverse=True)), re.IGNORECASE
)
_AFTER_WORD = re.compile(
    r"(?:[_-][A-Za-z0-9]{1,32}){0,3}s?(?![A-Za-z])"
    r"[ \t]{0,8}(?:=|:(?P<spaced>[ \t]{1,8})?)[ \t]{0,8}(?P<value>[!-~\u00c0-\u024f]{1,200})",
    re.IGNORECASE,
)
# What a value holds when it is code or a name, not a password: brackets (a call, an index), a
# variable ($PW, ${PW}, %s), a dotted or snake_case name (confirm_password, user.password).
_CODE_CHARS = re.compile(r"[()\[\]{}$%]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


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
    """Secrets in `text`: detect-secrets' plugins, and unquoted `key=value` passwords.

    The text is normalised first (see `slotrelay.pen.normalise`), so a zero-width space inside
    "password" or a full-width `＝` hides nothing. Each line is scanned by detect-secrets as Python
    (quoted values: `password = "..."`, keys and tokens), and for `key=value`, `key: value` pairs
    of a password word in any of the screen's languages (`password=hunter2`, `密码=hunter2`) whose
    value looks like a password rather than words or code (see `_looks_like_a_password`).

    Parameters:
        text: the text to scan, line by line.

    Returns:
        One finding per secret, with its detector's name, located in `text` as written.
    """
    plain = normalise(text)
    findings: list[Finding] = []
    with default_settings():
        plugins = list(get_plugins())
        for number, line_match in enumerate(re.finditer(r"[^\n]+", plain.text), start=1):
            line, offset = line_match.group(0), line_match.start()
            seen: set[str] = set()
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
            whole_line = plain.original_span(offset, offset + len(line))
            findings.extend(Finding(kind, *whole_line) for kind in sorted(seen))
            if SECRET_KEYWORD not in seen:
                findings.extend(
                    Finding(SECRET_KEYWORD, *plain.original_span(offset + start, offset + end))
                    for start, end in _unquoted_passwords(line)
                )
    return findings


def _unquoted_passwords(line: str) -> list[tuple[int, int]]:
    """Spans of `key=value` / `key: value` pairs of a password word whose value is a password.

    A word in Latin letters is a word of its own or the last part of a snake_case or kebab-case
    name (db_password, admin-pass), not the end of another word (compass); words of other scripts
    are written run together with the words around them ("数据库密码").
    """
    spans = []
    at = 0
    # A failed word is retried one character on: "db_password" holds detect-secrets' "db_pass" and
    # "password".
    while (word := _PASSWORD_WORD.search(line, at)) is not None:
        at = word.start() + 1
        before = line[word.start() - 1] if word.start() else " "
        if word.group(0).isascii() and before.isascii() and before.isalnum():
            continue
        pair = _AFTER_WORD.match(line, word.end())
        if pair is not None and _looks_like_a_password(
            pair.group("value"), spaced=bool(pair.group("spaced"))
        ):
            spans.append((word.start(), pair.end()))
            at = pair.end()
    return spans


def _looks_like_a_password(value: str, *, spaced: bool) -> bool:
    """An unquoted keyword value that is a password: one token mixing at least two of lower case,
    upper case, digits and symbols (`_` is a letter of identifiers), and not code or a name.

    After `key=` or `key:` a token of 6 characters counts (`password=hunter2`); after `key: `
    (prose's colon) 8 do, so "the hash of each password: sha256" stays prose."""
    token = value.strip("'\"").rstrip(".,;")
    if len(token) < (8 if spaced else 6) or _CODE_CHARS.search(token):
        return False
    if _NAME.fullmatch(token) and ("_" in token or "." in token):
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

    The text is normalised first (see `slotrelay.pen.normalise`): full-width and Arabic-Indic
    digits, no-break spaces between groups, a zero-width space or soft hyphen inside all read as the
    plain number. Each ID's shape is tried with each separator (`SEPARATORS`) and with none.

    Parameters:
        text: the text to scan (any language; a number may touch CJK text with no space).

    Returns:
        One finding per number, naming its kind and its position in `text` as written.
    """
    plain = normalise(text)
    findings: list[Finding] = []
    taken: set[tuple[int, int]] = set()
    for shape, patterns in _SHAPE_PATTERNS:
        if shape.context is not None and not shape.context.search(plain.text):
            continue
        for pattern in patterns:
            for match in _overlapping(pattern, plain.text):
                span = _validated_span(shape, pattern, plain.text, match)
                if span is not None and span not in taken:
                    taken.add(span)
                    findings.append(Finding(shape.kind, *plain.original_span(*span)))
    return sorted(findings, key=lambda finding: finding.start)


def _validated_span(
    shape: IdShape, pattern: re.Pattern[str], text: str, match: re.Match[str]
) -> tuple[int, int] | None:
    """Where a valid number lies in a match: the whole match, else the longest run of its leading
    groups that still has the shape ("536 22 1234 5" holds an SSN), else None.

    Not a number: a dotted quad of numbers up to 255 (an IPv4 address has a Steuer-ID's shape), and
    a run without separators that is part of a decimal number (the digits after "3.").
    """
    start, end = match.span()
    while True:
        written = text[start:end]
        if (
            not _is_ipv4(written)
            and not _in_a_decimal(text, start, end)
            and pattern.fullmatch(text, start, end)
            and shape.is_valid(_SEPARATOR_CHARS.sub("", written))
        ):
            return start, end
        cut = max(written.rfind(sep) for sep in SEPARATORS)
        if cut <= 0:
            return None
        end = start + cut


def _in_a_decimal(text: str, start: int, end: int) -> bool:
    if _SEPARATOR_CHARS.search(text, start, end):
        return False
    return bool(_DECIMAL_BEFORE.fullmatch(text, max(start - 2, 0), start) or _DECIMAL_AFTER.match(text, end))


def _is_ipv4(written: str) -> bool:
    """A dotted quad of numbers up to 255 is an address, not an ID (a Steuer-ID has the same shape)."""
    quad = _DOTTED_QUAD.fullmatch(written)
    return quad is not None and all(int(part) <= 255 for part in quad.groups())


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
