"""The chain file's data model (pydantic v2): nodes, routes, error types and what the seed leaves open.

Every field of the seed (engine definition, section 三) keeps its name. Additions, all optional:
a node's `executor` (how the engine runs it), structured checks beside the seed's free-text ones, an
error type's `on_escalation`, and the chain's `pause_timeout_seconds` (how long a paused run waits
for a person). Unknown keys are errors everywhere (`extra="forbid"`): a typo must not pass silently.

`schema.json` beside this module is generated from `Chain` (`python -m slotrelay.chain.schema`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class Spec(BaseModel):
    """Base of every chain model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class Slot(Spec):
    """Where a node's data lives: a JSON file, and optionally a babel JSONL log other agents tail."""

    slot_id: str = Field(pattern=IDENTIFIER)
    path: str = Field(min_length=1, description="relative paths resolve against the chain file's folder")
    babel_path: str | None = Field(default=None, description="each output is also appended here as one JSON line")


class Retry(Spec):
    """The node's R/W: how many retries (R) and the wait between them in seconds (W)."""

    max_retries: int = Field(ge=0)
    retry_interval_seconds: float = Field(ge=0)


class PathExistsCheck(Spec):
    """Holds when the field at this dotted path names a file or folder that exists and is readable."""

    path_exists: str = Field(min_length=1)


class FieldEqualsCheck(Spec):
    """Holds when the field at a dotted path equals a value: `{"field_equals": ["status", "completed"]}`."""

    field_equals: tuple[str, Any]


class JsonSchemaCheck(Spec):
    """Holds when the slot document validates against this JSON Schema file (relative to the chain)."""

    json_schema: str = Field(min_length=1)


StructuredCheck = PathExistsCheck | FieldEqualsCheck | JsonSchemaCheck
# A free-text check cannot be run by the engine: it holds only when the slot attests it
# (`"checks": {"<text>": true}`).
Check = Annotated[str, Field(min_length=1)] | StructuredCheck


class CheckRules(Spec):
    """L3 self-checks before and after the node runs."""

    pre_execution: list[Check] = Field(default_factory=list)
    post_execution: list[Check] = Field(default_factory=list)


class PythonExecutor(Spec):
    """Call `module:function(data: dict) -> dict` in the engine's process."""

    kind: Literal["python"]
    callable: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class CommandExecutor(Spec):
    """Run a program: input data as JSON on stdin, output data as one JSON object on stdout."""

    kind: Literal["command"]
    argv: list[str] = Field(min_length=1)
    error_map: dict[Annotated[str, Field(pattern=r"^-?[0-9]+$")], str] = Field(
        default_factory=dict, description="exit code -> error_type"
    )


class ExternalExecutor(Spec):
    """An agent outside the engine writes the output slot; the engine waits for it (watchdog)."""

    kind: Literal["external"] = "external"


class UrlRetry(Spec):
    """How the deploy node's URL check retries (urllib3 `Retry`); the seed's `Retry(total=2, backoff_factor=5)`."""

    total: int = Field(default=2, ge=0, le=10)
    backoff_factor: float = Field(default=5, ge=0, le=60)


class DeployExecutor(Spec):
    """Copy files to targets and verify them (implementation: slotrelay.chain.deploy)."""

    kind: Literal["deploy"]
    files: list[str] = Field(min_length=1)
    targets: list[str] = Field(min_length=1)
    check_url: str | None = None
    url_retry: UrlRetry = Field(default_factory=UrlRetry)


class PenExecutor(Spec):
    """A magic-pen call: an intent becomes code run in a sandbox (implementation: slotrelay.pen.node)."""

    kind: Literal["pen"]
    intent: str = Field(min_length=1)
    persona_id: str = Field(min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)


Executor = Annotated[
    PythonExecutor | CommandExecutor | ExternalExecutor | DeployExecutor | PenExecutor,
    Field(discriminator="kind"),
]


class Node(Spec):
    """One step: read the input slot, do the work, write the output slot."""

    node_id: str = Field(pattern=IDENTIFIER)
    layer: int | None = None
    role: str | None = None
    description: str | None = None
    input_slot: Slot | None = Field(default=None, description="null for a start node")
    output_slot: Slot
    capabilities: list[str] = Field(default_factory=list)
    forbidden_capabilities: list[str] = Field(default_factory=list)
    timeout_seconds: float | None = Field(default=None, gt=0)
    retry: Retry | None = None
    check_rules: CheckRules = Field(default_factory=CheckRules)
    executor: Executor = Field(default_factory=ExternalExecutor)


class Condition(Spec):
    """When a route holds: a field of the source's output slot, an operator, a value, extra checks."""

    field: str = Field(min_length=1)
    operator: Literal["equals", "in", "length_greater_than", "length_equals"]
    value: Any
    additional_checks: list[Check] = Field(default_factory=list)


class Route(Spec):
    """A conditional hand-off: when `from_node` ends and the condition holds, `to_node` gets its input."""

    route_id: str = Field(pattern=IDENTIFIER)
    from_node: str
    to_node: str
    condition: Condition | None = Field(default=None, description="null: the route always holds")
    priority: str = Field(default="P1", pattern=r"^P[0-9]+$", description="P0 is evaluated first")
    description: str | None = None
    max_iterations: int | None = Field(
        default=None, ge=1, le=1000,
        description=("a rework loop: this route may close a cycle (a reviewer sends work back), and fires at most"
                     " this many times in a run; the next firing escalates to a person"))

    @property
    def rank(self) -> int:
        """The priority as a number (P0 < P1 < ...), for ordering."""
        return int(self.priority[1:])


class ErrorType(Spec):
    """How a class of failure is handled: retry (R/W), skip (downstream goes on) or fail."""

    error_type: str = Field(pattern=IDENTIFIER)
    description: str | None = None
    handling: Literal["retry", "skip", "fail"]
    max_retries: int = Field(default=0, ge=0)
    retry_interval_seconds: float = Field(default=0, ge=0)
    escalate_after: Literal["max_retries_exceeded"] | None = None
    on_escalation: Literal["alert", "pause"] = Field(
        default="alert",
        description=("alert: write an alert, fail the node and go on with what does not need it; a person decides"
                     " before the run ends. pause: the node's downstream waits for the person's decision"),
    )


class Chain(Spec):
    """A node chain: the whole `node_chain.json`."""

    chain_id: str = Field(pattern=IDENTIFIER)
    version: str | None = None
    description: str | None = None
    nodes: list[Node] = Field(min_length=1)
    routes: list[Route] = Field(default_factory=list)
    error_types: list[ErrorType] = Field(default_factory=list)
    pause_timeout_seconds: int = Field(default=3600, gt=0, description="how long a paused run waits for a decision")
    required_env: list[str] = Field(default_factory=list, description="variables that must be set (from .env)")

    _source: Path | None = PrivateAttr(default=None)
    _slots_root: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The chain file this was loaded from."""
        return self._source

    @property
    def slots_root(self) -> Path | None:
        """The `--slots-root` override, if any."""
        return self._slots_root

    @property
    def base_dir(self) -> Path:
        """The chain file's folder: relative paths of checks and schemas resolve against it."""
        return self._source.parent if self._source else Path.cwd()

    @property
    def work_dir(self) -> Path:
        """Where slots resolve, and where `alerts/` and `logs/` go: `--slots-root` or the chain's folder."""
        return self._slots_root or self.base_dir

    def bind(self, *, source: Path | None, slots_root: Path | None = None) -> Chain:
        """Attach the file this chain came from and an optional slots root; returns self."""
        self._source = source.resolve() if source else None
        self._slots_root = slots_root.resolve() if slots_root else None
        return self

    def resolve(self, path: str) -> Path:
        """A slot path from the chain as an absolute path (relative ones against `work_dir`)."""
        candidate = Path(path)
        return candidate if candidate.is_absolute() else self.work_dir / candidate

    def node(self, node_id: str) -> Node:
        """The node with this id (KeyError if none)."""
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(node_id)

    def routes_from(self, node_id: str) -> list[Route]:
        """Routes leaving a node, in evaluation order (priority, then file order)."""
        return sorted((r for r in self.routes if r.from_node == node_id), key=lambda r: r.rank)

    def routes_to(self, node_id: str) -> list[Route]:
        """Routes arriving at a node."""
        return [r for r in self.routes if r.to_node == node_id]

    def error_type(self, name: str) -> ErrorType | None:
        """The declared error type of this name, or None."""
        return next((e for e in self.error_types if e.error_type == name), None)

    def start_nodes(self) -> list[str]:
        """Nodes with no input slot: where a run begins."""
        return [n.node_id for n in self.nodes if n.input_slot is None]
