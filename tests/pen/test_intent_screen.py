"""Intent screening against personal data written as people write it, inside Latin and CJK text.

Each number is made here from a body chosen for the test and the check digits python-stdnum
computes for it (`complete`), so every one validates and none is copied from anywhere. Every
format is refused in both scripts, and through `pen write` nothing of it reaches the model or a file.
"""

from __future__ import annotations

import itertools
import json
import string
from pathlib import Path
from types import ModuleType

import pytest
from stdnum import iban
from stdnum.br import cpf
from stdnum.cn import ric
from stdnum.de import idnr
from stdnum.es import dni, nie
from stdnum.fr import nir
from stdnum.it import codicefiscale
from stdnum.jp import in_ as my_number
from stdnum.kr import rrn
from typer.testing import CliRunner

from slotrelay.cli import app
from slotrelay.pen.errors import IntentRejected
from slotrelay.pen.intent_screen import find_personal_numbers, screen_intent


def complete(
    module: ModuleType, before: str, after: str = "", *, alphabet: str = string.digits, count: int = 1
) -> str:
    """The first check characters that make `before + check + after` valid for the stdnum module."""
    for tail in itertools.product(alphabet, repeat=count):
        if module.is_valid(before + "".join(tail) + after):
            return "".join(tail)
    raise AssertionError(f"no check characters make {before}…{after} valid")


NUMBERS: list[tuple[str, str]] = [
    # The reproduction: the dotted form of a CPF.
    (f"390.533.447-{complete(cpf, '390533447', count=2)}", "Brazilian CPF number"),
    (f"390533447{complete(cpf, '390533447', count=2)}", "Brazilian CPF number"),
    (
        f"11010519491231002{complete(ric, '11010519491231002', alphabet=string.digits + 'X')}",
        "Chinese resident identity number",
    ),
    (f"850315-123456{complete(rrn, '850315123456')}", "South Korean resident registration number"),
    (f"1 85 07 75 123 456 {complete(nir, '1850775123456', count=2)}", "French social security number (NIR)"),
    (f"12345678{complete(dni, '12345678', alphabet=string.ascii_uppercase)}", "Spanish DNI"),
    (f"X1234567{complete(nie, 'X1234567', alphabet=string.ascii_uppercase)}", "Spanish NIE"),
    (f"86 095 742 71{complete(idnr, '8609574271')}", "German tax ID (Steuer-ID)"),
    (
        f"RSSMRA85T10A562{complete(codicefiscale, 'RSSMRA85T10A562', alphabet=string.ascii_uppercase)}",
        "Italian codice fiscale",
    ),
    (f"1234 5678 901{complete(my_number, '12345678901')}", "Japanese My Number"),
    (f"DE{complete(iban, 'DE', '370400440532013000', count=2)} 3704 0044 0532 0130 00", "IBAN"),
    (f"FR{complete(iban, 'FR', '30006000011234567890189', count=2)}30006000011234567890189", "IBAN"),
]


def placed(number: str, script: str) -> str:
    if script == "cjk":
        return f"请核对{number}的记录并打印结果"  # no space on either side
    return f"look up the record of {number} and print the result"


@pytest.mark.parametrize("script", ["latin", "cjk"])
@pytest.mark.parametrize(("number", "kind"), NUMBERS, ids=[f"{kind}-{number}" for number, kind in NUMBERS])
def test_regression_personal_numbers_are_refused_in_latin_and_cjk_text(
    number: str, kind: str, script: str
) -> None:
    intent = placed(number, script)
    found = find_personal_numbers(intent)
    assert kind in {finding.kind for finding in found}, found
    start = intent.index(number)
    assert any(f.kind == kind and (f.start, f.end) == (start, start + len(number)) for f in found), found
    with pytest.raises(IntentRejected) as refused:
        screen_intent(intent)
    assert refused.value.details["reason"] == "sensitive"
    assert number not in json.dumps(refused.value.to_json(), ensure_ascii=False)


@pytest.mark.parametrize(
    "intent",
    [
        "log in with password=Sup3rS3cr3tP4ss! and list the users",
        "用password=Sup3rS3cr3tP4ss!登录并列出用户",
        "connect with db_password: Xk9-mQ2v-L7pR and list users",
    ],
)
def test_regression_an_unquoted_password_is_refused(intent: str) -> None:
    with pytest.raises(IntentRejected) as refused:
        screen_intent(intent)
    assert {f["kind"] for f in refused.value.details["findings"]} == {"Secret Keyword"}


@pytest.mark.parametrize(
    "intent",
    [
        "hash each password: use bcrypt with a cost of 12",
        "check that password=confirm_password in the signup form",
        "read password=os.environ['PW'] and fail when it is missing",
        "format the order id 110105194912310021 as a label",  # fails the check digit
        "convert 1234 5678 9012 into words",  # a 12-digit number whose check digit does not hold
        "parse dates like 2026-11-30 and sort them",
        "fetch the page at 192.168.100.200 and count the links",
        "合计订单12345678的金额并打印",
    ],
)
def test_ordinary_text_and_numbers_still_pass(intent: str) -> None:
    screen_intent(intent)


@pytest.fixture
def pen_cli(stub, monkeypatch):
    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    return CliRunner()


@pytest.mark.parametrize(("number", "kind"), NUMBERS, ids=[kind for _, kind in NUMBERS])
def test_regression_nothing_of_a_refused_intent_reaches_the_model_or_a_file(
    pen_cli, stub, root: Path, number: str, kind: str
) -> None:
    done = pen_cli.invoke(
        app, ["pen", "write", "--persona", "p1", placed(number, "cjk"), "--root", str(root), "--json"]
    )
    assert done.exit_code == 2, done.output
    body = json.loads(done.stdout)
    assert body["error"]["code"] == "MPP-E001" and kind in body["error"]["message"]
    assert stub.requests == []
    assert not list(root.rglob("request.json"))
    compact = number.replace(" ", "").replace(".", "").replace("-", "")
    for path in root.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert number not in text and compact not in text, path
