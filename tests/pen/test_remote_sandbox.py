"""The pen's sandbox on a remote Docker daemon: a second dockerd on 127.0.0.1 over TCP with TLS client
certificates (tests/sandbox/remote_dockerd.py) stands in for another host.

A run goes there (its container starts on that daemon, none on the local one), whether the daemon
comes from a `SandboxPolicy` block or from DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH; a
certificate it does not trust, or a daemon that does not answer, is MPP-E002 naming the daemon, and
nothing runs anywhere else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from harness.ports import free_port
from slotrelay import pen
from slotrelay.audit_log import AuditLog
from slotrelay.pen.errors import SandboxStartFailed
from slotrelay.psmr.analysis.effects import effects
from slotrelay.sandbox import SandboxRequestError, SandboxSettings, get_backend
from slotrelay.sandbox.backends import close_backends
from slotrelay.sandbox.daemon import DaemonEndpoint, docker_client
from slotrelay.sandbox.docker_backend import OWNER_LABEL, owner_id
from slotrelay.sandbox.errors import SandboxUnavailable
from tests.sandbox.remote_dockerd import RemoteDaemon, remote_dockerd
from tests.support.beyond_page import REMOTE_BUILD, REMOTE_RUN
from tests.support.sandbox_images import images_built
from tests.support.services import require_service

pytestmark = pytest.mark.docker

INTENT = "sum the numbers in the input list"
ROOT_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def remote() -> Iterator[RemoteDaemon]:
    """A TLS-only second daemon holding the python sandbox image (built there by `slotrelay sandbox
    build`)."""
    require_service(os.geteuid() == 0 and shutil.which("dockerd") is not None,
                    "a second dockerd needs root and Debian's docker.io")
    require_service(images_built(),
                    "no local Docker daemon: the base image tarball is cached by its first build")
    with remote_dockerd() as daemon:
        # The documented command (measured: 6.5 s from the cached base tarball, as long as `docker save |
        # docker load` of the built image takes): it also proves `build` follows DOCKER_HOST.
        built = subprocess.run(
            [sys.executable, "-m", "slotrelay.cli", *REMOTE_BUILD.split()[1:]],
            env={**os.environ, **daemon.env(), "PYTHONPATH": str(ROOT_DIR)},
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert built.returncode == 0, built.stdout + built.stderr
        try:
            yield daemon
        finally:
            # The backend's pool on this daemon goes before the daemon does.
            close_backends()


def _starts(endpoint: DaemonEndpoint | None, since: float) -> int:
    """How many sandbox containers of this process started on a daemon since `since`."""
    with closing(docker_client(endpoint)) as client:
        events = client.events(
            since=since, until=time.time() + 1, decode=True,
            filters={"type": "container", "event": "start", "label": f"{OWNER_LABEL}={owner_id()}"},
        )  # fmt: skip
        return sum(1 for _ in events)


def _handed_out() -> list[str]:
    """Every container this process's docker backends have handed out to a run, in order."""
    from slotrelay.sandbox import backends

    return [c for b in list(backends._opened.values()) if b.name == "docker" for c in b.pool.stats.handed_out]


def _request(**options) -> dict:
    return {
        "intent": INTENT,
        "context": {"persona_id": "p1", "upstream_inputs": {"numbers": [1, 2, 3]}},
        "options": {"persist_hint": "erase", **options},
    }


def test_pen_flow_runs_on_the_daemon_its_sandbox_policy_names(prefect_server, stub, root: Path,
                                                              remote) -> None:
    from blocks.code_model import CodeModel
    from blocks.sandbox_policy import SandboxPolicy
    from flows.pen import pen_write

    CodeModel(base_url=stub.base_url, model="stub-coder", timeout_s=5).save("remote-test-model",
                                                                            overwrite=True)
    SandboxPolicy(
        daemon_url=remote.url, tls_ca_cert=str(remote.ca), tls_client_cert=str(remote.cert),
        tls_client_key=str(remote.key), pool_size=1, default_limits={"timeout_ms": 20000},
    ).save("remote-test-policy", overwrite=True)  # fmt: skip
    since = time.time()
    outcome = pen_write(
        intent=INTENT, persona_id="p1", upstream_inputs={"numbers": [1, 2, 3]}, root=str(root),
        options={"persist_hint": "erase"}, model_block="remote-test-model",
        sandbox_policy="remote-test-policy",
    )  # fmt: skip
    assert outcome["execution"]["result"] == {"total": 6}
    # The run's container, plus at most the one the pool (size 1) starts ahead to replace it.
    assert _starts(remote.endpoint(), since) in (1, 2)
    assert _starts(None, since) == 0


def test_a_chains_pen_node_runs_on_the_daemon_its_sandbox_policy_names(prefect_server, stub, tmp_path: Path,
                                                                      remote, monkeypatch) -> None:
    from blocks.sandbox_policy import SandboxPolicy
    from flows.chain import run_chain
    from slotrelay.pen.writer import steps as pen_steps
    from slotrelay.psmr.analysis.effects import effects
    from tests.support.pen_chains import pen_chain
    from tests.support.prefect_api import recorded_task_runs

    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    SandboxPolicy(
        daemon_url=remote.url, tls_ca_cert=str(remote.ca), tls_client_cert=str(remote.cert),
        tls_client_key=str(remote.key), pool_size=1, default_limits={"memory_mb": 300},
    ).save("remote-chain-policy", overwrite=True)  # fmt: skip
    chain_path = pen_chain(tmp_path, None, prober=False)
    since = time.time()
    state = run_chain(str(chain_path), sandbox_policy="remote-chain-policy", return_state=True)
    summary = state.result(raise_on_failure=False)
    assert summary["state"] == "COMPLETED", summary
    data = json.loads((tmp_path / "slots/summer_output.json").read_text())["data"]
    assert data["execution"]["result"] == {"total": 15}
    # The run's container and those the pool starts ahead, all there; none on the local daemon.
    assert _starts(remote.endpoint(), since) >= 1
    assert _starts(None, since) == 0
    # The policy's default limits fill what the node's options leave unset (memory), under the ones
    # they set (the 10 s timeout).
    # numbers and summer, and summer's steps.
    count = 2 + len(pen_steps(None, effect_screen=effects, backend=None, settings=None))
    runs = recorded_task_runs([state.state_details.flow_run_id], count)
    assert [r.name for r in runs if r.name.startswith("pen-sandbox-run")] == [
        f"pen-sandbox-run {data['pen_id']} (python, 10000 ms, 300 MB, network none, fs tmp)"]


def test_a_chains_pen_node_on_a_daemon_refusing_its_certificate_fails_with_mpp_e002(
    prefect_server, stub, tmp_path: Path, remote, monkeypatch
) -> None:
    from blocks.sandbox_policy import SandboxPolicy
    from flows.chain import read_summary, run_chain
    from slotrelay.chain import load_chain
    from tests.support.pen_chains import pen_chain

    monkeypatch.setenv("SLOTRELAY_MODEL_BASE_URL", stub.base_url)
    monkeypatch.setenv("SLOTRELAY_MODEL_NAME", "stub-coder")
    SandboxPolicy(
        daemon_url=remote.url, tls_ca_cert=str(remote.ca), tls_client_cert=str(remote.stranger_cert),
        tls_client_key=str(remote.stranger_key),
    ).save("stranger-chain-policy", overwrite=True)  # fmt: skip
    since = time.time()
    chain_path = pen_chain(tmp_path, None, prober=False)
    state = run_chain(str(chain_path), sandbox_policy="stranger-chain-policy", return_state=True)
    # The run fails once the summer's alert pause runs out (pen_chain): its summary is kept on disk.
    summary = read_summary(load_chain(chain_path), state)
    summer = summary["nodes"]["summer"]
    assert summer["state"] == "Failed" and summer["error_type"] == "MPP-E002", summary
    assert _starts(None, since) == 0


def test_the_environment_names_the_daemon_for_the_sandbox_cli(remote, tmp_path: Path) -> None:
    program = tmp_path / "hello.py"
    program.write_text("import socket\nprint('ran on', socket.gethostname())\nresult = 42\n")
    env = {**os.environ, **remote.env(), "PYTHONPATH": str(ROOT_DIR)}
    since = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "slotrelay.cli", *REMOTE_RUN.split()[1:]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == 42 and result["backend"] == "docker"
    with closing(docker_client(remote.endpoint())) as there:
        started = there.events(since=since, until=time.time() + 1, decode=True,
                               filters={"type": "container", "event": "start",
                                        "label": "org.slotrelay.sandbox"})
        assert sum(1 for _ in started) == 1


def test_a_certificate_the_daemon_does_not_trust_is_mpp_e002_naming_it(stub, model, root: Path,
                                                                       remote) -> None:
    settings = SandboxSettings(endpoint=remote.endpoint(stranger=True))
    since = time.time()
    with pytest.raises(SandboxStartFailed) as failed:
        pen.write(_request(), root=root, model=model, settings=settings, effect_screen=effects)
    assert failed.value.code == "MPP-E002"
    assert remote.url in failed.value.message and "bwrap" not in failed.value.message
    assert _starts(None, since) == 0
    states = [r.get("to") for r in AuditLog(root).records() if r["event"] == "transition"]
    assert "completed" not in states


def test_an_unreachable_daemon_is_mpp_e002_and_nothing_falls_back(stub, model, root: Path, remote) -> None:
    nowhere = DaemonEndpoint(f"tcp://127.0.0.1:{free_port()}", ca_cert=str(remote.ca),
                             client_cert=str(remote.cert), client_key=str(remote.key))
    settings = SandboxSettings(endpoint=nowhere)
    since = time.time()
    with pytest.raises(SandboxStartFailed) as failed:
        pen.write(_request(), root=root, model=model, settings=settings, effect_screen=effects)
    assert failed.value.code == "MPP-E002"
    assert nowhere.url in failed.value.message and "bwrap" not in failed.value.message
    assert _starts(None, since) == 0
    with pytest.raises(SandboxRequestError, match="backend: 'bwrap' cannot run on the daemon"):
        get_backend("bwrap", settings=settings)
    with pytest.raises(SandboxUnavailable, match=nowhere.url):
        get_backend(None, settings=settings)


def test_a_tcp_daemon_without_tls_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxRequestError, match="tls_ca_cert, tls_client_cert, tls_client_key: a tcp://"):
        DaemonEndpoint("tcp://127.0.0.1:2375")
    with pytest.raises(SandboxRequestError, match="tls_ca_cert: .* is not a file"):
        DaemonEndpoint("tcp://127.0.0.1:2376", ca_cert=str(tmp_path / "no.pem"), client_cert=__file__,
                       client_key=__file__)
    with pytest.raises(SandboxRequestError, match="daemon_url: 'http://x' must start with"):
        DaemonEndpoint("http://x")


def test_a_host_outside_the_policy_egress_allow_list_is_mpp_e005_before_anything_runs(
    stub, model, root: Path, sandbox_backend: str
) -> None:
    from slotrelay.pen.errors import PermissionViolation

    settings = SandboxSettings(egress_allow=("api.example.org",))
    # Pools started by earlier tests refill in the background, so daemon start events cannot tell; what
    # must not happen is a sandbox handed out or a run begun for this request.
    handed_before = _handed_out()
    with pytest.raises(PermissionViolation) as refused:
        pen.write(_request(sandbox={"network": {"allow": ["evil.example.com"]}}), root=root, model=model,
                  backend=sandbox_backend, settings=settings, effect_screen=effects)
    assert refused.value.code == "MPP-E005" and "evil.example.com" in refused.value.message
    assert _handed_out() == handed_before


def test_the_policy_image_tags_choose_the_image_on_its_daemon(remote) -> None:
    from slotrelay import sandbox
    from slotrelay.sandbox.images import image_tag

    with closing(docker_client(remote.endpoint())) as there:
        there.images.get(image_tag("python")).tag("operator/python", "1")
    ours = SandboxSettings(endpoint=remote.endpoint(), image_tags=(("python", "operator/python:1"),),
                           pool_size=0)
    done = sandbox.run("result = 'from the operator image'", settings=ours)
    assert done.status == "success" and done.result == "from the operator image"
    missing = SandboxSettings(endpoint=remote.endpoint(), image_tags=(("python", "operator/python:2"),),
                              pool_size=0)
    with pytest.raises(SandboxUnavailable, match=f"image operator/python:2 is missing on {remote.url}"):
        sandbox.run("result = 1", settings=missing)
