"""The built-in `deploy` executor (seed 4.4): copy files to every target, prove each copy, check the URL.

The seed found deploys that were half done (the B mirror not synced, a sitemap forgotten), so the
checks are part of the step, not an afterthought: every copy is verified by sha256 against its
source, and where a URL is given every deployed file must be served there with the same bytes
(the seed's "curl C, compare with Dev").

Spec (validated by the chain models): `{"kind": "deploy", "files": [...], "targets": [...],
"check_url": str | null, "url_retry": {"total": 2, "backoff_factor": 5}}` (`url_retry` optional). Relative file and target paths resolve against the chain file's folder.

Each failure raises `NodeError` with one of these error types, which a chain declares in its
error_types to choose retry / skip / fail:

    deploy_source_missing    a listed file does not exist or is not a regular file
    deploy_target_unwritable a target folder cannot be created or written
    deploy_hash_mismatch     a copy's sha256 differs from its source's
    deploy_url_unreachable   the URL did not answer 200 after the retries
    deploy_url_mismatch      the URL answered 200 with bytes that differ from the source
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urljoin

import requests
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

from slotrelay.chain.errors import NodeError
from slotrelay.chain.models import DeployExecutor

if TYPE_CHECKING:
    from slotrelay.chain.executors import ExecutionContext

URL_TIMEOUT_SECONDS = 10


def url_retry(spec: DeployExecutor) -> Retry:
    """The URL check's retries: the spec's `url_retry` (default the seed's total=2, backoff_factor=5).

    urllib3 waits `backoff_factor * 2 ** (n - 1)` seconds before the n-th retry after the first (so 0 s,
    then 10 s by default); 429 and 5xx answers are retried like connection errors.
    """
    return Retry(total=spec.url_retry.total, backoff_factor=spec.url_retry.backoff_factor,
                 status_forcelist=(429, 500, 502, 503, 504), allowed_methods=("GET",))


def sha256_of(path: Path) -> str:
    """The sha256 hex digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_verified(source: Path, relative: Path, target_dir: Path, expected: str) -> Path:
    destination = target_dir / relative
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        temporary = destination.with_name(destination.name + ".tmp")
        shutil.copyfile(source, temporary)
        with temporary.open("rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, destination)
        # Read back from the target, not from memory: the proof is what the target holds.
        actual = sha256_of(destination)
    except OSError as exc:
        raise NodeError("deploy_target_unwritable", f"cannot write {destination}: {exc}") from exc
    if actual != expected:
        raise NodeError(
            "deploy_hash_mismatch",
            f"{destination}: sha256 {actual} differs from source {source} sha256 {expected}",
        )
    return destination


def _check_served(session: requests.Session, base_url: str, relative: Path, expected: str) -> str:
    url = urljoin(base_url if base_url.endswith("/") else base_url + "/", quote(relative.as_posix()))
    try:
        answer = session.get(url, timeout=URL_TIMEOUT_SECONDS)
    except requests.RequestException as exc:
        raise NodeError("deploy_url_unreachable", f"GET {url} failed after retries: {exc}") from exc
    if answer.status_code != 200:
        raise NodeError("deploy_url_unreachable", f"GET {url} answered {answer.status_code}, expected 200")
    served = hashlib.sha256(answer.content).hexdigest()
    if served != expected:
        raise NodeError(
            "deploy_url_mismatch", f"GET {url} served sha256 {served}, the source has sha256 {expected}"
        )
    return url


def run_deploy(spec: DeployExecutor, data: dict[str, Any], context: ExecutionContext) -> dict[str, Any]:
    """Copy every listed file to every target folder, verify each copy, and check the URL serves them.

    Parameters:
        spec: the node's deploy executor spec (`files`, `targets`, `check_url`).
        data: the node's input data (not needed by the copy; handed on in the output for traceability).
        context: the run's execution context; relative paths resolve against `context.chain.base_dir`.

    Returns:
        The output data: `{"deployed": [{"file", "target", "sha256"}], "checked_urls": [...],
        "input": data}`.

    Raises:
        NodeError: with one of the error types in the module docstring.
    """
    base = Path(context.chain.base_dir)
    files = [Path(f) for f in spec.files]
    targets = [base / Path(t) for t in spec.targets]

    sources: list[tuple[Path, Path, str]] = []
    for listed in files:
        source = listed if listed.is_absolute() else base / listed
        if not source.is_file():
            raise NodeError("deploy_source_missing", f"file to deploy {source} does not exist or is not a file")
        # Keep the listed relative layout in each target; an absolute source goes by its name alone.
        relative = Path(listed.name) if listed.is_absolute() else listed
        sources.append((source, relative, sha256_of(source)))

    deployed = []
    for target in targets:
        for source, relative, digest in sources:
            copy = _copy_verified(source, relative, target, digest)
            deployed.append({"file": str(source), "target": str(copy), "sha256": digest})

    checked: list[str] = []
    if spec.check_url:
        with requests.Session() as session:
            adapter = HTTPAdapter(max_retries=url_retry(spec))
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            for _source, relative, digest in sources:
                checked.append(_check_served(session, spec.check_url, relative, digest))
    return {"deployed": deployed, "checked_urls": checked, "input": data}
