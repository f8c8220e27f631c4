"""Prefect tasks wrapping the pen's steps (slotrelay.pen.writer / review), one task per phase so a
flow run shows where time went and where a call failed. They share the run object in-process, so
caching is off: a pen call is never replayed from a cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from slotrelay.pen import registry, writer
from slotrelay.pen.model_client import ChatClient
from slotrelay.pen.models import Action, Execution
from slotrelay.pen.writer import PenOutcome, PenRun
from slotrelay.sandbox.settings import SandboxSettings


@task(name="pen-screen-intent", cache_policy=NO_CACHE)
def screen_intent(run: PenRun) -> None:
    """MPP-E001 when the intent is empty, says too little, or carries sensitive content."""
    writer.screen(run)


@task(name="pen-generate-code", cache_policy=NO_CACHE)
def generate_code(run: PenRun, client: ChatClient) -> str:
    """Ask the code model for the program (MPP-E003 on failure)."""
    return writer.generate(run, client)


@task(name="pen-static-screen", cache_policy=NO_CACHE)
def static_screen(run: PenRun) -> None:
    """MPP-E005 before running when the code uses what the options forbid."""
    writer.screen_code(run)


@task(name="pen-sandbox-run", cache_policy=NO_CACHE)
def sandbox_run(run: PenRun, backend: str | None, settings: SandboxSettings | None = None) -> Execution:
    """Run the code in the sandbox (MPP-E002, E004, E005), under the operator's policy when given."""
    return writer.execute(run, backend=backend, settings=settings)


@task(name="pen-suggest", cache_policy=NO_CACHE)
def suggest(run: PenRun, client: ChatClient | None) -> Action:
    """The pen's suggestion: the model's, or the rule's when the model cannot answer."""
    return writer.suggest_action(run, client)


@task(name="pen-stage", cache_policy=NO_CACHE)
def stage(run: PenRun) -> str:
    """Write the completed pen to its staging folder."""
    return str(writer.stage(run))


@task(name="pen-apply-decision", cache_policy=NO_CACHE)
def apply_decision(root: str, pen_id: str, action: Action, decided_by: str) -> PenOutcome:
    """Erase, keep or share a completed pen."""
    return writer.apply_decision(root, pen_id, action, decided_by=decided_by)


@task(name="registry-check", cache_policy=NO_CACHE)
def registry_check(
    root: str | Path, pen_id: str, backend: str | None, settings: SandboxSettings | None = None
) -> dict[str, Any]:
    """Run a shared pen's test examples in the sandbox and the static screen."""
    return registry.check(root, pen_id, backend=backend, settings=settings).to_json()


@task(name="registry-verdict", cache_policy=NO_CACHE)
def registry_verdict(
    root: str | Path, pen_id: str, verdict: registry.Verdict, reviewer: str
) -> dict[str, Any]:
    """Record the reviewer's verdict and move the tool in the registry."""
    return registry.verdict(root, pen_id, verdict, reviewer=reviewer).to_json()
