"""The deploy node's parts that need no server: the spec, a remote's settings, release names, the sitemap,
feature points, and what a deploy imports."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from harness.deploy_site import in_chain
from slotrelay.chain.errors import NodeError
from slotrelay.chain.executors.deploy.feature_points import PageView, read_points
from slotrelay.chain.executors.deploy.node import run_deploy
from slotrelay.chain.executors.deploy.sitemap import SitemapInvalid, listed_locs, update_sitemap
from slotrelay.chain.executors.deploy.ssh import RemoteSettings
from slotrelay.chain.models import CssPoint, DeployExecutor, HeaderPoint, TitlePoint
from tests.support.chain_specs import ROOT

URLSET = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"targets": [{"name": "C"}]}, "needs `folder`, `ssh`, or both"),
        ({"targets": [{"ssh": "SITE_C", "base_url": "http://x/"}]},
         "come from <ssh>_URL and <ssh>_PREVIEW_URL"),
        ({"targets": [{"ssh": "SITE_C", "preview_url": "http://x/"}]}, "belong to a folder target"),
        ({"files": []}, "a deploy needs `files`, `files_from`, or both"),
        ({"files_from": "files"}, "should match pattern"),
        ({"require": ["url", "url"]}, "lists a check twice"),
        ({"require": ["speed"]}, "'url', 'feature_points' or 'sitemap'"),
        ({"keep_releases": 0}, "greater than or equal to 1"),
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
    context = in_chain(tmp_path)
    spec = {"kind": "deploy", "files": ["page.html"],
            "targets": [{"name": "C", "ssh": "NOWHERE", "folder": "site"}]}
    out = run_deploy(DeployExecutor(**spec), {}, context)
    assert out["targets"]["C"]["kind"] == "folder" and (tmp_path / "site" / "current" / "page.html").is_file()
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
        run_deploy(DeployExecutor(**spec), {}, in_chain(tmp_path / "chain"))
    assert caught.value.error_type == "deploy_config_invalid"


def test_release_ids_sort_by_time_and_current_names_only_a_release():
    from slotrelay.chain.executors.deploy.release import RELEASE_ID, new_release_id, release_of_link

    earlier = new_release_id(datetime(2026, 12, 4, 10, 15, 0, 123456, tzinfo=UTC))
    later = new_release_id(datetime(2026, 12, 4, 11, 0, 0, tzinfo=UTC))
    assert earlier.startswith("20261204T101500.123Z-") and RELEASE_ID.fullmatch(earlier) and earlier < later
    assert release_of_link(f"releases/{earlier}") == earlier == release_of_link(f"releases/{earlier}/")
    for foreign in (f"/var/www/releases/{earlier}", f"../releases/{earlier}", "releases/latest", earlier):
        assert release_of_link(foreign) is None


def test_pruning_keeps_the_newest_and_the_live_one_and_leaves_other_folders_alone():
    from slotrelay.chain.executors.deploy.release import new_release_id, to_prune

    names = [new_release_id(datetime(2026, 1, day, tzinfo=UTC)) for day in range(1, 6)]
    assert to_prune([*names, "shared", "uploads"], keep=2, live=names[-1]) == names[:3]
    assert to_prune(names, keep=1, live=names[-1]) == names[:4]
    assert to_prune(names, keep=10, live=names[-1]) == []


def test_a_deploy_module_loads_asyncssh_requests_and_bs4_only_when_a_deploy_needs_them():
    # The flow, the node task and the deploy executor itself load without them: a deploy to a folder
    # without a served URL, and every chain without a deploy node, never pays for their import.
    probe = ("import sys, flows.chain, tasks.node, slotrelay.chain.executors.deploy.node\n"
             "print(sorted(m for m in ('asyncssh', 'requests', 'bs4') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize(("target", "env", "loaded"), [
    ({"name": "C", "ssh": "SITE_C", "folder": "site"}, {"SITE_C_HOST": "deploy.example"}, True),
    ({"name": "C", "ssh": "SITE_C", "folder": "site"}, {}, False),
    ({"name": "C", "folder": "site"}, {"SITE_C_HOST": "deploy.example"}, False),
])
def test_a_run_that_deploys_to_a_remote_starts_loading_the_ssh_client_at_its_preflight(
        write_chain, target, env, loaded):
    # The run's preflight (before the flow starts) begins the import in the background: it overlaps with
    # the run's start instead of sitting in the deploy task. A chain that deploys to no remote loads nothing.
    chain = write_chain({"chain_id": "c", "version": "0.1", "error_types": [], "routes": [], "nodes": [
        {"node_id": "deploy", "input_slot": None, "output_slot": {"slot_id": "d", "path": "slots/d.json"},
         "executor": {"kind": "deploy", "files": ["page.html"], "targets": [target]}}]})
    probe = ("import sys, threading\n"
             "from slotrelay.chain import load_chain\n"
             "from slotrelay.chain.preflight import preflight\n"
             "preflight(load_chain(sys.argv[1]))\n"
             "preloads = [t for t in threading.enumerate() if t.name == 'slotrelay-deploy-preload']\n"
             "for thread in preloads:\n"
             "    thread.join()\n"
             "print(len(preloads), 'asyncssh' in sys.modules)")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SITE_C_")} | env
    done = subprocess.run([sys.executable, "-c", probe, str(chain)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True, env=environment)
    assert done.stdout.split() == (["1", "True"] if loaded else ["0", "False"]), done.stdout + done.stderr


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
        run_deploy(DeployExecutor(**spec), {}, in_chain(tmp_path))
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
