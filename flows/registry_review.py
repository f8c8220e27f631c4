"""The `registry-review` flow: a shared pen is checked, then a reviewer decides.

The checks (test_examples run in the sandbox, the static screen) become a Markdown artifact; the run
then pauses for the reviewer (`ReviewVerdictInput`: accept | reject | observation) unless a verdict
was passed in. Rejection writes MPP-E006 to the persona's notices; the run still completes, since the
review itself worked, and returns the error in its result.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput

from flows.pen import sandbox_settings
from slotrelay.pen.reports import review_markdown
from slotrelay.pen.terms import Verdict
from tasks import pen as pen_tasks
from tasks.pen import artifact_key

VERDICT_POLL_SECONDS = 2


class ReviewVerdictInput(RunInput):
    """The reviewer's verdict on a shared tool."""

    verdict: Verdict
    reviewer: str = "reviewer"


@flow(name="registry-review")
def registry_review(
    pen_id: str,
    root: str = ".",
    verdict: Verdict | None = None,
    reviewer: str = "reviewer",
    backend: str | None = None,
    sandbox_policy: str | None = None,
    review_timeout_s: int = 3600,
) -> dict[str, Any]:
    """Check a shared pen and record the reviewer's verdict.

    Parameters:
        pen_id: a pen in the registry inbox (state shared).
        root: the pen's root folder.
        verdict: decide without pausing (None: pause for a reviewer).
        reviewer: who reviews, when `verdict` is given.
        backend: the sandbox backend for the test examples.
        sandbox_policy: the name of a saved `SandboxPolicy` Block (as for `pen-write`).
        review_timeout_s: how long the pause waits for a reviewer.

    Returns:
        The review outcome (state, location, checks, and MPP-E006 when rejected).
    """
    log = get_run_logger()
    report = pen_tasks.registry_check(root, pen_id, backend, sandbox_settings(sandbox_policy))
    create_markdown_artifact(
        review_markdown(pen_id, report),
        key=artifact_key("pen-review", pen_id),
        description="test examples and static screen",
    )
    if verdict is None:
        answer = pause_flow_run(
            wait_for_input=ReviewVerdictInput,
            timeout=review_timeout_s,
            poll_interval=VERDICT_POLL_SECONDS,
            key=artifact_key("review", pen_id),
        )
        verdict, reviewer = answer.verdict, answer.reviewer
    outcome = pen_tasks.registry_verdict(root, pen_id, verdict, reviewer)
    log.info("review of %s: %s", pen_id, outcome["state"])
    return outcome
