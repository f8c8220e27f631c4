"""`pen.write` step by step: begin, then the steps of `steps()` in order, then finish.

Each step is a plain function over a `PenRun`. `complete` runs them in the order `steps()` gives,
each through the installed step runner (`slotrelay.pen.steps`): the CLI and plain Python call them,
while under Prefect the shell's runner makes each a task run, in the `pen-write` flow and in a
chain's `pen` node alike. Whatever step fails, `fail` destroys what the run produced, moves the pen to
`erased` (the one terminal state of the seed's where nothing but the audit records is left) and
appends the call's audit record, so every call, erased or failed, leaves exactly one `call` record
(plus its state transitions) and no pen stays `draft` or `executing`. A program killed at its
deadline is not a failure of the call: its output says `timeout` (and MPP-E004 is recorded), and the
persona decides on it as on any result. When the persona's policy asks a person, `finish` asks
through the installed asker (`slotrelay.pen.steps.ask_a_person`): under Prefect the run pauses for
the decision; elsewhere the pen waits, completed, for `slotrelay pen decide`. Timings are kept per
phase (screening, model, sandbox, persistence) for the overhead bench.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from slotrelay.audit_log import AuditLog, sha256_text
from slotrelay.pen import store
from slotrelay.pen.code_screen import enforce_screen
from slotrelay.pen.codegen import generate_code
from slotrelay.pen.errors import (
    ExecutionTimedOut,
    IllegalTransition,
    InvalidPenRequest,
    PenError,
    PenRunFailed,
    PermissionViolation,
    SandboxStartFailed,
)
from slotrelay.pen.ids import allocate_pen_id, parse_pen_id
from slotrelay.pen.intent_screen import screen_intent
from slotrelay.pen.manifest import build_manifest, sensitive_examples
from slotrelay.pen.model_client import ChatClient, ModelSettings
from slotrelay.pen.models import (
    FILE_SUFFIX,
    AuditRef,
    Execution,
    PenOutput,
    PenRequest,
    parse_request,
)
from slotrelay.pen.policy import Decision, decide, load_policy
from slotrelay.pen.run import PenOutcome, PenRun, execution_error
from slotrelay.pen.states import FINAL_ACTION_STATE, current_state, require_state, transition
from slotrelay.pen.steps import Step, ask_a_person, run_step
from slotrelay.pen.suggest import suggest
from slotrelay.pen.terms import PenAction
from slotrelay.timestamps import now_iso

if TYPE_CHECKING:
    from slotrelay.effect_screen import EffectScreen
    from slotrelay.sandbox.settings import SandboxSettings

# Sandbox violations that mean "tried to reach a forbidden resource" (MPP-E005); memory and output
# caps are limits the run hit, reported as an execution error instead.
ACCESS_VIOLATIONS = frozenset({"network", "fs"})


@contextmanager
def _timed(run: PenRun, phase: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        run.timings[phase] = run.timings.get(phase, 0.0) + (time.perf_counter() - start) * 1000


def begin(request: Any, *, root: str | Path) -> PenRun:
    """Validate the request, allocate a pen_id and record the pen as a draft.

    Parameters:
        request: the `pen.write` input (dict or `PenRequest`).
        root: the pen's root folder.

    Returns:
        The run.

    Raises:
        InvalidPenRequest: the request breaks the contract (nothing is recorded: there is no pen yet).
        PenRunFailed: the root cannot be written (a read-only folder, a full disk).
    """
    parsed = parse_request(request)
    # Options the sandbox would refuse (an IP in network.allow, a relative allow_path) are bad input
    # now, before a pen_id is claimed and the model is asked for code that could never run.
    sandbox_limits_for(parsed)
    run = PenRun(
        root=Path(root),
        request=parsed,
        pen_id="",
        intent_hash=sha256_text(parsed.intent),
        started_at=now_iso(),
    )
    with _timed(run, "persistence"):
        try:
            run.pen_id = allocate_pen_id(root, parsed.context.persona_id)
            transition(run.log, run.pen_id, "draft", persona_id=run.persona_id, intent_hash=run.intent_hash)
        except OSError as error:
            raise PenRunFailed(
                f"the pen cannot write its state for the root {root} (in {run.log.folder}): {error.strerror}"
            ) from error
    return run


def screen(run: PenRun) -> None:
    """Screen the intent (MPP-E001 on refusal; nothing has reached the model)."""
    with _timed(run, "screening"):
        screen_intent(run.request.intent)


def generate(run: PenRun, client: ChatClient) -> str:
    """Ask the code model for the program (MPP-E003 on failure)."""
    with _timed(run, "model"):
        run.code = generate_code(client, run.request)
    return run.code


def screen_code(run: PenRun, effect_screen: EffectScreen) -> None:
    """Screen the code statically with `effect_screen` for Python's effects (MPP-E005 before it runs)."""
    with _timed(run, "screening"):
        options = run.request.options.sandbox
        enforce_screen(_code(run), options.lang, options, effect_screen)


def _code(run: PenRun) -> str:
    if run.code is None:
        raise PenError(f"pen {run.pen_id} has no code yet")
    return run.code


def sandbox_limits_for(request: PenRequest) -> Any:
    """The sandbox's limits for a request's options.

    Raises:
        InvalidPenRequest: when the sandbox refuses the options (e.g. an IP address in network.allow).
    """
    from slotrelay.sandbox.limits import SandboxLimits
    from slotrelay.validation_text import first_problem

    options = request.options.sandbox.model_dump(mode="json", exclude={"lang"})
    try:
        return SandboxLimits.model_validate(options)
    except ValidationError as exc:
        problem = f"options.sandbox.{first_problem(exc)}"
        raise InvalidPenRequest(
            f"invalid pen.write request: {problem}", details={"fields": [problem]}
        ) from exc


def execute(run: PenRun, *, backend: str | None = None, settings: SandboxSettings | None = None) -> Execution:
    """Run the code in the sandbox and move the pen through executing to completed.

    Parameters:
        run: a run whose code passed the static screen.
        backend: the sandbox backend ("docker", "bwrap"; None: the sandbox's default).
        settings: the operator's sandbox policy (daemon, images, egress allow-list, pool size).

    Returns:
        The execution: status success, error, or timeout (the program was killed at `timeout_ms`:
        its partial stdout and stderr are kept, MPP-E004 is recorded with the `completed` transition,
        and the persona decides on it as on any other result).

    Raises:
        InvalidPenRequest: the backend named does not exist.
        SandboxStartFailed: (MPP-E002) no backend could start the code.
        PermissionViolation: (MPP-E005) the sandbox refused a network or file access.
    """
    from slotrelay import sandbox
    from slotrelay.sandbox.errors import SandboxError, SandboxRequestError

    code = _code(run)
    options = run.request.options.sandbox
    limits = sandbox_limits_for(run.request)
    with _timed(run, "persistence"):
        transition(run.log, run.pen_id, "executing", persona_id=run.persona_id, code_hash=run.code_hash)
    with _timed(run, "sandbox"):
        try:
            result = sandbox.run(
                code,
                lang=options.lang,
                limits=limits,
                inputs=run.request.context.upstream_inputs,
                backend=backend,
                settings=settings,
            )
        except SandboxRequestError as exc:
            # A backend name that does not exist is bad input, not a sandbox that failed to start.
            raise InvalidPenRequest(f"sandbox: {exc.message}") from exc
        except SandboxError as exc:
            raise SandboxStartFailed(
                f"the sandbox could not start the code: {exc.message}", details={"sandbox_error": exc.code}
            ) from exc
    violations = [violation.model_dump() for violation in result.violations]
    run.sandbox = {
        "backend": result.backend,
        "image": _image(result.backend, options.lang, settings),
        "exit_code": result.exit_code,
        "violations": violations,
        "truncated": result.truncated.model_dump(),
    }
    # A forbidden access weighs more than the deadline a refused program may then have run into.
    access = [v for v in violations if v["kind"] in ACCESS_VIOLATIONS]
    if access:
        raise PermissionViolation(
            "the sandbox refused: " + "; ".join(v["detail"] for v in access),
            details={"stage": "runtime", "violations": access},
        )
    timed_out = result.status == "timeout" or any(v["kind"] == "timeout" for v in violations)
    run.execution = Execution(
        status="timeout" if timed_out else result.status,
        stdout=result.stdout,
        stderr=result.stderr,
        # A killed program returned nothing; a shell script's last line may be cut mid-way.
        result=None if timed_out else program_result(options.lang, result.result, result.stdout),
        duration_ms=result.duration_ms,
    )
    with _timed(run, "persistence"):
        transition(
            run.log,
            run.pen_id,
            "completed",
            persona_id=run.persona_id,
            execution_status=run.execution.status,
            error_code=ExecutionTimedOut.code if timed_out else None,
        )
    return run.execution


def _image(backend: str, lang: str, settings: SandboxSettings | None) -> str | None:
    """The image a docker run used, from the backend that ran it (bwrap runs the host's interpreters)."""
    if backend != "docker":
        return None
    from slotrelay.sandbox import get_backend

    return str(get_backend(backend, lang=lang, settings=settings).image_for(lang))  # type: ignore[attr-defined]


def program_result(lang: str, result: Any, stdout: str) -> Any:
    """A program's structured result by the pen's convention.

    python and node return it (`main(inputs)`); a shell script has no return value, so its last
    non-empty stdout line, read as JSON, is the result (None when that line is not JSON, or too deep
    to read; lone surrogates become U+FFFD as in the sandbox's own results).

    Parameters:
        lang: the program's language.
        result: what the sandbox reported as the result.
        stdout: what the program printed.

    Returns:
        The result.
    """
    if lang != "shell" or result is not None:
        return result
    from slotrelay.sandbox.protocol import valid_text

    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        return valid_text(json.loads(lines[-1]))
    except (ValueError, RecursionError):
        return None


def suggest_action(run: PenRun, client: ChatClient | None) -> PenAction:
    """The pen's suggestion, from the model or the rule."""
    if run.execution is None:
        raise PenError(f"pen {run.pen_id} has not run yet")
    with _timed(run, "model"):
        run.suggestion, run.suggestion_source = suggest(client, run.request, run.execution)
    return run.suggestion


def persona_decision(run: PenRun) -> Decision:
    """What the persona's policy decides for this run (action None: a person decides)."""
    if run.execution is None or run.suggestion is None:
        raise PenError(f"pen {run.pen_id} has no suggestion yet")
    policy = load_policy(run.root, run.persona_id)
    run.decision = decide(policy, run.suggestion, run.execution, run.request.options.persist_hint)
    return run.decision


def stage(run: PenRun) -> Path:
    """Write the completed pen to its staging folder, where it waits for the decision."""
    folder = store.staging_dir(run.root, run.pen_id)
    with _timed(run, "persistence"):
        output = run.output(syslog_id="pending")
        store.write_text(run.root, folder / f"code.{FILE_SUFFIX[output.lang]}", output.code)
        store.write_json(run.root, folder / "request.json", run.request.model_dump(mode="json"))
        store.write_json(
            run.root,
            folder / "execution.json",
            {**output.execution.model_dump(mode="json"), "sandbox": run.sandbox},
        )
        store.write_json(run.root, folder / "output.json", output.model_dump(mode="json"))
    return folder


def record_call(run: PenRun, decision: Decision | None, *, error: PenError | None = None) -> AuditRef:
    """Append the call's audit record (one per call, failed or not) and return its reference."""
    with _timed(run, "persistence"):
        record = run.log.append(
            "call",
            pen_id=run.pen_id,
            persona_id=run.persona_id,
            intent_hash=run.intent_hash,
            code_hash=run.code_hash,
            started_at=run.started_at,
            ended_at=now_iso(),
            status=error.code if error else "completed",
            error_message=error.message if error else None,
            execution_status=run.execution.status if run.execution else None,
            # A completed run's own MPP code (MPP-E004 for a timeout): recorded, not raised.
            execution_error=(execution_error(run.execution) or {}).get("code") if run.execution else None,
            suggestion=run.suggestion,
            suggestion_source=run.suggestion_source,
            final_action=decision.action if decision else None,
            decided_by=decision.decided_by if decision else None,
        )
    return AuditRef(syslog_id=record["syslog_id"], intent_hash=run.intent_hash, code_hash=run.code_hash)


def fail(run: PenRun, error: PenError) -> PenError:
    """Destroy what a failed run produced, record the call, and return the error with its pen and audit ref.

    The pen becomes `erased`, wherever it stopped (draft, executing or completed): the seed's states
    name no failed state, and `erased` is the one whose meaning is what is true of a failed pen, "沙箱产物
    销毁，仅保留 audit 记录" (what the sandbox produced is destroyed, only the audit records stay). Its
    transition says who erased it (`decided_by: "pen (<code>)"`) and why (`error_code`), and the call
    record has the error's message, so a failed pen is never mistaken for one a persona chose to erase.
    """
    error.pen_id = run.pen_id
    store.erase_dir(store.staging_dir(run.root, run.pen_id))
    if current_state(run.log, run.pen_id) in ("draft", "executing", "completed"):
        transition(
            run.log,
            run.pen_id,
            "erased",
            persona_id=run.persona_id,
            final_action=PenAction.erase,
            decided_by=f"pen ({error.code})",
            error_code=error.code,
        )
    error.audit = record_call(run, None, error=error).model_dump()
    return error


def unexpected(error: Exception) -> PenRunFailed:
    """An error no pen code names, as the pen error that `fail` can clean up after."""
    return PenRunFailed(f"the run broke: {type(error).__name__}: {error}")


def apply_decision(
    root: str | Path, pen_id: str, action: PenAction, *, decided_by: str, comment: str | None = None
) -> PenOutcome:
    """Carry out a final action on a completed pen: erase, keep or share its staged files.

    Parameters:
        root: the pen's root folder.
        pen_id: the pen.
        action: erase, keep or share.
        decided_by: who decided (recorded in the transition).
        comment: why, when a person said (recorded in the transition too).

    Returns:
        The outcome, with where the files went (None after erase).

    Raises:
        PenNotFound: no such pen, or its staged files are gone.
        IllegalTransition: the pen is not completed (still running, already decided, or failed).
        InvalidPenRequest: share of a run whose result does not make a valid manifest.
    """
    if action not in FINAL_ACTION_STATE:
        raise InvalidPenRequest(f"final action {action!r} is not one of {', '.join(PenAction)}")
    action = PenAction(action)
    persona_id, _, _ = parse_pen_id(pen_id)
    try:
        return _apply(root, pen_id, persona_id, action, decided_by=decided_by, comment=comment)
    except PenError as error:
        error.pen_id = pen_id
        raise


def _apply(
    root: str | Path, pen_id: str, persona_id: str, action: PenAction, *, decided_by: str, comment: str | None
) -> PenOutcome:
    log = AuditLog(root)
    folder = store.staging_dir(root, pen_id)
    with log.locked():
        state = require_state(log, pen_id)
        if state in ("draft", "executing"):
            # The state machine lets the pen itself erase a run that failed there (`fail`); a person
            # decides only on a completed pen.
            raise IllegalTransition(
                f"pen {pen_id} is {state}: it has not completed, so there is nothing to decide yet",
                details={"pen_id": pen_id, "from": state, "to": FINAL_ACTION_STATE[action]},
            )
        if state != "completed":
            transition(log, pen_id, FINAL_ACTION_STATE[action])  # raises IllegalTransition with the states
        output = PenOutput.model_validate(store.read_json(root, folder / "output.json"))
        location: Path | None
        if action == PenAction.erase:
            store.erase_dir(folder)
            location = None
        elif action == PenAction.keep:
            location = store.move_dir(root, folder, store.private_dir(root, persona_id, pen_id))
        else:
            request = PenRequest.model_validate(store.read_json(root, folder / "request.json"))
            store.write_json(root, folder / "manifest.json", build_manifest(request, output))
            location = store.move_dir(root, folder, store.registry_dir(root, "inbox", pen_id))
        target = FINAL_ACTION_STATE[action]
        transition(
            log,
            pen_id,
            target,
            persona_id=persona_id,
            final_action=action,
            decided_by=decided_by,
            location=str(location) if location else None,
            **({"comment": comment} if comment else {}),
        )
    return PenOutcome(
        output=output,
        state=target,
        final_action=action,
        decided_by=decided_by,
        location=str(location) if location else None,
    )


def steps(
    client: ChatClient, *, effect_screen: EffectScreen, backend: str | None, settings: SandboxSettings | None
) -> tuple[Step, ...]:
    """The steps after `begin`, in the order they run: the one place that order is written.

    Parameters:
        client: the code model, for the code and the suggestion.
        effect_screen: the effects of Python code, for the static screen.
        backend: the sandbox backend (None: the sandbox's default).
        settings: the operator's sandbox policy.
    """
    return (
        Step("screen-intent", screen),
        Step("generate-code", lambda run: generate(run, client)),
        Step("static-screen", lambda run: screen_code(run, effect_screen)),
        Step("sandbox-run", lambda run: execute(run, backend=backend, settings=settings)),
        Step("suggest", lambda run: suggest_action(run, client)),
        Step("persona-decision", persona_decision),
        Step("stage", stage),
    )


def write(
    request: Any,
    *,
    root: str | Path,
    model: ModelSettings,
    effect_screen: EffectScreen,
    backend: str | None = None,
    settings: SandboxSettings | None = None,
) -> PenOutcome:
    """`pen.write`: from an intent to a run, a suggestion and the persona's decision.

    Parameters:
        request: the `pen.write` input (dict or `PenRequest`).
        root: the pen's root folder (persona brains, module registry, audit log).
        model: the code model's endpoint.
        effect_screen: the effects of Python code, for the static screen (PSMR's
            `slotrelay.psmr.analysis.effects.effects`; the pen does not import PSMR, its caller hands it
            over).
        backend: the sandbox backend (None: the sandbox's default).
        settings: the operator's sandbox policy (daemon, images, egress allow-list, pool size).

    Returns:
        The outcome. When the persona's policy asks a person and nobody can be asked here (see
        `finish`), the pen stays completed and staged, `final_action` is None, and `decide` finishes
        it later.

    Raises:
        InvalidPenRequest: the request breaks the contract.
        PenError: MPP-E001..E003, MPP-E005, each carrying `pen_id` and `audit` (the call's audit reference).
    """
    run = begin(request, root=root)
    return complete(run, model=model, effect_screen=effect_screen, backend=backend, settings=settings)


def complete(
    run: PenRun,
    *,
    model: ModelSettings,
    effect_screen: EffectScreen,
    backend: str | None = None,
    settings: SandboxSettings | None = None,
) -> PenOutcome:
    """Run a begun pen's steps in order, each through the installed step runner, then `finish` it.

    Raises:
        PenError: MPP-E001..E003, MPP-E005 or PEN_RUN_FAILED, each carrying `pen_id` and `audit` (the
            call's audit reference); the pen's files are destroyed and the pen is `erased` first.
    """
    run.config = config_report(model, settings)
    with ChatClient(model) as client:
        try:
            for step in steps(client, effect_screen=effect_screen, backend=backend, settings=settings):
                run_step(step, run)
        except PenError as error:
            raise fail(run, error) from None
        except Exception as error:
            raise fail(run, unexpected(error)) from error
    return finish(run)


def config_report(model: ModelSettings, settings: SandboxSettings | None) -> dict[str, Any]:
    """Where the code model and the sandbox policy of a run came from (the output's `x-slotrelay.config`)."""
    return {
        "model": {
            "base_url": model.base_url,
            "model": model.model,
            "from": dict(model.sources),
            "ignored": dict(model.ignored),
        },
        "sandbox": {"from": settings.source if settings is not None else "environment"},
    }


def finish(run: PenRun) -> PenOutcome:
    """Carry out the persona's decision and record the call; when the policy asks a person, ask one.

    The call is recorded and the pen staged before a person is asked, so a pen whose asker goes away
    (a killed process, a pause nobody answered) still waits for `slotrelay pen decide`.

    Raises:
        PenError: carrying out the decision failed (e.g. a share whose manifest is invalid); the
            pen's files are destroyed and the call is recorded with the error. A person's decision
            that cannot be carried out (a folder already where the pen would go) leaves the pen
            waiting instead.
        DecisionTimedOut: the asker paused for a person and nobody answered in time.
    """
    decision = run.decision
    if decision is None:
        raise PenError(f"pen {run.pen_id} has no decision yet")
    if decision.action is None:
        return _ask_a_person(run)
    action = decision.action
    if action == PenAction.share and run.execution is not None:
        found = sensitive_examples(run.request.context.upstream_inputs, run.execution.result)
        if found:
            # Sharing would publish the run's data as a test example: the pen is kept instead.
            action = PenAction.keep
            refused = f"share refused: {', '.join(found)} in the example"
            decision = Decision(action, f"{decision.decided_by} ({refused})")
    try:
        with _timed(run, "persistence"):
            outcome = apply_decision(run.root, run.pen_id, action, decided_by=decision.decided_by)
    except PenError as error:
        raise fail(run, error) from None
    except Exception as error:
        raise fail(run, unexpected(error)) from error
    ref = record_call(run, decision)
    outcome.output = run.output(ref.syslog_id)
    if outcome.location is not None:
        with _timed(run, "persistence"):
            store.write_json(
                run.root, Path(outcome.location) / "output.json", outcome.output.model_dump(mode="json")
            )
    outcome.timings = run.timings
    outcome.config = run.config
    return outcome


def _ask_a_person(run: PenRun) -> PenOutcome:
    """Record the call, keep the pen staged, and ask a person through the installed asker."""
    ref = record_call(run, run.decision)
    output = run.output(ref.syslog_id)
    folder = store.staging_dir(run.root, run.pen_id)
    with _timed(run, "persistence"):
        store.write_json(run.root, folder / "output.json", output.model_dump(mode="json"))
    pending = PenOutcome(
        output=output,
        state="completed",
        final_action=None,
        decided_by="person (pending)",
        location=str(folder),
        timings=run.timings,
        config=run.config,
    )
    try:
        answer = ask_a_person(run, pending)
    except PenError as error:
        error.pen_id = run.pen_id
        raise
    if answer is None:
        return pending
    decided: PenOutcome = run_step(
        Step(
            "apply-decision",
            lambda run: apply_decision(
                run.root, run.pen_id, answer.action, decided_by=answer.decided_by, comment=answer.comment
            ),
        ),
        run,
    )
    decided.output = output
    decided.timings = run.timings
    decided.config = run.config
    return decided
