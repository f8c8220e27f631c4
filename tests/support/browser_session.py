"""One node process and one headless Chromium that a UI test drives step by step (tests/ui/browser.js's
answerSteps): a job JSON a line on the script's stdin, one JSON line answered for each, the browser closed
when stdin ends. Steps that share a browser share its profile (cache, cookies, storage), as a person's
steps in one browser do."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
from pathlib import Path
from types import TracebackType
from typing import Self

# The UI tests' folder: their scripts, and the playwright-core they require from its node_modules.
UI = Path(__file__).resolve().parents[1] / "ui"
# playwright-core 1.65 needs Node >= 20 and Debian 12's nodejs is 18: use the Node 22 that
# tests/mcp pins (scripts/bootstrap.sh installs both folders).
NODE = UI.parent / "mcp" / "node_modules" / ".bin" / "node"
# Every wait in the browser; far above what a loaded 2-core machine needs (a few seconds).
BROWSER_TIMEOUT_MS = 120_000
# How long one step may take before the browser counts as gone (its own waits end well before).
STEP_TIMEOUT_S = 600


class BrowserSession:
    """`script` (tutorial.js, resume_form.js) in one browser with a fresh profile under `work`, its stderr
    in `work`/<script>.log; `step(**job)` runs one step and returns its answer."""

    def __init__(self, script: Path, work: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.log = work / f"{script.stem}.log"
        browser = {"profile": str(work / f"{script.stem}-profile"), "timeout_ms": BROWSER_TIMEOUT_MS}
        with self.log.open("w") as stderr:
            self.node = subprocess.Popen([str(NODE), str(script), json.dumps(browser)], cwd=UI,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                         text=True, start_new_session=True)
        assert self.node.stdin is not None and self.node.stdout is not None
        self.stdin, self.stdout = self.node.stdin, self.node.stdout
        # Read on a thread, so that a browser that stops answering fails the step instead of hanging.
        self.answers: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.stdout:
            self.answers.put(line)
        self.answers.put("")  # the script ended

    def step(self, **job: object) -> dict:
        """The script's answer to `job`; {ok: False, error} with the end of its log when it gave none."""
        try:
            self.stdin.write(json.dumps(job) + "\n")
            self.stdin.flush()
            line = self.answers.get(timeout=STEP_TIMEOUT_S)
        except (BrokenPipeError, queue.Empty):
            line = ""
        if line:
            return json.loads(line)
        return {"ok": False, "error": f"no answer; the script's stderr ends: {self.log.read_text()[-2000:]}"}

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError):
            self.stdin.close()
        try:
            self.node.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.node.pid, signal.SIGKILL)  # node and the Chromium it started
            self.node.wait()
        self.reader.join(timeout=60)
        self.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
