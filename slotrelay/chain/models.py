"""The chain file's data model (pydantic v2): nodes, routes, error types and what the seed leaves open.

Every field of the seed keeps its name (CONTRACTS.md#seed-field-names). Additions, all optional:
a node's `executor` (how the engine runs it), structured checks beside the seed's free-text ones, an
error type's `on_escalation`, and the chain's `pause_timeout_seconds` (how long a paused run waits
for a person; none by default: it waits until one decides). Unknown keys are errors everywhere
(`extra="forbid"`): a typo must not pass silently. The seed's own `external_unreachable` (a skip) holds in
every chain that does not declare that type itself (`SEED_ERROR_TYPES`).

`schema.json` beside this module is generated from `Chain` (`python -m slotrelay.chain.schema`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
T = TypeVar("T")


class Spec(BaseModel):
    """Base of every chain model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class Slot(Spec):
    """Where a node's data lives: a JSON file, and optionally a babel JSONL log other agents tail."""

    slot_id: str = Field(pattern=IDENTIFIER)
    path: str = Field(min_length=1, description="relative paths resolve against the chain file's folder")
    babel_path: str | None = Field(default=None,
                                   description="each output is also appended here as one JSON line")


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


ENV_PREFIX = r"^[A-Z][A-Z0-9_]*$"


class DeployTarget(Spec):
    """Where a deploy copies to: a local folder, a remote host over SSH, or a remote with a local fallback.

    A remote's whereabouts (host, port, user, key file, known-hosts policy, folder, served URLs) come
    from the environment or `.env` as `<ssh>_HOST`, `<ssh>_PORT`, ... never from the chain file. With
    both `ssh` and `folder`, the target is the remote when `<ssh>_HOST` is set, else the folder. Either
    way the folder holds `releases/<id>/` and the `current` link its web server serves.
    """

    name: str | None = Field(default=None, pattern=IDENTIFIER,
                             description="label in the output slot (default: ssh, else folder)")
    folder: str | None = Field(default=None, min_length=1,
                               description="a local folder; relative paths resolve against the chain file's "
                                           "folder")
    ssh: str | None = Field(default=None, pattern=ENV_PREFIX,
                            description="prefix of the environment variables that name the remote")
    base_url: str | None = Field(
        default=None, pattern=r"^https?://",
        description="where `folder`/current is served (a remote's comes from <ssh>_URL)"
    )
    preview_url: str | None = Field(
        default=None, pattern=r"^https?://",
        description="where `folder`/releases is served, so a release is checked before it goes live "
                    "(a remote's comes from <ssh>_PREVIEW_URL)"
    )

    @model_validator(mode="after")
    def _folder_or_ssh(self) -> DeployTarget:
        if self.folder is None and self.ssh is None:
            raise ValueError("a deploy target needs `folder`, `ssh`, or both")
        if (self.base_url is not None or self.preview_url is not None) and self.folder is None:
            raise ValueError("`base_url` and `preview_url` belong to a folder target; a remote's served URLs "
                             "come from <ssh>_URL and <ssh>_PREVIEW_URL")
        return self

    @property
    def label(self) -> str:
        """The target's name in the output slot and in messages."""
        return self.name or self.ssh or str(self.folder)


class TitlePoint(Spec):
    """A feature point: the page's `<title>` text."""

    kind: Literal["title"]


class CssPoint(Spec):
    """A feature point: the text (or one attribute) of the first element a CSS selector matches."""

    kind: Literal["css"]
    selector: str = Field(min_length=1)
    attribute: str | None = Field(default=None, min_length=1, description="null: the element's text")

    @field_validator("selector")
    @classmethod
    def _compiles(cls, selector: str) -> str:
        import soupsieve

        try:
            soupsieve.compile(selector)
        except soupsieve.SelectorSyntaxError as bad:
            raise ValueError(f"not a CSS selector: {bad}") from None
        return selector


class HeaderPoint(Spec):
    """A feature point: a response header of the served page (needs a served Dev side, `dev_url`)."""

    kind: Literal["header"]
    name: str = Field(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


FeaturePoint = Annotated[TitlePoint | CssPoint | HeaderPoint, Field(discriminator="kind")]


def _default_points() -> list[TitlePoint | CssPoint | HeaderPoint]:
    return [TitlePoint(kind="title"), CssPoint(kind="css", selector="h1"),
            CssPoint(kind="css", selector='meta[name="description"]', attribute="content")]


class FeaturePoints(Spec):
    """紧追-L3: points compared between every served target (a release before or right after it goes live)
    and the Dev copy."""

    points: list[FeaturePoint] = Field(
        default_factory=_default_points, min_length=1, description="default: title, h1 text, meta description"
    )
    pages: list[str] | None = Field(default=None,
                                    description="deployed paths to compare (null: every .html/.htm)")
    dev_url: str | None = Field(
        default=None, pattern=r"^https?://",
        description="where the Dev copy is served (null: the source files)"
    )

    @model_validator(mode="after")
    def _headers_need_a_served_dev(self) -> FeaturePoints:
        if self.dev_url is None and any(p.kind == "header" for p in self.points):
            raise ValueError("a header point needs `dev_url`: the Dev copy on disk has no response headers")
        return self


class Sitemap(Spec):
    """The sitemap (sitemaps.org) the deploy keeps: every deployed page gets a `<url><loc>` with `lastmod`."""

    path: str = Field(default="sitemap.xml", min_length=1,
                      description="the Dev copy, relative to the chain file; deployed at the same "
                      "relative path, and written back only when the deploy succeeds")
    site_url: str = Field(pattern=r"^https?://", description="the public URL the `<loc>`s start with")
    pages: list[str] = Field(default_factory=lambda: ["*.html", "*.htm"],
                             description="glob patterns over the deployed paths that are pages")


class UrlRetry(Spec):
    """urllib3 `Retry` of the URL checks (the seed's `Retry(total=2, backoff_factor=5)`)."""

    total: int = Field(default=2, ge=0)
    backoff_factor: float = Field(default=5, ge=0)


DeployCheck = Literal["url", "feature_points", "sitemap"]


class DeployExecutor(Spec):
    """Copy files to targets as a release, prove and check it, switch it live, keep the sitemap.

    Implementation: slotrelay.chain.executors.deploy.node (CONTRACTS.md#deploy-node).
    A target given as a string is a local folder.
    """

    kind: Literal["deploy"]
    files: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="files to deploy, relative to the chain file's folder")
    files_from: str | None = Field(
        default=None, pattern=r"^data(\.[^.\s]+)+$",
        description="dotted path into the input slot (`data.files`) of a list of files a previous node made")
    targets: list[Annotated[str, Field(min_length=1)] | DeployTarget] = Field(min_length=1)
    sitemap: Sitemap | None = None
    feature_points: FeaturePoints | None = Field(default_factory=FeaturePoints,
                                                 description="null: no comparison")
    url_retry: UrlRetry = Field(default_factory=UrlRetry)
    require: list[DeployCheck] = Field(
        default_factory=list,
        description="checks that must run (on at least one target): a required check that cannot run "
                    "fails the node with deploy_config_invalid")
    keep_releases: int = Field(default=5, ge=1,
                               description="releases kept on each target, the live one included")

    @property
    def target_specs(self) -> list[DeployTarget]:
        """Every target as a `DeployTarget` (a string is a folder)."""
        return [DeployTarget(folder=t) if isinstance(t, str) else t for t in self.targets]

    @model_validator(mode="after")
    def _unique_target_names(self) -> DeployExecutor:
        labels = [t.label for t in self.target_specs]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(f"target names must differ: {', '.join(repeated)} used twice (set `name`)")
        return self

    @model_validator(mode="after")
    def _something_to_deploy(self) -> DeployExecutor:
        if not self.files and self.files_from is None:
            raise ValueError("a deploy needs `files`, `files_from`, or both")
        if len(set(self.require)) != len(self.require):
            raise ValueError(f"`require` lists a check twice: {self.require}")
        return self


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
    priority: str = Field(
        default="P1", pattern=r"^P[0-9]{1,9}$", description="P0 is evaluated first (P0 to P999999999)"
    )
    description: str | None = None
    max_iterations: int | None = Field(
        default=None, ge=1, le=1000,
        description=(
            "a rework loop: this route may close a cycle (a reviewer sends work back), and fires at most"
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
        description=(
            "alert: write an alert, fail the node and go on with what does not need it; a person decides"
            " before the run ends. pause: the node's downstream waits for the person's decision"),
    )


# The seed declares one error type itself: "external_unreachable——标记为 skip，不重试" (marked skip, never
# retried). A chain that does not declare it still has it; one that does decides otherwise.
SEED_ERROR_TYPES = (
    ErrorType(error_type="external_unreachable", handling="skip",
              description="an outside service cannot be reached (the seed's type): not an error to repair"),
)


class _Lookup:
    """What the engine looks up on every node of a run, built once per chain instead of a scan each time.

    Built from the very lists it indexes, and built again when they are replaced or change length.
    """

    def __init__(self, nodes: list[Node], routes: list[Route]) -> None:
        self.lists = (nodes, routes)
        self.sizes = (len(nodes), len(routes))
        # The first of a repeated id, as a scan finds it (a chain that repeats one is refused at load).
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            self.nodes.setdefault(node.node_id, node)
        self.routes: dict[str, Route] = {}
        for route in routes:
            self.routes.setdefault(route.route_id, route)
        leaving: dict[str, list[Route]] = {}
        for route in sorted(routes, key=lambda r: r.rank):
            leaving.setdefault(route.from_node, []).append(route)
        self.leaving = leaving
        self.derived: dict[str, Any] = {}

    def fits(self, nodes: list[Node], routes: list[Route]) -> bool:
        return self.lists[0] is nodes and self.lists[1] is routes and self.sizes == (len(nodes), len(routes))


class Chain(Spec):
    """A node chain: the whole `node_chain.json`."""

    chain_id: str = Field(pattern=IDENTIFIER)
    version: str | None = None
    description: str | None = None
    nodes: list[Node] = Field(min_length=1)
    routes: list[Route] = Field(default_factory=list)
    error_types: list[ErrorType] = Field(default_factory=list)
    pause_timeout_seconds: int | None = Field(
        default=None, gt=0,
        description=(
            "how long a paused run waits for a person's decision; without it, it waits until one comes. When"
            " it runs out, the run fails and its alert stays undecided (docs/arbitration.md)"))
    required_env: list[str] = Field(default_factory=list,
                                    description="variables that must be set (from .env)")

    _source: Path | None = PrivateAttr(default=None)
    _slots_root: Path | None = PrivateAttr(default=None)
    _alerts_dir: Path | None = PrivateAttr(default=None)
    _logs_dir: Path | None = PrivateAttr(default=None)
    _lookup: _Lookup | None = PrivateAttr(default=None)

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

    @property
    def alerts_dir(self) -> Path:
        """Where Alert JSON files go: the folder set at bind, else `<work_dir>/alerts`."""
        return self._alerts_dir or self.work_dir / "alerts"

    @property
    def logs_dir(self) -> Path:
        """Where `engine.log` and run summaries go: the folder set at bind, else `<work_dir>/logs`."""
        return self._logs_dir or self.work_dir / "logs"

    def bind(
        self,
        *,
        source: Path | None,
        slots_root: Path | None = None,
        alerts_dir: Path | None = None,
        logs_dir: Path | None = None,
    ) -> Chain:
        """Attach the file this chain came from and optional slots root, alerts and logs folders; returns
        self."""
        self._source = source.resolve() if source else None
        self._slots_root = slots_root.resolve() if slots_root else None
        self._alerts_dir = alerts_dir.resolve() if alerts_dir else None
        self._logs_dir = logs_dir.resolve() if logs_dir else None
        # What is derived from the chain may hold paths resolved against the folders just set.
        self._lookup = None
        return self

    def resolve(self, path: str) -> Path:
        """A slot path from the chain as an absolute path (relative ones against `work_dir`)."""
        candidate = Path(path)
        return candidate if candidate.is_absolute() else self.work_dir / candidate

    def _looked_up(self) -> _Lookup:
        # Read from pydantic's store of private attributes: `self._lookup` goes through
        # BaseModel.__getattr__ (about 2 µs), and a node's run asks for the lookup some 25 times.
        private = self.__pydantic_private__
        assert private is not None  # the model declares private attributes
        lookup: _Lookup | None = private["_lookup"]
        if lookup is None or not lookup.fits(self.nodes, self.routes):
            lookup = private["_lookup"] = _Lookup(self.nodes, self.routes)
        return lookup

    def node(self, node_id: str) -> Node:
        """The node with this id (KeyError if none)."""
        return self._looked_up().nodes[node_id]

    def route(self, route_id: str) -> Route:
        """The route with this id (KeyError if none)."""
        return self._looked_up().routes[route_id]

    def routes_from(self, node_id: str) -> list[Route]:
        """Routes leaving a node, in evaluation order (priority, then file order)."""
        return list(self._looked_up().leaving.get(node_id, ()))

    def derived(self, name: str, build: Callable[[Chain], T]) -> T:
        """`build(self)`, computed once per chain (again if its nodes or routes are replaced, or it is bound
        again): for what a module derives from the chain's graph and folders and reads on every node
        (slotrelay.chain.routing, slotrelay.chain.provenance)."""
        derived = self._looked_up().derived
        if name not in derived:
            derived[name] = build(self)
        value: T = derived[name]
        return value

    def routes_to(self, node_id: str) -> list[Route]:
        """Routes arriving at a node."""
        return [r for r in self.routes if r.to_node == node_id]

    def error_type(self, name: str) -> ErrorType | None:
        """The error type of this name: the chain's own, else the seed's (`SEED_ERROR_TYPES`), else None."""
        declared = next((e for e in self.error_types if e.error_type == name), None)
        return declared or next((e for e in SEED_ERROR_TYPES if e.error_type == name), None)

    def start_nodes(self) -> list[str]:
        """Nodes with no input slot: where a run begins."""
        return [n.node_id for n in self.nodes if n.input_slot is None]
