"""The `pen-write` flow: `pen.write` as a Prefect flow run, one task run per step.

The steps, and their order, are the core's (`slotrelay.pen.writer.complete`); `tasks/pen.py` runs
each as a task run and shows the generated code and the sandbox run as Markdown artifacts. When the
persona's policy says a person decides (`{"mode": "person"}` in its pen-policy.json), the run pauses
with the pen's decision form (`tasks.pen.PenDecisionInput`: erase | keep | share, the pen and its
result shown first), as a chain's `pen` node does; resuming it from the UI, or with
`resume_flow_run(id, run_input={"decision": "keep"})`, carries the decision out. A pen error
(MPP-E001..E003, MPP-E005) fails the run after its audit record is written; the error is also an
artifact. A program killed at its deadline is an output (`execution.status: "timeout"`), not an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from slotrelay.pen import config, writer
from slotrelay.pen.errors import InvalidPenRequest, PenError, SandboxStartFailed
from slotrelay.pen.model_client import ModelSettings
from slotrelay.pen.run import PenRun
from slotrelay.psmr.analysis.effects import effects
from slotrelay.sandbox.backends import check_policy_images
from slotrelay.sandbox.errors import SandboxRequestError, SandboxUnavailable
from slotrelay.sandbox.settings import SandboxSettings
from tasks.pen import DECISION_TIMEOUT_S, artifact_key


def model_settings(model_block: str | None, root: str, env_file: str | None = None) -> ModelSettings:
    """The code model: from the named `CodeModel` Block, else the environment, the named dotenv file, and
    what the root's `.env` may set (`slotrelay.pen.config`)."""
    return code_model(model_block) or config.model_settings(root=Path(root), env_file=env_file)


def code_model(model_block: str | None) -> ModelSettings | None:
    """The code model of the named `CodeModel` Block, else None (the environment's or `.env`'s)."""
    if not model_block:
        return None
    from blocks.code_model import CodeModel

    # from sync code load returns the block; its annotation also allows an async caller's coroutine
    return cast(CodeModel, CodeModel.load(model_block)).settings()


def sandbox_settings(policy_block: str | None) -> SandboxSettings | None:
    """The sandbox policy from the named `SandboxPolicy` Block, else None (the environment's defaults).

    The images the policy pins are looked up on its daemon here, as the flow starts: a missing one
    stops the run before a pen is claimed or the model is asked, rather than after.

    Raises:
        InvalidPenRequest: the block's daemon URL, TLS files or image languages are unusable (naming
            the field).
        SandboxStartFailed: (MPP-E002) the daemon does not answer, or lacks an image the policy pins
            (naming it).
    """
    if not policy_block:
        return None
    from blocks.sandbox_policy import SandboxPolicy

    try:
        settings = cast(SandboxPolicy, SandboxPolicy.load(policy_block)).settings()
        check_policy_images(settings)
    except SandboxRequestError as error:
        raise InvalidPenRequest(f"sandbox policy {policy_block!r}: {error.message}") from error
    except SandboxUnavailable as error:
        raise SandboxStartFailed(f"sandbox policy {policy_block!r}: {error.message}") from error
    return settings


@flow(name="pen-write", log_prints=False)
def pen_write(
    intent: str,
    persona_id: str,
    upstream_inputs: Any = None,
    task_category: str | None = None,
    options: dict[str, Any] | None = None,
    root: str = ".",
    model_block: str | None = None,
    backend: str | None = None,
    sandbox_policy: str | None = None,
    decision_timeout_s: int = DECISION_TIMEOUT_S,
    env_file: str | None = None,
) -> dict[str, Any]:
    """Turn an intent into code, run it in the sandbox, and erase, keep or share it.

    Parameters:
        intent: what the code should do (natural language).
        persona_id: the persona holding the pen.
        upstream_inputs: the inputs the code receives (any JSON value).
        task_category: 'data-process', 'api-call', 'file-op', ...
        options: the request's `options` (`sandbox`, `persist_hint`; CONTRACTS.md#pen-request).
        root: where the pen keeps its files and audit log.
        model_block: the name of a saved `CodeModel` Block (else SLOTRELAY_MODEL_* / .env).
        backend: the sandbox backend (docker, bwrap; None: the first usable).
        sandbox_policy: the name of a saved `SandboxPolicy` Block (daemon, images, default limits,
            egress allow-list, pool size); None: the environment's daemon, then bwrap.
        decision_timeout_s: how long a pause for a person's decision waits.
        env_file: a dotenv file to read SLOTRELAY_MODEL_* from when no `model_block` is given (the
            root's own `.env` may set only the timeout and the token cap).

    Returns:
        The `pen.write` output (CONTRACTS.md#pen-output) with slotrelay's extension key `x-slotrelay`.

    Raises:
        PenError: MPP-E001..E003, MPP-E005, PEN_DECISION_TIMEOUT (the run fails; the call is audited).
    """
    log = get_run_logger()
    settings = sandbox_settings(sandbox_policy)
    options = dict(options or {})
    if settings is not None:
        options["sandbox"] = settings.with_defaults(options.get("sandbox"))
    request = {
        "intent": intent,
        "context": {
            "persona_id": persona_id,
            "task_category": task_category,
            "upstream_inputs": upstream_inputs,
        },
        "options": options,
    }
    # The model first, as `slotrelay pen write` does: without one no pen_id is claimed.
    model = model_settings(model_block, root, env_file)
    for key, why in model.ignored.items():
        log.warning("not used: %s from the %s", key, why)
    run = writer.begin(request, root=root)
    run.decision_timeout_s = decision_timeout_s
    log.info("pen %s: %s", run.pen_id, intent)
    try:
        outcome = writer.complete(run, model=model, effect_screen=effects, backend=backend, settings=settings)
    except PenError as error:
        # complete() has already recorded the call with the error (and erased the pen it failed).
        _error_artifact(run, error)
        raise
    log.info("pen %s: %s (%s)", run.pen_id, outcome.state, outcome.decided_by)
    return outcome.to_json()


def _error_artifact(run: PenRun, error: PenError) -> None:
    create_markdown_artifact(
        f"# {run.pen_id}: {error.code}\n\n{error.message}\n\naudit: `{error.audit}`",
        key=artifact_key("pen-error", run.pen_id),
        description="why the pen failed",
    )
