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

from slotrelay.chain.errors import ChainError, ChainValidationError, NodeError, Problem
from slotrelay.chain.executors import EXECUTORS, ExecutionContext, NodeOutput
from slotrelay.chain.models import Chain, ErrorType, Node, Route
from slotrelay.chain.outcomes import NodeOutcome, NodeState
from slotrelay.chain.provenance import input_slot_path, output_slot_path
from slotrelay.chain.routing import RouteDecision, evaluate_routes, route_finished
from slotrelay.chain.schema import load_chain, validate_document
from slotrelay.chain.slots import input_slot_document

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
