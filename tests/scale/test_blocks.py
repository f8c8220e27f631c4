"""The Blocks: registered with `prefect block register -m blocks` on the real test server, their schemas
carry what the UI's form shows, and the flows use them when given (the chain's folders here; the
sandbox policy in tests/pen/test_remote_sandbox.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from pydantic import ValidationError

from blocks import ChainFolders, SandboxPolicy
from harness.chains import small_chain
from slotrelay.sandbox import SandboxRequestError
from tests.support.beyond_page import REGISTER
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
SLUGS = {
    "slotrelay-code-model": {"base_url", "model", "api_key"},
    "slotrelay-sandbox-policy": {"daemon_url", "tls_ca_cert", "tls_client_cert", "tls_client_key",
                                 "image_tags",
                                 "default_limits", "egress_allow", "pool_size"},
    "slotrelay-chain-folders": {"slots_root", "alerts", "logs"},
}


async def _schemas() -> dict[str, dict]:
    async with get_client() as client:
        found = {}
        for slug in SLUGS:
            block_type = await client.read_block_type_by_slug(slug)
            schemas = await client.read_block_schemas()
            found[slug] = next(s.fields for s in schemas if s.block_type_id == block_type.id)
        return found


@pytest.mark.prefect_server
def test_block_register_puts_the_three_block_types_on_the_server(prefect_server) -> None:
    done = subprocess.run(
        [sys.executable, "-m", *REGISTER.split()],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Successfully registered 3 blocks" in done.stdout, done.stdout
    schemas = asyncio.run(_schemas())
    for slug, fields in SLUGS.items():
        properties = schemas[slug]["properties"]
        assert fields <= set(properties), (slug, set(properties))
        # The UI's form shows each field's description.
        assert all(properties[name].get("description") for name in fields), slug


@pytest.mark.prefect_server
def test_a_saved_sandbox_policy_loads_as_the_sandbox_settings(prefect_server, tmp_path: Path) -> None:
    SandboxPolicy(
        image_tags={"python": "registry.example/py:1"}, default_limits={"timeout_ms": 5000},
        egress_allow=["api.example.org"], pool_size=3,
    ).save("policy-test", overwrite=True)  # fmt: skip
    settings = SandboxPolicy.load("policy-test").settings()
    assert settings.endpoint is None and settings.pool_size == 3
    assert settings.image_tags == (("python", "registry.example/py:1"),)
    assert settings.with_defaults({"memory_mb": 128}) == {"timeout_ms": 5000, "memory_mb": 128}
    assert settings.with_defaults({"timeout_ms": 100}) == {"timeout_ms": 100}
    with pytest.raises(SandboxRequestError, match="tls_ca_cert, tls_client_cert, tls_client_key"):
        SandboxPolicy(daemon_url="tcp://build-host:2375").settings()
    with pytest.raises(ValidationError, match="not an absolute path"):
        ChainFolders(alerts="alerts")


def test_the_policy_egress_allow_list_refuses_hosts_outside_it() -> None:
    from slotrelay.sandbox import SandboxLimits, SandboxSettings

    settings = SandboxSettings(egress_allow=("api.example.org", "*.pypi.org", "cache.local:8080"))
    asked = SandboxLimits(network={"allow": ["api.example.org", "files.pypi.org", "cache.local:8080",
                                             "cache.local", "evil.example.com", "*.example.org"]})
    refused = [v.detail.split(" ")[1] for v in settings.egress_refusals(asked)]
    assert refused == ["cache.local", "evil.example.com", "*.example.org"]
    assert SandboxSettings().egress_refusals(asked) == []


@pytest.mark.prefect_server
def test_the_chain_flow_puts_alerts_and_logs_where_its_folders_block_says(prefect_server,
                                                                          tmp_path: Path) -> None:
    from flows.chain import run_chain

    chain = small_chain(tmp_path / "chain")
    slots, logs, alerts = tmp_path / "slots", tmp_path / "logs-elsewhere", tmp_path / "alerts-elsewhere"
    ChainFolders(slots_root=str(slots), alerts=str(alerts), logs=str(logs)).save("folders-test",
                                                                                 overwrite=True)
    summary = run_chain(str(chain), folders_block="folders-test")
    assert summary["state"] == "COMPLETED"
    assert json.loads((slots / "slots" / "double_output.json").read_text())["data"] == {"doubled": [2, 4, 6]}
    assert (logs / "runs" / f"{summary['flow_run_id']}.json").is_file()
    assert "double" in (logs / "engine.log").read_text()
    assert alerts.is_dir()
    assert not (chain.parent / "logs").exists() and not (slots / "logs").exists() and not (
        slots / "alerts").exists()


@pytest.mark.prefect_server
def test_watch_names_its_blocks_on_the_deployments_and_watches_the_folders_block(prefect_server,
                                                                                 tmp_path: Path) -> None:
    from deployments.pool import pool_chain_deployment
    from harness.chains import agent_writes, make_chain
    from harness.workers import stop
    from slotrelay.chain import load_chain

    chain = make_chain(tmp_path / "chain", "watched-blocks", 1)
    slots = tmp_path / "slots-elsewhere"
    ChainFolders(slots_root=str(slots), logs=str(tmp_path / "logs-elsewhere")).save("watch-folders",
                                                                                  overwrite=True)
    SandboxPolicy(pool_size=0).save("watch-policy", overwrite=True)
    blocks = ["--folders-block", "watch-folders", "--sandbox-policy", "watch-policy"]
    log = tmp_path / "watch.log"
    with log.open("w") as handle:
        watch = subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "watch", *blocks, str(chain)],
            cwd=ROOT, env={**os.environ, "PREFECT_API_URL": prefect_server, "PYTHONPATH": str(ROOT),
                           "COLUMNS": "200"},
            stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=120,
                   what="watch to start")
        assert watch.poll() is None, log.read_text()
        # The agent writes where the block puts the slots: the sensor watches there, the run writes there.
        agent_writes(slots, "src-0", {"n": 1})
        output = slots / "slots" / "work-0_output.json"
        wait_until(output.exists, timeout=180, what="the routed run's output slot")
    finally:
        stop(watch)
    assert json.loads(output.read_text())["data"]["seen"] == {"n": 1}
    assert not (chain.parent / "slots" / "work-0_output.json").exists()
    assert "work-0" in (tmp_path / "logs-elsewhere" / "engine.log").read_text()
    runs = asyncio.run(_runs_of("chain/watched-blocks"))
    assert runs and all(
        r.parameters["folders_block"] == "watch-folders" and r.parameters["sandbox_policy"] == "watch-policy"
        for r in runs)
    # `watch --pool` names them on its pool deployments the same way.
    on_pool = pool_chain_deployment(load_chain(chain), {"model_block": "some-model"})
    assert on_pool.parameters["model_block"] == "some-model" and on_pool.parameters["resume"] is True


async def _runs_of(deployment: str) -> list:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    async with get_client() as client:
        found = await client.read_deployment_by_name(deployment)
        return await client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[
            found.id])))


def test_a_server_home_keeps_its_block_encryption_key_whatever_folder_starts_it(tmp_path: Path,
                                                                                monkeypatch) -> None:
    # The key belongs to the database it encrypts: a home started from one folder and then from
    # another (`up --home` from two projects) must encrypt and read its blocks with one key.
    from dotenv import dotenv_values

    from deployments.server import ENCRYPTION_KEY_NAME, ENV_FILE_NAME, encryption_key

    home, first, second = tmp_path / "home", tmp_path / "first", tmp_path / "second"
    for folder in (home, first, second):
        folder.mkdir()
    (second / ENV_FILE_NAME).write_text(f"{ENCRYPTION_KEY_NAME}=a-key-of-another-project\n")
    monkeypatch.chdir(first)
    key = encryption_key(home)
    assert dotenv_values(home / ENV_FILE_NAME)[ENCRYPTION_KEY_NAME] == key
    assert (home / ENV_FILE_NAME).stat().st_mode & 0o777 == 0o600
    assert not (first / ENV_FILE_NAME).exists()
    monkeypatch.chdir(second)
    assert encryption_key(home) == key


def test_a_home_from_before_the_key_moved_takes_the_current_folders_key(tmp_path: Path, monkeypatch) -> None:
    from deployments.server import ENCRYPTION_KEY_NAME, ENV_FILE_NAME, encryption_key

    home = tmp_path / ".slotrelay" / "prefect"
    home.mkdir(parents=True)
    (tmp_path / ENV_FILE_NAME).write_text(f"SLOTRELAY_KEY=x\n{ENCRYPTION_KEY_NAME}=the-key-its-blocks-have\n")
    monkeypatch.chdir(tmp_path)
    assert encryption_key(home) == "the-key-its-blocks-have"
    assert f"{ENCRYPTION_KEY_NAME}=the-key-its-blocks-have" in (home / ENV_FILE_NAME).read_text()


def test_a_link_in_place_of_the_homes_key_file_is_replaced_not_written_through(tmp_path: Path,
                                                                              monkeypatch) -> None:
    from deployments.server import ENV_FILE_NAME, encryption_key

    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.write_text("untouched\n")
    (home / ENV_FILE_NAME).symlink_to(outside)
    monkeypatch.chdir(tmp_path)
    encryption_key(home)
    assert outside.read_text() == "untouched\n"
    assert not (home / ENV_FILE_NAME).is_symlink()
