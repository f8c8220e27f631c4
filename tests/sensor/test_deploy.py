"""The `deploy` executor on local folder targets against a real HTTP server on 127.0.0.1 (SSH, and the
releases on both kinds: tests/chain)."""

from __future__ import annotations

import functools
import hashlib
import logging
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from slotrelay.chain.errors import NodeError
from slotrelay.chain.executors.deploy import folder as deploy_folder
from slotrelay.chain.executors.deploy.node import run_deploy
from slotrelay.chain.models import DeployExecutor


class _QuietHandler(SimpleHTTPRequestHandler):
    failures_left = 0
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        if type(self).failures_left > 0:
            type(self).failures_left -= 1
            self.send_error(503, "warming up")
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str, type[_QuietHandler]]]:
    """A folder served over HTTP on 127.0.0.1 (the seed's C side), with its URL and handler class."""
    root = tmp_path / "served"
    root.mkdir()
    handler = type("Handler", (_QuietHandler,), {"failures_left": 0, "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}/site", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A chain folder with two files to deploy, one in a subfolder."""
    base = tmp_path / "chain"
    (base / "build" / "posts").mkdir(parents=True)
    (base / "build" / "index.html").write_text("<h1>slotrelay</h1>\n")
    (base / "build" / "posts" / "a.html").write_bytes(b"\x00binary\xffpost")
    return base


def in_chain(folder: Path) -> SimpleNamespace:
    """The part of an ExecutionContext the deploy executor reads: the chain's folder, the engine's logger."""
    return SimpleNamespace(chain=SimpleNamespace(base_dir=folder),
                           logger=logging.getLogger("slotrelay.engine"))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_deploys_to_every_target_verifies_and_checks_the_url(site, served):
    root, url, handler = served
    spec = {
        "kind": "deploy",
        "files": ["build/index.html", "build/posts/a.html"],
        "targets": [{"name": "C", "folder": str(root / "site"), "base_url": f"{url}/current"}, "mirror-b"],
        "url_retry": {"backoff_factor": 0.01},
    }
    out = run_deploy(DeployExecutor(**spec), {"from": "upstream"}, in_chain(site))
    url = f"{url}/current"

    for target in (root / "site" / "current", site / "mirror-b" / "current"):
        assert (target / "build/index.html").read_text() == "<h1>slotrelay</h1>\n"
        assert (target / "build/posts/a.html").read_bytes() == b"\x00binary\xffpost"
        assert not list(target.rglob("*.tmp"))
    assert len(out["deployed"]) == 4
    assert {d["sha256"] for d in out["deployed"]} == {_sha(b"<h1>slotrelay</h1>\n"),
                                                      _sha(b"\x00binary\xffpost")}
    assert out["checked_urls"] == [f"{url}/build/index.html", f"{url}/build/posts/a.html"]
    assert [(d["target_name"], d["url_status"]) for d in out["deployed"]] == [("C", 200), ("C", 200),
                                                                             ("mirror-b", None),
                                                                             ("mirror-b", None)]
    assert {k: out["targets"]["C"][k] for k in ("kind", "location", "base_url", "checked")} == {
        "kind": "folder", "location": str(root / "site"), "base_url": url, "checked": "after_switch"}
    # 紧追-L3 with the default points on both pages: served and Dev agree.
    assert [(p["page"], p["point"], p["served"], p["equal"]) for p in out["feature_points"][:3]] == [
        ("build/index.html", "title", None, True), ("build/index.html", "css h1", "slotrelay", True),
        ("build/index.html", 'css meta[name="description"] @content', None, True),
    ]
    assert len(out["feature_points"]) == 6 and all(p["target"] == "C" for p in out["feature_points"])
    assert handler.requests == ["/site/current/build/index.html", "/site/current/build/posts/a.html"]
    assert out["input"] == {"from": "upstream"}


def test_a_missing_source_is_named(site, served):
    spec = {"kind": "deploy", "files": ["build/nope.html"], "targets": ["out"]}
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {}, in_chain(site))
    assert caught.value.error_type == "deploy_source_missing"
    assert "build/nope.html" in caught.value.message
    assert not (site / "out").exists()


def test_a_url_that_does_not_serve_the_file_fails_after_the_copy(site, served):
    _root, url, _handler = served
    spec = {"kind": "deploy", "files": ["build/index.html"],
            "targets": [{"folder": "only-b", "base_url": url}]}
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {}, in_chain(site))
    assert caught.value.error_type == "deploy_url_unreachable"
    assert "404" in caught.value.message
    # Switched back: the target has no live release, as before the deploy.
    assert not (site / "only-b").exists()


def test_a_stale_served_copy_is_a_url_mismatch(site, served):
    # The seed's failure: the served side (C) still has yesterday's file while the mirror got the new one.
    root, url, _handler = served
    (root / "site" / "build").mkdir(parents=True)
    (root / "site" / "build" / "index.html").write_text("<h1>old</h1>\n")
    spec = {"kind": "deploy", "files": ["build/index.html"],
            "targets": [{"folder": "mirror-b", "base_url": url}]}
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {}, in_chain(site))
    assert caught.value.error_type == "deploy_url_mismatch"
    assert "target mirror-b" in caught.value.message


def test_the_url_check_retries_a_warming_server(site, served):
    root, url, handler = served
    handler.failures_left = 2
    spec = {"kind": "deploy", "files": ["build/index.html"], "url_retry": {"backoff_factor": 0.01},
            "targets": [{"folder": str(root / "site"), "base_url": f"{url}/current"}]}
    out = run_deploy(DeployExecutor(**spec), {}, in_chain(site))
    assert out["checked_urls"] == [f"{url}/current/build/index.html"]
    assert len(handler.requests) == 3

    handler.failures_left = 3
    handler.requests.clear()
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {}, in_chain(site))
    assert caught.value.error_type == "deploy_url_unreachable"
    assert len(handler.requests) == 3


def test_a_truncated_copy_is_a_hash_mismatch(site, monkeypatch):
    # A copy that loses bytes on the way (a full disk, a flaky mount): simulated by a short copy.
    def short_copy(source, target, *_):
        target.write(source.read()[:-3])

    monkeypatch.setattr(shutil, "copyfileobj", short_copy)
    spec = {"kind": "deploy", "files": ["build/index.html"], "targets": ["mirror-b"]}
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {}, in_chain(site))
    assert caught.value.error_type == "deploy_hash_mismatch"
    # Nothing half written under the final name, and no temporary copy left.
    assert not list((site / "mirror-b").rglob("*.*"))


def test_an_unwritable_target_is_named(site):
    (site / "blocked").write_text("a file where a folder should be")
    spec = {"kind": "deploy", "files": ["build/index.html"], "targets": ["blocked"]}
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {}, in_chain(site))
    assert caught.value.error_type == "deploy_target_unwritable"


def test_a_copy_that_cannot_be_read_back_is_named(site, monkeypatch):
    # The target's disk fails on the read that proves the copy: a named node error, not a bare OSError.
    real = deploy_folder.sha256_of

    def failing_read(handle):
        if "mirror-b" in handle.name:
            raise OSError(5, "Input/output error")
        return real(handle)

    monkeypatch.setattr(deploy_folder, "sha256_of", failing_read)
    spec = {"kind": "deploy", "files": ["build/index.html"], "targets": ["mirror-b"]}
    with pytest.raises(NodeError) as caught:
        run_deploy(DeployExecutor(**spec), {}, in_chain(site))
    assert caught.value.error_type == "deploy_target_unwritable"
    assert "mirror-b/releases/" in caught.value.message and "/build/index.html" in caught.value.message
