"""The workspaces one MCP server serves, and the roots it may analyse.

The server starts without source-write: psmr_workspace_build writes only to workspace stores, and may
analyse a folder only if it lies inside a root given on the command line (`--workspace PATH`);
writing source files and running tests take their own flags (`slotrelay.psmr.grants`). Paths are compared
after resolving symlinks and `..`, so a link inside a root that points outside it is refused too.

Every workspace lives in one store (`slotrelay.psmr.workspace.store.default_store`, in slotrelay's state
folder, or the `--store DIR` the server was started with), never in the analysed folder; the registry
remembers which store holds which workspace id, so a tool call only names the id.

The registry keeps the last resolution of as many workspaces as it has roots (`KeptResolutions`):
the server updates its workspaces after each apply (psmr_verify_rebuild, psmr_workspace_build), and
an update then replays the last resolution where the edit reaches instead of resolving everything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotrelay.psmr import api
from slotrelay.psmr.errors import CapabilityDenied, InvalidQuery, WorkspaceNotFound
from slotrelay.psmr.workspace.kept import KeptResolutions


@dataclass(frozen=True)
class ServedWorkspace:
    """A workspace this server answers for.

    Parameters:
        workspace_id: the id tools take (`ws_…`).
        root: the analysed folder.
        store: the store folder holding it.
        rev: the git revision analysed, or None for the checkout.
    """

    workspace_id: str
    root: Path
    store: Path
    rev: str | None = None

    def summary(self) -> dict[str, Any]:
        """The JSON a model sees for this workspace in psmr_workspace_describe."""
        return {"workspace_id": self.workspace_id, "root": str(self.root), "rev": self.rev}


class WorkspaceRegistry:
    """The roots the server may analyse and the workspaces it serves.

    Parameters:
        roots: folders psmr_workspace_build may analyse (and anything below them).
        store: the store for every workspace, or None for the default one.
    """

    def __init__(self, roots: Iterable[Path], *, store: Path | None = None) -> None:
        self.roots: tuple[Path, ...] = tuple(Path(root).resolve() for root in roots)
        self.store = store.resolve() if store is not None else None
        self._served: dict[str, ServedWorkspace] = {}
        self._startup_ids: list[str] = []
        # The server's own resolutions, one per root it may analyse, for its updates of them.
        self.kept = KeptResolutions(max(1, len(self.roots)))
        # Builds run in worker threads; the table is small, so one lock keeps reads consistent.
        self._lock = threading.Lock()

    def allowed_path(self, path: str | Path) -> Path:
        """The resolved folder if it lies inside an allowed root.

        Parameters:
            path: a folder, absolute or relative to the working directory.

        Returns:
            The resolved path.

        Raises:
            InvalidQuery: the path cannot be resolved (a NUL byte, a symlink loop).
            CapabilityDenied: the folder is outside every root.
        """
        try:
            resolved = Path(path).expanduser().resolve()
        except (ValueError, OSError, RuntimeError) as exc:
            # A NUL byte, a symlink loop or an unknown `~user`: nothing a build could use.
            raise InvalidQuery(
                f"path {path!r} is not a usable path ({exc}); give a folder inside a root"
            ) from exc
        if not any(resolved == root or resolved.is_relative_to(root) for root in self.roots):
            allowed = ", ".join(str(root) for root in self.roots) or "none"
            raise CapabilityDenied(
                f"{path!s} is outside the roots this server may analyse ({allowed}); restart the server "
                "with --workspace for that folder, or build a folder inside one of these roots"
            )
        return resolved

    def build(
        self,
        path: str | Path,
        *,
        rev: str | None = None,
        progress: Callable[[int, int, str], None] | None = None,
        at_startup: bool = False,
    ) -> dict[str, Any]:
        """Build or update the workspace for a folder inside a root, and serve it from now on.

        Parameters:
            path: the folder to analyse.
            rev: a git revision to analyse instead of the checkout.
            progress: called as `progress(done, total, file)` while files are analysed.
            at_startup: True for the `--workspace` folders, which define the default workspace.

        Returns:
            The core's build summary (`workspace_id`, `root`, `store`, counts, duration).

        Raises:
            CapabilityDenied: the folder is outside every root.
            PsmrError: the core could not build it (INVALID_QUERY, EXECUTION_FAILED).
        """
        root = self.allowed_path(path)
        summary = api.build_workspace(root, rev=rev, store=self.store, progress=progress, kept=self.kept)
        workspace_id = summary["workspace_id"]
        with self._lock:
            self._served[workspace_id] = ServedWorkspace(workspace_id, root, Path(summary["store"]), rev)
            if at_startup and workspace_id not in self._startup_ids:
                self._startup_ids.append(workspace_id)
        return summary

    @property
    def default_id(self) -> str | None:
        """The workspace tools use when a call names none: set only with exactly one `--workspace`."""
        return self._startup_ids[0] if len(self._startup_ids) == 1 else None

    def served(self) -> list[ServedWorkspace]:
        """Every workspace served, start-up ones first, then in the order they were built."""
        with self._lock:
            first = [self._served[i] for i in self._startup_ids]
            return first + [w for i, w in self._served.items() if i not in self._startup_ids]

    def resolve_id(self, workspace_id: str | None) -> str:
        """The workspace a call is about: the one it names, or the default.

        Parameters:
            workspace_id: the `workspace_id` argument, or None when omitted.

        Returns:
            A workspace id.

        Raises:
            InvalidQuery: none named and the server has no single default.
        """
        if workspace_id:
            return workspace_id
        if self.default_id is not None:
            return self.default_id
        ids = ", ".join(w.workspace_id for w in self.served())
        raise InvalidQuery(
            f"workspace_id is required: this server serves several workspaces ({ids}); "
            "psmr_workspace_describe without arguments lists them with their folders"
        )

    def store_for(self, workspace_id: str) -> Path:
        """The store holding a served workspace.

        Parameters:
            workspace_id: a workspace id.

        Returns:
            Its store folder.

        Raises:
            WorkspaceNotFound: this server does not serve that workspace.
        """
        with self._lock:
            served = self._served.get(workspace_id)
        if served is None:
            served = self._adopt(workspace_id)
        if served is None:
            ids = ", ".join(w.workspace_id for w in self.served()) or "none"
            raise WorkspaceNotFound(
                f"workspace {workspace_id!r} is not served here (served: {ids}); "
                "use one of those, or psmr_workspace_build to analyse another folder inside a root"
            )
        return served.store

    def _adopt(self, workspace_id: str) -> ServedWorkspace | None:
        """Serve a workspace found in a known store whose root is allowed (e.g. a revision built
        for a semantic diff, or one built earlier with `slotrelay psmr build`)."""
        with self._lock:
            stores = {w.store for w in self._served.values()}
        for store in sorted(stores):
            for listed in api.list_workspaces(store=store):
                if listed["workspace_id"] != workspace_id:
                    continue
                root = Path(listed["root"]).resolve()
                if not any(root == r or root.is_relative_to(r) for r in self.roots):
                    return None
                served = ServedWorkspace(workspace_id, root, store, listed.get("rev"))
                with self._lock:
                    self._served.setdefault(workspace_id, served)
                return served
        return None
