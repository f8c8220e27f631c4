"""The deploy node against a real OpenSSH server on 127.0.0.1 (the C side) and a local folder (the B mirror).

The remote folder's `current/` is served over HTTP on 127.0.0.1 as the C site; a second HTTP server
plays the Dev site where a test compares with it. A deploy that fails before anything is staged
(unreachable host, refused key, unknown host key) writes nothing on any target and leaves the Dev
sitemap as it was. The release behaviour on both target kinds: test_deploy_releases.py.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.deploy_site import in_chain, picture, serving
from harness.deploy_sshd import Sshd, new_key, running_sshd, sshd_available
from harness.ports import free_port
from slotrelay.chain import load_chain
from slotrelay.chain.conditions import evaluate_condition
from slotrelay.chain.errors import NodeError
from slotrelay.chain.executors.deploy.node import run_deploy
from slotrelay.chain.executors.deploy.sitemap import listed_locs
from slotrelay.chain.models import DeployExecutor
from tests.support.chain_specs import EXAMPLE
from tests.support.services import require_service

pytestmark = pytest.mark.ssh

PAGES = {
    "build/index.html": "<!doctype html><title>Today</title><h1>Front page</h1>"
                        '<meta name="description" content="the news">',
    "build/posts/one.html": "<!doctype html><title>One</title><h1>First post</h1>",
    "build/posts/two.html": "<!doctype html><title>Two</title><h1>Second post</h1>",
}
SITE = "https://example.org/"
SITEMAP = {"path": "build/sitemap.xml", "site_url": SITE}


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    require_service(sshd_available(), "openssh-server is not installed (scripts/bootstrap.sh installs it)")
    with running_sshd() as server:
        yield server


@pytest.fixture
def chain_dir(tmp_path: Path) -> Path:
    """A chain folder holding the built pages (the Dev copy) and a stylesheet."""
    for relative, text in PAGES.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    (tmp_path / "build" / "site.css").write_bytes(b"h1 { color: #333 }\n")
    return tmp_path


def deploy(folder: Path, **spec: object) -> dict:
    document = {"kind": "deploy", "files": [*PAGES, "build/site.css"], "url_retry": {"backoff_factor": 0.01}}
    document.update(spec)
    return run_deploy(DeployExecutor(**document), {"from": "publish"}, in_chain(folder))


def files_under(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_files_and_sitemap_land_on_remote_c_and_local_b_all_proven(sshd, chain_dir):
    remote = sshd.folder(f"www-{uuid.uuid4().hex[:6]}")
    with serving(remote / "current") as c_url, serving(chain_dir) as dev_url:
        # The remote's whereabouts come from the chain folder's .env, never from the chain.
        (chain_dir / ".env").write_text(
            "".join(f"{k}={v}\n" for k, v in sshd.env("SITE_C", remote, url=c_url).items()))
        out = deploy(
            chain_dir,
            targets=[{"name": "C", "ssh": "SITE_C"}, {"name": "B", "folder": "mirror-b"}],
            sitemap={"path": "build/sitemap.xml", "site_url": SITE},
            feature_points={"dev_url": dev_url, "points": [
                {"kind": "title"}, {"kind": "css", "selector": "h1"},
                {"kind": "header", "name": "Content-Type"}]},
        )

    expected = {**{p: t.encode() for p, t in PAGES.items()}, "build/site.css": b"h1 { color: #333 }\n"}
    sitemap = (chain_dir / "build" / "sitemap.xml").read_bytes()
    for target in (remote, chain_dir / "mirror-b"):
        assert files_under(target / "current") == {**expected, "build/sitemap.xml": sitemap}
    assert listed_locs(sitemap) == [SITE + p for p in PAGES]
    assert sitemap.count(b"<lastmod>") == 3

    assert out["targets"]["C"]["kind"] == "ssh" and out["targets"]["C"]["base_url"] == c_url
    assert out["targets"]["C"]["location"] == f"ssh://{sshd.user}@127.0.0.1:{sshd.port}{remote}"
    assert {k: out["targets"]["B"][k] for k in ("kind", "location", "base_url", "checked")} == {
        "kind": "folder", "location": str(chain_dir / "mirror-b"), "base_url": None, "checked": None}
    rows = {(r["target_name"], r["path"]): r for r in out["deployed"]}
    assert len(rows) == 10
    assert rows[("C", "build/sitemap.xml")]["proof"].startswith("sha256sum on the remote host")
    assert rows[("C", "build/posts/one.html")]["target"].endswith(
        f"{remote}/releases/{out['release']}/build/posts/one.html")
    assert {r["url_status"] for k, r in rows.items() if k[0] == "C"} == {200}
    assert {r["url_status"] for k, r in rows.items() if k[0] == "B"} == {None}
    assert out["checked_urls"] == [c_url + p for p in [*PAGES, "build/site.css", "build/sitemap.xml"]]
    assert out["sitemap"]["added"] == [SITE + p for p in PAGES] and out["sitemap"]["updated"] == []
    assert len(out["feature_points"]) == 9 and all(p["equal"] for p in out["feature_points"])
    assert {"page": "build/index.html", "point": "title", "served": "Today", "dev": "Today"}.items() <= \
        out["feature_points"][0].items()
    assert out["feature_points"][2]["served"] == "text/html"
    assert out["input"] == {"from": "publish"}


@pytest.fixture
def dev_sitemap(chain_dir: Path) -> bytes:
    """A Dev sitemap that lists one page already; a failed deploy must leave it byte for byte."""
    content = (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               f"<url><loc>{SITE}build/index.html</loc><lastmod>2020-01-01</lastmod></url></urlset>\n").encode()
    (chain_dir / "build" / "sitemap.xml").write_bytes(content)
    return content


def assert_untouched(remote: Path, chain_dir: Path, dev_sitemap: bytes) -> None:
    assert picture(remote) == {} and not (chain_dir / "mirror-b").exists()
    assert (chain_dir / "build" / "sitemap.xml").read_bytes() == dev_sitemap


def test_an_unreachable_host_is_named_and_nothing_is_written(sshd, chain_dir, dev_sitemap, monkeypatch):
    remote = sshd.folder(f"www-{uuid.uuid4().hex[:6]}")
    monkeypatch.setenv("SITE_C_PORT", str(free_port()))
    for key, value in sshd.env("SITE_C", remote).items():
        if key != "SITE_C_PORT":
            monkeypatch.setenv(key, value)
    with pytest.raises(NodeError) as caught:
        deploy(chain_dir, targets=[{"name": "C", "ssh": "SITE_C"}, {"name": "B", "folder": "mirror-b"}],
               sitemap=SITEMAP)
    assert caught.value.error_type == "deploy_host_unreachable"
    assert "cannot reach the host" in caught.value.message and "nothing went live" in caught.value.message
    assert_untouched(remote, chain_dir, dev_sitemap)


def test_a_wrong_key_is_an_authentication_refusal(sshd, chain_dir, dev_sitemap, monkeypatch):
    remote = sshd.folder(f"www-{uuid.uuid4().hex[:6]}")
    new_key(chain_dir / "stranger_key")
    for key, value in sshd.env("SITE_C", remote, key=chain_dir / "stranger_key").items():
        monkeypatch.setenv(key, value)
    with pytest.raises(NodeError) as caught:
        deploy(chain_dir, targets=[{"name": "C", "ssh": "SITE_C"}, {"name": "B", "folder": "mirror-b"}],
               sitemap=SITEMAP)
    assert caught.value.error_type == "deploy_auth_refused"
    assert "stranger_key" in caught.value.message
    assert_untouched(remote, chain_dir, dev_sitemap)


def test_an_unknown_host_key_is_refused(sshd, chain_dir, dev_sitemap, monkeypatch):
    remote = sshd.folder(f"www-{uuid.uuid4().hex[:6]}")
    impostor = new_key(chain_dir / "impostor_host_key")
    (chain_dir / "known_hosts").write_bytes(
        f"[127.0.0.1]:{sshd.port} ".encode() + impostor)
    for key, value in sshd.env("SITE_C", remote).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SITE_C_KNOWN_HOSTS", "known_hosts")
    with pytest.raises(NodeError) as caught:
        deploy(chain_dir, targets=[{"name": "C", "ssh": "SITE_C"}, {"name": "B", "folder": "mirror-b"}],
               sitemap=SITEMAP)
    assert caught.value.error_type == "deploy_host_key_unknown"
    assert_untouched(remote, chain_dir, dev_sitemap)


def test_a_mirror_that_fails_after_c_was_staged_leaves_c_as_it_was(sshd, chain_dir, dev_sitemap, monkeypatch):
    # B fails while C's release is already on the remote: C's release is removed, nothing went live.
    remote = sshd.folder(f"www-{uuid.uuid4().hex[:6]}")
    for key, value in sshd.env("SITE_C", remote).items():
        monkeypatch.setenv(key, value)
    (chain_dir / "blocked").write_text("a file where the mirror's folder should be")
    with pytest.raises(NodeError) as caught:
        deploy(chain_dir, targets=[{"name": "C", "ssh": "SITE_C"}, {"name": "B", "folder": "blocked/b"}],
               sitemap=SITEMAP)
    assert caught.value.error_type == "deploy_target_unwritable"
    assert "nothing went live" in caught.value.message and "hash passed on C" in caught.value.message
    assert picture(remote) == {}
    assert (chain_dir / "build" / "sitemap.xml").read_bytes() == dev_sitemap


def test_a_sitemap_that_already_lists_a_page_keeps_one_entry(sshd, chain_dir, monkeypatch):
    (chain_dir / "build" / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{SITE}build/index.html</loc><lastmod>2020-01-01</lastmod><changefreq>daily</changefreq></url>"
        f"<url><loc>{SITE}about.html</loc></url></urlset>"
    )
    remote = sshd.folder(f"www-{uuid.uuid4().hex[:6]}")
    with serving(remote / "current") as c_url:
        for key, value in sshd.env("SITE_C", remote, url=c_url).items():
            monkeypatch.setenv(key, value)
        out = deploy(chain_dir, targets=[{"name": "C", "ssh": "SITE_C"}],
                     files=["build/index.html", "build/posts/one.html"],
                     sitemap={"path": "build/sitemap.xml", "site_url": SITE})
        again = deploy(chain_dir, targets=[{"name": "C", "ssh": "SITE_C"}], files=["build/index.html"],
                       sitemap={"path": "build/sitemap.xml", "site_url": SITE})

    served = (remote / "current" / "build" / "sitemap.xml").read_bytes()
    assert served == (chain_dir / "build" / "sitemap.xml").read_bytes()
    assert listed_locs(served) == [f"{SITE}build/index.html", f"{SITE}about.html",
                                   f"{SITE}build/posts/one.html"]
    assert out["sitemap"]["updated"] == [f"{SITE}build/index.html"]
    assert out["sitemap"]["added"] == [f"{SITE}build/posts/one.html"]
    assert again["sitemap"]["added"] == [] and again["sitemap"]["updated"] == [f"{SITE}build/index.html"]
    assert b"2020-01-01" not in served and b"<changefreq>daily</changefreq>" in served


def test_the_example_deploys_c_to_the_remote_its_env_names_and_to_a_folder_otherwise(sshd, tmp_path,
                                                                                     monkeypatch):
    example = tmp_path / "phase2"
    shutil.copytree(EXAMPLE, example,
                    ignore=shutil.ignore_patterns("slots", "work", "logs", "alerts", ".env"))
    (example / "work" / "published").mkdir(parents=True)
    (example / "work" / "published" / "index.md").write_text("# Today\n- one\n")
    published = {"files": ["work/published/index.md"]}
    chain = load_chain(example / "node_chain.json")
    executor = chain.node("exec-deploy").executor
    to_check_site = next(r for r in chain.routes if r.route_id == "route-deploy-to-check-site")
    remote = sshd.folder(f"www-{uuid.uuid4().hex[:6]}")
    for key in sshd.env("PHASE2_C", remote):
        monkeypatch.delenv(key, raising=False)

    local = run_deploy(executor, published, in_chain(example))
    assert {k: local["targets"]["C"][k] for k in ("kind", "location", "base_url")} == {
        "kind": "folder", "location": str(example / "work" / "site"), "base_url": None}
    assert (example / "work" / "site" / "current" / "work" / "published" / "sitemap.xml").read_bytes() == \
        (example / "work" / "published" / "sitemap.xml").read_bytes()
    assert evaluate_condition(to_check_site.condition, {"data": local}, chain=chain).ok

    with serving(remote / "current") as c_url:
        (example / ".env").write_text(
            "".join(f"{k}={v}\n" for k, v in sshd.env("PHASE2_C", remote, url=c_url).items()))
        out = run_deploy(executor, published, in_chain(example))
    assert out["targets"]["C"]["kind"] == "ssh"
    assert (remote / "current" / "work" / "published" / "index.md").read_text() == "# Today\n- one\n"
    assert out["checked_urls"] == [c_url + "work/published/index.md", c_url + "work/published/sitemap.xml"]
    # The deploy node checked the remote C itself: the local site check does not run.
    assert not evaluate_condition(to_check_site.condition, {"data": out}, chain=chain).ok
