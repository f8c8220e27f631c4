"""A deploy target's releases: the layout both target kinds keep, and the steps a release goes through.

    <folder>/
      releases/
        20261204T101500.123Z-3f9a1c/      one release: the whole site, files unchanged since the
        20261204T111500.456Z-b07e22/      release before hard-linked to it, changed ones copied
      current -> releases/20261204T111500.456Z-b07e22      the live release: what the web server serves

The same shape for a local folder and a remote over SSH (Capistrano's and Deployer's), because it is
the only one that switches a whole site at once: `current` is replaced by renaming a new link over it
(rename(2), locally or through SFTP `posix-rename`), so a web server that resolves `current/` for each
request serves one release or the other, never a mix; a `rename(2)` per file would leave old and new
pages side by side for as long as the renames take. The release folder is never served before the
switch (unless a preview URL serves `releases/`), so nothing in it needs a temporary name.

A release goes through `stage` (made and proven by hash), `switch` (live), `switch_back` (the previous
release live again, or no `current` at all when there was none) or `discard` (removed, with the folders
the deploy created), and `prune` after a successful deploy. A `current` that is not a link to
`releases/<id>` was not made by a deploy: it is refused (deploy_target_unwritable), never replaced.
"""

from __future__ import annotations

import posixpath
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from slotrelay.chain.executors.deploy.sources import Upload

RELEASES = "releases"
CURRENT = "current"
RELEASE_ID = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9a-f]{6}")


def new_release_id(now: datetime) -> str:
    """A release id that sorts by time: UTC to the millisecond, and 6 random hex digits."""
    return f"{now:%Y%m%dT%H%M%S}.{now.microsecond // 1000:03d}Z-{uuid.uuid4().hex[:6]}"


def link_to(release: str) -> str:
    """What `current` holds for a release: relative, so the folder can be mounted or served anywhere."""
    return posixpath.join(RELEASES, release)


def release_of_link(target: str) -> str | None:
    """The release a `current` link names, or None when it names anything else."""
    folder, _, release = target.rstrip("/").rpartition("/")
    return release if folder == RELEASES and RELEASE_ID.fullmatch(release) else None


def to_prune(names: list[str], *, keep: int, live: str) -> list[str]:
    """The releases to remove so that `keep` remain, oldest first; the live one always stays.

    Parameters:
        names: entries of `releases/` (anything not named like a release is left alone).
        keep: how many releases to keep, the live one included.
        live: the release `current` names.
    """
    releases = sorted(name for name in names if RELEASE_ID.fullmatch(name) and name != live)
    return releases[:max(0, len(releases) - (keep - 1))]


@dataclass
class Staged:
    """A release made and proven on one target, not live yet.

    Attributes:
        release: its id.
        previous: the release `current` named before (None on a first deploy).
        landed: where each upload landed, in the order of the uploads.
        linked: uploads that were hard-linked to the previous release's copy (same sha256).
        carried: how many other files of the previous release were hard-linked into it.
        not_carried: entries of the previous release that are not regular files or folders (a link
            the deploy did not make is never carried).
        proof: how every copy was proven.
    """

    release: str
    previous: str | None
    landed: list[str]
    linked: set[str]
    carried: int
    not_carried: list[str] = field(default_factory=list)
    proof: str = ""


class ReleaseTarget(Protocol):
    """A target that keeps releases: a local folder (deploy_folder) or a remote (deploy_ssh)."""

    name: str
    kind: str
    location: str
    base_url: str | None
    preview_url: str | None
    url_settings: str
    """Where the target's URLs are set, for messages (`base_url or preview_url`)."""

    def stage(self, uploads: list[Upload], release: str) -> Staged:
        """Make `releases/<release>/`: the previous release's files linked, the uploads copied, all proven."""

    def switch(self) -> None:
        """Make the staged release live."""

    def switch_back(self) -> None:
        """Make the previous release live again (no `current` at all when there was none)."""

    def discard(self) -> list[str]:
        """Remove the staged release and any folder the deploy created; returns what could not be removed."""

    def prune(self, keep: int) -> list[str]:
        """Remove releases beyond `keep` (the live one stays); returns the removed ids."""

    def close(self) -> None:
        """Let go of connections."""
