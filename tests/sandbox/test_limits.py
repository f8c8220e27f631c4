"""Each limit hit for real, on both backends: the run reports it and the next run is untouched."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from slotrelay import sandbox
from slotrelay.sandbox import SandboxLimits


def kinds(result: sandbox.ExecutionResult) -> list[str]:
    return [violation.kind for violation in result.violations]


def test_inputs_in_and_result_out_in_every_language(backend: str) -> None:
    python = ("import json, sys\nseen = json.load(sys.stdin)\n"
              "def main(inputs):\n    print('sum', sum(seen))\n    return {'n': len(inputs)}\n")
    node = ("module.exports.main = async (xs) => "
            "{ console.log('sum', xs.reduce((a, b) => a + b)); return {n: xs.length}; };")
    shell = 'read -r line; echo "got $line"; echo oops >&2; exit 3'
    inputs = [1, 2, 3]
    first = sandbox.run(python, inputs=inputs, backend=backend)
    second = sandbox.run(node, lang="node", inputs=inputs, backend=backend)
    third = sandbox.run(shell, lang="shell", inputs=inputs, backend=backend)
    assert (first.status, first.stdout, first.result, first.backend) == (
        "success",
        "sum 6\n",
        {"n": 3},
        backend,
    )
    assert (second.status, second.stdout, second.result) == ("success", "sum 6\n", {"n": 3})
    assert (third.status, third.exit_code, third.stdout, third.stderr) == (
        "error",
        3,
        "got [1, 2, 3]\n",
        "oops\n",
    )


def test_a_program_error_is_a_result_with_its_traceback(backend: str) -> None:
    result = sandbox.run("def main(inputs):\n    return 1 / 0\n", backend=backend)
    assert (result.status, result.exit_code, result.result) == ("error", 1, None)
    assert "ZeroDivisionError" in result.stderr and "runner.py" not in result.stderr


def test_code_above_the_argument_limit_goes_through_stdin(backend: str) -> None:
    code = "# " + "x" * (300 << 10) + "\nresult = 'big'\n"
    assert sandbox.run(code, backend=backend).result == "big"


def test_the_deadline_kills_the_program_from_outside(backend: str) -> None:
    result = sandbox.run(
        "import time\nprint('started', flush=True)\ntime.sleep(120)\n",
        limits=SandboxLimits(timeout_ms=1500),
        backend=backend,
    )
    assert result.status == "timeout"
    assert kinds(result) == ["timeout"]
    assert result.stdout == "started\n"
    # Killed (128 + SIGKILL), so the run ended at its deadline, not when the 120 s sleep would have.
    assert result.exit_code == 137


@pytest.mark.parametrize("sleep_ms", [20, 35, 45, 50, 55, 60])
def test_regression_a_run_that_ends_at_its_deadline_is_a_timeout_only_when_killed(
    backend: str, sleep_ms: int
) -> None:
    # A program ending between the deadline and the kill was reported {"status": "timeout",
    # "exit_code": 0}. Around a 60 ms deadline some runs end first and some are killed; either way
    # status and exit code must agree.
    result = sandbox.run(
        f"import time\ntime.sleep({sleep_ms / 1000})\nresult = 1\n",
        limits=SandboxLimits(timeout_ms=60),
        backend=backend,
    )
    if result.status == "timeout":
        assert result.exit_code == 137 and kinds(result)[0] == "timeout", result
    else:
        assert (result.status, result.exit_code, result.result, kinds(result)) == ("success", 0, 1, []), (
            result
        )


def test_a_child_that_ignores_sigterm_dies_with_the_sandbox(backend: str) -> None:
    token = str(uuid.uuid4().int % 10**9 + 10**9)
    code = f"""
import os, signal
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.execv("/bin/sleep", ["sleep", "{token}"])
print("parent leaves")
"""
    result = sandbox.run(code, limits=SandboxLimits(timeout_ms=20_000), backend=backend)
    assert (result.status, result.stdout) == ("success", "parent leaves\n")
    leftovers = subprocess.run(["pgrep", "-f", f"sleep {token}"], capture_output=True, text=True, check=False)
    assert leftovers.stdout == ""


def test_processes_stop_at_the_pids_limit(backend: str) -> None:
    code = """
import os, time
started = 0
while True:
    try:
        pid = os.fork()
    except OSError as error:
        print("refused", started, error.errno)
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    started += 1
"""
    result = sandbox.run(code, limits=SandboxLimits(pids=16, timeout_ms=20_000), backend=backend)
    assert result.status == "success", result.stderr
    word, started, code_seen = result.stdout.split()
    assert word == "refused" and int(code_seen) == errno.EAGAIN
    assert 0 < int(started) < 16
    assert sandbox.run("result = 'next'", backend=backend).result == "next"


def test_memory_over_the_limit_is_stopped(backend: str) -> None:
    result = sandbox.run(
        "blob = b'x' * (400 << 20)\nprint(len(blob))\n", limits=SandboxLimits(memory_mb=128), backend=backend
    )
    assert result.status == "error"
    assert "419430400" not in result.stdout
    if backend == "docker":
        assert result.exit_code == 137
        assert "memory" in kinds(result)
    else:
        # bwrap bounds the address space: the allocation fails inside the program.
        assert "MemoryError" in result.stderr


def test_tmp_is_sized_inside_the_memory_budget(backend: str) -> None:
    code = """
import errno
written = 0
try:
    with open("/tmp/fill", "wb") as out:
        while True:
            out.write(b"x" * (1 << 20))
            out.flush()
            written += 1
except OSError as error:
    print(written, errno.errorcode[error.errno])
"""
    result = sandbox.run(code, limits=SandboxLimits(memory_mb=128), backend=backend)
    megabytes, reason = result.stdout.split()
    assert result.status == "success"
    assert reason in ("ENOSPC", "EFBIG")
    assert 0 < int(megabytes) <= 64


def test_output_is_capped_while_streaming_and_the_result_survives(backend: str) -> None:
    code = """
import sys
def main(inputs):
    chunk = "y" * 65536
    for _ in range(800):
        sys.stdout.write(chunk)
        sys.stderr.write(chunk)
    return {"flooded": True}
"""
    limits = SandboxLimits(stdout_max_bytes=100_000, stderr_max_bytes=5_000)
    result = sandbox.run(code, limits=limits, backend=backend)
    assert result.status == "success"
    assert result.result == {"flooded": True}
    assert (len(result.stdout), len(result.stderr)) == (100_000, 5_000)
    assert result.truncated.model_dump() == {"stdout": True, "stderr": True}
    assert kinds(result) == ["output", "output"]


def test_root_is_read_only_and_fs_none_leaves_nothing_writable(backend: str) -> None:
    code = """
import errno
outcome = {}
for path in ("/etc/probe", "/usr/probe", "/tmp/probe", "/probe"):
    try:
        open(path, "w").close()
        outcome[path] = "written"
    except OSError as error:
        outcome[path] = errno.errorcode[error.errno]
result = outcome
"""
    with_tmp = sandbox.run(code, limits=SandboxLimits(fs="tmp"), backend=backend).result
    without = sandbox.run(code, limits=SandboxLimits(fs="none"), backend=backend).result
    assert with_tmp["/tmp/probe"] == "written"
    assert all(outcome != "written" for path, outcome in with_tmp.items() if path != "/tmp/probe")
    assert all(outcome != "written" for outcome in without.values())


def test_tmp_does_not_survive_into_the_next_run(backend: str) -> None:
    write = "open('/tmp/left-behind', 'w').write('state')\nresult = 'wrote'"
    read = "import os\nresult = os.path.exists('/tmp/left-behind')"
    assert sandbox.run(write, backend=backend).result == "wrote"
    assert sandbox.run(read, backend=backend).result is False


def test_no_network_by_default(backend: str, local_host) -> None:
    port, log = local_host
    before = len(log.paths)
    code = f"""
import socket
outcome = {{}}
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3)
    outcome["connect"] = "connected"
except OSError as error:
    outcome["connect"] = type(error).__name__
try:
    socket.getaddrinfo("deb.debian.org", 80)
    outcome["dns"] = "resolved"
except OSError as error:
    outcome["dns"] = type(error).__name__
result = outcome
"""
    result = sandbox.run(code, backend=backend)
    assert result.result["connect"] != "connected"
    assert result.result["dns"] == "gaierror"
    assert len(log.paths) == before


def test_the_allow_list_admits_one_host_and_refuses_the_rest(backend: str, local_host) -> None:
    port, log = local_host
    code = f"""
import socket, urllib.error, urllib.request
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
def connect(target):
    with socket.create_connection(("127.0.0.1", 3128), timeout=10) as proxy:
        proxy.sendall(f"CONNECT {{target}} HTTP/1.1\\r\\nHost: {{target}}\\r\\n\\r\\n".encode())
        return proxy.recv(100).decode().split("\\r\\n")[0]
result = {{
    "allowed": fetch("http://localhost:{port}/allowed"),
    "other_name": fetch("http://deb.debian.org/debian/"),
    "ip_literal": fetch("http://127.0.0.1:{port}/by-ip"),
    "other_port": fetch("http://localhost:{port + 1}/other-port"),
    "connect": connect("deb.debian.org:443"),
}}
"""
    limits = SandboxLimits(network={"allow": [f"localhost:{port}"]}, timeout_ms=30_000)
    result = sandbox.run(code, limits=limits, backend=backend)
    assert result.status == "success", result.stderr
    assert result.result["allowed"] == [200, "hello from /allowed"]
    for refused in ("other_name", "ip_literal", "other_port"):
        assert result.result[refused][0] == 403
    assert result.result["connect"] == "HTTP/1.1 403 Forbidden"
    assert "/allowed" in log.paths and "/by-ip" not in log.paths and "/other-port" not in log.paths
    refusals = [v.detail for v in result.violations if v.kind == "network"]
    assert len(refusals) == 4
    assert any("deb.debian.org:443" in detail for detail in refusals)


def test_allow_paths_are_read_only_and_a_symlink_escape_is_refused(
    backend: str, monkeypatch, request: pytest.FixtureRequest
) -> None:
    # Under /tmp directly: pytest's own folders are private to root, and bwrap runs as nobody.
    root = Path(tempfile.mkdtemp(prefix="slotrelay-roots-"))
    request.addfinalizer(lambda: shutil.rmtree(root))
    (root / "data.txt").write_text("shared data")
    # World-writable on the host, so only the read-only mount can stop a write.
    (root / "data.txt").chmod(0o666)
    (root / "escape").symlink_to("/etc")
    root.chmod(0o755)
    monkeypatch.setenv("SLOTRELAY_SANDBOX_ROOTS", str(root))
    data = str(root / "data.txt")
    code = f"""
import errno
text = open({data!r}).read()
try:
    open({data!r}, "a").write("changed")
    wrote = "written"
except OSError as error:
    wrote = errno.errorcode[error.errno]
result = [text, wrote]
"""
    allowed = sandbox.run(code, limits=SandboxLimits(fs={"allow_paths": [data]}), backend=backend)
    assert allowed.result == ["shared data", "EROFS"]
    assert (root / "data.txt").read_text() == "shared data"
    for asked in (str(root / "escape"), "/etc"):
        refused = sandbox.run(
            "result = 'ran'", limits=SandboxLimits(fs={"allow_paths": [asked]}), backend=backend
        )
        assert (refused.status, refused.result, kinds(refused)) == ("error", None, ["fs"])


def test_host_secrets_and_files_stay_outside(backend: str, tmp_path, monkeypatch) -> None:
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("s3cr3t")
    monkeypatch.setenv("SLOTRELAY_TEST_SECRET", "hunter2")
    code = f"""
import os
def readable(path):
    try:
        return open(path, "rb").read().decode(errors="replace")
    except OSError as error:
        return type(error).__name__
result = {{
    "environ": dict(os.environ),
    "init_environ": readable("/proc/1/environ"),
    "secret_file": readable({str(secret_file)!r}),
    "uid": os.getuid(),
}}
"""
    result = sandbox.run(code, backend=backend).result
    assert "hunter2" not in json.dumps(result)
    assert (
        "SLOTRELAY_TEST_SECRET" not in result["environ"]
        and "SLOTRELAY_TEST_SECRET" not in result["init_environ"]
    )
    assert result["secret_file"] in ("FileNotFoundError", "PermissionError")
    assert result["uid"] == 65534


@pytest.mark.parametrize(
    ("call", "expected"),
    [("io_uring_setup", errno.ENOSYS), ("unshare_user", errno.EPERM), ("clone_newuser", errno.EPERM)],
)
def test_seccomp_refuses_io_uring_and_new_namespaces(backend: str, call: str, expected: int) -> None:
    code = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
calls = {{
    "io_uring_setup": lambda: libc.syscall(425, 8, ctypes.create_string_buffer(120)),
    "unshare_user": lambda: libc.unshare(0x10000000),
    "clone_newuser": lambda: libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0),
}}
answer = calls[{call!r}]()
if answer == 0:
    os._exit(0)
result = [answer, ctypes.get_errno()]
"""
    result = sandbox.run(code, backend=backend)
    assert result.result == [-1, expected], result.stderr


def test_a_flood_until_the_deadline_is_drained_and_killed(backend: str) -> None:
    code = "import sys\nwhile True:\n    sys.stdout.write('z' * 65536)\n"
    limits = SandboxLimits(timeout_ms=1500, stdout_max_bytes=10_000)
    result = sandbox.run(code, limits=limits, backend=backend)
    assert result.status == "timeout"
    assert (len(result.stdout), result.truncated.stdout) == (10_000, True)
    assert kinds(result) == ["timeout", "output"]
    assert result.exit_code == 137  # killed at the deadline: the flood never ends by itself


def test_a_program_that_closes_its_output_is_still_held_to_the_deadline(backend: str) -> None:
    code = "import os, time\nprint('bye', flush=True)\nos.close(1)\nos.close(2)\ntime.sleep(120)\n"
    result = sandbox.run(code, limits=SandboxLimits(timeout_ms=1500), backend=backend)
    assert (result.status, result.stdout, kinds(result)) == ("timeout", "bye\n", ["timeout"])


def test_a_fork_bomb_is_contained_and_the_next_run_is_untouched(backend: str) -> None:
    # The sleep starts before the bomb and the shell then runs only builtins: a shell whose own fork is
    # refused may give up and end early, which is the program's doing, not the sandbox's.
    bomb = "sleep 30 &\nsleeper=$!\nbomb() { bomb | bomb & }\nbomb\nwait $sleeper\necho survived\n"
    result = sandbox.run(bomb, lang="shell", limits=SandboxLimits(timeout_ms=2000, pids=32), backend=backend)
    ended = (result.exit_code, result.duration_ms, result.violations, result.stderr[:2000])
    assert result.status == "timeout", ended
    assert "survived" not in result.stdout
    after = sandbox.run("import os\nresult = os.getpid()", backend=backend)
    assert after.status == "success" and isinstance(after.result, int)
