"""One page's reads of one workspace: every answer from `slotrelay.psmr.api.call`, checked for one version.

A page may call several operators (the overview asks describe, unknowns, conflicts and deltas, and
reads the loaded workspace for its orientation: `slotrelay.psmr.ops.overview`).
A rebuild that lands between two of those calls would mix two versions on one page, so the reader
notes the workspace version from its manifest before the first call and checks it again after
the last (`check_unchanged`): a page that straddles a rebuild is refused with 409, never shown mixed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from psmr_view.errors import ViewError
from psmr_view.paging import PageRef
from psmr_view.source import SourceFiles
from slotrelay.psmr import api
from slotrelay.psmr.errors import PsmrError
from slotrelay.psmr.workspace.store import Store, Workspace

WORKSPACE_ID = re.compile(r"ws_[0-9a-f]+")


def require_store(store: Path) -> None:
    """Refuse a store folder that does not exist.

    Raises:
        ViewError: WORKSPACE_NOT_FOUND (404) naming the folder.
    """
    if not (store / "workspaces").is_dir():
        raise ViewError(
            "WORKSPACE_NOT_FOUND",
            f"there is no PSMR store at {store}; build one with `slotrelay psmr build PATH` "
            "(or start the view with --store naming the store it was built in)",
        )


class WorkspaceReader:
    """The operators' answers about one workspace of a store, for one page.

    Parameters:
        store: the store folder.
        workspace_id: the workspace the page is about.

    Raises:
        ViewError: no such store or workspace (404), or a damaged or half-replaced manifest (409).
    """

    def __init__(self, store: Path, workspace_id: str) -> None:
        require_store(store)
        if not WORKSPACE_ID.fullmatch(workspace_id):
            raise ViewError(
                "WORKSPACE_NOT_FOUND",
                f"{workspace_id!r} is not a workspace id (ws_ and hex digits); see /workspaces",
            )
        self.store = store
        self.workspace_id = workspace_id
        self.manifest = self._manifest()
        self.version: str = self.manifest["version"]
        self.files = SourceFiles(self.source_root, self.manifest["files"])

    def _manifest(self) -> dict[str, Any]:
        try:
            return Store.open(self.store).manifest(self.workspace_id)
        except PsmrError as exc:
            raise ViewError(exc.code, exc.message) from exc

    def call(
        self, operation: str, request: dict[str, Any], *, budget: dict[str, int], page: PageRef | None = None
    ) -> dict[str, Any]:
        """Call an operator on this workspace and return its envelope.

        Parameters:
            operation: the operator (e.g. `query.subgraph`).
            request: its request, without `workspace_id`, `budget` or `continuation_token`.
            budget: the page's budget.
            page: the page asked for; its token resumes the answer.

        Returns:
            The `status: "ok"` envelope.

        Raises:
            ViewError: the operator's refusal, with its code.
        """
        body: dict[str, Any] = {"workspace_id": self.workspace_id, **request, "budget": budget}
        if page is not None and page.token is not None:
            body["continuation_token"] = page.token
        answer = api.call(operation, body, store=self.store)
        if answer["status"] == "error":
            raise ViewError.from_envelope(answer["error"])
        return answer

    def workspace(self) -> Workspace:
        """The loaded workspace (as the operators load it; the process keeps the last few loaded).

        Raises:
            ViewError: the store's refusal (a damaged or half-replaced workspace: 409).
        """
        try:
            return Store.open(self.store).load(self.workspace_id)
        except PsmrError as exc:
            raise ViewError(exc.code, exc.message) from exc

    def check_unchanged(self) -> None:
        """Refuse the page if the workspace was rebuilt while it was being read.

        Raises:
            ViewError: WORKSPACE_REBUILT (409).
        """
        now = self._manifest()["version"]
        if now != self.version:
            raise ViewError(
                "WORKSPACE_REBUILT",
                f"the workspace was rebuilt while this page was read (version {self.version} is now {now}); "
                "reload the page",
                status=409,
            )

    @property
    def source_root(self) -> Path:
        """The folder the workspace's files were read from (a revision's worktree for `--rev`)."""
        return Path(self.manifest["source_root"])

    def summary(self) -> dict[str, Any]:
        """What every page shows about the workspace in its header."""
        return {
            "workspace_id": self.workspace_id,
            "root": self.manifest["root"],
            "rev": self.manifest.get("rev"),
            "commit": self.manifest.get("commit"),
            "version": self.version,
            "updated": self.manifest.get("updated"),
        }


def list_workspaces(store: Path) -> list[dict[str, Any]]:
    """The workspaces of a store, as `slotrelay psmr list` shows them.

    Raises:
        ViewError: WORKSPACE_NOT_FOUND (404) when the store does not exist.
    """
    require_store(store)
    return api.list_workspaces(store=store)
