"""`slotrelay pen write | decide | review | audit verify`: the magic pen's commands.

Exit codes (each `PenError`'s `exit_code`, printed and mapped in slotrelay.cli):
    0  ok
    1  the work ran and failed: the program ended in error (its output is printed all the same),
       MPP-E003 code generation, MPP-E004 timeout, MPP-E005 violation, MPP-E006 share rejected,
       PEN_RUN_FAILED an error no code names (the pen is cleaned up and its call recorded)
    2  bad input: MPP-E001 intent, an invalid request, pen_id, action or state change
    3  the environment is missing something: MPP-E002 no sandbox, no code model configured
With `--json`, a failure prints one object `{"error": {"code", "message", ...}, "pen_id", "audit": {...}}`
on stdout (`pen_id` null when the error came before one was assigned).
The pen is imported inside the commands, so every other `slotrelay` command starts without it.
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager, nullcontext
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from slotrelay.commands.output import AsJson, print_json
from slotrelay.errors import AlreadyReported, ExitCode
from slotrelay.pen.reports import fence_name
from slotrelay.pen.terms import PenAction, Verdict

if TYPE_CHECKING:
    from slotrelay.pen.run import PenOutcome

app = typer.Typer(
    no_args_is_help=True, help="The magic pen: intent -> code -> sandbox -> erase, keep or share."
)
audit_app = typer.Typer(no_args_is_help=True, help="The pen's hash-chained audit log.")
app.add_typer(audit_app, name="audit")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

Root = Annotated[
    Path, typer.Option("--root", help="the existing folder where the pen keeps its files and audit log")
]


class Backend(StrEnum):
    docker = "docker"
    bwrap = "bwrap"


# Checked by typer before anything runs: a misspelt backend must not cost a model call first.
SandboxBackend = Annotated[Backend | None, typer.Option("--backend", help="sandbox backend: docker or bwrap")]


def _check_root(root: Path, *, writes: bool = True) -> None:
    """Refuse a --root the pen cannot use, before any work: it must be an existing (writable) folder.

    A missing root is not created: a mistyped one would scatter pens and an audit log where nobody
    looks (and `audit verify` would find its empty log intact).
    """
    if not root.exists():
        problem = f"--root: {root} does not exist (create the folder first, or name the pen's folder)"
    elif not root.is_dir():
        problem = f"--root: {root} is not a folder"
    elif writes and not os.access(root, os.W_OK | os.X_OK):
        problem = f"--root: {root} is not writable (the pen keeps its files and audit log there)"
    else:
        return
    from slotrelay.pen.errors import InvalidPenRequest

    raise InvalidPenRequest(problem)


def _progress(message: str, as_json: bool) -> AbstractContextManager[object]:
    # A spinner on stderr while the model and the sandbox work; none when stdout must be pure JSON
    # for a program (stderr stays quiet then too).
    return nullcontext() if as_json else err.status(message)


def _json_value(text: str | None, what: str) -> Any:
    if text is None:
        return None
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise typer.BadParameter(f"{what}: cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{what}: not JSON ({exc})") from None


def _show_outcome(outcome: PenOutcome) -> None:
    output = outcome.output
    out.print(
        Panel(
            Syntax(output.code, fence_name(output.lang)),
            title=f"{output.pen_id} ({output.lang})",
        )
    )
    table = Table(show_header=False)
    execution = output.execution
    table.add_row("execution", f"{execution.status} in {execution.duration_ms} ms")
    table.add_row("result", json.dumps(execution.result, ensure_ascii=False, default=str)[:500])
    if execution.stderr.strip():
        table.add_row("stderr", execution.stderr.strip()[-500:])
    table.add_row("suggestion", output.suggestion)
    table.add_row("final action", f"{outcome.final_action or 'waiting for a person'} ({outcome.decided_by})")
    table.add_row("state", outcome.state)
    table.add_row("files", outcome.location or "none (erased; only the audit record stays)")
    table.add_row("audit", output.audit.syslog_id)
    if outcome.config is not None:
        model = outcome.config["model"]
        table.add_row("model", f"{model['model']} at {model['base_url']} ({_sources(model['from'])})")
        table.add_row("sandbox policy", outcome.config["sandbox"]["from"])
    out.print(table)
    if outcome.final_action is None:
        out.print(f"decide with: slotrelay pen decide {output.pen_id} keep|erase|share", markup=False)


def _sources(sources: dict[str, str]) -> str:
    """`base_url, model from the environment; timeout_s from root .env ...`: each origin once."""
    by_origin: dict[str, list[str]] = {}
    for name, origin in sources.items():
        if origin != "default":
            by_origin.setdefault(origin, []).append(name)
    return "; ".join(f"{', '.join(names)} from the {origin}" for origin, names in by_origin.items())


@app.command()
def write(
    intent: Annotated[str | None, typer.Argument(help="what the code should do, in any language")] = None,
    persona: Annotated[str | None, typer.Option("--persona", help="the persona holding the pen")] = None,
    input: Annotated[str | None, typer.Option("--input", help="upstream_inputs as JSON, or @FILE")] = None,
    task_category: Annotated[
        str | None, typer.Option("--task-category", help="data-process, api-call, ...")
    ] = None,
    lang: Annotated[str | None, typer.Option("--lang", help="python, node or shell")] = None,
    timeout_ms: Annotated[
        int | None, typer.Option("--timeout-ms", help="wall-clock limit of the run (default 30000)")
    ] = None,
    memory_mb: Annotated[
        int | None, typer.Option("--memory-mb", help="memory limit of the run (default 512)")
    ] = None,
    network: Annotated[
        str | None, typer.Option("--network", help="none, or host names separated by commas")
    ] = None,
    fs: Annotated[
        str | None, typer.Option("--fs", help="none, tmp, or readable paths separated by commas")
    ] = None,
    persist_hint: Annotated[
        str | None, typer.Option("--persist-hint", help="auto, erase, keep or share")
    ] = None,
    request: Annotated[
        str | None, typer.Option("--request", help="the whole pen.write request as JSON or @FILE")
    ] = None,
    env_file: Annotated[
        Path | None,
        typer.Option(
            "--env-file",
            help="a dotenv file to read SLOTRELAY_MODEL_* from (the environment wins); the root's own "
            ".env may set only SLOTRELAY_MODEL_TIMEOUT_S and SLOTRELAY_MODEL_MAX_TOKENS",
        ),
    ] = None,
    backend: SandboxBackend = None,
    root: Root = Path("."),
    as_json: AsJson = False,
) -> None:
    """Turn an intent into code, run it in the sandbox, and erase, keep or share it."""
    _check_root(root)
    body: dict[str, Any] = _json_value(request, "--request") or {}
    if not isinstance(body, dict):
        raise typer.BadParameter("--request: must be a JSON object")
    if intent is not None:
        body["intent"] = intent
    context = body.setdefault("context", {})
    if persona is not None:
        context["persona_id"] = persona
    if input is not None:
        context["upstream_inputs"] = _json_value(input, "--input")
    if task_category is not None:
        context["task_category"] = task_category
    options = body.setdefault("options", {})
    sandbox = options.setdefault("sandbox", {})
    for key, value in (("lang", lang), ("timeout_ms", timeout_ms), ("memory_mb", memory_mb)):
        if value is not None:
            sandbox[key] = value
    if network is not None:
        sandbox["network"] = "none" if network == "none" else {"allow": [h for h in network.split(",") if h]}
    if fs is not None:
        sandbox["fs"] = fs if fs in ("none", "tmp") else {"allow_paths": [p for p in fs.split(",") if p]}
    if persist_hint is not None:
        options["persist_hint"] = persist_hint
    body.setdefault("intent", "")
    from slotrelay.pen import write as pen_write
    from slotrelay.pen.config import model_settings
    from slotrelay.psmr.analysis.effects import effects

    model = model_settings(root=root, env_file=env_file)
    if not as_json:
        for key, why in model.ignored.items():
            err.print(f"not used: {key} from the {why}", markup=False)
    with _progress("pen.write: screening, asking the code model, running the sandbox", as_json):
        outcome = pen_write(
            body, root=root, model=model, effect_screen=effects, backend=backend.value if backend else None
        )
    if as_json:
        print_json(outcome.to_json())
    else:
        _show_outcome(outcome)
    if outcome.output.execution.status != "success":
        # The outcome above shows the program's error: exit without a second report.
        raise AlreadyReported(ExitCode.FAILED)


@app.command()
def decide(
    pen_id: Annotated[str, typer.Argument(help="MPP-{persona}-{yyyymmdd}-{nnn}")],
    action: Annotated[PenAction, typer.Argument(help="erase, keep or share")],
    root: Root = Path("."),
    as_json: AsJson = False,
) -> None:
    """A person's final action on a completed pen that waits for one."""
    _check_root(root)
    from slotrelay.pen import decide as pen_decide

    outcome = pen_decide(root, pen_id, action)
    if as_json:
        print_json(outcome.to_json())
    else:
        out.print(
            f"{pen_id}: {outcome.state} -> {outcome.location or 'erased (only the audit record stays)'}",
            markup=False,
        )


@app.command()
def review(
    pen_id: Annotated[str, typer.Argument(help="a shared pen")],
    verdict: Annotated[Verdict, typer.Argument(help="accept, reject or observation")],
    reviewer: Annotated[str, typer.Option("--reviewer", help="who reviews")] = "reviewer",
    backend: SandboxBackend = None,
    root: Root = Path("."),
    as_json: AsJson = False,
) -> None:
    """Review a shared pen: run its test examples and the static screen, then apply the verdict."""
    _check_root(root)
    from slotrelay.pen import review as pen_review
    from slotrelay.psmr.analysis.effects import effects

    with _progress(f"reviewing {pen_id}: running its test examples in the sandbox", as_json):
        outcome = pen_review(
            root,
            pen_id,
            verdict,
            effect_screen=effects,
            reviewer=reviewer,
            backend=backend.value if backend else None,
        )
    if as_json:
        print_json(outcome.to_json())
    else:
        table = Table("example", "status", "expected", "got", "passed")
        for test in outcome.report.tests:
            table.add_row(
                str(test["index"]),
                test["status"],
                json.dumps(test["expected"])[:80],
                json.dumps(test["got"])[:80],
                "yes" if test["passed"] else "NO",
            )
        out.print(table)
        for finding in outcome.report.static_findings:
            out.print(f"static screen: line {finding['line']}: {finding['detail']}", markup=False)
        out.print(f"{pen_id}: {outcome.state} -> {outcome.location}", markup=False)
        if outcome.error is not None:
            err.print(f"{outcome.error.code}: {outcome.error.message} (sent to the persona)", markup=False)
    if outcome.error is not None:
        # Reported above (or in the JSON outcome) as a result sent to the persona, not raised.
        raise AlreadyReported(outcome.error.exit_code)


@audit_app.command("verify")
def audit_verify(root: Root = Path("."), as_json: AsJson = False) -> None:
    """Check every record's hash, the chain between them, and the head (exit 1 when broken)."""
    _check_root(root, writes=False)
    from slotrelay.pen import verify_audit

    report = verify_audit(root)
    if as_json:
        print_json(report.to_json())
    elif report.ok:
        out.print(f"{report.path}: {report.records} records, chain intact", markup=False)
    else:
        for problem in report.problems:
            err.print(f"{report.path}:{problem['line']}: {problem['problem']}", markup=False)
    if not report.ok:
        raise AlreadyReported(ExitCode.FAILED)
