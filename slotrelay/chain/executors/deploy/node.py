"""The built-in `deploy` executor: every target switches to a new, fully checked release, or none does.

The rule it keeps: CONTRACTS.md#deploy-node. The seed was written after deploys that were half done
(the B mirror not synced, the sitemap forgotten, a stale page left public), so every check is part
of the step, and a failed one leaves every target serving exactly what it served before:

1. the files (`files`, and `files_from`: a list a previous node wrote into the input slot) are read
   from the chain's folder without following a link (deploy.sources) and hashed once;
2. with a sitemap, the Dev copy's update (one `<url>` per deployed page, deploy.sitemap) is
   made in memory and deployed with the files; the Dev copy is written back only when all is done;
3. every target (a local folder, deploy.folder, or a remote over SSH,
   deploy.ssh) gets the batch as a new release, unchanged files hard-linked to the
   release before, every copy proven by its sha256 (deploy.release);
4. a target with a preview URL is checked there before anything goes live: every file answers 200
   with its bytes, and each page's feature points equal Dev's (紧追-L3, deploy.checks);
5. every target switches (`current` renamed over); targets served without a preview are checked
   right after; any failure switches every target back and removes the new releases;
6. old releases beyond `keep_releases` are removed.

The output lists each check on each target as `passed` or `skipped` with the reason (a failure fails
the node, and its message lists them); a check named in `require` that cannot run anywhere fails the
node with deploy_config_invalid before anything is copied. Error types: deploy.errors.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dotenv import dotenv_values

from slotrelay.chain.checks import field_value, is_missing
from slotrelay.chain.errors import NodeError
from slotrelay.chain.executors.deploy.errors import (
    CONFIG_INVALID,
    FEATURE_POINTS_DIFFER,
    HASH_MISMATCH,
    PROOF_FAILED,
    SITEMAP_INVALID,
    SOURCE_MISSING,
    URL_MISMATCH,
    URL_UNREACHABLE,
)
from slotrelay.chain.executors.deploy.folder import FolderReleases
from slotrelay.chain.executors.deploy.http import url_of
from slotrelay.chain.executors.deploy.release import ReleaseTarget, Staged, new_release_id
from slotrelay.chain.executors.deploy.sitemap import SitemapInvalid, update_sitemap
from slotrelay.chain.executors.deploy.sources import ChainFolder, Upload
from slotrelay.chain.models import DeployExecutor, FeaturePoints, Sitemap

if TYPE_CHECKING:
    from slotrelay.chain.executors import ExecutionContext
    from slotrelay.chain.executors.deploy.checks import ServedChecks

PAGE_SUFFIXES = (".html", ".htm")
BEFORE_SWITCH = "before_switch"
AFTER_SWITCH = "after_switch"
_CHECK_OF_ERROR = {HASH_MISMATCH: "hash", PROOF_FAILED: "hash", URL_UNREACHABLE: "url", URL_MISMATCH: "url",
                   FEATURE_POINTS_DIFFER: "feature_points"}


def deploy_env(base_dir: Path) -> dict[str, str]:
    """The environment a deploy reads remotes from: `.env` files, then the environment, which wins.

    The chain folder's `.env` wins over the working folder's, as in the engine's L1 check.
    """
    values: dict[str, str] = {}
    for env_file in (Path.cwd() / ".env", base_dir / ".env"):
        if env_file.is_file():
            values.update({k: v for k, v in dotenv_values(env_file).items() if v is not None})
    values.update(os.environ)
    return values


def _uploads(spec: DeployExecutor, data: dict[str, Any], folder: ChainFolder) -> list[Upload]:
    listed = [(path, "file") for path in spec.files]
    if spec.files_from is not None:
        produced = field_value({"data": data}, spec.files_from)
        if is_missing(produced) or not isinstance(produced, list) or not all(
                isinstance(p, str) and p for p in produced):
            shown = "nothing" if is_missing(produced) else f"{type(produced).__name__} {str(produced)[:200]}"
            raise NodeError(SOURCE_MISSING,
                            f"files_from {spec.files_from}: the input slot holds {shown} there, not a list "
                            "of file paths")
        listed += [(path, f"file from {spec.files_from}") for path in produced]
    uploads: dict[str, Upload] = {}
    for path, what in listed:
        upload = folder.upload(path, field=what)
        uploads.setdefault(upload.relative, upload)
    if not uploads:
        raise NodeError(SOURCE_MISSING, f"nothing to deploy: files_from {spec.files_from} is an empty list")
    return list(uploads.values())


def _targets(spec: DeployExecutor, base: Path, env: dict[str, str]) -> list[ReleaseTarget]:
    targets: list[ReleaseTarget] = []
    for target in spec.target_specs:
        if target.ssh and env.get(f"{target.ssh}_HOST", "").strip():
            # Only a deploy to a remote pays for asyncssh's import.
            from slotrelay.chain.executors.deploy.ssh import RemoteReleases, RemoteSettings

            settings = RemoteSettings.from_env(target.ssh, env, base_dir=base)
            assert settings is not None  # <ssh>_HOST is set
            targets.append(RemoteReleases(target.label, settings))
        elif target.folder is not None:
            folder = Path(target.folder)
            targets.append(FolderReleases(target.label, folder if folder.is_absolute() else base / folder,
                                          base_url=target.base_url, preview_url=target.preview_url))
        else:
            raise NodeError(CONFIG_INVALID,
                            f"target {target.label}: {target.ssh}_HOST is not set (environment or .env) and "
                            "the target has no folder to fall back to")
    return targets


def _feature_pages(points: FeaturePoints, uploads: list[Upload]) -> list[Upload]:
    if points.pages is None:
        return [u for u in uploads if u.relative.endswith(PAGE_SUFFIXES)]
    by_path = {u.relative: u for u in uploads}
    unknown = [p for p in points.pages if p not in by_path]
    if unknown:
        raise NodeError(CONFIG_INVALID, f"feature_points.pages {unknown} are not among the deployed files")
    return [by_path[p] for p in points.pages]


def _stage_sitemap(sitemap: Sitemap, uploads: list[Upload],
                   folder: ChainFolder) -> tuple[Upload, dict[str, Any]]:
    """The Dev sitemap with the batch's pages, in memory: one more upload, and the report (none written)."""
    relative = folder.relative_of(sitemap.path, field="sitemap path").as_posix()
    if any(u.relative == relative for u in uploads):
        raise NodeError(CONFIG_INVALID,
                        f"{relative} is the sitemap: the `sitemap` setting deploys it, not `files`")
    pages = [u.relative for u in uploads if any(fnmatch.fnmatch(u.relative, p) for p in sitemap.pages)]
    try:
        update = update_sitemap(folder.read(relative), [url_of(sitemap.site_url, p) for p in pages],
                                lastmod=datetime.now(UTC))
    except SitemapInvalid as invalid:
        raise NodeError(SITEMAP_INVALID, f"sitemap {folder.base / relative}: {invalid}") from invalid
    digest = hashlib.sha256(update.content).hexdigest()
    report = {"path": relative, "source": str(folder.base / relative), "sha256": digest,
              "added": update.added, "updated": update.updated}
    return Upload(relative=relative, sha256=digest, source=str(folder.base / relative),
                  content=update.content), report


def _row(check: str, target: ReleaseTarget, status: str, *, stage: str | None = None,
         reason: str | None = None) -> dict[str, Any]:
    return {"check": check, "target": target.name, "status": status, "stage": stage, "reason": reason}


def _plan(spec: DeployExecutor, targets: list[ReleaseTarget], pages: list[Upload]) -> list[dict[str, Any]]:
    """Every check on every target, `pending` or `skipped` with why; a required check that cannot run fails.

    Raises:
        NodeError: deploy_config_invalid naming the required check and why it cannot run anywhere.
    """
    rows = []
    for target in targets:
        served = target.preview_url or target.base_url
        stage = BEFORE_SWITCH if target.preview_url else AFTER_SWITCH
        unserved = f"target {target.name} has no served URL ({target.url_settings})"
        rows.append(_row("hash", target, "pending", stage=BEFORE_SWITCH))
        rows.append(_row("url", target, "pending", stage=stage) if served
                    else _row("url", target, "skipped", reason=unserved))
        if spec.feature_points is None:
            rows.append(_row("feature_points", target, "skipped", reason="feature_points is null"))
        elif not pages:
            rows.append(_row("feature_points", target, "skipped",
                             reason="no page among the deployed files (.html, .htm, feature_points.pages)"))
        elif not served:
            rows.append(_row("feature_points", target, "skipped", reason=unserved))
        else:
            rows.append(_row("feature_points", target, "pending", stage=stage))
        rows.append(_row("sitemap", target, "pending", stage=BEFORE_SWITCH) if spec.sitemap is not None
                    else _row("sitemap", target, "skipped", reason="the node has no `sitemap`"))
    for check in spec.require:
        mine = [row for row in rows if row["check"] == check]
        if not any(row["status"] == "pending" for row in mine):
            reasons = "; ".join(dict.fromkeys(str(row["reason"]) for row in mine))
            raise NodeError(CONFIG_INVALID,
                            f"`require` lists {check}, which cannot run on any target: {reasons}")
    return rows


def _summary(rows: list[dict[str, Any]]) -> str:
    parts = []
    for row in rows:
        status = "not run" if row["status"] == "pending" else row["status"]
        text = f"{row['check']} {status} on {row['target']}"
        if row["status"] == "skipped":
            text += f" ({row['reason']})"
        elif row["stage"] and row["check"] != "hash" and row["check"] != "sitemap":
            text += f" ({row['stage'].replace('_', ' ')})"
        parts.append(text)
    return "checks: " + ", ".join(parts)


@dataclass
class _Deploy:
    """One deploy's progress across its targets: what is staged, what is live, what to undo."""

    spec: DeployExecutor
    targets: list[ReleaseTarget]
    uploads: list[Upload]
    rows: list[dict[str, Any]]
    pages: list[Upload]
    folder: ChainFolder
    context: ExecutionContext
    release: str
    staged: dict[str, Staged] = field(default_factory=dict)
    begun: list[ReleaseTarget] = field(default_factory=list)
    switched: list[ReleaseTarget] = field(default_factory=list)
    answered: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    checks: ServedChecks | None = None

    def mark(self, check: str, target: ReleaseTarget, status: str) -> None:
        for row in self.rows:
            if row["check"] == check and row["target"] == target.name and row["status"] == "pending":
                row["status"] = status

    def served_checks(self) -> ServedChecks:
        if self.checks is None:
            # requests and BeautifulSoup load only for a deploy that checks a served target.
            from slotrelay.chain.executors.deploy.checks import ServedChecks

            self.checks = ServedChecks(self.spec.url_retry, self.spec.feature_points, self.pages)
        return self.checks

    def check(self, target: ReleaseTarget, stage: str) -> None:
        if stage == BEFORE_SWITCH:
            assert target.preview_url is not None  # checked before the switch only with a preview
            base_url = target.preview_url.rstrip("/") + f"/{self.release}/"
        else:
            assert target.base_url is not None
            base_url = target.base_url
        try:
            answered = self.served_checks().check(target.name, base_url, self.uploads)
        except NodeError as failure:
            if failure.error_type == FEATURE_POINTS_DIFFER:
                # Every file was fetched and matched before the points were compared.
                self.mark("url", target, "passed")
            self.mark(_CHECK_OF_ERROR.get(failure.error_type, "url"), target, "failed")
            raise
        self.answered.update({(target.name, path): value for path, value in answered.items()})
        self.mark("url", target, "passed")
        self.mark("feature_points", target, "passed")

    def run(self, sitemap: Upload | None) -> None:
        for target in self.targets:
            self.begun.append(target)
            try:
                self.staged[target.name] = target.stage(self.uploads, self.release)
            except NodeError as failure:
                if failure.error_type in (HASH_MISMATCH, PROOF_FAILED):
                    self.mark("hash", target, "failed")
                raise
            self.mark("hash", target, "passed")
            self.mark("sitemap", target, "passed")
        for target in self.targets:
            if target.preview_url:
                self.check(target, BEFORE_SWITCH)
        for target in self.targets:
            target.switch()
            self.switched.append(target)
        for target in self.targets:
            if target.base_url and not target.preview_url:
                self.check(target, AFTER_SWITCH)
        if sitemap is not None:
            assert sitemap.content is not None  # the staged sitemap is in memory
            self.folder.write(sitemap.relative, sitemap.content)

    def undo(self) -> str:
        """Switch every switched target back and remove every staged release; says what was done."""
        notes = []
        started = time.perf_counter()
        back = []
        for target in reversed(self.switched):
            previous = self.staged[target.name].previous
            try:
                target.switch_back()
                back.append(f"{target.name} to "
                            + (f"release {previous}" if previous else "no release (none before)"))
            except NodeError as failure:
                notes.append(f"COULD NOT switch {target.name} back, it serves release {self.release}: "
                             f"{failure.message}")
        took = (time.perf_counter() - started) * 1000
        if back:
            notes.insert(0, f"switched back in {took:.1f} ms: {', '.join(reversed(back))}")
        else:
            notes.insert(0, "nothing went live")
        for target in self.begun:
            notes += [f"could not remove {problem}" for problem in target.discard()]
        notes.append(f"release {self.release} removed")
        self.context.logger.warning("deploy: %s", "; ".join(notes))
        return "; ".join(notes)

    def output(self, data: dict[str, Any], sitemap: dict[str, Any] | None,
               pruned: dict[str, dict[str, Any]]) -> dict[str, Any]:
        deployed = []
        targets = {}
        for target in self.targets:
            staged = self.staged[target.name]
            for upload, landed in zip(self.uploads, staged.landed, strict=True):
                url, status = self.answered.get((target.name, upload.relative), (None, None))
                linked = upload.relative in staged.linked
                deployed.append({"file": upload.source, "path": upload.relative, "target": landed,
                                 "target_name": target.name, "sha256": upload.sha256,
                                 "how": "linked" if linked else "uploaded", "proof": staged.proof,
                                 "url": url, "url_status": status})
            checked = (BEFORE_SWITCH if target.preview_url else AFTER_SWITCH
                       if target.base_url else None)
            targets[target.name] = {
                "kind": target.kind, "location": target.location, "base_url": target.base_url,
                "preview_url": target.preview_url, "release": staged.release, "previous": staged.previous,
                "checked": checked, "uploaded": len(self.uploads) - len(staged.linked),
                "linked": len(staged.linked), "carried": staged.carried, "not_carried": staged.not_carried,
                **pruned[target.name]}
        return {
            "release": self.release,
            "targets": targets,
            "deployed": deployed,
            "checks": self.rows,
            "checked_urls": self.checks.checked if self.checks else [],
            "sitemap": sitemap,
            "feature_points": self.checks.compared if self.checks else [],
            "input": data,
        }


def run_deploy(spec: DeployExecutor, data: dict[str, Any], context: ExecutionContext) -> dict[str, Any]:
    """Deploy the files (and the sitemap) to every target as a new release, proven, checked and switched.

    Parameters:
        spec: the node's deploy executor spec.
        data: the node's input data (`files_from` reads it; handed on in the output for traceability).
        context: the run's execution context; relative paths resolve against `context.chain.base_dir`.

    Returns:
        The output data: `release`, `targets` (name -> kind, location, base_url, preview_url, release,
        previous, checked: `before_switch`/`after_switch`/null, uploaded, linked, carried, not_carried,
        pruned), `deployed` (one row per file and target: file, path, target, target_name, sha256, how,
        proof, url, url_status), `checks` (check, target, status, stage, reason), `checked_urls`,
        `sitemap` (path, sha256, added, updated; null without one), `feature_points` (one row per
        target, page and point: served and Dev values) and `input`.

    Raises:
        NodeError: with one of the types of deploy.errors; after a failure every
            target serves what it served before, and the message says what was undone.
    """
    base = Path(context.chain.base_dir)
    folder = ChainFolder(base)
    uploads = _uploads(spec, data, folder)
    targets = _targets(spec, base, deploy_env(base))
    pages = _feature_pages(spec.feature_points, uploads) if spec.feature_points else []
    rows = _plan(spec, targets, pages)
    sitemap_upload, sitemap = _stage_sitemap(spec.sitemap, uploads, folder) if spec.sitemap else (None, None)
    if sitemap_upload is not None:
        # Last in the batch: a preview or live check reads it after the pages it lists.
        uploads.append(sitemap_upload)
    deploy = _Deploy(spec, targets, uploads, rows, pages, folder, context, new_release_id(datetime.now(UTC)))
    try:
        try:
            deploy.run(sitemap_upload)
        except NodeError as failure:
            undone = deploy.undo()
            raise NodeError(failure.error_type, f"{failure.message}; {undone}; {_summary(rows)}") from failure
        except BaseException:
            deploy.undo()
            raise
        pruned: dict[str, dict[str, Any]] = {}
        for target in targets:
            try:
                pruned[target.name] = {"pruned": target.prune(spec.keep_releases), "prune_failed": None}
            except NodeError as failure:
                # The new release is live and checked; old ones stay until a later deploy removes them.
                context.logger.warning("deploy: %s: old releases not removed: %s", target.name,
                                       failure.message)
                pruned[target.name] = {"pruned": [], "prune_failed": failure.message}
            context.logger.info("deploy: %s serves release %s", target.name, deploy.release)
    finally:
        if deploy.checks is not None:
            deploy.checks.close()
        for target in targets:
            target.close()
    return deploy.output(data, sitemap, pruned)

