"""The intent screen against personal data and passwords written to slip past it (issue 29, item 8).

Each bypass is an intent that reached the code model before: a password as an unquoted `key=value`
(in English, Chinese, Japanese, Korean, Portuguese, French, Spanish, German), an ID grouped with
spaces, dots or slashes, written in full-width or Arabic-Indic digits, or with a no-break space, a
zero-width space or a soft hyphen inside. Every number is made here from a body chosen for the
test and the check digits python-stdnum computes for it, so it validates and is copied from
nowhere. A refusal locates the number where it was written and never repeats it; through
`slotrelay pen write` nothing of it reaches the model. Ordinary intents with numbers in them
(versions, dates, sizes, addresses, decimals) still pass: a screen that refuses them is broken too.
"""

from __future__ import annotations

import itertools
import json
import string
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from stdnum import iban
from stdnum.br import cpf
from typer.testing import CliRunner

from harness.stub_model import StubModel
from slotrelay.cli import app
from slotrelay.pen.errors import IntentRejected
from slotrelay.pen.intent_screen import screen_intent
from slotrelay.pen.normalise import normalise


def complete(module: ModuleType, before: str, after: str = "", *, count: int = 2) -> str:
    """The first check digits that make `before + check + after` valid for the stdnum module."""
    for tail in itertools.product(string.digits, repeat=count):
        if module.is_valid(before + "".join(tail) + after):
            return "".join(tail)
    raise AssertionError(f"no check digits make {before}…{after} valid")


CPF_CHECK = complete(cpf, "390533447")
IBAN_CHECK = complete(iban, "DE", "370400440532013000")
FULL_WIDTH = str.maketrans(string.digits + "-", "０１２３４５６７８９－")
ARABIC_INDIC = str.maketrans(string.digits, "٠١٢٣٤٥٦٧٨٩")
NBSP, NARROW_NBSP, ZWSP, SOFT_HYPHEN = "\u00a0", "\u202f", "\u200b", "\u00ad"

SSN = "US social security number"
CARD = "payment card number"
SECRET = "Secret Keyword"

# (intent, the sensitive part as written in it, the kind its finding names)
BYPASSES: list[tuple[str, str, str]] = [
    ("log in with password=hunter2 and list the users", "password=hunter2", SECRET),
    ("log in with pass=Summer2024! and list the users", "pass=Summer2024!", SECRET),
    ("用密码=hunter2登录并列出用户", "密码=hunter2", SECRET),
    ("用数据库密码：Summer2024!登录并列出用户", "密码：Summer2024!", SECRET),
    ("パスワード=hunter2でログインしてユーザーを一覧にする", "パスワード=hunter2", SECRET),
    ("비밀번호=hunter2 로 로그인하고 사용자를 나열", "비밀번호=hunter2", SECRET),
    ("entre com senha=verao2024 e liste os usuários", "senha=verao2024", SECRET),
    ("connecte-toi avec mot de passe: Ete2024!xy et liste les comptes", "mot de passe: Ete2024!xy", SECRET),
    ("inicia sesión con clave=Verano24 y lista los usuarios", "clave=Verano24", SECRET),
    ("melde dich mit Passwort=Sommer2024 an und liste die Nutzer", "Passwort=Sommer2024", SECRET),
    (f"log in with pass{ZWSP}word=hunter2 and list the users", f"pass{ZWSP}word=hunter2", SECRET),
    ("look up the person with SSN 536 22 1234 in the list", "536 22 1234", SSN),
    ("look up the person with SSN 536221234 in the list", "536221234", SSN),
    ("look up the person with SSN 536.22.1234 in the list", "536.22.1234", SSN),
    ("look up the person with SSN 536/22/1234 in the list", "536/22/1234", SSN),
    (
        "look up the person with SSN " + "536-22-1234".translate(FULL_WIDTH) + " in the list",
        "536-22-1234".translate(FULL_WIDTH),
        SSN,
    ),
    (
        "look up the person with SSN " + "536-22-1234".translate(ARABIC_INDIC) + " in the list",
        "536-22-1234".translate(ARABIC_INDIC),
        SSN,
    ),
    (
        f"look up the record of 390 533 447 {CPF_CHECK} and print it",
        f"390 533 447 {CPF_CHECK}",
        "Brazilian CPF number",
    ),
    (
        f"look up the record of 390533{ZWSP}447{CPF_CHECK} and print it",
        f"390533{ZWSP}447{CPF_CHECK}",
        "Brazilian CPF number",
    ),
    (
        f"look up the record of 390.533.{SOFT_HYPHEN}447-{CPF_CHECK} and print it",
        f"390.533.{SOFT_HYPHEN}447-{CPF_CHECK}",
        "Brazilian CPF number",
    ),
    (
        f"pay the invoice to DE{IBAN_CHECK}{NBSP}3704{NBSP}0044{NBSP}0532{NBSP}0130{NBSP}00 today",
        f"DE{IBAN_CHECK}{NBSP}3704{NBSP}0044{NBSP}0532{NBSP}0130{NBSP}00",
        "IBAN",
    ),
    (f"charge 4111{NBSP}1111{NBSP}1111{NBSP}1111 for the order", f"4111{NBSP}1111{NBSP}1111{NBSP}1111", CARD),
    (
        f"charge 4111{NARROW_NBSP}1111{NARROW_NBSP}1111{NARROW_NBSP}1111 for the order",
        f"4111{NARROW_NBSP}1111{NARROW_NBSP}1111{NARROW_NBSP}1111",
        CARD,
    ),
    ("charge 4111.1111.1111.1111 for the order", "4111.1111.1111.1111", CARD),
    ("charge 4111/1111/1111/1111 for the order", "4111/1111/1111/1111", CARD),
    # A number followed by one more group still holds the number.
    ("charge 4111 1111 1111 1111 7 times", "4111 1111 1111 1111", CARD),
]


@pytest.mark.parametrize(("intent", "written", "kind"), BYPASSES, ids=[w for _, w, _ in BYPASSES])
def test_regression_a_disguised_secret_or_id_is_refused_where_it_was_written(
    intent: str, written: str, kind: str
) -> None:
    with pytest.raises(IntentRejected) as refused:
        screen_intent(intent)
    error = refused.value
    assert error.code == "MPP-E001" and error.details["reason"] == "sensitive"
    start = intent.index(written)
    spans = {(f["start"], f["end"]) for f in error.details["findings"] if f["kind"] == kind}
    assert any(s <= start and start + len(written) <= e for s, e in spans), error.details["findings"]
    if kind != SECRET:
        # Found as written, not in the normalised copy's coordinates.
        assert (start, start + len(written)) in spans, error.details["findings"]
    reported = json.dumps(error.to_json(), ensure_ascii=False)
    assert written not in reported and normalise(written).text not in reported


@pytest.mark.parametrize(
    "intent",
    [
        "upgrade numpy to 1.26.4 and pin it in requirements.txt",
        "group the rows by day from 2024/03/15 to 15.03.2024 and count them",
        "resize the images to 1920x1080 and keep the 12 500 newest",
        "split files larger than 104857600 bytes into parts",
        "use pi = 3.14159265358979 to compute the area of each circle",
        "fetch the status page at 10.123.145.178 and count the links",  # has a Steuer-ID's shape
        "retry 3 times with a timeout of 30000 ms, then log the error",
        "sum the quantities 4111 and 1111 and 250 in the order list",
        "hash each password: sha256 of the salt and the text, then compare",
        "create a form with fields username: string and password: string",
        "check that password=confirm_password in the signup form",
        "read password=${DB_PASSWORD} from the environment and connect",
        "the first pass: sort the rows, the second pass: merge them",
        "合计订单12345678的金额并打印",
        "把版本号 ３.１２.４ 写入文件",  # full-width digits of a version
    ],
)
def test_ordinary_intents_with_numbers_still_pass(intent: str) -> None:
    screen_intent(intent)


def test_the_normalised_form_traces_each_character_to_where_it_was_written() -> None:
    written = f"SSN ٥٣٦{NBSP}٢٢{ZWSP}-١٢٣٤ ＝"
    plain = normalise(written)
    assert plain.text == "SSN 536 22-1234 ="
    assert plain.original_span(4, 15) == (4, 16)  # the zero-width space lies inside the number


@pytest.fixture(scope="module")
def model_stub() -> Iterator[StubModel]:
    with StubModel() as stub:
        yield stub


@pytest.mark.parametrize(
    ("intent", "written", "kind"),
    [BYPASSES[0], BYPASSES[2], BYPASSES[13], BYPASSES[18], BYPASSES[20], BYPASSES[22]],
    ids=lambda value: value if isinstance(value, str) and len(value) < 40 else None,
)
def test_regression_nothing_of_a_disguised_intent_reaches_the_model_or_a_file(
    model_stub: StubModel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    intent: str,
    written: str,
    kind: str,
) -> None:
    model_stub.reset()
    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", model_stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    done = CliRunner().invoke(
        app, ["pen", "write", "--persona", "p1", intent, "--root", str(tmp_path), "--json"]
    )
    assert done.exit_code == 2, done.output
    body = json.loads(done.stdout)
    assert body["error"]["code"] == "MPP-E001" and kind in body["error"]["message"]
    assert model_stub.requests == []
    plain = normalise(written).text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert written not in text and plain not in text, path
