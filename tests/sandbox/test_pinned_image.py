"""A sandbox policy that pins an image runs that image on Docker, or nothing (issue 29).

Before, a policy naming an image the daemon lacks ran the code on bwrap instead, with the host's
interpreter: not what the operator pinned, and without a word. Now the run is refused with an error
naming the image, `bwrap` asked for under such a policy is refused, and a policy's images are all
checked when it is loaded (`check_policy_images`, which the pen-write flow calls at start). Against
the real daemon: a tag nobody built, and a tag of this checkout's image made for the test (removed
after).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import closing

import pytest

from slotrelay import sandbox
from slotrelay.sandbox import SandboxRequestError, SandboxSettings
from slotrelay.sandbox.backends import check_policy_images
from slotrelay.sandbox.daemon import docker_client
from slotrelay.sandbox.errors import SandboxUnavailable
from slotrelay.sandbox.images import image_tag

pytestmark = pytest.mark.docker

MISSING = f"slotrelay-test/never-built:{uuid.uuid4().hex[:8]}"


@pytest.fixture
def pinned_tag(docker_backend) -> Iterator[str]:
    """A second tag of this checkout's python image on the local daemon, for one test."""
    repository, tag = "slotrelay-test/pinned", uuid.uuid4().hex[:8]
    with closing(docker_client()) as client:
        client.images.get(image_tag("python")).tag(repository, tag)
        try:
            yield f"{repository}:{tag}"
        finally:
            client.images.remove(f"{repository}:{tag}")


def test_regression_a_policy_naming_a_missing_image_is_refused_naming_it_not_run_on_bwrap(
    docker_backend, bwrap_ready
) -> None:
    policy = SandboxSettings(image_tags=(("python", MISSING),), pool_size=0)
    with pytest.raises(SandboxUnavailable) as missing:
        sandbox.run("result = 'ran'", settings=policy)
    message = missing.value.message
    assert f"the sandbox policy's python image {MISSING} is missing on" in message, message
    assert "bwrap" not in message
    refused = f"backend: 'bwrap' cannot run the image the sandbox policy names ({MISSING})"
    with pytest.raises(SandboxRequestError, match=re.escape(refused)):
        sandbox.run("result = 'ran'", settings=policy, backend="bwrap")
    with pytest.raises(SandboxUnavailable, match=MISSING):
        check_policy_images(policy)


def test_a_language_the_policy_does_not_pin_keeps_the_default_order(docker_backend) -> None:
    policy = SandboxSettings(image_tags=(("node", MISSING),), pool_size=0)
    done = sandbox.run("result = 'ran'", settings=policy)
    assert (done.status, done.result) == ("success", "ran")
    with pytest.raises(SandboxUnavailable, match=f"node image {MISSING} is missing"):
        check_policy_images(policy)


def test_a_pinned_image_on_the_daemon_is_the_one_that_runs(pinned_tag: str) -> None:
    policy = SandboxSettings(image_tags=(("python", pinned_tag),), pool_size=0)
    check_policy_images(policy)
    done = sandbox.run("result = 'from the pinned image'", settings=policy)
    assert (done.backend, done.status, done.result) == ("docker", "success", "from the pinned image")
    assert sandbox.get_backend(lang="python", settings=policy).image_for("python") == pinned_tag  # type: ignore[attr-defined]
