"""The docker backend's own promises: the pool, the container's hardening, orphan collection."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
import traceback
from pathlib import Path

import docker
import docker.errors
import pytest

from slotrelay import sandbox
from slotrelay.sandbox import SandboxLimits
from slotrelay.sandbox.docker_backend import LABEL, OWNER_LABEL, DockerBackend, owner_id
from slotrelay.sandbox.protocol import encode_request, new_marker
from tests.support.waiting import wait_until

pytestmark = pytest.mark.docker

# A shape no other test uses, so this file's counts are its own.
LIMITS = SandboxLimits(memory_mb=96, pids=48)


@pytest.fixture
def api():
    client = docker.from_env()
    yield client.api
    client.close()


def encode(code: str) -> tuple[bytes, str]:
    marker = new_marker()
    return encode_request(lang="python", code=code, inputs=None, marker=marker), marker


# How long a test waits for the pool's worker or a container's runner before it fails: the waits return as
# soon as the state is reached; this bounds a hang, it does not time anything.
WAIT_S = 120


def _pool_workers() -> str:
    """The stack of each sandbox pool's worker thread, for a wait that ran out with the worker at work:
    the call it is stuck in."""
    frames = sys._current_frames()
    return "\n".join(
        f"{thread.name}:\n" + "".join(traceback.format_stack(frames[thread.ident]))
        for thread in threading.enumerate()
        if thread.name == "sandbox-pool" and thread.ident in frames
    ) or "no pool worker thread"


def ready(backend: DockerBackend, count: int) -> list:
    """The containers of this file's shape once `count` are ready (the pool's own signal)."""
    try:
        return backend.pool.wait_ready(backend.shape_for("python", LIMITS, []), count, WAIT_S)
    except TimeoutError as slow:
        pytest.fail(f"{slow}; where the pools' workers were:\n{_pool_workers()}")


def idle(backend: DockerBackend) -> None:
    """Once the pool's worker has done every fill and removal asked of it so far."""
    try:
        backend.pool.wait_idle(WAIT_S)
    except TimeoutError as slow:
        pytest.fail(f"{slow}; where the pools' workers were:\n{_pool_workers()}")


def wait_runner_blocked(api, container_id: str) -> None:
    """Once the container's runner is asleep in read(0, ...) (syscall 0 on x86_64). A process's state
    has no event to wait on, so this one wait reads /proc until the state shows."""
    wait_until(
        lambda: runner_syscall(api, container_id) == ("S", ["0", "0x0"]),
        timeout=WAIT_S,
        what=f"the runner of {container_id[:12]} to sleep in read(0, ...)",
        details=lambda: f"its state and syscall: {runner_syscall(api, container_id)}",
    )


def runner_syscall(api, container_id: str) -> tuple[str, str]:
    """The in-container runner's process state and current syscall number, read from the host's /proc."""
    init = api.inspect_container(container_id)["State"]["Pid"]
    children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
    assert len(children) == 1, children
    runner = children[0]
    state = Path(f"/proc/{runner}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state, Path(f"/proc/{runner}/syscall").read_text().split()[:2]


def test_the_pool_holds_started_containers_blocked_on_stdin_and_refills(docker_backend, api) -> None:
    docker_backend.warm("python", LIMITS)
    for item in ready(docker_backend, 2):
        assert api.inspect_container(item.id)["State"]["Running"] is True
        # Idle means asleep in read(0, ...): it costs no CPU while it waits.
        wait_runner_blocked(api, item.id)
    warm_before = docker_backend.pool.stats.warm
    handed_before = len(docker_backend.pool.stats.handed_out)
    hostnames = [
        sandbox.run("import socket\nresult = socket.gethostname()", limits=LIMITS, backend="docker").result
        for _ in range(4)
    ]
    handed = docker_backend.pool.stats.handed_out[handed_before:]
    assert len(set(handed)) == 4
    assert [name[:12] for name in handed] == hostnames
    assert docker_backend.pool.stats.warm - warm_before >= 3
    idle(docker_backend)  # the refills and the removals of the used ones are done
    refilled = ready(docker_backend, 2)
    assert not {item.id for item in refilled} & set(handed)
    assert not api.containers(all=True, filters={"id": handed})


def test_a_started_container_runs_one_program_and_is_never_handed_out_twice(docker_backend, api) -> None:
    shape = docker_backend.shape_for("python", LIMITS, [])
    docker_backend.warm("python", LIMITS)
    ready(docker_backend, 2)
    program = "import os\nseen = os.path.exists('/tmp/mark')\nopen('/tmp/mark', 'w').close()\nresult = seen"
    taken = [docker_backend.pool.acquire(shape) for _ in range(3)]  # two warm, then one cold
    try:
        assert len({item.id for item in taken}) == 3
        for item in taken:
            request, marker = encode(program)
            first = docker_backend._run_started(item, request, marker, LIMITS, None)
            assert (first.status, first.result) == ("success", False), first
            # The runner ran its one program and exited, and the container with it ...
            assert api.inspect_container(item.id)["State"]["Running"] is False
            # ... so a second program has nowhere to go.
            request, marker = encode(program)
            with pytest.raises(sandbox.SandboxUnavailable, match="ended before its program was delivered"):
                docker_backend._run_started(item, request, marker, LIMITS, None)
    finally:
        for item in taken:
            docker_backend.pool.release(item)
    later = [docker_backend.pool.acquire(shape) for _ in range(2)]
    for item in later:
        docker_backend.pool.release(item)
    assert not {item.id for item in later} & {item.id for item in taken}
    handed = docker_backend.pool.stats.handed_out
    assert len(handed) == len(set(handed))
    idle(docker_backend)
    assert not api.containers(all=True, filters={"id": [i.id for i in taken + later]})


def test_the_deadline_counts_from_the_delivery_not_the_start(docker_backend) -> None:
    docker_backend.warm("python", LIMITS)
    oldest = ready(docker_backend, 1)[0]
    # The premise, not a wait for an event: the container idles in the pool longer than the run's whole
    # deadline, so a deadline counted from its start would kill the program at once.
    time.sleep(1.5)
    result = sandbox.run(
        "result = 'in time'", limits=LIMITS.model_copy(update={"timeout_ms": 1000}), backend="docker"
    )
    assert oldest.id in docker_backend.pool.stats.handed_out
    assert (result.status, result.result) == ("success", "in time"), result


def test_a_kill_the_daemon_answers_with_an_error_still_ends_the_run_as_a_timeout(
    docker_backend, monkeypatch
) -> None:
    # Under load the daemon may deliver the kill and still answer 500 ("tried to kill container, but did
    # not receive an exit event" once the container takes over 10 s to end). The run was killed at its
    # deadline all the same: it was reported as the program's own error, exit 137.
    real_kill = docker.APIClient.kill

    def kill_answered_late(client: docker.APIClient, container: str, *args: object, **kwargs: object) -> None:
        real_kill(client, container, *args, **kwargs)
        raise docker.errors.APIError("tried to kill container, but did not receive an exit event")

    monkeypatch.setattr(docker.APIClient, "kill", kill_answered_late)
    result = sandbox.run(
        "import time\nprint('started', flush=True)\ntime.sleep(120)\n",
        limits=LIMITS.model_copy(update={"timeout_ms": 1000}),
        backend="docker",
    )
    assert (result.status, result.exit_code, result.stdout) == ("timeout", 137, "started\n"), result


def test_the_idle_containers_memory_caps_stay_within_the_pool_budget() -> None:
    backend = DockerBackend(pool_size=3, pool_memory_mb=250)
    try:
        backend.warm("python", LIMITS)
        ready(backend, 2)  # 2 x 96 MB within 250 MB
        # A third (288 MB) would break the budget: once the worker has nothing left to do, it made none.
        idle(backend)
        assert len(backend.pool.ready(backend.shape_for("python", LIMITS, []))) == 2
        assert backend.pool.held() == 192
    finally:
        backend.close()


def test_every_container_is_hardened(docker_backend, api) -> None:
    docker_backend.warm("python", LIMITS)
    details = api.inspect_container(ready(docker_backend, 1)[0].id)
    host, config = details["HostConfig"], details["Config"]
    assert host["NetworkMode"] == "none" and config["NetworkDisabled"] is True
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges:true" in host["SecurityOpt"]
    profile = json.loads(next(opt for opt in host["SecurityOpt"] if opt.startswith("seccomp="))[8:])
    assert any("io_uring_setup" in rule["names"] for rule in profile["syscalls"])
    assert host["Memory"] == host["MemorySwap"] == 96 << 20
    assert host["Tmpfs"]["/tmp"].count("size=48m") == 1
    assert host["PidsLimit"] == 48
    assert host["NanoCpus"] == 1_000_000_000
    assert host["Init"] is True
    assert host["LogConfig"]["Type"] == "none"
    assert host["IpcMode"] == "none"
    assert {limit["Name"] for limit in host["Ulimits"]} == {"nofile", "fsize", "core"}
    assert config["User"] == "65534:65534"
    assert config["OpenStdin"] is True and config["StdinOnce"] is True
    assert config["Labels"][LABEL] == "1" and config["Labels"][OWNER_LABEL] == owner_id()
    assert not any(name.startswith("SLOTRELAY") for name in config["Env"])


def test_orphans_of_a_dead_client_are_collected_by_label(docker_backend, api) -> None:
    image = docker_backend.shape_for("python", LIMITS, []).image
    dead = api.create_container(
        image, labels={LABEL: "1", OWNER_LABEL: f"{owner_id().split(':')[0]}:999999999:0"}
    )
    alive = api.create_container(image, labels={LABEL: "1", OWNER_LABEL: owner_id()})
    try:
        assert docker_backend.collect_orphans() >= 1
        remaining = {c["Id"] for c in api.containers(all=True, filters={"label": LABEL})}
        assert dead["Id"] not in remaining
        assert alive["Id"] in remaining
    finally:
        for created in (dead, alive):
            with contextlib.suppress(docker.errors.NotFound):
                api.remove_container(created["Id"], force=True)


def test_the_daemons_refusals_become_sandbox_errors_in_one_place(docker_backend, api) -> None:
    from slotrelay.sandbox.docker_errors import docker_errors
    from slotrelay.sandbox.errors import SandboxDaemonRefused, SandboxNotFound

    with (
        pytest.raises(SandboxNotFound, match="image nowhere/none:0 is missing on the-daemon; run") as missing,
        docker_errors("creating", image="nowhere/none:0", daemon="the-daemon"),
    ):
        api.inspect_image("nowhere/none:0")
    assert isinstance(missing.value.__cause__, docker.errors.ImageNotFound)
    assert missing.value.code == "SANDBOX_UNAVAILABLE"
    with pytest.raises(SandboxNotFound, match=r"docker: removing it \(404 "), docker_errors("removing it"):
        api.remove_container("slotrelay-no-such-container", force=True)
    created = api.create_container(
        docker_backend.image_for("python"), labels={LABEL: "1", OWNER_LABEL: owner_id()}
    )
    try:
        # Killing a container that is not running is the daemon's 409: a refusal, not a missing object.
        with (
            pytest.raises(SandboxDaemonRefused, match="is not running") as refused,
            docker_errors("killing it"),
        ):
            api.kill(created["Id"])
        assert not isinstance(refused.value, SandboxNotFound)
    finally:
        api.remove_container(created["Id"], force=True)
