"""The PSMR MCP server: a thin adapter from MCP `tools/list` and `tools/call` to `slotrelay.psmr.api`.

Built on the SDK's low-level `mcp.server.lowlevel.Server` rather than `MCPServer`, because the tool
surface is data, not Python signatures: the input schemas come from the core's operator catalog
(`psmr_mcp.catalog`), and errors must reach the model as the contract's codes (`INVALID_QUERY: ...`)
where `MCPServer` would prefix its own wording and derive schemas from function annotations.

A call goes: look the tool up, check the arguments against its input schema
(`slotrelay.psmr.request_schema`; a bad argument is a tool error naming the field, never a crash),
fill in defaults and the default workspace, run the core in a worker thread, and answer with the
envelope as `structuredContent` plus the same JSON as text. A `status: "error"` envelope becomes
`isError: true` with `CODE: message` as the first text. Anything unexpected, here or in the core
(`slotrelay.psmr.api.call` masks its own the same way), is logged with its traceback and reaches the
client only as EXECUTION_FAILED with an incident id.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from psmr_mcp import catalog, engine_tools
from psmr_mcp.workspaces import WorkspaceRegistry
from slotrelay import __version__
from slotrelay.errors import ToolError
from slotrelay.psmr import api, envelope, request_limits
from slotrelay.psmr.errors import InvalidQuery, PsmrError, TypeMismatch
from slotrelay.psmr.grants import READ_ONLY, Grants
from slotrelay.psmr.request_schema import RequestSchema
from slotrelay.validation_text import schema_problem

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

logger = logging.getLogger(__name__)

SERVER_NAME = "slotrelay-psmr"
INSTRUCTIONS = (
    "PSMR is a semantic workspace over a Python code base. Do not read everything: discover, query, "
    "slice, then reason. Start with psmr_workspace_describe, find identities with psmr_query_search, "
    "slice with psmr_query_subgraph, check claims with psmr_query_evidence, and ask "
    "psmr_query_unknowns before concluding nothing else is affected. psmr_impact, psmr_semantic_diff, "
    "psmr_findings, psmr_find_motif and psmr_get_contracts analyse. To change code: psmr_delta_propose, "
    "psmr_delta_validate, psmr_projection_preview, then psmr_projection_apply (only if the server was "
    "started with --allow-write), psmr_run_tests (--allow-exec), psmr_verify_rebuild, "
    "psmr_verify_roundtrip and psmr_verify_review. Answers are budgeted: a truncated answer carries a "
    "continuation_token to resume it."
)


class ToolSurface:
    """The tools, their schemas and the dispatch of a call to the core.

    Parameters:
        registry: the workspaces served and the roots that may be analysed.
        grants: the capabilities the server was started with (write roots, process execution).
    """

    def __init__(self, registry: WorkspaceRegistry, *, grants: Grants = READ_ONLY,
                 engine: engine_tools.EngineTools | None = None) -> None:
        self.registry = registry
        self.grants = grants
        self.engine = engine or engine_tools.EngineTools()
        self.schemas = {name: catalog.input_schema(spec) for name, spec in catalog.TOOLS_BY_NAME.items()}
        self.schemas.update(self.engine.schemas)
        self._checks: dict[str, RequestSchema] = {}

    def tools(self) -> list[types.Tool]:
        """The `tools/list` answer, in the catalog's order (reads, then changes, the build last)."""
        return [self._tool(spec) for spec in (*catalog.ALL_TOOLS, *self.engine.specs)]

    def _tool(self, spec: catalog.ToolSpec) -> types.Tool:
        return types.Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=self.schemas[spec.name],
            output_schema=catalog.ENVELOPE_SCHEMA,
            annotations=types.ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.read_only,
                destructive_hint=spec.destructive,
                idempotent_hint=spec.idempotent,
                open_world_hint=False,
            ),
        )

    async def call(
        self, name: str, arguments: dict[str, Any], ctx: ServerRequestContext[Any] | None
    ) -> dict[str, Any]:
        """Run one tool and return its envelope; PSMR errors come back as error envelopes.

        Parameters:
            name: a tool name from the catalog.
            arguments: the call's arguments (unchecked).
            ctx: the request context, used to report build progress; None in direct calls.

        Returns:
            The `psmr-tool-result-0.1` envelope.
        """
        request_id = envelope.new_request_id()
        try:
            request = self._checked(name, arguments)
            # Calls run side by side, each in its own worker thread: no lock is held across a read, so a
            # slow or refused read answers alone. The core keeps what threads share consistent (its
            # caches' tables, one build of a workspace at a time, an apply under its audit log's lock).
            if name in self.engine.schemas:
                answer = await self.engine.call(name, request, _client_name(ctx))
            elif name == catalog.BUILD_TOOL:
                answer = await anyio.to_thread.run_sync(partial(self._build, request, ctx))
            else:
                answer = await anyio.to_thread.run_sync(partial(self._query, name, request))
            if answer["status"] == "error" and answer["error"]["code"] == "EXECUTION_FAILED":
                # A failed git run, or a core fault answered with its incident id (the core logs the
                # traceback as slotrelay.psmr): name the tool beside it in this server's log.
                logger.warning("psmr tool %s: %s", name, answer["error"]["message"])
            return answer
        except ToolError as exc:
            # PSMR's errors and the engine's agent tools' alike (slotrelay.errors.ToolError).
            return envelope.error(request_id, exc.code, exc.message, details=exc.details)
        except Exception:
            # The traceback stays in the server log; the client learns only where to look.
            logger.exception("psmr tool %s failed unexpectedly (incident %s)", name, request_id)
            return envelope.error(
                request_id,
                "EXECUTION_FAILED",
                f"{name} failed with an internal error (incident {request_id}, logged by the server); "
                "retry once, then narrow the request or report the incident",
            )

    def _checked(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments checked against the tool's schema, with its advertised defaults applied; past
        a size limit of the schema the call is POLICY_BLOCKED before anything else looks at it."""
        request_limits.check(name, self.schemas[name], arguments)
        if name not in self._checks:
            # Compiled on a tool's first call: a server seldom hears from every tool.
            self._checks[name] = RequestSchema(self.schemas[name])
        errors = sorted(self._checks[name].violations(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            raise _argument_error(name, errors)
        request = {**catalog.defaults(self.schemas[name]), **arguments}
        if "budget" in self.schemas[name]["properties"]:
            request["budget"] = {**catalog.MCP_BUDGET_DEFAULTS, **arguments.get("budget", {})}
        return request

    def _query(self, name: str, request: dict[str, Any]) -> dict[str, Any]:
        spec = catalog.TOOLS_BY_NAME[name]
        if name == "psmr_workspace_describe":
            return self._describe(request)
        if spec.operation in ("operator.list", "operator.describe"):
            return api.call(spec.operation, request)
        if spec.operation == "analysis.semantic_diff" and (
            request.get("workspace_a") or request.get("workspace_b")
        ):
            return api.call(spec.operation, request, store=self._diff_store(request))
        request["workspace_id"] = self.registry.resolve_id(request.get("workspace_id"))
        assert spec.operation is not None  # only the build tool has none, and it goes to _build
        return api.call(
            spec.operation,
            request,
            store=self.registry.store_for(request["workspace_id"]),
            grants=self.grants,
            kept=self.registry.kept,
        )

    def _diff_store(self, request: dict[str, Any]) -> Path:
        """The store of a diff's workspaces, each of which must be served (every workspace a server
        serves lives in its one store)."""
        named = [request[key] for key in ("workspace_a", "workspace_b") if request.get(key)]
        stores = [self.registry.store_for(workspace_id) for workspace_id in named]
        return stores[0]

    def _describe(self, request: dict[str, Any]) -> dict[str, Any]:
        served = [w.summary() for w in self.registry.served()]
        if not request.get("workspace_id") and self.registry.default_id is None:
            return envelope.ok(
                envelope.new_request_id(),
                {
                    "served_workspaces": served,
                    "next": "call psmr_workspace_describe again with one of these workspace_id values",
                },
            )
        request["workspace_id"] = self.registry.resolve_id(request.get("workspace_id"))
        answer = api.call(
            "workspace.describe", request, store=self.registry.store_for(request["workspace_id"])
        )
        if answer["status"] == "ok":
            answer["data"]["served_workspaces"] = served
        return answer

    def _build(self, request: dict[str, Any], ctx: ServerRequestContext[Any] | None) -> dict[str, Any]:
        # Here, not at the top: only a build reports progress, and a server's first answer seldom is one.
        import anyio.from_thread

        def progress(done: int, total: int, file: str) -> None:
            if ctx is not None:
                anyio.from_thread.run(ctx.session.report_progress, done, total, f"analysed {file}")

        summary = self.registry.build(request["path"], rev=request.get("rev"), progress=progress)
        return envelope.ok(envelope.new_request_id(), summary)


def _client_name(ctx: ServerRequestContext[Any] | None) -> str | None:
    """The MCP client's name from its initialize request, when there is one."""
    params = ctx.session.client_params if ctx is not None else None
    return params.client_info.name if params is not None else None


def _argument_error(name: str, errors: list[ValidationError]) -> PsmrError:
    """One PSMR error naming every bad argument: TYPE_MISMATCH if all are wrong JSON types."""
    parts = [schema_problem(error) for error in errors[:5]]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    message = f"{name}: " + "; ".join(parts) + more + "; the tool's inputSchema lists the allowed values"
    if all(error.validator == "type" for error in errors):
        return TypeMismatch(message)
    return InvalidQuery(message)


def to_result(answer: dict[str, Any]) -> types.CallToolResult:
    """The MCP result for an envelope: structured content plus the same JSON as text.

    Parameters:
        answer: a `psmr-tool-result-0.1` envelope.

    Returns:
        The tool result; `isError` with `CODE: message` first when the envelope is an error.
    """
    text = types.TextContent(type="text", text=envelope.render(answer))
    if answer["status"] == "error":
        headline = f"{answer['error']['code']}: {answer['error']['message']}"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=headline), text],
            structured_content=answer,
            is_error=True,
        )
    return types.CallToolResult(content=[text], structured_content=answer)


def build_server(registry: WorkspaceRegistry, *, grants: Grants = READ_ONLY,
                 engine: engine_tools.EngineTools | None = None) -> Server[Any]:
    """The MCP server for a registry of workspaces; serve it with `psmr_mcp.transports`.

    Parameters:
        registry: the workspaces served and the roots that may be analysed.
        grants: the capabilities beyond reading (`--allow-write`, `--allow-exec`); none by default.
        engine: the chains served and the nodes granted (`--chain`, `--agent`); none by default.

    Returns:
        An MCP server offering the PSMR tools and the engine's.
    """
    surface = ToolSurface(registry, grants=grants, engine=engine)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=surface.tools())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in surface.schemas:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown tool: {params.name}; tools/list names the psmr_* tools",
            )
        return to_result(await surface.call(params.name, dict(params.arguments or {}), ctx))

    return Server(
        SERVER_NAME,
        version=__version__,
        title="PSMR semantic workspace",
        instructions=f"{INSTRUCTIONS} {engine_tools.INSTRUCTIONS}",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
