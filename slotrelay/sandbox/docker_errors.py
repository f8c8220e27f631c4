"""The one place where errors of the docker SDK (and the requests errors it lets through) are translated.

The sandbox runs its calls into the docker SDK inside `docker_errors(doing)`, as httpx runs its transport
inside `map_httpcore_exceptions`: a foreign error is raised again as the most specific sandbox error,
`from` the original so the traceback keeps it.

    docker.errors.ImageNotFound          SandboxNotFound      "docker: image <image> is missing on <daemon>"
    docker.errors.NotFound               SandboxNotFound      "docker: <doing> (<error>)"
    docker.errors.APIError               SandboxDaemonRefused "docker: <doing> (<error>)"
    docker.errors.BuildError             SandboxImageError    "<doing> failed: <message>", the log's end
    docker.errors.DockerException        SandboxUnavailable   "docker: <doing> (<error>)"
    requests.exceptions.RequestException SandboxUnavailable   a refused certificate, a dropped connection

A caller that expects one of these answers (an image the daemon lacks, a container already gone)
catches the sandbox error: `except SandboxNotFound: return False`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from slotrelay.sandbox.errors import (
    SandboxDaemonRefused,
    SandboxImageError,
    SandboxNotFound,
    SandboxUnavailable,
)

# How much of a failed build's log an error carries: the end, where the failing step is.
BUILD_LOG_TAIL = 800


@contextmanager
def docker_errors(doing: str, *, image: str | None = None, daemon: str | None = None) -> Iterator[None]:
    """Raise the sandbox's error for any docker SDK or requests error in the block.

    Parameters:
        doing: what the block does, as the message says it ("could not create a sandbox container");
            for a build, the image being built ("building <tag>").
        image: the image the block needs; a missing one is then reported by name, with the fix.
        daemon: the daemon's address, named with a missing `image`.

    Raises:
        SandboxNotFound: the daemon has no such container or image.
        SandboxDaemonRefused: the daemon answered with another error status.
        SandboxImageError: an image build failed; the message ends with the build log's end.
        SandboxUnavailable: the daemon did not answer, refused this client, or the SDK failed otherwise.
    """
    import docker.errors
    import requests

    try:
        yield
    # The most specific first: APIError is both a DockerException and a requests HTTPError.
    except docker.errors.ImageNotFound as exc:
        if image is None:
            raise SandboxNotFound(f"docker: {doing} ({exc})") from exc
        raise SandboxNotFound(
            f"docker: image {image} is missing on {daemon}; run `slotrelay sandbox build`"
        ) from exc
    except docker.errors.NotFound as exc:
        raise SandboxNotFound(f"docker: {doing} ({exc})") from exc
    except docker.errors.APIError as exc:
        raise SandboxDaemonRefused(f"docker: {doing} ({exc})") from exc
    except docker.errors.BuildError as exc:
        log = "".join(str(step.get("stream", step.get("error", ""))) for step in exc.build_log)
        raise SandboxImageError(f"{doing} failed: {exc.msg}\n{log[-BUILD_LOG_TAIL:]}") from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise SandboxUnavailable(f"docker: {doing} ({exc})") from exc
