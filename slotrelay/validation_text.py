"""How a failed validation reads: "where: what is wrong", the same for pydantic and jsonschema.

Both libraries say where a value failed as a sequence of keys and list indexes. Every message of
slotrelay that reports such a failure (a chain, a slot, an alert, a pen request, a sandbox limit, a
PSMR request or record, an MCP tool's arguments) turns it into text here, so a field is named the same
way everywhere: dotted (`budget.max_nodes`, `nodes.0.id`), or as a JSON path (`$.nodes[0].id`) where
the message sits beside jsonschema's own paths (a chain's problems).

A problem at the top of the document has no location to name, and its message already says what is
wrong with the whole ("'anchor' is a required property"): it reads as the message alone. Pydantic
starts the message of a validator's `ValueError` with "Value error, "; that says nothing to a user and
is dropped. A message that already names its field (a nested model's problem re-raised as
"network.allow: ...") is kept as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaViolation
    from pydantic import ValidationError

Location = Iterable[str | int]


def dotted_path(location: Location) -> str:
    """`nodes.0.id` for a location; "" for the top of the document."""
    return ".".join(str(part) for part in location)


def json_path(location: Location) -> str:
    """`$.nodes[0].id` for a location, as jsonschema's `json_path` writes it; `$` for the top."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def problem_text(location: Location, message: str, *, path: Callable[[Location], str] = dotted_path) -> str:
    """One problem as "where: what is wrong".

    Parameters:
        location: the keys and indexes of the value that failed.
        message: what the validator said about it.
        path: how the location is written (`dotted_path` or `json_path`).

    Returns:
        One line; the message alone when the location names nothing.
    """
    where = path(location)
    message = message.removeprefix("Value error, ")
    if not where or message.startswith((f"{where}.", f"{where}:")):
        return message
    return f"{where}: {message}"


def model_problems(
    error: ValidationError, *, limit: int | None = None, path: Callable[[Location], str] = dotted_path
) -> list[str]:
    """The problems of a failed pydantic validation, one line each, in pydantic's order.

    Parameters:
        error: what `model_validate` (or a `TypeAdapter`) raised.
        limit: the most problems to return (all by default).
        path: how a location is written (`dotted_path` or `json_path`).

    Returns:
        At least one line.
    """
    return [problem_text(e["loc"], e["msg"], path=path) for e in error.errors()[:limit]]


def first_problem(error: ValidationError) -> str:
    """The first problem of a failed pydantic validation, for a message with room for one line."""
    return model_problems(error, limit=1)[0]


def schema_problem(violation: SchemaViolation, *, path: Callable[[Location], str] = dotted_path) -> str:
    """One jsonschema violation as "where: what is wrong".

    Parameters:
        violation: one error of `iter_errors`, or jsonschema's `best_match` of them.
        path: how the location is written (`dotted_path` or `json_path`).
    """
    return problem_text(violation.absolute_path, violation.message, path=path)
