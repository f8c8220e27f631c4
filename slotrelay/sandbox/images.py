"""Sandbox images: a base made without a registry, and one image per language built on it.

The base is a minimal Debian with python3 from `sandbox_images/base/bootstrap.sh` (debootstrap,
then `docker import`); its tarball is cached under `~/.cache/slotrelay/` so a wiped daemon
re-imports in seconds, and so are the downloaded .debs, so a changed script does not download
them again. Each language image is `docker build` of `sandbox_images/<lang>/Dockerfile`
with the in-sandbox runtime (`slotrelay/sandbox/runtime/`) as context.

Every image is tagged and labelled with a content hash of what it is made from (the base: the
bootstrap script; a language: its Dockerfile, the runtime files and the base's hash), so
`build` is a no-op when nothing changed and the backends always run the image that matches
this checkout's runner.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slotrelay.sandbox.docker_errors import docker_errors
from slotrelay.sandbox.errors import (
    SandboxDaemonRefused,
    SandboxImageError,
    SandboxNotFound,
    SandboxUnavailable,
)
from slotrelay.sandbox.limits import LANGUAGES

if TYPE_CHECKING:
    from docker import DockerClient

REPOSITORY = "slotrelay-sandbox"
HASH_LABEL = "org.slotrelay.sandbox.hash"
RUNTIME_DIR = Path(__file__).parent / "runtime"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def images_dir() -> Path:
    """The `sandbox_images/` folder of this checkout (or `SLOTRELAY_SANDBOX_IMAGES`)."""
    configured = os.environ.get("SLOTRELAY_SANDBOX_IMAGES")
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / "sandbox_images"


def _digest(parts: list[bytes]) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
    return hasher.hexdigest()[:16]


def runtime_files() -> dict[str, bytes]:
    """The in-sandbox runtime files by name (runner.py, runner.js, egress_shim.py)."""
    return {path.name: path.read_bytes() for path in sorted(RUNTIME_DIR.iterdir()) if path.is_file()}


def base_hash() -> str:
    """Content hash of the base image: its bootstrap script."""
    return _digest([(images_dir() / "base" / "bootstrap.sh").read_bytes()])


def language_hash(lang: str) -> str:
    """Content hash of a language image: its Dockerfile, the runtime and the base's hash."""
    dockerfile = images_dir() / lang / "Dockerfile"
    parts = [base_hash().encode(), dockerfile.read_bytes()]
    for name, content in runtime_files().items():
        parts += [name.encode(), content]
    return _digest(parts)


def base_tag() -> str:
    """The base image's name, e.g. `slotrelay-sandbox/base:0123456789abcdef`."""
    return f"{REPOSITORY}/base:{base_hash()}"


def image_tag(lang: str) -> str:
    """The image a backend runs for `lang`, named by its content hash."""
    return f"{REPOSITORY}/{lang}:{language_hash(lang)}"


def apt_mirror() -> str:
    """The Debian mirror this machine's apt uses (or `SLOTRELAY_DEBIAN_MIRROR`)."""
    configured = os.environ.get("SLOTRELAY_DEBIAN_MIRROR")
    if configured:
        return configured
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    pattern = re.compile(r"(?:^deb\s+(?:\[[^]]*\]\s+)?|^URIs:\s*)(\S+/debian)/?\s", re.MULTILINE)
    for source in sources:
        if source.is_file() and source.name.endswith((".list", ".sources")):
            found = pattern.search(source.read_text(errors="replace") + "\n")
            if found:
                return found.group(1)
    return DEFAULT_MIRROR


def cache_dir() -> Path:
    """Where the base root file system tarball is kept between builds."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "slotrelay"


@dataclass
class BuildStep:
    """One image `build` looked at, and what it did: "current", "imported", "bootstrapped", "built",
    or "removed (stale)" for an image of an older checkout."""

    image: str
    action: str


def has_image(client: DockerClient, tag: str) -> bool:
    """Whether the daemon behind `client` has an image tagged `tag`."""
    try:
        with docker_errors(f"could not look up image {tag}"):
            client.images.get(tag)
    except SandboxNotFound:
        return False
    return True


def _build_base(client: DockerClient, *, force: bool, say: Callable[[str], None]) -> BuildStep:
    tag = base_tag()
    if not force and has_image(client, tag):
        return BuildStep(tag, "current")
    tarball = cache_dir() / f"base-{base_hash()}.tar"
    action = "imported"
    if force or not tarball.is_file():
        tarball.parent.mkdir(parents=True, exist_ok=True)
        if shutil.which("debootstrap") is None:
            raise SandboxUnavailable(
                f"debootstrap is not installed, and the base image {tag} is made with it "
                "(apt-get install debootstrap)"
            )
        mirror = apt_mirror()
        say(f"debootstrap bookworm from {mirror} (about a minute)")
        script = images_dir() / "base" / "bootstrap.sh"
        done = subprocess.run(
            ["sh", str(script), mirror, str(tarball), str(cache_dir() / "debs")],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SandboxImageError(f"{script} failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
        action = "bootstrapped"
        for older in cache_dir().glob("base-*.tar"):
            if older != tarball:
                older.unlink()
    say(f"docker import {tarball.name}")
    repository, version = tag.split(":")
    client.api.import_image_from_file(
        str(tarball),
        repository=repository,
        tag=version,
        changes=[f"LABEL {HASH_LABEL}={base_hash()}", "ENV LANG=C.UTF-8"],
    )
    return BuildStep(tag, action)


def _context(lang: str) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(str(images_dir() / lang / "Dockerfile"), arcname="Dockerfile")
        for name, content in runtime_files().items():
            info = tarfile.TarInfo(f"runtime/{name}")
            info.size = len(content)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(content))
    buffer.seek(0)
    return buffer


def _build_language(client: DockerClient, lang: str, *, force: bool, say: Callable[[str], None]) -> BuildStep:
    tag = image_tag(lang)
    if not force and has_image(client, tag):
        return BuildStep(tag, "current")
    say(f"docker build {tag}")
    with docker_errors(f"building {tag}"):
        client.images.build(
            fileobj=_context(lang),
            custom_context=True,
            tag=tag,
            buildargs={"BASE_IMAGE": base_tag()},
            labels={HASH_LABEL: language_hash(lang)},
            network_mode="host",
            rm=True,
            forcerm=True,
        )
    return BuildStep(tag, "built")


def build_images(
    client: DockerClient, *, langs: tuple[str, ...] = LANGUAGES, force: bool = False,
    say: Callable[[str], None] = print
) -> list[BuildStep]:
    """Make sure the base and each language image matching this checkout exist in the daemon.

    Parameters:
        client: a `docker.DockerClient`.
        langs: the languages to build.
        force: rebuild even when an image with the right content hash exists.
        say: receives one line per slow step (debootstrap, import, build).

    Returns:
        One `BuildStep` per image, saying whether it was current or what was done.

    Raises:
        SandboxUnavailable: the base must be made and debootstrap is not installed.
        SandboxImageError: debootstrap or a build failed (the message has the log's end).
    """
    steps = [_build_base(client, force=force, say=say)]
    for lang in langs:
        steps.append(_build_language(client, lang, force=force, say=say))
    return steps + _remove_stale(client, keep={base_tag(), *(image_tag(lang) for lang in LANGUAGES)})


def _remove_stale(client: DockerClient, *, keep: set[str]) -> list[BuildStep]:
    """Untag sandbox images an older checkout built; one a container still uses stays."""
    removed = []
    for image in client.images.list(filters={"label": HASH_LABEL}):
        for tag in image.tags:
            if tag.startswith(f"{REPOSITORY}/") and tag not in keep:
                try:
                    with docker_errors(f"could not remove stale image {tag}"):
                        client.images.remove(tag)
                except SandboxDaemonRefused:
                    continue  # a container still uses it, or it is gone already
                removed.append(BuildStep(tag, "removed (stale)"))
    return removed


def missing_images(client: DockerClient, langs: tuple[str, ...] = LANGUAGES) -> list[str]:
    """The language images this checkout needs that the daemon lacks."""
    return [image_tag(lang) for lang in langs if not has_image(client, image_tag(lang))]
