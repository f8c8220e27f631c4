"""What a page says when it cannot be shown: a `ViewError` with the contract's code and an HTTP status.

    ViewError (Exception)       status 4xx, code from the PSMR contract (WORKSPACE_NOT_FOUND, ...)

Every refusal of the operators (`status: "error"` envelopes) becomes one, with the status of
`STATUS_BY_CODE`; the view's own checks (a bad page number, a workspace rebuilt between two reads)
raise it directly. The application renders it as an HTML page with that status, never a traceback.
"""

from __future__ import annotations

from typing import Any

# An operator's refusal as an HTTP status. EXECUTION_FAILED is the operator meeting an input it could
# not process (an unknown git revision); VALIDATION_FAILED is a workspace whose graph does not match
# its manifest, which is what a reader sees while a rebuild is replacing it.
STATUS_BY_CODE: dict[str, int] = {
    "WORKSPACE_NOT_FOUND": 404,
    "OBJECT_NOT_FOUND": 404,
    "OPERATOR_UNAVAILABLE": 404,
    "INVALID_QUERY": 400,
    "TYPE_MISMATCH": 400,
    "POLICY_BLOCKED": 400,
    "UNSUPPORTED_PROJECTION": 400,
    "CAPABILITY_DENIED": 403,
    "CONFLICT_REQUIRES_REVIEW": 409,
    "VALIDATION_FAILED": 409,
    "UNRESOLVED_REQUIRED_INPUT": 422,
    "EXECUTION_FAILED": 422,
}


class ViewError(Exception):
    """A page that cannot be shown, and why.

    Parameters:
        code: a PSMR error code (or the view's own, e.g. WORKSPACE_REBUILT).
        message: what went wrong and what to do instead.
        status: the HTTP status (default: from `STATUS_BY_CODE`, else 400).
        links: (label, URL) pairs offered on the error page (e.g. "analyse anyway").
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        links: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status if status is not None else STATUS_BY_CODE.get(code, 400)
        self.links = links or []

    @classmethod
    def from_envelope(cls, error: dict[str, Any]) -> ViewError:
        """The error of a `status: "error"` envelope."""
        return cls(error["code"], error["message"])
