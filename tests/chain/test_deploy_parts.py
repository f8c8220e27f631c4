"""The deploy node's parts that need no server: the spec, a remote's settings, the sitemap, feature points."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from slotrelay.chain.deploy import run_deploy
from slotrelay.chain.deploy_ssh import RemoteSettings
from slotrelay.chain.errors import NodeError
from slotrelay.chain.feature_points import PageView, read_points
from slotrelay.chain.models import CssPoint, DeployExecutor, HeaderPoint, TitlePoint
from slotrelay.chain.sitemap import SitemapInvalid, listed_locs, update_sitemap

URLSET = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"targets": [{"name": "C"}]}, "needs `folder`, `ssh`, or both"),
        ({"targets": [{"ssh": "SITE_C", "base_url": "http://x/"}]}, "comes from <ssh>_URL"),
        ({"targets": [{"ssh": "site-c"}]}, "should match pattern"),
        ({"targets": ["out", {"folder": "out"}]}, "out used twice"),
        ({"feature_points": {"points": [{"kind": "header", "name": "ETag"}]}},
         "a header point needs `dev_url`"),
        ({"feature_points": {"points": [{"kind": "css", "selector": "h1[["}]}}, "not a CSS selector"),
        ({"check_url": "http://x/"}, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_spec_is_refused_naming_what_is_wrong(spec, expected):
    document = {"kind": "deploy", "files": ["a.html"], "targets": ["out"], **spec}
    with pytest.raises(ValidationError) as refused:
        DeployExecutor(**document)
    assert expected in str(refused.value)


def test_a_remote_is_read_from_the_environment_and_every_gap_is_named(tmp_path):
    (tmp_path / "key").write_text("not checked here")
    env = {"C_HOST": "deploy.example", "C_USER": "web", "C_KEY": "key", "C_KNOWN_HOSTS": "none",
           "C_PATH": "/srv/www/"}
    settings = RemoteSettings.from_env("C", env, base_dir=tmp_path)
    assert (settings.port, settings.key_path, settings.known_hosts, settings.path) == (22, tmp_path / "key",
                                                                                       None, "/srv/www")
    assert settings.location == "ssh://web@deploy.example:22/srv/www"
    assert RemoteSettings.from_env("C", {}, base_dir=tmp_path) is None
    for change, named in [({"C_USER": ""}, "C_USER is not"), ({"C_KEY": "nope"}, "C_KEY=nope: no such file"),
                          ({"C_PORT": "70000"}, "C_PORT='70000'"),
                          ({"C_KNOWN_HOSTS": "missing"}, "C_KNOWN_HOSTS"),
                          ({"C_URL": "ftp://x"}, "C_URL")]:
        with pytest.raises(NodeError) as caught:
            RemoteSettings.from_env("C", {**env, **change}, base_dir=tmp_path)
        assert caught.value.error_type == "deploy_config_invalid" and named in caught.value.message


def test_a_remote_without_a_host_falls_back_to_its_folder_or_is_named(tmp_path, monkeypatch):
    (tmp_path / "page.html").write_text("<title>t</title>")
    monkeypatch.delenv("NOWHERE_HOST", raising=False)
    context = SimpleNamespace(chain=SimpleNamespace(base_dir=tmp_path))
    spec = {"kind": "deploy", "files": ["page.html"],
            "targets": [{"name": "C", "ssh": "NOWHERE", "folder": "site"}]}
    out = run_deploy(DeployExecutor(**spec), {}, context)
    assert out["targets"]["C"]["kind"] == "folder" and (tmp_path / "site" / "page.html").is_file()
    spec["targets"] = [{"name": "C", "ssh": "NOWHERE"}]
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {}, context)
    assert caught.value.error_type == "deploy_config_invalid"
    assert "NOWHERE_HOST is not set" in caught.value.message


def test_a_file_that_climbs_out_of_its_folder_is_refused(tmp_path):
    (tmp_path / "chain").mkdir()
    (tmp_path / "secret.html").write_text("x")
    spec = {"kind": "deploy", "files": ["../secret.html"], "targets": ["site"]}
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {},
                   SimpleNamespace(chain=SimpleNamespace(base_dir=tmp_path / "chain")))
    assert caught.value.error_type == "deploy_config_invalid"


def test_a_new_sitemap_lists_each_page_once_with_lastmod():
    when = datetime(2026, 12, 1, 6, 30, tzinfo=UTC)
    update = update_sitemap(None, ["https://e.org/a.html", "https://e.org/b.html", "https://e.org/a.html"],
                            lastmod=when)
    assert update.added == ["https://e.org/a.html", "https://e.org/b.html"] and update.updated == []
    assert update.content.startswith(b"<?xml version='1.0' encoding='UTF-8'?>")
    assert listed_locs(update.content) == ["https://e.org/a.html", "https://e.org/b.html"]
    assert update.content.count(b"<lastmod>2026-12-01T06:30:00+00:00</lastmod>") == 2


def test_an_existing_entry_gets_its_lastmod_after_loc_and_keeps_the_rest():
    existing = f'{URLSET}<url><loc>https://e.org/a.html</loc><priority>0.8</priority></url></urlset>'.encode()
    update = update_sitemap(existing, ["https://e.org/a.html"], lastmod=datetime(2026, 1, 2, tzinfo=UTC))
    assert update.updated == ["https://e.org/a.html"]
    text = update.content.decode()
    assert text.index("<loc>") < text.index("<lastmod>") < text.index("<priority>0.8</priority>")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"<urlset><url>", "not well-formed XML"),
        (b"<urlset><url><loc>x</loc></url></urlset>", "not <urlset> in the namespace"),
        (f"{URLSET}<url><lastmod>2020-01-01</lastmod></url></urlset>".encode(), "has no <loc>"),
        (f"{URLSET}<url><loc>x</loc></url><url><loc>x</loc></url></urlset>".encode(), "listed twice"),
    ],
)
def test_a_sitemap_that_cannot_be_kept_is_refused(content, reason):
    with pytest.raises(SitemapInvalid, match=reason):
        update_sitemap(content, ["https://e.org/a.html"], lastmod=datetime.now(UTC))


def test_an_invalid_sitemap_fails_the_node_before_anything_is_copied(tmp_path):
    (tmp_path / "index.html").write_text("<title>t</title>")
    (tmp_path / "sitemap.xml").write_text("<urlset>")
    spec = {"kind": "deploy", "files": ["index.html"], "targets": ["b"], "sitemap": {"site_url": "https://e.org/"}}
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {}, SimpleNamespace(chain=SimpleNamespace(base_dir=tmp_path)))
    assert caught.value.error_type == "deploy_sitemap_invalid" and "sitemap.xml" in caught.value.message
    assert not (tmp_path / "b").exists() and (tmp_path / "sitemap.xml").read_text() == "<urlset>"


def test_feature_points_read_title_selector_text_attribute_and_header():
    page = PageView(
        body=b'<html lang="en"><head><title> Hello\n  world </title><meta name="description" '
             b'content="d"></head>'
             b'<body><h1 class="x">Big <em>news</em></h1></body></html>',
        headers={"Content-Type": "text/html"},
    )
    points = [TitlePoint(kind="title"), CssPoint(kind="css", selector="h1.x"),
              CssPoint(kind="css", selector="html", attribute="lang"), CssPoint(kind="css", selector="h2"),
              HeaderPoint(kind="header", name="Content-Type")]
    assert read_points(page, points) == ["Hello world", "Big news", "en", None, "text/html"]
    with pytest.raises(ValueError, match="has no headers"):
        read_points(PageView(body=page.body, headers=None), points[-1:])
