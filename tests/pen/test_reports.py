"""What a person reads about a pen (slotrelay.pen.reports) is the core's, not the Prefect shell's: plain
Markdown over the pen's records, which the shell shows as artifacts and in its forms."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from slotrelay.pen.models import AuditRef, Execution, PenOutput, parse_request
from slotrelay.pen.reports import decision_markdown, fence_name, fenced, review_markdown
from slotrelay.pen.run import PenOutcome, PenRun
from slotrelay.pen.terms import PenAction


def test_the_reports_load_neither_prefect_nor_the_rest_of_the_pen() -> None:
    loaded = "('prefect', 'slotrelay.pen.writer', 'slotrelay.sandbox')"
    probe = ("import sys, slotrelay.pen.reports; "
             f"print(sorted(m for m in sys.modules if m.startswith({loaded})))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_fence_outlasts_every_run_of_backticks_in_its_text() -> None:
    text = "print('```')\n````"
    block = fenced(text, fence_name("node"))
    assert block == f"`````javascript\n{text}\n`````"


def test_a_review_lists_each_example_and_the_static_screen() -> None:
    report = {
        "passed": False,
        "tests": [{"index": 0, "status": "success", "expected": 2, "got": 3, "passed": False}],
        "static_findings": [{"line": 4, "detail": "imports socket"}],
    }
    shown = review_markdown("MPP-ana-20260101-001", report)
    assert shown.startswith("# Review of MPP-ana-20260101-001: **checks failed: it cannot be accepted**")
    assert "| 0 | success | `2` | `3` | **no** |" in shown
    assert "- line 4: imports socket" in shown


def test_a_decision_shows_the_pen_the_choices_and_the_output_fenced(tmp_path: Path) -> None:
    request = parse_request({"intent": "sum the numbers", "context": {"persona_id": "p1"},
                             "options": {"sandbox": {"lang": "node"}}})
    run = PenRun(root=tmp_path, request=request, pen_id="MPP-p1-20260101-001", intent_hash="0" * 64,
                 started_at="2026-01-01T00:00:00.000+00:00", suggestion_source="policy")
    output = PenOutput(pen_id=run.pen_id, code="console.log(6)", lang="node", suggestion=PenAction.keep,
                       execution=Execution(status="success", stdout="```\n6", result=6, duration_ms=12),
                       audit=AuditRef(syslog_id="SL-1", intent_hash=run.intent_hash))
    pending = PenOutcome(output=output, state="completed", final_action=None, decided_by="", location=None)
    shown = decision_markdown(run, pending)
    assert shown.startswith("## Pen MPP-p1-20260101-001 waits for a decision")
    assert "| asked by | the pen-write flow |" in shown and "| suggestion | keep (policy) |" in shown
    assert all(f"- **{action.value}**: " in shown for action in PenAction)
    assert "````\n```\n6\n````" in shown and "```javascript\nconsole.log(6)\n```" in shown
