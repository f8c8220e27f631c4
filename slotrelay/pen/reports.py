"""What a person reads about a pen, as Markdown: its code, its sandbox run, the decision it waits for,
and a registry review's checks.

Plain text over the pen's own records, so the pen says it once: the Prefect shell shows these as
artifacts and in its decision form (`tasks/pen.py`, `flows/registry_review.py`), and the CLI names a
language's highlighting as the fences here do (`fence_name`). The module imports nothing of the pen but
its terms, so a chain process that has no pen node does not load the pen to import it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from slotrelay.pen.terms import PenAction

if TYPE_CHECKING:
    from slotrelay.pen.run import PenOutcome, PenRun

ACTION_HELP = {
    PenAction.erase: "destroy the code and its output; only the audit record stays",
    PenAction.keep: "store the pen in the persona's private folder",
    PenAction.share: "deliver it to the registry inbox for review (with its manifest)",
}


def fence_name(lang: str) -> str:
    """The name Markdown fences and syntax highlighters know a sandbox language by."""
    return {"node": "javascript", "shell": "bash"}.get(lang, lang)


def fenced(text: str, fence: str = "") -> str:
    """`text` in a fenced block, the fence longer than any run of backticks in it so the text cannot
    close it."""
    ticks = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{ticks}{fence}\n{text}\n{ticks}"


def limits_text(run: PenRun) -> str:
    """The run's sandbox limits in one line: language, timeout, memory, network, files."""
    options = run.request.options.sandbox
    network = (
        options.network if isinstance(options.network, str) else f"allow {','.join(options.network.allow)}"
    )
    fs = options.fs if isinstance(options.fs, str) else f"read {','.join(options.fs.allow_paths)}"
    return f"{options.lang}, {options.timeout_ms} ms, {options.memory_mb} MB, network {network}, fs {fs}"


def code_markdown(run: PenRun) -> str:
    """The generated code, fenced for its language."""
    fence = fence_name(run.request.options.sandbox.lang)
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
    parts = [f"## Pen {output.pen_id} waits for a decision\n\n| field | value |\n|---|---|\n{table}\n"]
    parts.append(f"\n{choices}\n")
    for name, text in (("stdout", execution.stdout), ("stderr", execution.stderr)):
        if text.strip():
            parts.append(f"\n**{name}**\n\n{fenced(text[-2000:])}\n")
    parts.append(f"\n**code**\n\n{fenced(output.code, fence_name(output.lang))}\n")
    return "".join(parts)


def review_markdown(pen_id: str, report: dict[str, Any]) -> str:
    """A registry review's checks (`registry.check(...).to_json()`): each test example, the static screen."""
    rows = "\n".join(
        f"| {t['index']} | {t['status']} | `{json.dumps(t['expected'])[:80]}` | "
        f"`{json.dumps(t['got'])[:80]}` | "
        f"{'yes' if t['passed'] else '**no**'} |"
        for t in report["tests"]
    )
    findings = "\n".join(f"- line {f['line']}: {f['detail']}" for f in report["static_findings"]) or "- none"
    verdict = "all checks passed" if report["passed"] else "**checks failed: it cannot be accepted**"
    return (
        f"# Review of {pen_id}: {verdict}\n\n| example | status | expected | got | passed "
        "|\n|---|---|---|---|---|\n"
        f"{rows}\n\n## Static screen\n{findings}\n"
    )
