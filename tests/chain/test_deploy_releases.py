"""Deploys are releases, on both target kinds: a remote over SSH (a real OpenSSH server on 127.0.0.1) and a
local folder. The served side C is a real HTTP server on 127.0.0.1 pointed at the target's `current/`.

A deploy switches every target to a new, fully checked release or leaves every target exactly as it was
(byte for byte, and as served), the Dev sitemap included.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.deploy_site import deploy, get, picture, served, serving
from harness.deploy_sshd import Sshd, running_sshd, sshd_available
from slotrelay.chain.errors import NodeError
from tests.support.services import require_service

SITE = "https://example.org/"
PAGES = {
    "build/index.html": "<!doctype html><title>Today</title><h1>Front page</h1>",
    "build/posts/one.html": "<!doctype html><title>One</title><h1>First post</h1>",
    "build/posts/two.html": "<!doctype html><title>Two</title><h1>Second post</h1>",
}
FILES = [*PAGES, "build/site.css"]
SITEMAP = {"path": "build/sitemap.xml", "site_url": SITE}
KINDS = [pytest.param("ssh", marks=pytest.mark.ssh), "folder"]
# A release's name, as docs/deploy.md gives it: UTC time to the millisecond, 6 random hex digits.
RELEASE_ID = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9a-f]{6}")


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    require_service(sshd_available(), "openssh-server is not installed (scripts/bootstrap.sh installs it)")
    with running_sshd() as server:
        yield server


@dataclass
class Side:
    """The C side under test: a folder (on this machine, or the sshd's remote folder) and its target spec."""

    kind: str
    root: Path
    target: Callable[..., dict[str, Any]]

    @property
    def current(self) -> Path:
        return self.root / "current"


@pytest.fixture(params=KINDS)
def side(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Side:
    name = f"www-{uuid.uuid4().hex[:6]}"
    if request.param == "folder":
        root = tmp_path / name

        def folder_target(*, url: str | None = None, preview: str | None = None,
                          path: Path | None = None) -> dict[str, Any]:
            return {"name": "C", "folder": str(path or root), "base_url": url, "preview_url": preview}

        return Side("folder", root, folder_target)
    server: Sshd = request.getfixturevalue("sshd")
    remote = server.folder(name)

    def ssh_target(*, url: str | None = None, preview: str | None = None,
                   path: Path | None = None) -> dict[str, Any]:
        for key in ("SITE_C_URL", "SITE_C_PREVIEW_URL"):
            monkeypatch.delenv(key, raising=False)
        for key, value in server.env("SITE_C", path or remote, url=url).items():
            monkeypatch.setenv(key, value)
        if preview:
            monkeypatch.setenv("SITE_C_PREVIEW_URL", preview)
        return {"name": "C", "ssh": "SITE_C"}

    return Side("ssh", remote, ssh_target)


@pytest.fixture
def chain_dir(tmp_path: Path) -> Path:
    """A chain folder holding the built pages (the Dev copy), a stylesheet and a Dev sitemap."""
    folder = tmp_path / "chain"
    write_pages(folder, PAGES)
    (folder / "build" / "site.css").write_bytes(b"h1 { color: #333 }\n")
    (folder / "build" / "sitemap.xml").write_text(
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{SITE}about.html</loc></url></urlset>\n")
    return folder


def write_pages(folder: Path, pages: dict[str, str]) -> None:
    for relative, text in pages.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text, encoding="utf-8")


def live_release(root: Path) -> str:
    target = os.readlink(root / "current")
    assert target.startswith("releases/") and RELEASE_ID.fullmatch(target.removeprefix("releases/")), target
    return target.removeprefix("releases/")


def test_each_deploy_is_a_release_unchanged_files_are_hard_links_and_old_ones_are_pruned(side, chain_dir):
    connections = (lambda: side_log(side).count("Accepted publickey")) if side.kind == "ssh" else (lambda: 0)
    before = connections()
    first = deploy(chain_dir, files=FILES, targets=[side.target(), "mirror-b"], sitemap=SITEMAP,
                   keep_releases=2)
    one = first["release"]
    assert RELEASE_ID.fullmatch(one)
    assert live_release(side.root) == one == live_release(chain_dir / "mirror-b")
    if side.kind == "ssh":
        assert connections() == before + 1, "one SSH connection for the whole deploy of the target"
    assert {(t["release"], t["previous"], t["uploaded"], t["linked"]) for t in first["targets"].values()} == {
        (one, None, 5, 0)}
    live = {p: (side.current / p).read_bytes() for p in FILES}
    assert live == {p: (chain_dir / p).read_bytes() for p in FILES}

    (chain_dir / "build" / "index.html").write_text(PAGES["build/index.html"].replace("Front page", "Later"))
    second = deploy(chain_dir, files=["build/index.html"], targets=[side.target(), "mirror-b"],
                    sitemap=SITEMAP, keep_releases=2)
    two = second["release"]
    for root in (side.root, chain_dir / "mirror-b"):
        assert live_release(root) == two and sorted(os.listdir(root / "releases")) == [one, two]
        # Files the batch did not list are carried over as hard links: the same inode in both releases.
        for unchanged in ["build/posts/one.html", "build/posts/two.html", "build/site.css"]:
            assert (root / "releases" / two / unchanged).stat().st_ino == \
                   (root / "releases" / one / unchanged).stat().st_ino
        assert (root / "releases" / two / "build/index.html").stat().st_ino != \
               (root / "releases" / one / "build/index.html").stat().st_ino
        assert (root / "releases" / one / "build/index.html").read_text().endswith("Front page</h1>")
    c = second["targets"]["C"]
    assert (c["previous"], c["carried"]) == (one, 3)
    assert {r["how"] for r in second["deployed"] if r["path"] == "build/index.html"} == {"uploaded"}

    third = deploy(chain_dir, files=["build/index.html"], targets=[side.target(), "mirror-b"],
                   sitemap=SITEMAP, keep_releases=2)
    three = third["release"]
    assert third["targets"]["C"]["pruned"] == [one] and third["targets"]["mirror-b"]["pruned"] == [one]
    # An unchanged listed file is linked to the release before, not sent again.
    assert {r["how"] for r in third["deployed"] if r["path"] == "build/index.html"} == {"linked"}
    assert sorted(os.listdir(side.root / "releases")) == [two, three] and live_release(side.root) == three


def side_log(side: Side) -> str:
    return (side.root.parent / "sshd.log").read_text(errors="replace")


def test_every_check_is_listed_passed_or_skipped_with_why(side, chain_dir):
    with serving(side.current) as c_url, serving(chain_dir) as dev_url:
        out = deploy(chain_dir, files=FILES, targets=[side.target(url=c_url), "mirror-b"], sitemap=SITEMAP,
                     feature_points={"dev_url": dev_url})
    checks = {(r["check"], r["target"]): (r["status"], r["stage"], r["reason"]) for r in out["checks"]}
    assert checks[("hash", "C")] == ("passed", "before_switch", None)
    assert checks[("url", "C")] == ("passed", "after_switch", None)
    assert checks[("feature_points", "C")] == ("passed", "after_switch", None)
    assert checks[("sitemap", "C")] == ("passed", "before_switch", None)
    assert checks[("hash", "mirror-b")][0] == checks[("sitemap", "mirror-b")][0] == "passed"
    assert checks[("url", "mirror-b")] == (
        "skipped", None, "target mirror-b has no served URL (base_url or preview_url)")
    assert checks[("feature_points", "mirror-b")][0] == "skipped"
    assert out["targets"]["C"]["checked"] == "after_switch" and out["targets"]["mirror-b"]["checked"] is None
    assert out["checked_urls"] == [c_url + p for p in [*FILES, "build/sitemap.xml"]]

    # No sitemap, no feature points, no URL at all: the deploy still goes, and says what it skipped.
    bare = deploy(chain_dir, files=FILES, targets=[side.target()], feature_points=None)
    reasons = {r["check"]: (r["status"], r["reason"]) for r in bare["checks"]}
    assert reasons["sitemap"] == ("skipped", "the node has no `sitemap`")
    assert reasons["feature_points"] == ("skipped", "feature_points is null")
    assert reasons["url"][0] == "skipped" and "no served URL" in reasons["url"][1]


def test_a_reader_polling_the_site_during_the_switch_never_sees_a_mix(side, chain_dir):
    pages = {f"build/page-{n}.html": f"<!doctype html><title>{n}</title><p>old</p>" for n in range(12)}
    write_pages(chain_dir, pages)
    deploy(chain_dir, files=list(pages), targets=[side.target()], feature_points=None)
    seen: list[str] = []
    swept_once, deployed, finished = threading.Event(), threading.Event(), threading.Event()

    with serving(side.current) as url:
        def reader() -> None:
            while True:
                sweep_after_deploy = deployed.is_set()
                for page, text in pages.items():
                    body = get(url + page)
                    seen.append("old" if body == text.encode() else "new" if
                                body == text.replace("old", "new").encode() else f"other: {body!r}")
                swept_once.set()
                if sweep_after_deploy:
                    finished.set()
                    return

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        assert swept_once.wait(60), "the reader did not read the site"
        write_pages(chain_dir, {p: t.replace("old", "new") for p, t in pages.items()})
        deploy(chain_dir, files=list(pages), targets=[side.target()], feature_points=None)
        deployed.set()
        assert finished.wait(60), "the reader did not read the site after the deploy"
        thread.join()

    assert seen[0] == "old" and seen[-1] == "new" and set(seen) == {"old", "new"}, seen
    first_new = seen.index("new")
    assert "old" not in seen[first_new:], f"an old page was served after a new one: {seen}"


def _dev_with(tmp_path: Path, title: str) -> Path:
    dev = tmp_path / f"dev-{uuid.uuid4().hex[:6]}"
    write_pages(dev, {**PAGES, "build/posts/two.html": PAGES["build/posts/two.html"].replace("Two", title)})
    return dev


@dataclass
class Before:
    """A picture of everything a failed deploy must leave as it was."""

    c: dict[str, object]
    mirror: dict[str, object]
    sitemap: bytes
    served: dict[str, bytes | int]


def deployed_once(side: Side, chain_dir: Path, c_url: str) -> Before:
    out = deploy(chain_dir, files=FILES, targets=[side.target(url=c_url), "mirror-b"], sitemap=SITEMAP,
                 feature_points=None)
    assert out["targets"]["C"]["checked"] == "after_switch"
    return Before(picture(side.root), picture(chain_dir / "mirror-b"),
                  (chain_dir / "build" / "sitemap.xml").read_bytes(),
                  served(c_url, [*FILES, "build/sitemap.xml"]))


def assert_as_before(before: Before, side: Side, chain_dir: Path, c_url: str) -> None:
    assert served(c_url, [*FILES, "build/sitemap.xml"]) == before.served
    assert picture(side.root) == before.c
    assert picture(chain_dir / "mirror-b") == before.mirror
    assert (chain_dir / "build" / "sitemap.xml").read_bytes() == before.sitemap


def test_a_feature_point_difference_switches_back_and_leaves_c_and_the_mirror_as_served_before(
        side, chain_dir, tmp_path):
    with serving(side.current) as c_url, serving(_dev_with(tmp_path, "Two, revised")) as dev_url:
        before = deployed_once(side, chain_dir, c_url)
        release = live_release(side.root)
        (chain_dir / "build" / "index.html").write_text(PAGES["build/index.html"].replace("Front", "Later"))
        with pytest.raises(NodeError) as caught:
            deploy(chain_dir, files=FILES, targets=[side.target(url=c_url), "mirror-b"], sitemap=SITEMAP,
                   feature_points={"dev_url": dev_url})
        assert_as_before(before, side, chain_dir, c_url)
    assert caught.value.error_type == "deploy_feature_points_differ"
    message = caught.value.message
    assert "page build/posts/two.html on target C" in message
    assert "'Two' served, 'Two, revised' on Dev" in message
    assert "switched back in " in message
    assert f"C to release {release}, mirror-b to release {release}" in message
    assert "feature_points failed on C (after switch)" in message


def test_a_hash_mismatch_leaves_everything_as_it_was(side, chain_dir, monkeypatch):
    with serving(side.current) as c_url:
        before = deployed_once(side, chain_dir, c_url)
        index = chain_dir / "build" / "index.html"
        index.write_text(PAGES["build/index.html"].replace("Front", "Later"))
        from slotrelay.chain.executors.deploy import sources as deploy_sources

        real = deploy_sources.sha256_of

        def changes_after_hashing(handle):
            # The source changes between its hash and its copy: the copy on the target has other bytes.
            digest = real(handle)
            with index.open("a") as source:
                source.write("<!-- changed -->")
            return digest

        monkeypatch.setattr(deploy_sources, "sha256_of", changes_after_hashing)
        with pytest.raises(NodeError) as caught:
            deploy(chain_dir, files=["build/index.html"], targets=[side.target(url=c_url), "mirror-b"],
                   sitemap=SITEMAP, feature_points=None)
        index.write_text(PAGES["build/index.html"])
        assert_as_before(before, side, chain_dir, c_url)
    assert caught.value.error_type == "deploy_hash_mismatch"
    assert "nothing went live" in caught.value.message and "hash failed on C" in caught.value.message


def test_a_url_failure_after_the_switch_switches_back(side, chain_dir):
    refused: set[str] = set()
    with serving(side.current, refused=refused) as c_url:
        before = deployed_once(side, chain_dir, c_url)
        write_pages(chain_dir, {"build/posts/three.html": "<!doctype html><title>3</title><h1>Third</h1>"})
        refused.add("/build/posts/three.html")
        with pytest.raises(NodeError) as caught:
            deploy(chain_dir, files=[*FILES, "build/posts/three.html"],
                   targets=[side.target(url=c_url), "mirror-b"], sitemap=SITEMAP, feature_points=None)
        refused.clear()
        assert_as_before(before, side, chain_dir, c_url)
        assert get(c_url + "build/posts/three.html") == 404
    assert caught.value.error_type == "deploy_url_unreachable"
    assert "switched back in" in caught.value.message
    assert "url failed on C (after switch)" in caught.value.message


def test_a_release_checked_at_its_preview_url_never_goes_live_when_a_check_fails(side, chain_dir, tmp_path):
    with serving(side.current) as c_url, serving(side.root / "releases") as preview, \
            serving(_dev_with(tmp_path, "Two, revised")) as dev_url:
        before = deployed_once(side, chain_dir, c_url)
        with pytest.raises(NodeError) as caught:
            deploy(chain_dir, files=FILES, targets=[side.target(url=c_url, preview=preview), "mirror-b"],
                   sitemap=SITEMAP, feature_points={"dev_url": dev_url})
        assert_as_before(before, side, chain_dir, c_url)
        assert caught.value.error_type == "deploy_feature_points_differ"
        assert "nothing went live" in caught.value.message
        assert "feature_points failed on C (before switch)" in caught.value.message

        out = deploy(chain_dir, files=FILES, targets=[side.target(url=c_url, preview=preview), "mirror-b"],
                     sitemap=SITEMAP, feature_points={"dev_url": c_url})
    assert out["targets"]["C"]["checked"] == "before_switch"
    assert out["checked_urls"][0] == f"{preview}{out['release']}/build/index.html"
    passed = {(r["check"], r["stage"]) for r in out["checks"]
              if r["target"] == "C" and r["status"] == "passed"}
    assert passed >= {("url", "before_switch"), ("feature_points", "before_switch")}


def _deploy_without_dac_override(chain_dir: Path, spec: dict[str, Any]) -> dict[str, str]:
    """Run the deploy in a process that the folder's mode bits bind (root's override capability dropped)."""
    script = (
        "import json, logging, sys\n"
        "from types import SimpleNamespace\n"
        "from slotrelay.chain.executors.deploy.node import run_deploy\n"
        "from slotrelay.chain.errors import NodeError\n"
        "from slotrelay.chain.models import DeployExecutor\n"
        "context = SimpleNamespace(chain=SimpleNamespace(base_dir=sys.argv[1]),\n"
        "                          logger=logging.getLogger('slotrelay.engine'))\n"
        "try:\n"
        "    run_deploy(DeployExecutor(**json.loads(sys.argv[2])), {}, context)\n"
        "    print(json.dumps({'error_type': None}))\n"
        "except NodeError as e:\n"
        "    print(json.dumps({'error_type': e.error_type, 'message': e.message}))\n"
    )
    prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    done = subprocess.run([*prefix, sys.executable, "-c", script, str(chain_dir), json.dumps(spec)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_read_only_root_with_new_nested_folders_is_write_denied(side, chain_dir, request):
    if side.kind == "folder" and os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root writes into any folder and setpriv is missing")
    read_only = side.root / "ro"
    read_only.mkdir(parents=True)
    if side.kind == "ssh":
        request.getfixturevalue("sshd").own(read_only)
    read_only.chmod(0o555)
    sitemap = (chain_dir / "build" / "sitemap.xml").read_bytes()
    try:
        if side.kind == "ssh":
            with pytest.raises(NodeError) as caught:
                deploy(chain_dir, files=FILES, targets=[side.target(path=read_only / "a" / "b")],
                       sitemap=SITEMAP)
            error_type, message = caught.value.error_type, caught.value.message
        else:
            result = _deploy_without_dac_override(chain_dir, {
                "kind": "deploy", "files": FILES, "sitemap": SITEMAP,
                "targets": [{"name": "C", "folder": str(read_only / "a" / "b")}]})
            error_type, message = result["error_type"], result["message"]
    finally:
        read_only.chmod(0o755)
    assert error_type == "write_denied", message
    # The level that refused is named: `a`, the first new folder under the read-only one.
    assert re.search(rf"the folder {re.escape(str(read_only))}/a\b(?!/b)", message), message
    assert picture(read_only) == {}
    assert (chain_dir / "build" / "sitemap.xml").read_bytes() == sitemap


@pytest.mark.parametrize(("require", "spec", "named"), [
    ("url", {}, "no served URL"),
    ("feature_points", {"feature_points": None}, "feature_points is null"),
    ("sitemap", {}, "the node has no `sitemap`"),
])
def test_a_required_check_that_cannot_run_is_config_invalid_before_anything_is_copied(
        side, chain_dir, require, spec, named):
    sitemap = (chain_dir / "build" / "sitemap.xml").read_bytes()
    with pytest.raises(NodeError) as caught:
        deploy(chain_dir, files=FILES, targets=[side.target(), "mirror-b"], require=[require], **spec)
    assert caught.value.error_type == "deploy_config_invalid"
    assert f"`require` lists {require}" in caught.value.message and named in caught.value.message
    assert picture(side.root) == {} and not (chain_dir / "mirror-b").exists()
    assert (chain_dir / "build" / "sitemap.xml").read_bytes() == sitemap


def test_a_source_that_is_a_link_or_outside_the_chain_folder_is_refused(side, chain_dir, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.html").write_text("not for the site")
    (chain_dir / "build" / "leak.html").symlink_to("/etc/hostname")
    (chain_dir / "linked").symlink_to(outside)
    refused = [
        ({"files": ["build/leak.html"]}, {}, "deploy_source_missing",
         "build/leak.html: is a symlink: refused"),
        ({"files": ["linked/secret.html"]}, {}, "deploy_source_missing", "linked is a symlink: refused"),
        ({"files": [str(outside / "secret.html")]}, {}, "deploy_config_invalid",
         "outside the chain's folder"),
        ({"files": ["../outside/secret.html"]}, {}, "deploy_config_invalid", "climbs out"),
        ({"files_from": "data.files"}, {"files": ["build/index.html", "build/leak.html"]},
         "deploy_source_missing", "is a symlink: refused"),
        ({"files_from": "data.files"}, {"pages": []}, "deploy_source_missing", "holds nothing there"),
    ]
    for spec, data, error_type, named in refused:
        with pytest.raises(NodeError) as caught:
            deploy(chain_dir, data, targets=[side.target(), "mirror-b"], **spec)
        message = caught.value.message
        assert (caught.value.error_type, named in message) == (error_type, True), message
    assert picture(side.root) == {} and not (chain_dir / "mirror-b").exists()

    # Files a previous node made, listed in the input slot, deploy like listed ones.
    out = deploy(chain_dir, {"files": ["build/index.html", str(chain_dir / "build/posts/one.html")]},
                 files_from="data.files", targets=[side.target()], feature_points=None)
    assert [r["path"] for r in out["deployed"]] == ["build/index.html", "build/posts/one.html"]
    assert (side.current / "build/posts/one.html").read_text() == PAGES["build/posts/one.html"]
