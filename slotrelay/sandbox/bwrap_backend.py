"""The bwrap backend: the same limits without a daemon, for machines without Docker.

Each run is one `bwrap` process: new user, pid, network, ipc, uts and cgroup namespaces, the
host's /usr read-only with the usual merged-/usr links, /proc, a minimal /dev, a sized tmpfs
at /tmp (fs "tmp"), allow_paths bound read-only, then / and /dev remounted read-only. Inside,
the program runs as uid 65534 with slotrelay's seccomp filter (see `seccomp`); when slotrelay
runs as root, bwrap itself is started as `HOST_UID`, an unprivileged uid of its own on the host.

bwrap is started with an empty environment: its init is pid 1 inside, and its
/proc/1/environ would otherwise show the caller's variables. rlimits bound the rest: files
(nofile, fsize), processes (nproc: per host uid, shared by all bwrap sandboxes, unlike Docker's
per-container pids limit), CPU seconds, and memory as an address-space limit (RLIMIT_AS),
which is weaker than a cgroup limit and is not applied to node (V8 reserves far more address
space than it uses). `doctor` says so.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from io import BufferedReader
from pathlib import Path
from typing import IO, Any, cast

from slotrelay.sandbox import seccomp
from slotrelay.sandbox.egress import SHIM_PORT, EgressProxy
from slotrelay.sandbox.errors import SandboxUnavailable
from slotrelay.sandbox.images import RUNTIME_DIR
from slotrelay.sandbox.limits import ExecutionResult, SandboxLimits
from slotrelay.sandbox.policy import ReadOnlyMount, admit_paths
from slotrelay.sandbox.protocol import CappedCapture, encode_request, execution_result, new_marker

NOBODY = 65534
# RLIMIT_NPROC counts every process of a host uid. Docker sandboxes run as 65534 on the host, so
# bwrap sandboxes started as 65534 shared their pids limit with every container running at the time.
HOST_UID = 65533
PYTHON = "/usr/bin/python3"
NODE = "/usr/bin/node"
EGRESS_MOUNT = "/run/slotrelay-egress"
KILL_GRACE_S = 15.0


def _runner(lang: str) -> list[str]:
    if lang == "node":
        return [NODE, "/opt/slotrelay/runner.js"]
    return [PYTHON, "-I", "/opt/slotrelay/runner.py"]


def problems(lang: str | None = None) -> list[str]:
    """Why this machine cannot run bwrap sandboxes (for `lang`, or for any language); empty when it can."""
    found = []
    if shutil.which("bwrap") is None:
        found.append("bwrap is not installed (apt-get install bubblewrap)")
    if shutil.which("prlimit") is None:
        found.append("prlimit is not installed (apt-get install util-linux)")
    if os.uname().machine != "x86_64":
        found.append(f"the seccomp filter is written for x86_64, not {os.uname().machine}")
    interpreter = NODE if lang == "node" else PYTHON
    if not os.access(interpreter, os.X_OK):
        found.append(f"{interpreter} is missing (the sandbox sees only the host's /usr)")
    return found


def _rlimits(limits: SandboxLimits, lang: str) -> list[str]:
    """`prlimit` options binding bwrap and everything it starts (set before bwrap is exec'd)."""
    file_limit = max(limits.tmp_mb, 1) << 20
    cpu_seconds = math.ceil(limits.timeout_ms / 1000) + 1
    options = [
        "--nofile=256",
        f"--fsize={file_limit}",
        "--core=0",
        f"--nproc={limits.pids}",
        f"--cpu={cpu_seconds}",
    ]
    if lang != "node":
        options.append(f"--as={limits.memory_mb << 20}")
    return ["prlimit", *options, "--"]


class BwrapBackend:
    """Runs code under bubblewrap on this machine.

    Raises:
        SandboxUnavailable: bwrap, the seccomp architecture or the python interpreter is missing.
    """

    name = "bwrap"

    def __init__(self) -> None:
        found = problems()
        if found:
            raise SandboxUnavailable("bwrap: " + "; ".join(found))
        self._filter = seccomp.bpf_program()

    def close(self) -> None:
        """Nothing to release: every run is its own process."""

    def _command(
        self,
        lang: str,
        limits: SandboxLimits,
        mounts: list[ReadOnlyMount],
        egress_dir: str | None,
        filter_fd: int,
        ready_fd: int,
    ) -> list[str]:
        command = [
            "bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--uid", str(NOBODY), "--gid", str(NOBODY), "--hostname", "sandbox",
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
            "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
            "--ro-bind-try", "/etc/ssl", "/etc/ssl",
            "--ro-bind", str(RUNTIME_DIR), "/opt/slotrelay",
            "--proc", "/proc", "--dev", "/dev",
        ]  # fmt: skip
        if limits.tmp_mb:
            command += ["--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp"]
        for mount in mounts:
            command += ["--ro-bind", mount.source, mount.target]
        environment = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
        runner = _runner(lang)
        if egress_dir:
            command += ["--ro-bind", egress_dir, EGRESS_MOUNT]
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
                environment[name] = f"http://127.0.0.1:{SHIM_PORT}"
            shim = [PYTHON, "-I", "/opt/slotrelay/egress_shim.py", f"{EGRESS_MOUNT}/egress.sock", "--"]
            runner = shim + runner
        environment["SLOTRELAY_READY_FD"] = str(ready_fd)
        for name, value in environment.items():
            command += ["--setenv", name, value]
        if lang == "node":
            command += ["--setenv", "NODE_OPTIONS", f"--max-old-space-size={max(16, limits.memory_mb // 2)}"]
        command += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp" if limits.tmp_mb else "/"]
        command += ["--seccomp", str(filter_fd), "--", *runner]
        return command

    def run(self, code: str, *, lang: str, limits: SandboxLimits, inputs: Any) -> ExecutionResult:
        """Run `code` in a fresh bwrap sandbox. See `slotrelay.sandbox.run` for the contract."""
        found = problems(lang)
        if found:
            raise SandboxUnavailable("bwrap: " + "; ".join(found))
        mounts, refused = admit_paths(limits.allow_paths)
        if refused:
            return ExecutionResult.refused(refused, self.name)
        marker = new_marker()
        request = encode_request(lang=lang, code=code, inputs=inputs, marker=marker)
        egress_dir = None
        proxy = None
        if limits.allow_hosts:
            egress_dir = tempfile.mkdtemp(prefix=f"{os.getpid()}-bwrap-")
            os.chmod(egress_dir, 0o755)
            proxy = EgressProxy(Path(egress_dir) / "egress.sock", limits.allow_hosts)
            proxy.start()
        try:
            return self._run_process(lang, limits, mounts, egress_dir, request, marker, proxy)
        finally:
            if proxy is not None:
                proxy.stop()
            if egress_dir:
                shutil.rmtree(egress_dir, ignore_errors=True)

    def _run_process(
        self,
        lang: str,
        limits: SandboxLimits,
        mounts: list[ReadOnlyMount],
        egress_dir: str | None,
        request: bytes,
        marker: str,
        proxy: EgressProxy | None,
    ) -> ExecutionResult:
        filter_read, filter_write = os.pipe()
        os.write(filter_write, self._filter)
        os.close(filter_write)
        # The runner writes a byte here once it starts inside the sandbox: without it, nothing ran.
        ready_read, ready_write = os.pipe()
        os.set_blocking(ready_read, False)
        command = self._command(lang, limits, mounts, egress_dir, filter_read, ready_write)
        as_root = os.geteuid() == 0
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                [*_rlimits(limits, lang), *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={},
                pass_fds=(filter_read, ready_write),
                start_new_session=True,
                user=HOST_UID if as_root else None,
                group=HOST_UID if as_root else None,
                extra_groups=[] if as_root else None,
                cwd="/",
            )
        except OSError as error:
            os.close(ready_read)
            raise SandboxUnavailable(f"bwrap: could not start ({error})") from error
        finally:
            os.close(filter_read)
            os.close(ready_write)
        stdout = CappedCapture(limits.stdout_max_bytes)
        stderr = CappedCapture(limits.stderr_max_bytes)
        # Popen was given stdin, stdout and stderr = PIPE, buffered: its pipes are BufferedReaders
        assert process.stdin is not None
        readers = [_drain(cast(BufferedReader, process.stdout), stdout),
                   _drain(cast(BufferedReader, process.stderr), stderr)]
        _feed(process.stdin, request)
        # The deadline is on the process, not on its output: a program may close both streams.
        try:
            exit_code = process.wait(timeout=limits.timeout_ms / 1000)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            exit_code = process.wait(timeout=KILL_GRACE_S)
            # Only our SIGKILL makes bwrap itself end by a signal; any other end is the program's own,
            # reached while the kill was on its way, so it was not killed.
            timed_out = exit_code == -signal.SIGKILL
        for reader in readers:
            reader.join(timeout=KILL_GRACE_S)
        duration_ms = int((time.monotonic() - started) * 1000)
        try:
            set_up = timed_out or _read_available(ready_read) == b"1"
        finally:
            os.close(ready_read)
        if not set_up:
            message = bytes(stderr.head).decode("utf-8", "replace").strip()
            raise SandboxUnavailable(f"bwrap could not set up the sandbox: {message or f'exit {exit_code}'}")
        return execution_result(
            stdout, stderr, marker, exit_code=exit_code, timed_out=timed_out, limits=limits,
            duration_ms=duration_ms, backend=self.name, refusals=proxy.refusals() if proxy else None,
        )  # fmt: skip


def _read_available(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""


def _drain(pipe: BufferedReader, capture: CappedCapture) -> threading.Thread:
    # Read to the end even past the cap: a reader that stops would block the program, not end it.
    def drain() -> None:
        with pipe:
            while chunk := pipe.read1(65536):
                capture.feed(chunk)

    thread = threading.Thread(target=drain, name="sandbox-reader", daemon=True)
    thread.start()
    return thread


def _feed(pipe: IO[bytes], data: bytes) -> None:
    def feed() -> None:
        try:
            with pipe:
                pipe.write(data)
        except OSError:
            pass  # the program ended without reading all of its stdin

    threading.Thread(target=feed, name="sandbox-writer", daemon=True).start()
