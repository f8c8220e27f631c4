"""Deciding a paused run in the Prefect UI's form, in a real browser: tests/ui/resume_form.js (`SCRIPT`)
presses Resume, fills the form and submits it (`resume_in_browser`)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from tests.support.browser_session import BrowserSession

SCRIPT = Path(__file__).resolve().parents[1] / "ui" / "resume_form.js"


def resume_in_browser(ui_url: str, flow_run_id: str, *, ui: str, form: dict, refused: bool, name: str,
                      tmp_path: Path, browser: BrowserSession | None = None,
                      form_screenshot: Path | None = None, alert: bool = True) -> dict:
    """resume_form.js's decision on one paused run, in `browser` (else in a browser of its own); returns
    what it did, with a screenshot of the page it left (tmp_path/<name>-page.png) and, with
    `form_screenshot`, one of the form as it opened. With `alert` (a run paused on an alert, not a pen's
    decision) it reads the alert under the Decision field."""
    screenshot = tmp_path / f"{name}-page.png"
    job = {
        "step": "resume",
        "ui_url": ui_url,
        "flow_run_id": flow_run_id,
        "ui": ui,
        "form": form,
        "refused": refused,
        "screenshot": str(screenshot),
        "form_screenshot": str(form_screenshot) if form_screenshot else None,
        "alert": alert,
    }
    with contextlib.ExitStack() as own:
        session = browser or own.enter_context(BrowserSession(SCRIPT, tmp_path / name))
        result = session.step(**job)
        assert result["ok"], (f"the {ui} UI did not take the decision: {result}; screenshot: {screenshot}; "
                              f"stderr: {session.log.read_text()[-2000:]}")
    return result
