"""The docker backend's own promises: the pool, the container's hardening, orphan collection."""

from __future__ import annotations

import contextlib
import json
import time

import docker
import docker.errors
import pytest

from slotrelay import sandbox
from slotrelay.sandbox import SandboxLimits
from slotrelay.sandbox.docker_backend import LABEL, OWNER_LABEL, owner_id

pytestmark = pytest.mark.docker

# A shape no other test uses, so this file's counts are its own.
LIMITS = SandboxLimits(memory_mb=96, pids=48)


@pytest.fixture
def api():
    client = docker.from_env()
    yield client.api
    client.close()


def wait_for(check, what: str, seconds: float = 90):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"waited {seconds} s for {what}")


def test_the_pool_hands_out_fresh_never_started_containers_and_refills(docker_backend, api) -> None:
    shape = docker_backend.shape_for("python", LIMITS, [])
    docker_backend.warm("python", LIMITS)
    ready = wait_for(
        lambda: len(docker_backend.pool.ready(shape)) == 2 and docker_backend.pool.ready(shape), "2 ready"
    )
    for item in ready:
        state = api.inspect_container(item.id)["State"]
        assert (state["Status"], state["StartedAt"][:4]) == ("created", "0001")
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
    refilled = wait_for(
        lambda: len(docker_backend.pool.ready(shape)) == 2 and docker_backend.pool.ready(shape), "refill"
    )
    assert not {item.id for item in refilled} & set(handed)

    def used_ones_removed() -> bool:
        return not api.containers(all=True, filters={"id": handed})

    wait_for(used_ones_removed, "used containers to be removed")


def test_every_container_is_hardened(docker_backend, api) -> None:
    shape = docker_backend.shape_for("python", LIMITS, [])
    docker_backend.warm("python", LIMITS)
    ready = wait_for(lambda: docker_backend.pool.ready(shape), "a ready container")
    details = api.inspect_container(ready[0].id)
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
