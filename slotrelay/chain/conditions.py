"""Route conditions: `{field, operator, value, additional_checks}` evaluated on an output slot.

Operators (the seed's four): `equals`, `in` (the field's value is one of a list), `length_greater_than`,
`length_equals` (of a string, list or object). A missing field or a value of the wrong type makes the
condition not hold, with a reason saying so; it never raises.
"""

from __future__ import annotations

import json
from collections.abc import Sized
from typing import Any

from slotrelay.chain.checks import CheckResult, field_value, is_missing, run_check
from slotrelay.chain.models import Chain, Condition


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _operator_holds(operator: str, actual: Any, expected: Any, field: str) -> CheckResult:
    if operator == "equals":
        if actual == expected:
            return CheckResult(True, f"{field} equals {_show(expected)}")
        return CheckResult(False, f"{field} is {_show(actual)}, not {_show(expected)}")
    if operator == "in":
        if not isinstance(expected, list):
            return CheckResult(False, f"operator 'in' needs a list value, got {_show(expected)}")
        if actual in expected:
            return CheckResult(True, f"{field} = {_show(actual)} is in {_show(expected)}")
        return CheckResult(False, f"{field} = {_show(actual)} is not in {_show(expected)}")
    if isinstance(expected, bool) or not isinstance(expected, int):
        return CheckResult(False, f"operator {operator!r} needs an integer value, got {_show(expected)}")
    if not isinstance(actual, Sized) or isinstance(actual, bytes):
        return CheckResult(False, f"{field} = {_show(actual)} has no length")
    length = len(actual)
    if operator == "length_greater_than":
        held = length > expected
        return CheckResult(held, f"len({field}) = {length} {'>' if held else '<='} {expected}")
    held = length == expected
    return CheckResult(held, f"len({field}) = {length} {'==' if held else '!='} {expected}")


def evaluate_condition(condition: Condition | None, document: dict[str, Any], *, chain: Chain) -> CheckResult:
    """Whether a route's condition holds on the source's output slot document.

    Parameters:
        condition: the route's condition; None always holds.
        document: the source node's output slot document.
        chain: the chain, for resolving paths in additional checks.

    Returns:
        Whether it held, and a reason naming the field, operator or check that decided.
    """
    if condition is None:
        return CheckResult(True, "no condition")
    actual = field_value(document, condition.field)
    if is_missing(actual):
        return CheckResult(False, f"{condition.field} is missing")
    result = _operator_holds(condition.operator, actual, condition.value, condition.field)
    if not result.ok:
        return result
    for check in condition.additional_checks:
        extra = run_check(check, document, chain=chain)
        if not extra.ok:
            return CheckResult(False, f"additional check failed: {extra.reason}")
    return result
