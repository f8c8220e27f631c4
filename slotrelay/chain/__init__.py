"""The chain engine's core: spec models, validation, graph, conditions, checks, executors, routing.

Plain Python, no Prefect: `flows/chain.py` and `tasks/node.py` compile a chain onto Prefect, and
the watchdog sensor (`deployments/`) routes slots with the same functions.
"""

from slotrelay.chain.errors import ChainError, ChainValidationError, NodeError, Problem
from slotrelay.chain.executors import EXECUTORS, ExecutionContext, NodeOutput
from slotrelay.chain.models import Chain, ErrorType, Node, Route
from slotrelay.chain.outcomes import NodeOutcome, NodeState
from slotrelay.chain.provenance import input_slot_path, output_slot_path
from slotrelay.chain.routing import RouteDecision, evaluate_routes, route_finished
from slotrelay.chain.schema import load_chain, validate_document
from slotrelay.slots import input_slot_document

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
