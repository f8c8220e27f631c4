"""`slotrelay sandbox build | run | doctor` as a user types them (the examples of docs/sandbox.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from harness.commands import SLOTRELAY


def slotrelay(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SLOTRELAY, "sandbox", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.docker
def test_build_is_a_no_op_when_the_images_are_current(docker_backend) -> None:
    first = slotrelay("build")
    assert first.returncode == 0, first.stderr
    again = slotrelay("build")
    assert again.returncode == 0, again.stderr
    rows = [line for line in again.stdout.splitlines() if "slotrelay-sandbox/" in line]
    assert len(rows) == 4 and all("current" in row for row in rows)


def test_run_prints_one_json_object(backend: str, tmp_path: Path) -> None:
    program = tmp_path / "sum.py"
    program.write_text("def main(inputs):\n    print('adding')\n    return sum(inputs)\n")
    done = slotrelay(
        "run", "--backend", backend, "--lang", "python", "--timeout-ms", "2000", "--memory-mb", "128",
        "--network", "none", "--fs", "tmp", str(program), "--inputs", "[1, 2, 39]", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert set(answer) == {
        "status", "exit_code", "stdout", "stderr", "result", "duration_ms", "violations", "backend",
        "truncated",
    }  # fmt: skip
    assert (answer["status"], answer["result"], answer["stdout"], answer["backend"]) == (
        "success", 42, "adding\n", backend,
    )  # fmt: skip
    assert answer["truncated"] == {"stdout": False, "stderr": False}


def test_a_failed_program_exits_1(backend: str, tmp_path: Path) -> None:
    program = tmp_path / "fails.sh"
    program.write_text("echo nope >&2\nexit 4\n")
    failed = slotrelay("run", "--backend", backend, "--lang", "shell", str(program))
    assert failed.returncode == 1
    assert "nope" in failed.stderr and "exit 4" in failed.stderr


def test_bad_input_exits_2_and_names_what_was_wrong(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text("print(1)\n")
    bad = slotrelay("run", "--memory-mb", "1", str(program))
    assert bad.returncode == 2 and "memory_mb" in bad.stderr
    missing = slotrelay("run", str(tmp_path / "absent.py"))
    assert missing.returncode == 2 and "absent.py" in missing.stderr
    unknown = slotrelay("run", "--lang", "ruby", str(program))
    assert unknown.returncode == 2 and "ruby" in unknown.stderr
    not_json = slotrelay("run", "--inputs", "{nope", str(program))
    assert not_json.returncode == 2 and "--inputs" in not_json.stderr
    ip_host = slotrelay("run", "--network", "10.0.0.1", str(program))
    assert ip_host.returncode == 2 and "network.allow: '10.0.0.1' is an IP address" in ip_host.stderr
    relative = slotrelay("run", "--allow-path", "data/in.csv", str(program))
    assert relative.returncode == 2 and "fs.allow_paths: 'data/in.csv' is not an absolute" in relative.stderr
    assert "Value error" not in ip_host.stderr + relative.stderr


@pytest.mark.docker
def test_build_without_debootstrap_means_exit_3(docker_backend, tmp_path: Path) -> None:
    # --force makes the base again, which needs debootstrap; an empty PATH hides it. Nothing is built.
    done = slotrelay("build", "--force", "--lang", "python", env={"PATH": str(tmp_path)})
    assert done.returncode == 3, done.stderr
    assert "SANDBOX_UNAVAILABLE" in done.stderr and "debootstrap is not installed" in done.stderr


@pytest.mark.docker
def test_no_daemon_means_exit_3_and_a_reason() -> None:
    gone = slotrelay("run", "--backend", "docker", "-", env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert gone.returncode == 3
    assert "SANDBOX_UNAVAILABLE" in gone.stderr and "docker" in gone.stderr


@pytest.mark.docker
@pytest.mark.bwrap
def test_doctor_names_each_backend(docker_backend, bwrap_ready: str) -> None:
    done = slotrelay("doctor", "--json")
    assert done.returncode == 0, done.stderr
    reports = {report["name"]: report for report in json.loads(done.stdout)}
    assert set(reports) == {"docker", "bwrap"}
    for name in reports:
        assert reports[name]["usable"] is True and reports[name]["problems"] == []
        assert set(reports[name]["languages"]) == {"python", "node", "shell"}
    assert any("RLIMIT_AS" in note for note in reports["bwrap"]["notes"])
    plain = slotrelay("doctor")
    assert plain.returncode == 0
    assert "docker: usable (python, node, shell)" in plain.stdout
    assert "bwrap: usable (python, node, shell)" in plain.stdout
    no_daemon = slotrelay("doctor", "--json", env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    docker_report = json.loads(no_daemon.stdout)[0]
    assert no_daemon.returncode == 0  # bwrap still runs code
    assert docker_report["usable"] is False and "does not answer" in docker_report["problems"][0]


def test_the_readme_examples_run(backend: str, tmp_path: Path, local_host) -> None:
    from slotrelay import sandbox

    r = sandbox.run(
        "def main(inputs):\n    return sum(inputs)",
        lang="python",
        inputs=[1, 2],
        limits=sandbox.SandboxLimits(timeout_ms=2000, memory_mb=128),
        backend=backend,
    )
    assert (r.status, r.result) == ("success", 3)

    script = tmp_path / "script.sh"
    script.write_text('read -r inputs; echo "inputs: $inputs"\n')
    shell = slotrelay("run", "--backend", backend, "--lang", "shell", "--inputs", '{"n": 3}', str(script))
    assert shell.returncode == 0 and shell.stdout == 'inputs: {"n": 3}\n'

    port, _ = local_host
    data = Path(tempfile.mkdtemp(prefix="slotrelay-roots-"))
    try:
        data.chmod(0o755)
        (data / "in.csv").write_text("a,b\n")
        program = tmp_path / "prog.py"
        program.write_text(
            "import urllib.request\n"
            f"print(open({str(data / 'in.csv')!r}).read().strip())\n"
            f"print(urllib.request.urlopen('http://localhost:{port}/readme').read().decode())\n"
        )
        done = slotrelay(
            "run", "--backend", backend, "--network", f"api.example.org,localhost:{port}",
            "--allow-path", str(data / "in.csv"), str(program),
            env={"SLOTRELAY_SANDBOX_ROOTS": str(data)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout == "a,b\nhello from /readme\n"
    finally:
        shutil.rmtree(data)


@pytest.mark.parametrize("path", ["/", "/opt", "/proc/1"])
def test_regression_allow_path_of_the_sandboxs_own_file_system_is_bad_input(
    tmp_path: Path, path: str
) -> None:
    # With "/" among the operator's roots, `--allow-path /` reached the backend and came back as
    # SANDBOX_UNAVAILABLE (exit 3); it is the request that is wrong.
    program = tmp_path / "prog.py"
    program.write_text("print(1)\n")
    done = slotrelay("run", "--allow-path", path, str(program), env={"SLOTRELAY_SANDBOX_ROOTS": "/"})
    assert done.returncode == 2, done.stderr
    assert f"BAD_INPUT: fs.allow_paths: '{path}'" in done.stderr and "SANDBOX_UNAVAILABLE" not in done.stderr


def test_regression_a_lone_surrogate_in_the_result_prints_as_json(backend: str, tmp_path: Path) -> None:
    program = tmp_path / "surrogate.py"
    program.write_text("def main(inputs):\n    return {'s': '\\ud800'}\n")
    done = slotrelay("run", "--backend", backend, "--json", str(program))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == {"s": "\ufffd"}
    plain = slotrelay("run", "--backend", backend, str(program))
    assert plain.returncode == 0 and 'result: {"s": "\\ufffd"}' in plain.stderr, plain.stderr


@pytest.mark.docker
def test_regression_a_run_command_in_this_process_leaves_its_pool_alone(docker_backend) -> None:
    """`sandbox run` runs one program and exits, so it asks for no pool. It once did so by setting
    SLOTRELAY_SANDBOX_POOL_SIZE=0 in the environment: run in a process that goes on (the CLI's app called
    in-process, as tests/test_cli_surface.py does), every docker backend that process opened later kept
    nothing ready. Under `pytest -n 2 --dist loadfile` (files dealt out by size: test_cli_surface.py before
    test_docker.py) that failed the four pool tests of test_docker.py whenever both files landed on a worker
    that opened its docker backend after the CLI's run ("waited 90 s for 2 ready", the worker idle)."""
    from unittest import mock

    from typer.testing import CliRunner

    from slotrelay.cli import app
    from slotrelay.sandbox import SandboxLimits, get_backend
    from slotrelay.sandbox.backends import POOL_SIZE_VARIABLE, close_backends

    # The backends opened so far go, so the next one opens with this process's environment as it is now;
    # and those opened here go with it, so that no later test inherits what this one changed.
    close_backends()
    try:
        with mock.patch.dict(os.environ):
            os.environ.pop(POOL_SIZE_VARIABLE, None)
            done = CliRunner().invoke(app, ["sandbox", "run", "--backend", "docker", "--json", "-"],
                                      input="result = 6 * 7\n")
            assert done.exit_code == 0, done.output
            assert json.loads(done.stdout)["result"] == 42
            assert POOL_SIZE_VARIABLE not in os.environ
            process_wide = get_backend("docker", lang="python")
            shape = process_wide.shape_for("python", SandboxLimits(), [])
            # Opened warm for python's default shape: two started containers, not none.
            assert len(process_wide.pool.wait_ready(shape, 2, timeout=120)) == 2
    finally:
        close_backends()
