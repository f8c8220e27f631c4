"""The resolver's memo gives each key the value it has when evaluated alone, whatever was asked first."""

from __future__ import annotations

from typing import Any

from slotrelay.psmr.analysis.memo import CanonicalMemo


def _ring(order: list[str]) -> dict[str, frozenset[str]]:
    """Values of a three-key cycle a -> b -> c -> a (each key is itself plus the next one's value),
    asked in the given order; a key met again on its own cycle stands for nothing."""
    follows = {"a": "b", "b": "c", "c": "a"}

    def compute(key: Any) -> frozenset[str]:
        return frozenset({key}) | memo.get(follows[key])

    memo: CanonicalMemo[frozenset[str]] = CanonicalMemo(compute, lambda key: frozenset(), min)
    return {key: memo.get(key) for key in order}


def test_a_cycle_has_the_same_values_whichever_key_is_asked_first() -> None:
    answers = [_ring(order) for order in (["a", "b", "c"], ["c", "b", "a"], ["b", "a", "c"])]
    # Cut at the head, a: c's value stops before a, b's holds c's, a's holds all three.
    assert answers[0] == {"a": {"a", "b", "c"}, "b": {"b", "c"}, "c": {"c"}}
    assert answers[1] == answers[0]
    assert answers[2] == answers[0]


def test_invalidate_drops_what_used_an_input_and_names_the_questions_that_used_it() -> None:
    inputs = {"x": 1, "y": 2}

    def compute(key: Any) -> int:
        if key in inputs:
            memo.read(("input", key))
            return inputs[key]
        return memo.get("x") + 10 if key == "uses_x" else memo.get("y") + 10

    memo: CanonicalMemo[int] = CanonicalMemo(compute, lambda key: 0, min)
    for question in ("first", "second"):
        memo.begin(question)
        memo.get("uses_x" if question == "first" else "uses_y")
        memo.end()
    inputs["x"] = 5
    asked = memo.invalidate([("input", "x")])
    assert "first" in asked and "second" not in asked
    assert "uses_y" in memo.done and "uses_x" not in memo.done
    assert memo.get("uses_x") == 15


def test_unread_keeps_only_the_values_that_read_no_input_directly_or_through_a_key() -> None:
    def compute(key: str) -> int:
        if key == "input":
            memo.read(("input",))
            return 1
        if key == "uses_input":
            return memo.get("input") + 1
        if key == "constant":
            return 7
        return memo.get("constant") + 1

    memo: CanonicalMemo[int] = CanonicalMemo(compute, lambda key: 0, min)
    for key in ("uses_input", "uses_constant"):
        memo.get(key)
    assert memo.unread() == {"constant": 7, "uses_constant": 8}
    other: CanonicalMemo[int] = CanonicalMemo(compute, lambda key: 0, min)
    other.keep(memo.unread())
    assert other.done == {"constant": 7, "uses_constant": 8}
