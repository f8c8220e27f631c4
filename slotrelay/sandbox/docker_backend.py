"""The docker backend: every run in a fresh, hardened container from the pool of started ones.

A container is created with: network none, a read-only root, /tmp as a tmpfs
sized inside the memory budget (fs "tmp") or nothing writable (fs "none"), memory equal to
memory+swap, a pids limit (not `--ulimit nproc`, which counts per uid across containers), a
CPU quota, no capabilities, no-new-privileges, slotrelay's seccomp profile (Docker 20.10's
default lets io_uring through), uid 65534, nofile/fsize/core ulimits, `--init` so signals
reach the program, and Docker's log driver off (output is read from the attach stream only;
a logging driver once wrote 329 MB for a 2 s flood). Every container carries the
`org.slotrelay.sandbox` label and its owner, so orphans of a killed client are collected by
label at start and at close.

The pool's worker creates a container, attaches to its stdin, stdout and stderr, and starts it:
the runner then sits blocked reading its program from stdin (next to no CPU; its memory cap counts
against the pool's budget). The request path is: write the request to the open stdin and close
it (the deadline counts from here), read both streams with caps while draining the rest, kill
through the API at the deadline, wait, inspect (exit code, OOM kill). The runner runs one program
and exits, so the container stops with it; removal happens on the pool's worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotrelay.sandbox import images, seccomp
from slotrelay.sandbox.daemon import DaemonEndpoint, close_attach, describe, docker_client, is_local
from slotrelay.sandbox.docker_errors import docker_errors
from slotrelay.sandbox.egress import SHIM_PORT, EgressProxy
from slotrelay.sandbox.errors import SandboxDaemonRefused, SandboxNotFound, SandboxUnavailable
from slotrelay.sandbox.limits import ExecutionResult, SandboxLimits
from slotrelay.sandbox.policy import ReadOnlyMount, admit_paths
from slotrelay.sandbox.pool import ContainerPool
from slotrelay.sandbox.protocol import CappedCapture, encode_request, execution_result, new_marker

log = logging.getLogger(__name__)

LABEL = "org.slotrelay.sandbox"
OWNER_LABEL = "org.slotrelay.sandbox.owner"
BACKEND_LABEL = "org.slotrelay.sandbox.backend"
EGRESS_ROOT = Path(tempfile.gettempdir()) / "slotrelay-egress"
EGRESS_MOUNT = "/run/slotrelay-egress"
SANDBOX_UID = "65534:65534"
# After a kill, how long the reader may take to see the stream end before it is cut.
DRAIN_GRACE_S = 15.0
KILLED_EXIT_CODE = 128 + signal.SIGKILL
# What a daemon error while a program runs is reported as (the run's calls, and its waiter thread's).
RUN_FAILED = "the sandbox container failed to run"


def _process_start(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_id() -> str:
    """This process's identity on the label: host, pid and start time (pids get reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start(os.getpid())}"


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname():
        return True  # another machine's client sharing this daemon: not ours to judge
    return pid.isdigit() and _process_start(int(pid)) == started


@dataclass(frozen=True)
class ContainerShape:
    """Everything fixed at creation: containers of one shape are interchangeable."""

    image: str
    memory_mb: int
    tmp_mb: int
    pids: int
    cpus: float
    mounts: tuple[ReadOnlyMount, ...]
    egress: bool


@dataclass
class PooledContainer:
    """A started container waiting for its program, its attach stream, and its egress socket's folder.

    `stream` is the docker SDK's attach socket for stdout and stderr, opened before the start so nothing
    the container writes is lost; `inlet` is a second one for stdin, closed whole once the request is
    written: a TLS stream cannot be half-closed (SSLSocket.shutdown drops the TLS layer, and later reads
    see ciphertext), and with StdinOnce the daemon ends the program's stdin when that client goes.
    """

    id: str
    egress_dir: str | None
    stream: Any
    inlet: Any = None


class DockerBackend:
    """Runs code in containers on one Docker daemon: `endpoint`'s, else the environment's (DOCKER_HOST).

    Parameters:
        pool_size: containers kept ready per shape.
        pool_memory_mb: the most the memory caps of the idle containers may add up to.
        endpoint: the daemon (None: DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH).
        image_tags: images to run instead of this checkout's, by language (an operator's own builds).

    Raises:
        SandboxUnavailable: the daemon does not answer; the message names it.
    """

    name = "docker"

    def __init__(
        self,
        *,
        pool_size: int = 2,
        pool_memory_mb: int = 1024,
        endpoint: DaemonEndpoint | None = None,
        image_tags: Mapping[str, str] | None = None,
    ) -> None:
        self._client = docker_client(endpoint)
        try:
            # The pool's worker gets its own connection: a client's session is not shared across threads.
            self._worker_client = docker_client(endpoint)
        except SandboxUnavailable:
            self._client.close()
            raise
        self.daemon = describe(endpoint)
        self._image_tags = dict(image_tags or {})
        self._instance = uuid.uuid4().hex
        self._local = is_local(self._client)
        self._seccomp = seccomp.docker_profile()
        self._entrypoints: dict[str, list[str]] = {}
        self.collect_orphans()
        self.pool: ContainerPool[ContainerShape, PooledContainer] = ContainerPool(
            create=self._create,
            remove=self._remove,
            ident=lambda item: item.id,
            cost=lambda shape: shape.memory_mb,
            budget=pool_memory_mb,
            size=pool_size,
        )

    def image_for(self, lang: str) -> str:
        """The image runs of `lang` use: the operator's tag when one is set, else this checkout's."""
        return self._image_tags.get(lang) or images.image_tag(lang)

    def collect_orphans(self) -> int:
        """Remove sandbox containers (and egress folders) whose owning process is gone.

        Returns:
            How many containers were removed.
        """
        removed = 0
        for container in self._client.api.containers(all=True, filters={"label": LABEL}):
            owner = container.get("Labels", {}).get(OWNER_LABEL, "")
            if not _owner_alive(owner):
                self._client.api.remove_container(container["Id"], force=True)
                removed += 1
        if EGRESS_ROOT.is_dir():
            for folder in EGRESS_ROOT.iterdir():
                pid = folder.name.split("-", 1)[0]
                if pid.isdigit() and _process_start(int(pid)) is None:
                    shutil.rmtree(folder, ignore_errors=True)
        return removed

    def close(self) -> None:
        """Remove every container this backend still holds, even one a crashed run left behind."""
        self.pool.close()
        try:
            with docker_errors("could not remove this backend's sandbox containers"):
                for container in self._client.api.containers(
                    all=True, filters={"label": f"{BACKEND_LABEL}={self._instance}"}
                ):
                    self._client.api.remove_container(container["Id"], force=True)
        except SandboxUnavailable:
            # The daemon went away first; the next backend's start collects these by label.
            log.warning("could not remove this backend's sandbox containers", exc_info=True)
        self._client.close()
        self._worker_client.close()

    def missing_image(self, lang: str) -> str | None:
        """The image `lang` needs when the daemon lacks it, else None."""
        tag = self.image_for(lang)
        return None if images.has_image(self._client, tag) else tag

    def shape_for(self, lang: str, limits: SandboxLimits, mounts: list[ReadOnlyMount]) -> ContainerShape:
        """The container shape a run of `lang` under `limits` needs."""
        return ContainerShape(
            image=self.image_for(lang),
            memory_mb=limits.memory_mb,
            tmp_mb=limits.tmp_mb,
            pids=limits.pids,
            cpus=limits.cpus,
            mounts=tuple(mounts),
            egress=bool(limits.allow_hosts),
        )

    def _entrypoint(self, image: str) -> list[str]:
        if image not in self._entrypoints:
            self._entrypoints[image] = self._worker_client.api.inspect_image(image)["Config"]["Entrypoint"]
        return self._entrypoints[image]

    def _create(self, shape: ContainerShape) -> PooledContainer:
        from docker.types import LogConfig, Mount, Ulimit

        api = self._worker_client.api
        mounts = [Mount(m.target, m.source, type="bind", read_only=True) for m in shape.mounts]
        environment = {"HOME": "/tmp", "LANG": "C.UTF-8", "PATH": "/usr/local/bin:/usr/bin:/bin"}
        entrypoint = None
        egress_dir = None
        if shape.egress:
            EGRESS_ROOT.mkdir(mode=0o755, exist_ok=True)
            egress_dir = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=EGRESS_ROOT)
            os.chmod(egress_dir, 0o755)
            mounts.append(Mount(EGRESS_MOUNT, egress_dir, type="bind", read_only=True))
            proxy = f"http://127.0.0.1:{SHIM_PORT}"
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
                environment[name] = proxy
            entrypoint = [
                "python3", "-I", "/opt/slotrelay/egress_shim.py", f"{EGRESS_MOUNT}/egress.sock", "--",
                *self._entrypoint(shape.image),
            ]  # fmt: skip
        file_limit = max(shape.tmp_mb, 1) << 20
        host_config = api.create_host_config(
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={shape.tmp_mb}m,mode=1777"} if shape.tmp_mb else None,
            mounts=mounts or None,
            mem_limit=f"{shape.memory_mb}m",
            memswap_limit=f"{shape.memory_mb}m",
            pids_limit=shape.pids,
            nano_cpus=int(shape.cpus * 1e9),
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true", f"seccomp={self._seccomp}"],
            ulimits=[
                Ulimit(name="nofile", soft=256, hard=256),
                Ulimit(name="fsize", soft=file_limit, hard=file_limit),
                Ulimit(name="core", soft=0, hard=0),
            ],
            ipc_mode="none",
            init=True,
            log_config=LogConfig(type="none"),
        )
        created = api.create_container(
            shape.image,
            entrypoint=entrypoint,
            user=SANDBOX_UID,
            # The SDK also sets StdinOnce: stdin closes when the client attached to it goes (_run_started).
            stdin_open=True,
            environment=environment,
            working_dir="/tmp" if shape.tmp_mb else "/",
            host_config=host_config,
            labels={LABEL: "1", OWNER_LABEL: owner_id(), BACKEND_LABEL: self._instance},
            network_disabled=True,
        )
        item = PooledContainer(id=created["Id"], egress_dir=egress_dir, stream=None)
        try:
            item.stream = api.attach_socket(item.id, params={"stdout": 1, "stderr": 1, "stream": 1})
            item.inlet = api.attach_socket(item.id, params={"stdin": 1, "stream": 1})
            api.start(item.id)
        except BaseException:
            self._remove(item)
            raise
        return item

    def _remove(self, item: PooledContainer) -> None:
        for attached in (item.stream, item.inlet):
            if attached is not None:
                close_attach(attached)
        try:
            with docker_errors(f"could not remove sandbox container {item.id[:12]}"):
                self._worker_client.api.remove_container(item.id, force=True)
        except SandboxNotFound:
            pass  # already gone: another backend's orphan collection removed it
        if item.egress_dir:
            shutil.rmtree(item.egress_dir, ignore_errors=True)

    def warm(self, lang: str, limits: SandboxLimits | None = None) -> None:
        """Start containers ahead of time for runs of `lang` under `limits` (the defaults when None)."""
        limits = limits or SandboxLimits()
        mounts, _ = admit_paths(limits.allow_paths)
        self.pool.warm(self.shape_for(lang, limits, mounts))

    def run(self, code: str, *, lang: str, limits: SandboxLimits, inputs: Any) -> ExecutionResult:
        """Run `code` in a fresh container. See `slotrelay.sandbox.run` for the contract."""
        if not self._local and (limits.allow_paths or limits.allow_hosts):
            raise SandboxUnavailable(
                "docker: allow_paths and network allow-lists bind host paths, so they need the daemon "
                f"on this machine, not {self._client.api.base_url}"
            )
        mounts, refused = admit_paths(limits.allow_paths)
        if refused:
            return ExecutionResult.refused(refused, self.name)
        marker = new_marker()
        request = encode_request(lang=lang, code=code, inputs=inputs, marker=marker)
        shape = self.shape_for(lang, limits, mounts)
        with docker_errors("could not create a sandbox container", image=shape.image, daemon=self.daemon):
            container = self.pool.acquire(shape)
        proxy = None
        if container.egress_dir:
            proxy = EgressProxy(Path(container.egress_dir) / "egress.sock", limits.allow_hosts)
            proxy.start()
        try:
            with docker_errors(RUN_FAILED):
                return self._run_started(container, request, marker, limits, proxy)
        finally:
            if proxy is not None:
                proxy.stop()
            self.pool.release(container)

    def _run_started(
        self,
        container: PooledContainer,
        request: bytes,
        marker: str,
        limits: SandboxLimits,
        proxy: EgressProxy | None,
    ) -> ExecutionResult:
        from docker.utils.socket import frames_iter

        api = self._client.api
        stdout = CappedCapture(limits.stdout_max_bytes)
        stderr = CappedCapture(limits.stderr_max_bytes)
        stream = container.stream
        inlet = container.inlet
        raw = getattr(stream, "_sock", stream)
        # An idle runner writes nothing: anything to read now means the container ended while it waited.
        if select.select([raw], [], [], 0)[0]:
            raise SandboxUnavailable(
                f"docker: container {container.id[:12]} ended before its program was delivered"
            )

        def feed() -> None:
            try:
                getattr(inlet, "_sock", inlet).sendall(request)
            except OSError:
                pass  # the program ended without reading all of its stdin
            finally:
                close_attach(inlet)

        def drain() -> None:
            # Read to the end even past the caps: a reader that stops makes the kill hang.
            try:
                for kind, data in frames_iter(stream, False):
                    (stdout if kind == 1 else stderr).feed(data)
            except OSError:
                pass  # the stream was closed under us after a kill

        ended: list[int | Exception] = []

        def wait() -> None:
            try:
                with docker_errors(RUN_FAILED):
                    ended.append(api.wait(container.id)["StatusCode"])
            except SandboxUnavailable as error:
                ended.append(error)

        reader = threading.Thread(target=drain, name="sandbox-reader", daemon=True)
        waiter = threading.Thread(target=wait, name="sandbox-waiter", daemon=True)
        reader.start()
        # The wall-clock limit counts from the delivery: the time the container sat in the pool is not the
        # program's.
        started = time.monotonic()
        threading.Thread(target=feed, name="sandbox-writer", daemon=True).start()
        # The deadline is on the container, not on its output: a program may close both streams.
        waiter.start()
        waiter.join(timeout=limits.timeout_ms / 1000)
        timed_out = waiter.is_alive()
        if timed_out:
            # A refusal is no verdict: the container ended between the deadline and the kill (409), or the
            # daemon delivered the kill but did not see the container end in its own time (500). The exit
            # code below says which.
            with contextlib.suppress(SandboxDaemonRefused), docker_errors(RUN_FAILED):
                api.kill(container.id)
            waiter.join(timeout=DRAIN_GRACE_S)
        duration_ms = int((time.monotonic() - started) * 1000)
        reader.join(timeout=DRAIN_GRACE_S)
        if not ended:
            raise SandboxUnavailable(f"docker: container {container.id[:12]} did not stop after a kill")
        if isinstance(ended[0], Exception):
            raise ended[0]
        exit_code = ended[0]
        # Killed at the deadline: SIGKILL's exit code (the init passes it on). A program that ended while the
        # kill was on its way keeps its own exit code and status.
        timed_out = timed_out and exit_code == KILLED_EXIT_CODE
        state = api.inspect_container(container.id)["State"]
        return execution_result(
            stdout, stderr, marker, exit_code=exit_code, timed_out=timed_out, limits=limits,
            duration_ms=duration_ms, backend=self.name, out_of_memory=bool(state.get("OOMKilled")),
            refusals=proxy.refusals() if proxy else None,
        )  # fmt: skip
