"""The built-in `deploy` executor: copy, prove, check the served side, keep the sitemap, compare.

The rule it keeps: CONTRACTS.md#deploy-node.

The seed was written after deploys that were half done (the B mirror not synced, the sitemap
forgotten), so every check is part of the step:

1. every listed file goes to every target: a local folder (the B mirror) or a remote folder over SSH
   (the C side, slotrelay.chain.deploy_ssh). A target's batch lands under temporary names, each copy is
   proven by the sha256 of what the target holds, and only then renamed into place: a failure leaves
   nothing half written under a final name;
2. with a sitemap, the Dev copy of `sitemap.xml` gets one `<url>` per deployed page (added or updated,
   never twice; slotrelay.chain.sitemap) and goes to every target in the same batch, renamed last;
3. where a target is served (a folder's `base_url`, a remote's `<ssh>_URL`), every deployed file must
   answer 200 there with the same bytes (slotrelay.chain.deploy_http, urllib3 `Retry`);
4. 紧追-L3: on every served target, each page's feature points (title, CSS selector text, response
   header; slotrelay.chain.feature_points) must equal the Dev copy's.

Each failure raises `NodeError` with one of these error types, which a chain declares in its
`error_types` to choose retry / skip / fail:

    deploy_source_missing         a listed file does not exist or is not a regular file
    deploy_config_invalid         a remote's variables are missing or wrong, a path leaves its folder
    deploy_host_unreachable       the SSH host does not answer, or the connection broke
    deploy_auth_refused           the SSH host refused the key
    deploy_host_key_unknown       the SSH host's key is not in the known_hosts file
    write_denied                  a target refused the write (permissions, read-only): declare it
                                  `fail`, a retry cannot change a permission (the seed's type)
    deploy_target_unwritable      a target failed otherwise (a file where a folder should be, disk full)
    deploy_hash_mismatch          a copy's sha256 differs from its source's
    deploy_proof_failed           the remote host could not hash the copies (no `sha256sum`)
    deploy_url_unreachable        a URL did not answer 200 after the retries
    deploy_url_mismatch           a URL answered 200 with bytes that differ from the source
    deploy_sitemap_invalid        the Dev sitemap does not parse or breaks the protocol
    deploy_feature_points_differ  a served page's feature point differs from Dev's

Relative file, folder and sitemap paths resolve against the chain file's folder; each file keeps its
listed relative path under every target.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import requests
from dotenv import dotenv_values

from slotrelay.chain.deploy_http import Served, fetch, session_for, url_of
from slotrelay.chain.deploy_ssh import (
    CONFIG_INVALID,
    HASH_MISMATCH,
    TARGET_UNWRITABLE,
    WRITE_DENIED,
    RemoteSettings,
    Upload,
    deploy_remote,
)
from slotrelay.chain.errors import NodeError
from slotrelay.chain.feature_points import PageView, describe, read_points
from slotrelay.chain.models import DeployExecutor, FeaturePoints, Sitemap
from slotrelay.chain.sitemap import SitemapInvalid, update_sitemap

if TYPE_CHECKING:
    from slotrelay.chain.executors import ExecutionContext

SOURCE_MISSING = "deploy_source_missing"
URL_MISMATCH = "deploy_url_mismatch"
SITEMAP_INVALID = "deploy_sitemap_invalid"
FEATURE_POINTS_DIFFER = "deploy_feature_points_differ"
PAGE_SUFFIXES = (".html", ".htm")


@dataclass(frozen=True)
class Target:
    """A deploy target as this run resolved it: a local folder or a remote (never both)."""

    name: str
    location: str
    base_url: str | None
    folder: Path | None = None
    remote: RemoteSettings | None = None

    @property
    def kind(self) -> str:
        """`ssh` or `folder`."""
        return "ssh" if self.remote else "folder"


def sha256_of(path: Path) -> str:
    """The sha256 hex digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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


def _inside(relative: str, field: str) -> str:
    if ".." in PurePosixPath(relative).parts:
        raise NodeError(CONFIG_INVALID, f"{field} {relative!r} climbs out of its folder with '..'")
    return relative


def _sources(spec: DeployExecutor, base: Path) -> list[Upload]:
    uploads = []
    for listed_text in spec.files:
        listed = Path(listed_text)
        source = listed if listed.is_absolute() else base / listed
        if not source.is_file():
            raise NodeError(SOURCE_MISSING, f"file to deploy {source} does not exist or is not a file")
        # Keep the listed relative layout in each target; an absolute source goes by its name alone.
        relative = listed.name if listed.is_absolute() else _inside(listed.as_posix(), "file")
        uploads.append(Upload(source=source, relative=relative, sha256=sha256_of(source)))
    return uploads


def _targets(spec: DeployExecutor, base: Path, env: dict[str, str]) -> list[Target]:
    targets = []
    for target in spec.target_specs:
        remote = RemoteSettings.from_env(target.ssh, env, base_dir=base) if target.ssh else None
        if remote is not None:
            targets.append(Target(target.label, remote.location, remote.url, remote=remote))
        elif target.folder is not None:
            folder = Path(target.folder)
            folder = folder if folder.is_absolute() else base / folder
            targets.append(Target(target.label, str(folder), target.base_url, folder=folder))
        else:
            raise NodeError(CONFIG_INVALID, f"target {target.label}: {target.ssh}_HOST is not set "
                                            "(environment or .env) and the target has no folder to fall back "
                                            "to")
    return targets


def _folder_error(path: Path, failure: OSError) -> NodeError:
    error_type = WRITE_DENIED if failure.errno in (errno.EACCES, errno.EPERM,
                                                   errno.EROFS) else TARGET_UNWRITABLE
    return NodeError(error_type, f"cannot write {path}: {failure}")


def _land_in_folder(folder: Path, uploads: list[Upload]) -> list[str]:
    """A batch into a local folder: temporary names, sha256 of each copy, rename into place."""
    token = uuid.uuid4().hex[:8]
    finals = [folder / u.relative for u in uploads]
    written: list[Path] = []
    try:
        temporaries = []
        for upload, final in zip(uploads, finals, strict=True):
            temporary = final.with_name(f".{final.name}.{token}.tmp")
            try:
                final.parent.mkdir(parents=True, exist_ok=True)
                written.append(temporary)
                shutil.copyfile(upload.source, temporary)
                with temporary.open("rb+") as handle:
                    os.fsync(handle.fileno())
                # Read back from the target's disk, not from memory: the proof is what the target holds.
                digest = sha256_of(temporary)
            except OSError as failure:
                raise _folder_error(final, failure) from failure
            if digest != upload.sha256:
                raise NodeError(HASH_MISMATCH, f"{final}: the copy has sha256 {digest}, "
                                               f"the source {upload.source} {upload.sha256}")
            temporaries.append(temporary)
        for temporary, final in zip(temporaries, finals, strict=True):
            try:
                os.replace(temporary, final)
            except OSError as failure:
                raise _folder_error(final, failure) from failure
            written.remove(temporary)
    finally:
        for temporary in written:
            temporary.unlink(missing_ok=True)
    return [str(final) for final in finals]


def _write_dev_sitemap(path: Path, content: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with temporary.open("wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as failure:
        raise _folder_error(path, failure) from failure
    finally:
        temporary.unlink(missing_ok=True)


def _keep_sitemap(sitemap: Sitemap, uploads: list[Upload], base: Path) -> tuple[Upload, dict[str, Any]]:
    """Update the Dev sitemap with the batch's pages; returns it as one more upload, and the report."""
    relative = _inside(PurePosixPath(sitemap.path).as_posix(), "sitemap path")
    if any(u.relative == relative for u in uploads):
        raise NodeError(CONFIG_INVALID,
                        f"{relative} is the sitemap: the `sitemap` setting deploys it, not `files`")
    path = base / relative
    pages = [u.relative for u in uploads if any(fnmatch.fnmatch(u.relative, p) for p in sitemap.pages)]
    try:
        existing = path.read_bytes() if path.is_file() else None
        update = update_sitemap(existing, [url_of(sitemap.site_url, p) for p in pages],
                                lastmod=datetime.now(UTC))
    except SitemapInvalid as invalid:
        raise NodeError(SITEMAP_INVALID, f"sitemap {path}: {invalid}") from invalid
    except OSError as unreadable:
        raise NodeError(SITEMAP_INVALID, f"sitemap {path} cannot be read: {unreadable}") from unreadable
    _write_dev_sitemap(path, update.content)
    digest = hashlib.sha256(update.content).hexdigest()
    report = {"path": relative, "source": str(path), "sha256": digest, "added": update.added,
              "updated": update.updated}
    return Upload(source=path, relative=relative, sha256=digest), report


def _feature_pages(points: FeaturePoints, uploads: list[Upload], sitemap: str | None) -> list[Upload]:
    if points.pages is None:
        return [u for u in uploads if u.relative.endswith(PAGE_SUFFIXES) and u.relative != sitemap]
    by_path = {u.relative: u for u in uploads}
    unknown = [p for p in points.pages if p not in by_path]
    if unknown:
        raise NodeError(CONFIG_INVALID, f"feature_points.pages {unknown} are not among the deployed files")
    return [by_path[p] for p in points.pages]


class _Comparison:
    """紧追-L3 over every served target: Dev pages read once, every difference collected before failing."""

    def __init__(self, points: FeaturePoints, session: requests.Session) -> None:
        self.points = points
        self.session = session
        self.dev: dict[str, list[str | None]] = {}
        self.compared: list[dict[str, Any]] = []
        self.differences: list[str] = []

    def _dev_values(self, upload: Upload) -> list[str | None]:
        if upload.relative not in self.dev:
            if self.points.dev_url is None:
                view = PageView(body=upload.source.read_bytes(), headers=None)
            else:
                served = fetch(self.session, url_of(self.points.dev_url, upload.relative), side="Dev")
                view = PageView(body=served.body, headers=served.headers)
            self.dev[upload.relative] = read_points(view, self.points.points)
        return self.dev[upload.relative]

    def compare(self, target: Target, upload: Upload, served: Served) -> None:
        """Read the points of one served page and of its Dev copy, and record each pair."""
        values = read_points(PageView(body=served.body, headers=served.headers), self.points.points)
        for point, value, dev in zip(self.points.points, values, self._dev_values(upload), strict=True):
            self.compared.append({"target": target.name, "page": upload.relative, "url": served.url,
                                  "point": describe(point), "served": value, "dev": dev,
                                  "equal": value == dev})
            if value != dev:
                self.differences.append(f"page {upload.relative} on target {target.name} ({served.url}): "
                                        f"{describe(point)} is {value!r} served, {dev!r} on Dev")


def _check_served(
    spec: DeployExecutor, targets: list[Target], uploads: list[Upload], deployed: list[dict[str, Any]],
    sitemap: str | None,
) -> tuple[list[str], list[dict[str, Any]]]:
    """Steps 3 and 4: every file on every served target answers 200 with its bytes; then 紧追-L3."""
    checked: list[str] = []
    served_targets = [t for t in targets if t.base_url]
    if not served_targets:
        return checked, []
    rows = {(row["target_name"], row["path"]): row for row in deployed}
    pages = _feature_pages(spec.feature_points, uploads, sitemap) if spec.feature_points else []
    with session_for(spec.url_retry) as session:
        comparison = _Comparison(spec.feature_points, session) if spec.feature_points else None
        for target in served_targets:
            for upload in uploads:
                assert target.base_url is not None  # served_targets have one
                served = fetch(session, url_of(target.base_url, upload.relative),
                               side=f"target {target.name}")
                digest = hashlib.sha256(served.body).hexdigest()
                if digest != upload.sha256:
                    raise NodeError(URL_MISMATCH,
                                    f"target {target.name}: GET {served.url} served sha256 {digest}, "
                                    f"the source {upload.source} has sha256 {upload.sha256}")
                rows[(target.name, upload.relative)].update(url=served.url, url_status=served.status)
                checked.append(served.url)
                if comparison is not None and upload in pages:
                    comparison.compare(target, upload, served)
    if comparison is not None and comparison.differences:
        raise NodeError(FEATURE_POINTS_DIFFER,
                        "the served site differs from Dev: " + "; ".join(comparison.differences))
    return checked, comparison.compared if comparison is not None else []


def run_deploy(spec: DeployExecutor, data: dict[str, Any], context: ExecutionContext) -> dict[str, Any]:
    """Deploy the listed files (and the sitemap) to every target, proving each step (module docstring).

    Parameters:
        spec: the node's deploy executor spec.
        data: the node's input data (handed on in the output for traceability).
        context: the run's execution context; relative paths resolve against `context.chain.base_dir`.

    Returns:
        The output data: `targets` (name -> kind, location, base_url), `deployed` (one row per file and
        target: file, path, target, target_name, sha256, proof, url, url_status), `checked_urls`,
        `sitemap` (path, sha256, added, updated; null without one), `feature_points` (one row per
        target, page and point: served and Dev values) and `input`.

    Raises:
        NodeError: with one of the error types in the module docstring.
    """
    base = Path(context.chain.base_dir)
    uploads = _sources(spec, base)
    targets = _targets(spec, base, deploy_env(base))
    sitemap = None
    if spec.sitemap is not None:
        sitemap_upload, sitemap = _keep_sitemap(spec.sitemap, uploads, base)
        # Last in the batch: renamed into place after the pages it lists.
        uploads.append(sitemap_upload)

    deployed = []
    for target in targets:
        if target.remote is not None:
            landed = deploy_remote(target.remote, uploads)
            proof = "sha256sum on the remote host, before the rename"
        else:
            assert target.folder is not None  # a target is a remote or a folder (_targets)
            landed = _land_in_folder(target.folder, uploads)
            proof = "sha256 of the copy on disk, before the rename"
        for upload, where in zip(uploads, landed, strict=True):
            deployed.append({"file": str(upload.source), "path": upload.relative, "target": where,
                             "target_name": target.name, "sha256": upload.sha256, "proof": proof,
                             "url": None, "url_status": None})

    checked, compared = _check_served(spec, targets, uploads, deployed, sitemap["path"] if sitemap else None)
    return {
        "targets": {
            t.name: {"kind": t.kind, "location": t.location, "base_url": t.base_url} for t in targets},
        "deployed": deployed,
        "checked_urls": checked,
        "sitemap": sitemap,
        "feature_points": compared,
        "input": data,
    }
