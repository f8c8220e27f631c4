"""`files_from` in a real chain run: a python node makes pages at run time and lists them in its output
slot; the deploy node reads that list from its input slot and makes a release of those pages on a remote
over SSH (the private sshd) and on a local mirror. `slotrelay run` on a real Prefect server."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from harness.commands import SLOTRELAY
from harness.deploy_site import get, serving
from harness.deploy_sshd import Sshd, running_sshd, sshd_available
from tests.support.chain_specs import node, route
from tests.support.services import require_service

pytestmark = [pytest.mark.prefect_server, pytest.mark.ssh]

BUILD = '''
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(data):
    """Write two pages whose text only this run knows, and list them."""
    nonce = (HERE / "nonce.txt").read_text()
    made = []
    for name in ("a", "b"):
        page = HERE / "out" / "pages" / f"{name}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<!doctype html><title>{name}</title><h1>{nonce} {name}</h1>")
        made.append(page.relative_to(HERE).as_posix())
    return {"files": made}
'''


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    require_service(sshd_available(), "openssh-server is not installed (scripts/bootstrap.sh installs it)")
    with running_sshd() as server:
        yield server


def test_files_a_previous_node_made_are_deployed_from_its_output_slot(prefect_server, sshd, write_chain,
                                                                      tmp_path):
    nonce = uuid.uuid4().hex
    remote = sshd.folder(f"www-{uuid.uuid4().hex[:6]}")
    (tmp_path / "nonce.txt").write_text(nonce)
    chain = write_chain({
        "chain_id": "files-from", "version": "0.1",
        "nodes": [
            node("build", start=True, executor={"kind": "python", "callable": "site:build"}),
            node("deploy", executor={
                "kind": "deploy", "files_from": "data.files", "require": ["url"], "feature_points": None,
                "url_retry": {"backoff_factor": 0.01},
                "targets": [{"name": "C", "ssh": "SITE_C"}, {"name": "B", "folder": "mirror-b"}]}),
        ],
        "routes": [route("build", "deploy")],
        "error_types": [],
    }, modules={"site.py": BUILD})
    with serving(remote / "current") as c_url:
        env = {**os.environ, **sshd.env("SITE_C", remote, url=c_url), "PREFECT_API_URL": prefect_server}
        done = subprocess.run([SLOTRELAY, "run", str(chain), "--json"], check=False, capture_output=True,
                              text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        pages = {f"out/pages/{name}.html": get(c_url + f"out/pages/{name}.html") for name in ("a", "b")}

    summary = json.loads(done.stdout)
    assert {n: summary["nodes"][n]["state"] for n in ("build", "deploy")} == {"build": "Completed",
                                                                              "deploy": "Completed"}
    for relative, body in pages.items():
        assert isinstance(body, bytes) and nonce.encode() in body
        assert (tmp_path / "mirror-b" / "current" / relative).read_bytes() == body
    output = json.loads((tmp_path / "slots" / "deploy_output.json").read_text())["data"]
    assert [(r["target_name"], r["path"]) for r in output["deployed"]] == [
        ("C", "out/pages/a.html"), ("C", "out/pages/b.html"),
        ("B", "out/pages/a.html"), ("B", "out/pages/b.html")]
    assert output["input"] == {"files": list(pages)}
