"""The chain engine: one package for everything a chain's run does, in plain Python, no Prefect.

    models, schema, graph     the chain spec (node_chain.json): models, validation, the graph picture
    schedule, runner          the order nodes run in, and one node's run with its checks and retries
    routing, conditions       the one routing step: route a finished node's output into input slots
    checks, preflight         a node's pre/post checks; a run's L1/L2 checks before it starts
    outcomes, errors, network a node's states, the error types, what counts as the network's failure
    slots, provenance         slot files: read, write, and where each input came from
    alerts, ledger, enginelog what a run leaves: alerts for a person, the routing ledger, the engine log
    sensor/                   the watchdog sensor that routes slots agents write outside a run
    executors/                how a node's work is done, by kind; `executors/deploy/` is the deploy node
    agent_view, agent_submit  what an agent sees of a node and how it submits its output

`flows/chain.py` and `tasks/node.py` compile a chain onto Prefect; `deployments/` starts runs.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slotrelay.chain.errors import ChainError, ChainValidationError, NodeError, Problem
    from slotrelay.chain.executors import EXECUTORS, ExecutionContext, NodeOutput
    from slotrelay.chain.models import Chain, ErrorType, Node, Route
    from slotrelay.chain.outcomes import NodeOutcome, NodeState
    from slotrelay.chain.provenance import input_slot_path, output_slot_path
    from slotrelay.chain.routing import RouteDecision, evaluate_routes, route_finished
    from slotrelay.chain.schema import load_chain, validate_document
    from slotrelay.chain.slots import input_slot_document

# Each public name's module, read on first use (PEP 562): importing one part of the engine, such as
# `slotrelay.chain.slots` for the MCP server's first answer, loads that part and not the executors,
# the schema's validator (jsonschema) or the graph (networkx).
_HOMES = {
    "errors": ["ChainError", "ChainValidationError", "NodeError", "Problem"],
    "executors": ["EXECUTORS", "ExecutionContext", "NodeOutput"],
    "models": ["Chain", "ErrorType", "Node", "Route"],
    "outcomes": ["NodeOutcome", "NodeState"],
    "provenance": ["input_slot_path", "output_slot_path"],
    "routing": ["RouteDecision", "evaluate_routes", "route_finished"],
    "schema": ["load_chain", "validate_document"],
    "slots": ["input_slot_document"],
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "EXECUTORS",
    "Chain",
    "ChainError",
    "ChainValidationError",
    "ErrorType",
    "ExecutionContext",
    "Node",
    "NodeError",
    "NodeOutcome",
    "NodeOutput",
    "NodeState",
    "Problem",
    "Route",
    "RouteDecision",
    "evaluate_routes",
    "input_slot_document",
    "input_slot_path",
    "load_chain",
    "output_slot_path",
    "route_finished",
    "validate_document",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
