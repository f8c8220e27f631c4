"""What a person reads about a pen (slotrelay.pen.reports) is the core's, not the Prefect shell's: plain
Markdown over the pen's records, which the shell shows as artifacts and in its forms."""

from __future__ import annotations

import subprocess
import sys

from slotrelay.pen.reports import fence_name, fenced, review_markdown


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
