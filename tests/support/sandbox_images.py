"""The sandbox images this checkout needs, built once per process when a Docker daemon answers."""

from __future__ import annotations

import functools

from slotrelay.sandbox import SandboxUnavailable


@functools.cache
def images_built() -> bool:
    """Build the images this checkout needs when a daemon answers (a no-op when current, as in CI)."""
    from slotrelay.sandbox import images
    from slotrelay.sandbox.daemon import docker_client

    try:
        client = docker_client()
    except SandboxUnavailable:
        return False
    try:
        images.build_images(client, say=lambda line: None)
    finally:
        client.close()
    return True
