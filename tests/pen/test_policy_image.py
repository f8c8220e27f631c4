"""The pen-write flow under a `SandboxPolicy` naming an image the daemon lacks stops as it starts (issue 29).

Before, such a run claimed a pen, asked the model for code and ran it on bwrap. Now loading the policy
looks its images up on the daemon: MPP-E002 naming the image, before a pen id is claimed or the model
is asked. A policy naming a language the sandbox does not run is refused naming the field.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from slotrelay.pen.errors import SandboxStartFailed
from slotrelay.sandbox import SandboxRequestError
from tests.support.sandbox_images import images_built

MISSING = f"slotrelay-test/never-built:{uuid.uuid4().hex[:8]}"


@pytest.mark.docker
def test_regression_a_pen_write_under_a_policy_naming_a_missing_image_stops_at_start(
    prefect_server, stub, root: Path, sandbox_backend
) -> None:
    from blocks.code_model import CodeModel
    from blocks.sandbox_policy import SandboxPolicy
    from flows.pen import pen_write

    assert images_built()
    model = CodeModel(base_url=stub.base_url, model="stub-coder", timeout_s=5)
    model.save("image-test-model", overwrite=True)
    SandboxPolicy(image_tags={"python": MISSING}, pool_size=0).save("missing-image-policy", overwrite=True)
    with pytest.raises(SandboxStartFailed) as failed:
        pen_write(
            intent="sum the numbers in the input list",
            persona_id="p1",
            upstream_inputs={"numbers": [1, 2]},
            root=str(root),
            model_block="image-test-model",
            sandbox_policy="missing-image-policy",
        )
    assert failed.value.code == "MPP-E002"
    assert "sandbox policy 'missing-image-policy': " in failed.value.message
    assert f"python image {MISSING} is missing" in failed.value.message
    assert stub.requests == []
    assert list(root.iterdir()) == []  # no pen claimed, nothing audited


def test_a_policy_naming_a_language_the_sandbox_does_not_run_is_refused_naming_the_field() -> None:
    from blocks.sandbox_policy import SandboxPolicy

    with pytest.raises(SandboxRequestError, match="image_tags: 'pyhton' is not a language the sandbox runs"):
        SandboxPolicy(image_tags={"pyhton": "registry/py:1"}).settings()
