"""The pen as a chain node: `{"kind": "pen", "intent", "persona_id", "options": {...}}`.

The node's input slot data becomes `upstream_inputs`; its output data is the pen's output object
with slotrelay's extension key (`x-slotrelay`: the decision, where the configuration came from).
`options` takes the request's `sandbox` and `persist_hint`, and `task_category`, `root` (relative to
the chain's work dir, which is the default), `env_file` (a dotenv file for SLOTRELAY_MODEL_*, relative
to the work dir), `backend` and `error_map`. A pen error becomes `NodeError(error_type, message)` with
the MPP code as the error type (so a chain declares `MPP-E003` with handling `retry`, for instance), or
the type `error_map` names for it; the message names the pen. A program killed at its deadline is an
output like a program that failed (`data.execution.status` is `timeout`; route on it), not an error.

When the persona's policy asks a person, the pen asks through the installed asker: under Prefect the
chain's run pauses, from inside this node, with the pen's decision form (tasks/pen.py), for the
chain's `pause_timeout_seconds`; the person's decision is carried out before the node's output slot
is written, so the slot holds the decided pen.

The run's caller gives the `pen` kind a `PenNodeSettings` (the chain flow does): the static screen of
Python code (PSMR's analyzer, which the pen does not import), and, from the flow's `model_block` and
`sandbox_policy` Blocks, a model and a sandbox policy (daemon, images, default limits, egress
allow-list, pool size), as for the `pen-write` flow. Without them the code model comes from the
environment, `env_file`, and what the root's `.env` may set (`slotrelay.pen.config`), as for
`slotrelay pen write`, and the sandbox from the environment's daemon, then bwrap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotrelay.chain.errors import NodeError
from slotrelay.effect_screen import EffectScreen
from slotrelay.pen import config
from slotrelay.pen.errors import PenError
from slotrelay.pen.model_client import ModelSettings
from slotrelay.pen.writer import begin, complete
from slotrelay.sandbox.settings import SandboxSettings

NODE_OPTIONS = frozenset(
    {"sandbox", "persist_hint", "task_category", "root", "env_file", "backend", "error_map"}
)


@dataclass(frozen=True)
class PenNodeSettings:
    """What a chain run's caller sets for its pen nodes (`ExecutionContext.executor_settings["pen"]`).

    Attributes:
        effect_screen: the effects of Python code, for the static screen (PSMR's
            `slotrelay.psmr.analysis.effects.effects`: the pen does not import PSMR, the caller hands it
            over).
        model: the code model (None: the environment, the node's `env_file`, what the root's `.env`
            may set).
        sandbox: the operator's sandbox policy (None: the environment's daemon, then bwrap).
    """

    effect_screen: EffectScreen
    model: ModelSettings | None = None
    sandbox: SandboxSettings | None = None


def run_pen_node(spec: Any, data: dict[str, Any], context: Any) -> dict[str, Any]:
    """Run a pen call for a chain node.

    Parameters:
        spec: the node's executor (`kind`, `intent`, `persona_id`, `options`).
        data: the input slot's data (the pen's upstream_inputs; `{}` for a start node).
        context: the chain's `ExecutionContext` (its chain file locates the default root; its
            `executor_settings["pen"]`, a `PenNodeSettings`, the model and the sandbox policy).

    Returns:
        The output slot's data: the pen's output object and slotrelay's extension (its decision).

    Raises:
        NodeError: error type = the MPP code (or `error_map[code]`), message = the pen's message and
            the pen's id once it had one.
    """
    options = dict(spec.options or {})
    unknown = set(options) - NODE_OPTIONS
    error_map: dict[str, str] = options.get("error_map") or {}
    if unknown:
        raise NodeError("PEN_INVALID_REQUEST", f"pen node options: unknown keys {sorted(unknown)}")
    work_dir = _work_dir(context)
    root = work_dir / options["root"] if options.get("root") else work_dir
    settings = getattr(context, "executor_settings", {}).get("pen")
    if not isinstance(settings, PenNodeSettings):
        # Without a screen the generated code could not be checked before it runs: refuse, never skip it.
        raise NodeError(
            "PEN_INVALID_REQUEST",
            "a pen node needs its PenNodeSettings (the static screen among them) in the chain run's "
            "executor_settings['pen']; the chain flow gives them",
        )
    if settings.sandbox is not None:
        options["sandbox"] = settings.sandbox.with_defaults(options.get("sandbox"))
    request = {
        "intent": spec.intent,
        "context": {
            "persona_id": spec.persona_id,
            "task_category": options.get("task_category"),
            "upstream_inputs": data or None,
        },
        "options": {key: options[key] for key in ("sandbox", "persist_hint") if key in options},
    }
    env_file = work_dir / options["env_file"] if options.get("env_file") else None
    try:
        model = settings.model or config.model_settings(root=root, env_file=env_file)
        run = begin(request, root=root)
        node = getattr(context, "node", None)
        run.where = f"node {node.node_id} of chain {context.chain.chain_id}" if node is not None else None
        run.decision_timeout_s = getattr(getattr(context, "chain", None), "pause_timeout_seconds", None)
        outcome = complete(
            run,
            model=model,
            effect_screen=settings.effect_screen,
            backend=options.get("backend"),
            settings=settings.sandbox,
        )
    except PenError as error:
        about = f" (pen {error.pen_id})" if error.pen_id else ""
        raise NodeError(error_map.get(error.code, error.code), error.message + about) from error
    return outcome.to_json()


def _work_dir(context: Any) -> Path:
    # The chain's work dir (its folder, or --slots-root); plain callers without a chain get the cwd.
    chain = getattr(context, "chain", None)
    return Path(chain.work_dir) if chain is not None else Path.cwd()
