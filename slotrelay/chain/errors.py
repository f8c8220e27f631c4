"""Errors of the chain engine.

    SlotrelayError                      slotrelay.errors
     +-- ChainError                     a chain file that cannot be used (code CHAIN_INVALID, ...)
     |    +-- ChainValidationError      every problem found, each with its JSON path
     +-- NodeError                      a node's run failed; `code` is the chain's error_type
     +-- ExecutorUnavailable            an executor kind whose module is not installed
     +-- ToolError                      slotrelay.errors: what an MCP tool answers with
          +-- AgentToolError            the engine's agent tools refused (agent_view, agent_submit)
               +-- AgentRequestInvalid        INVALID_QUERY
               +-- AgentTargetNotFound        OBJECT_NOT_FOUND
               +-- AgentNotGranted            CAPABILITY_DENIED
               +-- NothingToAnswer            UNRESOLVED_REQUIRED_INPUT
               +-- AgentOutputRejected        VALIDATION_FAILED

A `ChainError` is input to fix (exit 2), unless it says otherwise (GRAPHVIZ_MISSING exits 3).

`NodeError.error_type` is matched against the chain's `error_types` (retry / skip / fail); a type the
chain does not declare is handled as `unknown` (L5: the run pauses for a person).

The engine's agent tools answer with the codes PSMR's tools use (CONTRACTS.md#psmr-error-codes), so an
agent reads one vocabulary from the MCP server; the classes are the engine's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from slotrelay.errors import ExitCode, SlotrelayError, ToolError

# Error types the engine itself raises; a chain decides their handling by declaring them.
INPUT_MISSING = "input_missing"
SLOT_INVALID = "slot_invalid"
# L2: a slot path that cannot be written (the seed: "不可写 → 升级到 L4 异常层").
SLOT_UNWRITABLE = "slot_unwritable"
EXECUTOR_MISSING = "executor_missing"
OUTPUT_INVALID = "output_invalid"
TIMEOUT = "timeout"
CHECK_FAILED = "check_failed"
IDENTITY_MISMATCH = "identity_mismatch"
UNKNOWN = "unknown"
# The seed's own type: a network failure no executor classified (slotrelay.chain.network); a skip unless
# the chain declares it otherwise.
EXTERNAL_UNREACHABLE = "external_unreachable"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a chain file.

    Attributes:
        path: JSON path of the offending value (`$.nodes[2].retry.max_retries`), `$` for the whole file.
        message: what is wrong there.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ChainError(SlotrelayError):
    """A chain file that cannot be read or used."""

    code = "CHAIN_INVALID"
    exit_code = ExitCode.BAD_INPUT


class ChainValidationError(ChainError):
    """A chain file with problems; `problems` lists every one found, each naming its JSON path.

    Parameters:
        source: the chain file.
        problems: what is wrong, in file order.
    """

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {problem}" for problem in problems)
        super().__init__(f"{source}: invalid chain, {len(problems)} problem(s):\n{lines}")


class NodeError(SlotrelayError):
    """A node's run failed with a named error type.

    Raised by executors (and by python callables of a chain) as `NodeError(error_type, message)`.

    Parameters:
        error_type: the chain's error type this failure belongs to (`input_missing`, `timeout`, ...).
        message: what happened.
    """

    # Set by the node task (tasks/node.py) when the chain's retry policy asks Prefect for another attempt.
    retry_requested: bool = False

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message, code=error_type)
        self.error_type = error_type

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Prefect persists task exceptions with pickle: rebuild from both arguments.
        return (type(self), (self.error_type, self.message))


class ExecutorUnavailable(NodeError):
    """An executor kind whose implementation module cannot be imported (not installed yet)."""

    def __init__(self, kind: str, target: str, reason: str) -> None:
        super().__init__(EXECUTOR_MISSING,
                         f"executor kind {kind!r} needs {target}, which cannot be loaded: {reason}")
        self.kind = kind
        self.target = target

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (NodeError, (self.error_type, self.message))


class AgentToolError(ToolError):
    """An agent's call to the engine's MCP tools refused; `code` is one of the tool surface's."""

    code = "AGENT_TOOL_ERROR"
    exit_code = ExitCode.BAD_INPUT


class AgentRequestInvalid(AgentToolError):
    """The request cannot be answered as given (no chain id while several are served, not an agent's node)."""

    code = "INVALID_QUERY"


class AgentTargetNotFound(AgentToolError):
    """No served chain, node or input slot of that id."""

    code = "OBJECT_NOT_FOUND"


class AgentNotGranted(AgentToolError):
    """The server was not started with the grant the call needs (`--agent NODE_ID`, `--allow-decide`)."""

    code = "CAPABILITY_DENIED"


class NothingToAnswer(AgentToolError):
    """The node has nothing to answer now: no pending input, or its input was already answered."""

    code = "UNRESOLVED_REQUIRED_INPUT"


class AgentOutputRejected(AgentToolError):
    """The output breaks a rule the sensor applies; `details.violations` lists each."""

    code = "VALIDATION_FAILED"
    exit_code = ExitCode.FAILED
