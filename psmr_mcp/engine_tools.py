"""The engine's tool family on the MCP server: agents take part in chains as nodes (docs/agents.md).

`chain_list`, `chain_describe`, `node_inbox`, `run_status` and `alerts_list` read; `node_submit` writes
an agent node's output slot through the checks the sensor applies, for the nodes the server was started
with `--agent NODE_ID`; `alert_decide` (with `--allow-decide`) resumes a paused run with a decision
(`psmr_mcp.engine_runs`, which reaches the Prefect API); `pen_write` (with `--allow-pen ROOT`) is the
magic pen's `pen.write`, answering MPP-001's output.
The tools share the PSMR tools' SDK, transports, envelope, error codes, annotations and output schema
(`psmr_mcp.server.ToolSurface` lists and checks them with its own, and answers their errors); the logic
is the core's (`slotrelay.chain.agent_view`, `slotrelay.chain.agent_submit`,
`slotrelay.chain.sensor.inbox_wait`), and this module only maps a call onto it. The core is imported
on the first engine call: a server serving only workspaces starts without the chain engine
(docs/mcp.md#cold-start).
"""

from __future__ import annotations

import getpass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from psmr_mcp.catalog import ToolSpec
from slotrelay.chain.outcomes import OUTPUT_STATUSES
from slotrelay.psmr import envelope

if TYPE_CHECKING:
    from slotrelay.chain.agent_view import AgentGrants, ServedChains
    from slotrelay.chain.sensor.inbox_wait import SlotWaiter

INSTRUCTIONS = (
    "The chain engine's tools let you act as a node of a chain: chain_list and chain_describe (a node's "
    "contract and the JSON Schema of its output), node_inbox (wait_s waits for your input without "
    "polling), node_submit (your output, checked as the engine checks it; the answer says what the "
    "engine does next, or which rule failed at which JSON path, and then nothing was written)."
)
MAX_WAIT_S = 600

CHAIN_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "A chain_id from chain_list. Optional when the server serves one chain, or when only "
    "one served chain has the node.",
}
NODE_ID = {"type": "string", "minLength": 1, "maxLength": 200, "description": "A node_id of the chain."}
INPUT_DIGEST = {
    "type": "string",
    "pattern": "^sha256:[0-9a-f]{64}$",
    "description": "The input_digest node_inbox gave: the submit then answers that input only, and is "
    "refused with UNRESOLVED_REQUIRED_INPUT if the input has changed since.",
}


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }


SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "chain_list",
        None,
        "List the chains served",
        "Returns every chain this server serves: chain_id, chain file, slots folder, its nodes, and which "
        "of them are agents' nodes (executor external: their output slot is written by an agent, through "
        "node_submit). Cheap. Next: chain_describe.",
    ),
    ToolSpec(
        "chain_describe",
        None,
        "Describe a chain or one node",
        "Without node_id: the chain's nodes (in brief), routes (with their conditions) and error types "
        "(how each failure is handled: retry, skip, fail). With node_id: that node's contract: its "
        "capabilities and forbidden capabilities, pre and post checks, timeout, retry, the routes leaving "
        "it, and `output_schema`, the JSON Schema its output slot must satisfy for node_submit to take it.",
    ),
    ToolSpec(
        "node_inbox",
        None,
        "Read (or wait for) a node's input",
        "Returns the node's input slot (`input`, with its `data`), `state` (pending: yours to answer now; "
        "waiting: a join still waiting for other sources; answered; empty: nothing routed to it yet), "
        "`since`, `attempt` (above 1 when the engine asks again after a retry), `deadline` (since + "
        "timeout_seconds) and `input_digest` (pass it to node_submit). With wait_s, answers as soon as the "
        "node becomes pending (from file events, no polling) or after wait_s seconds with the state then.",
    ),
    ToolSpec(
        "node_submit",
        None,
        "Submit a node's output",
        "Writes the node's output slot (atomically) after the checks the engine's sensor applies: the node "
        "has a pending input; the output's shape; the identity check (every capability used is declared "
        "and none forbidden); for completed (or skipped) the node's post checks; for failed an error_type "
        "the chain declares. A refusal is VALIDATION_FAILED with `data.violations`, each with the rule and "
        "the JSON path of the field (`$.data.approved`), and nothing is written: fix it and submit again. "
        "A success says what the engine will do (`engine`: the routes that fire and the nodes they start, "
        "or how the chain's error types handle a failure); `slotrelay watch` carries it out. A node with no "
        "pending input (already answered, or nothing routed to it yet) is UNRESOLVED_REQUIRED_INPUT. Only "
        "for nodes the server was started with --agent NODE_ID for; otherwise CAPABILITY_DENIED.",
        read_only=False,
        idempotent=False,
    ),
    ToolSpec(
        "run_status",
        None,
        "A chain's or a flow run's status",
        "With flow_run_id: that run's state on the Prefect server, each node's task state, the nodes "
        "running or paused now (`current`), its Prefect UI link, and once it has ended `summary`, the same "
        "summary `slotrelay run --json` prints. With chain_id (or nothing, when one chain is served): where "
        "each node stands by its slots (pending, waiting, answered, empty) and the chain's latest runs. "
        "Needs the Prefect server `slotrelay watch` uses (PREFECT_API_URL) for runs; the slots are read "
        "without it.",
    ),
    ToolSpec(
        "alerts_list",
        None,
        "List a chain's alerts",
        "Returns the alerts of the served chains (or of one): which node failed, its error type, how the "
        "chain handled it (fail, escalate, arbitrate), the message, `status` (open, paused: a run waits "
        "for a decision; decided; timed_out), the decisions possible and the decision taken. `alert` is the "
        "name alert_decide takes.",
    ),
    ToolSpec(
        "alert_decide",
        None,
        "Decide an alert",
        "Resumes the run paused on an alert with a decision, exactly as `slotrelay decide` and the Prefect "
        "UI form do: continue (the node is done with `data` as its output data, or skipped without it), "
        "retry, terminate (the run fails), reload (the chain file is read again). The run records the "
        "decision in the alert file with who decided (`via: mcp`). An alert already decided, or whose run "
        "no longer waits, is INVALID_QUERY. Only on a server started with --allow-decide; otherwise "
        "CAPABILITY_DENIED.",
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
    ToolSpec(
        "pen_write",
        None,
        "Write and run code with the magic pen",
        "The magic pen's contract (MPP-001) as a tool: `intent` (what the code should do, in natural "
        "language), `context` (`persona_id`, optional `task_category` and `upstream_inputs`, the input the "
        "code gets) and `options` (`sandbox`: lang, timeout_ms, memory_mb, network, fs; `persist_hint`). "
        "The code model writes the code, the sandbox runs it under limits, the call is audited, and the "
        "persona erases, keeps or shares it. The answer's data is exactly MPP-001's output (pen_id, code, "
        "lang, execution, suggestion, audit) plus `x-slotrelay`. A refusal carries its MPP code in "
        "`data.mpp_code` (MPP-E001 intent refused, MPP-E002 no sandbox, MPP-E003 no code from the model, "
        "MPP-E005 an access beyond the grant). Only on a server started with --allow-pen ROOT (the pen's "
        "folder); otherwise CAPABILITY_DENIED.",
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
)

INPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "chain_list": _schema({}),
    "chain_describe": _schema(
        {
            "chain_id": CHAIN_ID,
            "node_id": {
                **NODE_ID,
                "description": "A node_id: describe this node (with its output_schema) instead of the chain.",
            },
        }
    ),
    "node_inbox": _schema(
        {
            "node_id": NODE_ID,
            "chain_id": CHAIN_ID,
            "wait_s": {
                "type": "number",
                "minimum": 0,
                "maximum": MAX_WAIT_S,
                "default": 0,
                "description": "Wait up to this many seconds for the node to become pending (0: answer now).",
            },
        },
        ["node_id"],
    ),
    "node_submit": _schema(
        {
            "node_id": {**NODE_ID, "description": "The node you act as (the server must grant it: --agent)."},
            "chain_id": CHAIN_ID,
            "status": {"enum": list(OUTPUT_STATUSES), "description": "completed, failed or skipped."},
            "data": {
                "type": "object",
                "default": {},
                "description": "The output's data: what the routes' conditions and the next nodes read.",
            },
            "checks": {
                "type": "object",
                "maxProperties": 100,
                "default": {},
                "additionalProperties": {"type": "boolean"},
                "propertyNames": {"maxLength": 500},
                "description": 'Free-text checks of the node you attest: {"<the check\'s text>": true}.',
            },
            "capabilities_used": {
                "type": "array",
                "maxItems": 100,
                "default": [],
                "uniqueItems": True,
                "items": {"type": "string", "minLength": 1, "maxLength": 200},
                "description": "The capabilities you used; each must be one the node declares.",
            },
            "error": {
                "anyOf": [
                    {"type": "null"},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["error_type"],
                        "properties": {
                            "error_type": {"type": "string", "minLength": 1, "maxLength": 200},
                            "message": {"type": "string", "maxLength": 2000},
                        },
                    },
                ],
                "default": None,
                "description": "For status failed: the error type (one the chain declares) and a message.",
            },
            "input_digest": INPUT_DIGEST,
        },
        ["node_id", "status"],
    ),
    "run_status": _schema(
        {
            "chain_id": CHAIN_ID,
            "flow_run_id": {
                "type": "string",
                "maxLength": 36,
                "pattern": "^[0-9a-fA-F-]{32,36}$",
                "description": "A flow run id (an alert's flow_run_id, or one run_status listed).",
            },
        }
    ),
    "alerts_list": _schema(
        {
            "chain_id": CHAIN_ID,
            "status": {
                "enum": ["open", "paused", "decided", "timed_out"],
                "description": "Only alerts in this status (paused: a run waits for a decision).",
            },
        }
    ),
    "alert_decide": _schema(
        {
            "alert": {
                "type": "string",
                "pattern": "^alert-[A-Za-z0-9_.-]+[.]json$",
                "maxLength": 300,
                "description": "The alert's name as alerts_list gives it (`alert-<time>-<node_id>.json`).",
            },
            "chain_id": CHAIN_ID,
            "decision": {
                "enum": ["continue", "retry", "terminate", "reload"],
                "description": "continue, retry, terminate or reload (see the tool's description).",
            },
            "data": {
                "anyOf": [{"type": "object"}, {"type": "null"}],
                "default": None,
                "description": "With continue: the node's output data (omit to continue as skipped).",
            },
            "comment": {
                "type": "string",
                "minLength": 1,
                "maxLength": 2000,
                "description": "Why; kept in the alert file with the decision.",
            },
        },
        ["alert", "decision", "comment"],
    ),
    "pen_write": _schema(
        {
            "intent": {
                "type": "string",
                "maxLength": 20_000,
                "description": "What the code should do, in natural language.",
            },
            "context": {
                "type": "object",
                "description": "`persona_id` (required: the persona holding the pen), `task_category`, "
                "`upstream_inputs` (the code's input).",
            },
            "options": {
                "type": "object",
                "default": {},
                "description": "`sandbox` (lang, timeout_ms, memory_mb, network, fs) and `persist_hint` "
                "(auto, erase, keep, share), as MPP-001 defines them.",
            },
        },
        ["intent", "context"],
    ),
}

# A pen error's MPP code, as the envelope's code (the envelope speaks the contract's twelve); the MPP code
# itself travels in `data.mpp_code`.
PEN_ERROR_CODES = {
    "MPP-E001": "INVALID_QUERY",
    "MPP-E002": "EXECUTION_FAILED",
    "MPP-E003": "EXECUTION_FAILED",
    "MPP-E005": "CAPABILITY_DENIED",
    "MPP-E006": "VALIDATION_FAILED",
    "PEN_INVALID_REQUEST": "INVALID_QUERY",
    "PEN_MODEL_NOT_CONFIGURED": "EXECUTION_FAILED",
}


class EngineTools:
    """The engine's tools over the chains a server serves.

    Parameters:
        chains: the chains served (`--chain`, repeatable).
        grants: the nodes the server's sessions may act as (`--agent`), and `--allow-decide`.
        pen_root: the pen's folder `pen_write` may write in (`--allow-pen ROOT`); None: no pen.
    """

    specs = SPECS
    schemas = INPUT_SCHEMAS

    def __init__(
        self,
        chains: ServedChains | None = None,
        *,
        grants: AgentGrants | None = None,
        pen_root: Path | None = None,
    ) -> None:
        self._chains = chains
        self._grants = grants
        self._waiter: SlotWaiter | None = None
        self.pen_root = pen_root

    @property
    def chains(self) -> ServedChains:
        """The chains served (none unless the server was started with --chain)."""
        if self._chains is None:
            from slotrelay.chain.agent_view import ServedChains

            self._chains = ServedChains([])
        return self._chains

    @property
    def grants(self) -> AgentGrants:
        """The nodes granted (none unless the server was started with --agent)."""
        if self._grants is None:
            from slotrelay.chain.agent_view import AgentGrants

            self._grants = AgentGrants()
        return self._grants

    async def call(self, name: str, request: dict[str, Any], client: str | None = None) -> dict[str, Any]:
        """Run one engine tool on checked arguments; errors are raised as `ToolError`s for the envelope.

        Parameters:
            name: an engine tool.
            request: its arguments, checked against its input schema, defaults applied.
            client: the MCP client's name (from its initialize), recorded with a decision.
        """
        if name == "alert_decide":
            request = {**request, "decided_by": f"{getpass.getuser()} via MCP client {client or 'unnamed'}"}
        data = await anyio.to_thread.run_sync(
            partial(getattr(self, "_" + name), request), abandon_on_cancel=name == "node_inbox"
        )
        return envelope.ok(envelope.new_request_id(), data)

    def _chain_list(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"chains": self.chains.summaries(), "agent_grants": sorted(self.grants.nodes)}

    def _chain_describe(self, request: dict[str, Any]) -> dict[str, Any]:
        from slotrelay.chain.agent_view import describe_chain, describe_node

        if request.get("node_id"):
            chain, node = self.chains.node(request.get("chain_id"), request["node_id"])
            return {**describe_node(chain, node), "granted": node.node_id in self.grants.nodes}
        return describe_chain(self.chains.chain(request.get("chain_id")))

    def _node_inbox(self, request: dict[str, Any]) -> dict[str, Any]:
        from slotrelay.chain.agent_view import inbox
        from slotrelay.chain.provenance import input_slot_path, output_slot_path
        from slotrelay.chain.sensor.inbox_wait import SlotWaiter

        chain, node = self.chains.node(request.get("chain_id"), request["node_id"])
        wait_s = float(request["wait_s"])
        if wait_s > 0 and not inbox(chain, node)["pending"]:
            if self._waiter is None:
                self._waiter = SlotWaiter()
            folder = (input_slot_path(chain, node.node_id) or output_slot_path(chain, node.node_id)).parent
            self._waiter.wait(folder, lambda: inbox(chain, node)["pending"], wait_s)
        return inbox(chain, node)

    def _node_submit(self, request: dict[str, Any]) -> dict[str, Any]:
        from slotrelay.chain.agent_submit import submit

        self.grants.require_node(request["node_id"])
        chain, node = self.chains.node(request.get("chain_id"), request["node_id"])
        return submit(
            chain,
            node,
            status=request["status"],
            data=request["data"],
            error=request["error"],
            checks=request["checks"],
            capabilities_used=request["capabilities_used"],
            input_digest=request.get("input_digest"),
        )

    def _run_status(self, request: dict[str, Any]) -> dict[str, Any]:
        from psmr_mcp import engine_runs
        from slotrelay.chain.agent_view import inbox

        if request.get("flow_run_id"):
            return engine_runs.run_status(self.chains.chains, request["flow_run_id"])
        chain = self.chains.chain(request.get("chain_id"))
        nodes = {}
        for node in chain.nodes:
            seen = inbox(chain, node)
            nodes[node.node_id] = {"state": seen["state"], "output_status": seen.get("output_status")}
        return {"chain_id": chain.chain_id, "nodes": nodes, "runs": engine_runs.recent_runs(chain)}

    def _alerts_list(self, request: dict[str, Any]) -> dict[str, Any]:
        from slotrelay.chain.alerts import chain_alerts

        chains = (
            [self.chains.chain(request["chain_id"])]
            if request.get("chain_id")
            else self.chains.chains.values()
        )
        listed = []
        for chain in chains:
            for path, alert in chain_alerts(chain.alerts_dir):
                if request.get("status") in (None, alert.status):
                    listed.append({"alert": path.name, **alert.model_dump(mode="json")})
        return {"alerts": listed}

    def _alert_decide(self, request: dict[str, Any]) -> dict[str, Any]:
        from psmr_mcp import engine_runs
        from slotrelay.psmr.errors import ObjectNotFound

        self.grants.require_decide()
        chains = (
            [self.chains.chain(request["chain_id"])]
            if request.get("chain_id")
            else self.chains.chains.values()
        )
        # Only a file alerts_list shows: the name is looked up in the chains' alerts folders, never joined.
        found = [
            c.alerts_dir / request["alert"]
            for c in chains
            if request["alert"] in {p.name for p in c.alerts_dir.glob("alert-*.json")}
        ]
        if not found:
            raise ObjectNotFound(f"no alert {request['alert']} in the served chains' alerts (alerts_list)")
        return engine_runs.decide(
            found[0],
            request["decision"],
            comment=request["comment"],
            data=request["data"],
            decided_by=request["decided_by"],
        )

    def _pen_write(self, request: dict[str, Any]) -> dict[str, Any]:
        from slotrelay.pen import PenError
        from slotrelay.pen import write as pen_write
        from slotrelay.pen.config import model_settings
        from slotrelay.psmr.analysis.effects import effects
        from slotrelay.psmr.errors import CapabilityDenied, PsmrError

        if self.pen_root is None:
            raise CapabilityDenied(
                "pen_write needs the grant --allow-pen ROOT (the pen's folder), which this "
                "server was not started with; nothing was run"
            )
        body = {"intent": request["intent"], "context": request["context"], "options": request["options"]}
        try:
            outcome = pen_write(
                body, root=self.pen_root, model=model_settings(root=self.pen_root), effect_screen=effects
            )
        except PenError as refused:
            error = PsmrError(
                f"{refused.code}: {refused.message}", details={"mpp_code": refused.code, **refused.to_json()}
            )
            error.code = PEN_ERROR_CODES.get(refused.code, "EXECUTION_FAILED")
            raise error from None
        return outcome.to_json()
