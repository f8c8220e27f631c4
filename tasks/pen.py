"""The pen's steps as Prefect task runs, a person's decision as a pause of the run, and registry review.

Importing this module installs `run_as_task` as the pen's step runner and `ask_in_the_run` as its
asker (`slotrelay.pen.steps`). Inside a flow or task run, each step of `slotrelay.pen.writer.complete`
becomes a task run named `pen-<step>`, in the `pen-write` flow and, nested under the node's task run,
in a chain's `pen` node; outside Prefect (the CLI) a step is called directly. The generated code and
the sandbox run (its limits, backend, image and exit) are Markdown artifacts of their task runs.

When a persona's policy asks a person, `ask_in_the_run` pauses the flow run (the `pen-write` run, or
the chain's run from inside its `pen` node) with `PenDecisionInput`, a form built as the engine's
arbitration form is (flows/arbitration.py): what to decide first, in its description (the pen, the
suggestion, the result, stdout, stderr and the code), a plain list of choices, who decided and why.
The UI renders it in both Prefect UIs; the API takes the same input (`resume_flow_run(id,
run_input={"decision": "keep"})`). The run waits in place (a chain's node waits inside its task run,
and Prefect cannot suspend a task run), one pen decision at a time per flow run, for the chain's
`pause_timeout_seconds` or the flow's `decision_timeout_s`; with no answer by then the pen stays
completed for `slotrelay pen decide` and the call fails with PEN_DECISION_TIMEOUT.

The pen itself is imported only inside the tasks: `tasks` loads this module in every chain process,
and a chain without a pen node must not pay for the pen. Caching is off: a pen call is never replayed.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext, TaskRunContext
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from pydantic import ConfigDict, Field, WithJsonSchema

from slotrelay.pen.steps import PersonAnswer, Step, use_asker, use_runner
from slotrelay.pen.terms import PenAction, Verdict

if TYPE_CHECKING:
    from slotrelay.pen.writer import PenOutcome, PenRun
    from slotrelay.sandbox.settings import SandboxSettings

# How often a paused run asks the API whether it was resumed (Prefect's default is 10 s).
DECISION_POLL_SECONDS = 1
# A pen-write run's wait when its caller sets none (a chain's node waits its pause_timeout_seconds).
DECISION_TIMEOUT_S = 3600
# One pen pause at a time per flow run: two pen nodes of one run never propose two pauses at once.
_pause_locks: dict[str, threading.Lock] = {}
_pause_locks_guard = threading.Lock()


def _pause_lock(flow_run_id: str) -> threading.Lock:
    with _pause_locks_guard:
        return _pause_locks.setdefault(flow_run_id, threading.Lock())


def artifact_key(kind: str, pen_id: str) -> str:
    """An artifact key (lowercase letters, digits, dashes) for one pen."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{kind}-{pen_id}".lower())


def limits_text(run: PenRun) -> str:
    """The run's sandbox limits in one line: language, timeout, memory, network, files."""
    options = run.request.options.sandbox
    network = (
        options.network if isinstance(options.network, str) else f"allow {','.join(options.network.allow)}"
    )
    fs = options.fs if isinstance(options.fs, str) else f"read {','.join(options.fs.allow_paths)}"
    return f"{options.lang}, {options.timeout_ms} ms, {options.memory_mb} MB, network {network}, fs {fs}"


def _run_name(step: Step, run: PenRun) -> str:
    if step.name == "sandbox-run":
        return f"pen-sandbox-run {run.pen_id} ({limits_text(run)})"
    return f"pen-{step.name} {run.pen_id}"


def code_markdown(run: PenRun) -> str:
    """The generated code, fenced for its language."""
    lang = run.request.options.sandbox.lang
    fence = {"node": "javascript", "shell": "bash"}.get(lang, lang)
    return (
        f"# {run.pen_id}: generated code\n\n**Intent:** {run.request.intent}\n\n```{fence}\n{run.code}\n```\n"
    )


def sandbox_markdown(run: PenRun, error: BaseException | None) -> str:
    """The sandbox run: its limits, backend, image and exit, then what the program printed."""
    execution = run.execution
    stopped = f"stopped: {getattr(error, 'code', type(error).__name__)}"
    rows = [
        ("status", execution.status if execution else stopped),
        ("exit code", str(run.sandbox.get("exit_code"))),
        ("limits", limits_text(run)),
        ("backend", str(run.sandbox.get("backend"))),
        ("image", run.sandbox.get("image") or "none (the host's interpreter, under bwrap)"),
    ]
    if execution is not None:
        rows += [
            ("duration", f"{execution.duration_ms} ms"),
            ("result", f"`{json.dumps(execution.result, ensure_ascii=False, default=str)[:500]}`"),
        ]
    rows += [(f"violation ({v['kind']})", v["detail"]) for v in run.sandbox.get("violations", [])]
    table = "\n".join(f"| {key} | {value} |" for key, value in rows)
    parts = [f"# {run.pen_id}: sandbox run\n\n| field | value |\n|---|---|\n{table}\n"]
    if execution is not None:
        for name, text in (("stdout", execution.stdout), ("stderr", execution.stderr)):
            if text.strip():
                parts.append(f"\n**{name}**\n\n```\n{text[-2000:]}\n```\n")
    return "".join(parts)


def _show(step: Step, run: PenRun, error: BaseException | None) -> None:
    if step.name == "generate-code" and run.code is not None:
        create_markdown_artifact(
            code_markdown(run),
            key=artifact_key("pen-code", run.pen_id),
            description="code generated by the pen",
        )
    elif step.name == "sandbox-run" and run.sandbox:
        # Also when the run broke a limit: a person sees the exit and what was refused.
        create_markdown_artifact(
            sandbox_markdown(run, error),
            key=artifact_key("pen-execution", run.pen_id),
            description="the sandbox run: limits, image, exit",
        )


@task(name="pen-step", cache_policy=NO_CACHE)
def pen_step(step: Step, run: PenRun) -> Any:
    """One step of the pen, shown with its artifact when it has one."""
    try:
        result = step.call(run)
    except BaseException as error:
        _show(step, run, error)
        raise
    _show(step, run, None)
    return result


def run_as_task(step: Step, run: PenRun) -> Any:
    """The pen's step runner under Prefect: a task run inside a flow or task run, a plain call elsewhere."""
    if FlowRunContext.get() is None and TaskRunContext.get() is None:
        return step.call(run)
    name = _run_name(step, run)
    # A callable, not the string: Prefect would fill a string's {braces} from the parameters.
    return pen_step.with_options(name=f"pen-{step.name}", task_run_name=lambda: name)(step, run)


use_runner(run_as_task)


def _decision_required(schema: dict[str, Any]) -> None:
    # Required and with a default: the form opens on keep, and the UIs do not label the one field
    # that matters "(Optional)".
    schema["required"] = ["decision", *schema.get("required", [])]


class PenDecisionInput(RunInput):
    """A person's final action on a pen (CONTRACTS.md#persona-decision): erase, keep or share.

    `decision` defaults to keep, the safe one (nothing destroyed, nothing published).
    """

    model_config = ConfigDict(json_schema_extra=_decision_required)

    # The schema Prefect's forms render: a plain list of choices (an enum's $ref is not one they all follow).
    decision: Annotated[
        PenAction,
        WithJsonSchema({"enum": [action.value for action in PenAction], "title": "Decision",
                        "type": "string", "default": PenAction.keep.value}),
    ] = PenAction.keep
    comment: str | None = Field(default=None, description="why, kept in the pen's audit record")
    decided_by: str | None = None


ACTION_HELP = {
    PenAction.erase: "destroy the code and its output; only the audit record stays",
    PenAction.keep: "store the pen in the persona's private folder",
    PenAction.share: "deliver it to the registry inbox for review (with its manifest)",
}


def _fenced(text: str, fence: str = "") -> str:
    # A fence longer than any run of backticks in the text, so the text cannot close it.
    ticks = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{ticks}{fence}\n{text}\n{ticks}"


def decision_markdown(run: PenRun, pending: PenOutcome) -> str:
    """What a person reads before deciding: the pen, the suggestion, the result, the output and the code."""
    output = pending.output
    execution = output.execution
    rows = [
        ("pen", output.pen_id),
        ("persona", run.persona_id),
        ("asked by", run.where or "the pen-write flow"),
        ("intent", run.request.intent.strip()),
        ("suggestion", f"{output.suggestion} ({run.suggestion_source})"),
        ("execution", f"{execution.status} in {execution.duration_ms} ms"),
        ("result", f"`{json.dumps(execution.result, ensure_ascii=False, default=str)[:500]}`"),
    ]
    table = "\n".join(f"| {key} | {str(value).replace('|', '/')} |" for key, value in rows)
    choices = "\n".join(f"- **{action.value}**: {what}" for action, what in ACTION_HELP.items())
    fence = {"node": "javascript", "shell": "bash"}.get(output.lang, output.lang)
    parts = [f"## Pen {output.pen_id} waits for a decision\n\n| field | value |\n|---|---|\n{table}\n"]
    parts.append(f"\n{choices}\n")
    for name, text in (("stdout", execution.stdout), ("stderr", execution.stderr)):
        if text.strip():
            parts.append(f"\n**{name}**\n\n{_fenced(text[-2000:])}\n")
    parts.append(f"\n**code**\n\n{_fenced(output.code, fence)}\n")
    return "".join(parts)


def ask_in_the_run(run: PenRun, pending: PenOutcome) -> PersonAnswer | None:
    """The pen's asker under Prefect: pause the flow run with the decision form (None outside a flow run).

    Raises:
        DecisionTimedOut: nobody answered within the run's decision timeout.
    """
    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        return None
    description = decision_markdown(run, pending)
    create_markdown_artifact(description, key=artifact_key("pen-decision", run.pen_id),
                             description="the persona asks a person")
    timeout = run.decision_timeout_s or DECISION_TIMEOUT_S
    with _pause_lock(str(context.flow_run.id)):
        try:
            answer = pause_flow_run(
                wait_for_input=PenDecisionInput.with_initial_data(description=description),
                timeout=timeout,
                poll_interval=DECISION_POLL_SECONDS,
                key=artifact_key("decision", run.pen_id),
            )
        except FlowPauseTimeout:
            from slotrelay.pen.errors import DecisionTimedOut

            raise DecisionTimedOut(
                f"nobody decided on pen {run.pen_id} within {timeout} s: it stays completed; decide it with "
                f"`slotrelay pen decide {run.pen_id} erase|keep|share --root {run.root}`"
            ) from None
    return PersonAnswer(PenAction(answer.decision), f"person:{answer.decided_by or 'prefect-ui'}",
                        comment=answer.comment)


use_asker(ask_in_the_run)


@task(name="registry-check", cache_policy=NO_CACHE)
def registry_check(
    root: str | Path, pen_id: str, backend: str | None, settings: SandboxSettings | None = None
) -> dict[str, Any]:
    """Run a shared pen's test examples in the sandbox and the static screen."""
    from slotrelay.pen import registry

    return registry.check(root, pen_id, backend=backend, settings=settings).to_json()


@task(name="registry-verdict", cache_policy=NO_CACHE)
def registry_verdict(root: str | Path, pen_id: str, verdict: Verdict, reviewer: str) -> dict[str, Any]:
    """Record the reviewer's verdict and move the tool in the registry."""
    from slotrelay.pen import registry

    return registry.verdict(root, pen_id, verdict, reviewer=reviewer).to_json()
