"""The `pen.write` output of MPP-001 as its original writes it, for the tests to pin the pen's answers on.

The original's output block ("2. pen.write 输出"), keys only:

    {
      "pen_id": "string · MPP-{persona}-{yyyymmdd}-{nnn}",
      "code": "string · 笔生成的语言源代码",
      "lang": "string · 与 sandbox.lang 一致",
      "execution": {"status", "stdout", "stderr", "result", "duration_ms"},
      "suggestion": "'erase' | 'keep' | 'share' · 1.5B MP 给的建议",
      "audit": {"syslog_id", "intent_hash", "code_hash"}
    }

Anything else slotrelay hands out sits under its one extension key, `x-slotrelay`.
"""

from __future__ import annotations

from typing import Any

OUTPUT_KEYS = frozenset({"pen_id", "code", "lang", "execution", "suggestion", "audit"})
EXECUTION_KEYS = frozenset({"status", "stdout", "stderr", "result", "duration_ms"})
AUDIT_KEYS = frozenset({"syslog_id", "intent_hash", "code_hash"})
EXTENSION = "x-slotrelay"
EXTENSION_KEYS = frozenset({"decision", "config", "error"})


def assert_output_shape(body: dict[str, Any]) -> None:
    """The answer holds exactly the seed's keys, at every level, plus the one extension key."""
    assert set(body) == OUTPUT_KEYS | {EXTENSION}, sorted(body)
    assert set(body["execution"]) == EXECUTION_KEYS, sorted(body["execution"])
    assert set(body["audit"]) == AUDIT_KEYS, sorted(body["audit"])
    assert set(body[EXTENSION]) == EXTENSION_KEYS, sorted(body[EXTENSION])


def decision_of(body: dict[str, Any]) -> dict[str, Any]:
    """What became of the pen, from the extension."""
    return body[EXTENSION]["decision"]
