"""Choosing a sandbox backend, and `doctor`: which backends work here and why the others do not.

The default order is docker, then bwrap (`SLOTRELAY_SANDBOX_BACKEND` or the `backend` argument
pins one), unless the operator's `SandboxSettings` name a daemon or an image for the language: then
docker only (on that daemon, with that image); a pinned image that is missing is an error naming it,
never a run somewhere else. Docker counts as usable for a language only when the daemon answers
and that language's image (the policy's, else this checkout's) exists. Backends are opened once per
process and closed at exit (the docker one owns a pool of containers). Where none works,
`SandboxUnavailable` says why for each; code never runs unsandboxed.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import threading
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Protocol

from slotrelay.sandbox import bwrap_backend, images
from slotrelay.sandbox.daemon import docker_client, is_local
from slotrelay.sandbox.docker_errors import docker_errors
from slotrelay.sandbox.errors import SandboxRequestError, SandboxUnavailable
from slotrelay.sandbox.limits import LANGUAGES, ExecutionResult, SandboxLimits
from slotrelay.sandbox.settings import SandboxSettings

BACKENDS = ("docker", "bwrap")
BACKEND_VARIABLE = "SLOTRELAY_SANDBOX_BACKEND"
POOL_SIZE_VARIABLE = "SLOTRELAY_SANDBOX_POOL_SIZE"
POOL_MEMORY_VARIABLE = "SLOTRELAY_SANDBOX_POOL_MEMORY_MB"


class Backend(Protocol):
    """What every backend offers."""

    name: str

    def run(self, code: str, *, lang: str, limits: SandboxLimits, inputs: Any) -> ExecutionResult: ...

    def close(self) -> None: ...


_opened: dict[tuple[object, ...], Backend] = {}
_images_seen: set[tuple[str, str]] = set()
_lock = threading.Lock()


def _open(name: str, settings: SandboxSettings) -> Backend:
    # One docker backend per daemon and image set: a policy naming another daemon gets its own pool.
    key = (name, settings.endpoint, settings.image_tags, settings.pool_size) if name == "docker" else (name,)
    if key in _opened:
        return _opened[key]
    if name == "docker":
        from slotrelay.sandbox.docker_backend import DockerBackend

        pool_size = settings.pool_size
        if pool_size is None:
            pool_size = int(os.environ.get(POOL_SIZE_VARIABLE, "2"))
        docker_backend = DockerBackend(
            pool_size=pool_size,
            pool_memory_mb=int(os.environ.get(POOL_MEMORY_VARIABLE, "1024")),
            endpoint=settings.endpoint,
            image_tags=dict(settings.image_tags),
        )
        # The most common shape, ready before the first run asks for it.
        if not docker_backend.missing_image("python"):
            docker_backend.warm("python")
        backend: Backend = docker_backend
    else:
        backend = bwrap_backend.BwrapBackend()
    _opened[key] = backend
    return backend


def close_backends() -> None:
    """Close every backend this process opened (their pools' containers are removed); runs at exit.

    A caller that stops using a daemon before the process ends (a test's own daemon) calls it first,
    so nothing is left to remove from a daemon that is gone.
    """
    with _lock:
        while _opened:
            _opened.popitem()[1].close()
        _images_seen.clear()


atexit.register(close_backends)


def _usable_for(backend: Backend, lang: str, settings: SandboxSettings) -> str | None:
    """Why `backend` cannot run `lang` right now, or None when it can."""
    if backend.name == "docker":
        tag = backend.image_for(lang)  # type: ignore[attr-defined]
        daemon = backend.daemon  # type: ignore[attr-defined]
        if (daemon, tag) not in _images_seen:
            if backend.missing_image(lang):  # type: ignore[attr-defined]
                if lang in dict(settings.image_tags):
                    return (
                        f"docker: the sandbox policy's {lang} image {tag} is missing on {daemon}; pull or "
                        "tag it there, or take it out of the policy's image_tags"
                    )
                return f"docker: image {tag} is missing on {daemon} (run `slotrelay sandbox build`)"
            _images_seen.add((daemon, tag))
        return None
    found = bwrap_backend.problems(lang)
    return "bwrap: " + "; ".join(found) if found else None


def get_backend(name: str | None = None, *, lang: str = "python",
                settings: SandboxSettings | None = None) -> Backend:
    """The backend to run `lang` with: `name`, else `SLOTRELAY_SANDBOX_BACKEND`, else the first usable.

    Parameters:
        name: "docker" or "bwrap"; None: the environment's choice, else the first usable.
        lang: the language to run.
        settings: the operator's policy; when it names a daemon or an image for `lang`, only docker
            is tried (on that daemon, with that image).

    Raises:
        SandboxRequestError: an unknown backend or language name, or bwrap asked for under a policy
            that names a daemon or an image for `lang`.
        SandboxUnavailable: the backend asked for (or every backend) cannot run `lang` here; a
            policy's image missing on the daemon is named.
    """
    settings = settings or SandboxSettings()
    name = name or os.environ.get(BACKEND_VARIABLE) or None
    if name is not None and name not in BACKENDS:
        raise SandboxRequestError(f"backend: {name!r} is not one of {', '.join(BACKENDS)}")
    if lang not in LANGUAGES:
        raise SandboxRequestError(f"lang: {lang!r} is not one of {', '.join(LANGUAGES)}")
    pinned = dict(settings.image_tags).get(lang)
    if settings.endpoint is not None or pinned is not None:
        if name not in (None, "docker"):
            if settings.endpoint is not None:
                chosen = f"on the daemon the sandbox policy names ({settings.endpoint.url})"
            else:
                chosen = f"the image the sandbox policy names ({pinned})"
            raise SandboxRequestError(f"backend: {name!r} cannot run {chosen}")
        # The policy chose the daemon or the image: falling back to bwrap would run the code elsewhere.
        name = "docker"
    reasons = []
    with _lock:
        for candidate in [name] if name else BACKENDS:
            try:
                backend = _open(candidate, settings)
            except SandboxUnavailable as error:
                reasons.append(error.message)
                continue
            reason = _usable_for(backend, lang, settings)
            if reason is None:
                return backend
            reasons.append(reason)
    raise SandboxUnavailable(f"no sandbox can run {lang} code here: {'; '.join(reasons)}")


def check_policy_images(settings: SandboxSettings) -> None:
    """Refuse a policy whose pinned images are not all on its daemon, before anything is asked of it.

    Parameters:
        settings: the operator's policy.

    Raises:
        SandboxRequestError: the policy pins an image for a language the sandbox does not run.
        SandboxUnavailable: the daemon does not answer, or lacks a pinned image (the message names it).
    """
    for lang, _ in settings.image_tags:
        get_backend(lang=lang, settings=settings)


@dataclass
class BackendReport:
    """One backend's answer in `doctor`."""

    name: str
    usable: bool
    languages: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _docker_report() -> BackendReport:
    report = BackendReport(name="docker", usable=False)
    try:
        client = docker_client()
        with docker_errors("the daemon answered but did not describe itself"):
            info = client.info()
    except SandboxUnavailable as error:
        report.problems.append(f"{error}; start it with scripts/start-dockerd.sh")
        return report
    with closing(client):
        if not is_local(client):
            report.notes.append("the daemon is remote: allow_paths and network allow-lists need a local one")
        report.notes.append(
            f"daemon {info.get('ServerVersion')} at {os.environ.get('DOCKER_HOST', 'the local socket')}, "
            f"storage {info.get('Driver')}, "
            f"cgroup v{info.get('CgroupVersion', '1')}"
        )
        if info.get("Driver") == "vfs":
            report.notes.append(
                "vfs copies the whole image on every create: the pool hides it, but memory use grows"
            )
        if "name=seccomp" not in " ".join(info.get("SecurityOptions", [])):
            report.problems.append("the daemon has no seccomp support")
        missing = images.missing_images(client)
        report.languages = [lang for lang in LANGUAGES if images.image_tag(lang) not in missing]
        if missing:
            report.problems.append(f"images missing: {', '.join(missing)} (run `slotrelay sandbox build`)")
    report.usable = bool(report.languages) and not any("seccomp" in p for p in report.problems)
    if not report.usable:
        report.languages = []
    report.notes.append("network allow-lists go through the host's egress proxy on a unix socket")
    return report


def _bwrap_report() -> BackendReport:
    report = BackendReport(name="bwrap", usable=False, problems=bwrap_backend.problems())
    if not report.problems:
        probe = subprocess.run(
            ["bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--", "/usr/bin/true"],
            capture_output=True, text=True, env={}, check=False,
            user=bwrap_backend.HOST_UID if os.geteuid() == 0 else None,
        )  # fmt: skip
        if probe.returncode != 0:
            report.problems.append(f"bwrap cannot create namespaces here: {probe.stderr.strip()}")
    if not report.problems:
        report.usable = True
        report.languages = [lang for lang in LANGUAGES if not bwrap_backend.problems(lang)]
    report.notes += [
        (
            "memory is only an address-space limit (RLIMIT_AS), not a cgroup limit, and none for node "
            "(V8 reserves more address space than it uses; its heap is capped with --max-old-space-size)"
        ),
        "processes are limited per host uid (RLIMIT_NPROC), shared by every bwrap sandbox at once",
        "no OOM report: a program over its memory limit sees allocation failures instead",
    ]
    return report


def doctor() -> list[BackendReport]:
    """Check each backend on this machine without running user code.

    Returns:
        One report per backend, in the default order.
    """
    return [_docker_report(), _bwrap_report()]
