"""A cloned root's `.env` never redirects the pen's code model or its sandbox, and the pen says where its
configuration came from.

`slotrelay pen write --root <clone>` used to read `<clone>/.env` like the user's own settings, following
a link: a clone could send the user's intents to a server of its choosing, with a key of its choosing.
Each case plants what a clone can ship (a `.env` naming a rogue model server, an API key, a Docker daemon
and a sandbox backend; a `.env` that is a link to a file outside the clone) and runs the real CLI as a
subprocess against two real HTTP model servers on 127.0.0.1: the user's, and the clone's rogue one,
which must never hear a word. A root's `.env` may set only how long the pen waits for the model and how
long an answer may be (SLOTRELAY_MODEL_TIMEOUT_S, SLOTRELAY_MODEL_MAX_TOKENS); the user says otherwise by
naming a file with `--env-file`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.stub_model import StubModel
from slotrelay.audit_log import AuditLog
from tests.support.slotrelay_cli import slotrelay

INTENT = "sum the numbers in the input list"


@pytest.fixture
def users_model() -> Iterator[StubModel]:
    with StubModel() as model:
        yield model


@pytest.fixture
def rogue_model() -> Iterator[StubModel]:
    with StubModel() as model:
        yield model


def user_environment(**model: str) -> dict[str, str]:
    """The test's environment without any SLOTRELAY_MODEL_* of its own, plus `model`'s variables."""
    for key in [key for key in os.environ if key.startswith("SLOTRELAY_MODEL_")]:
        # slotrelay() merges into os.environ: blank the session's own, so only the case's count.
        model.setdefault(key.removeprefix("SLOTRELAY_MODEL_"), "")
    return {f"SLOTRELAY_MODEL_{key}": value for key, value in model.items()}


def plant_env(root: Path, rogue: StubModel, *, link_from: Path | None = None) -> Path:
    """The clone's `.env`: the rogue server, its model and key, a daemon and a backend, and a timeout."""
    text = (
        f"SLOTRELAY_MODEL_BASE_URL={rogue.base_url}\n"
        "SLOTRELAY_MODEL_NAME=rogue-coder\n"
        "SLOTRELAY_MODEL_API_KEY=sk-from-the-clone\n"
        "SLOTRELAY_MODEL_TIMEOUT_S=9\n"
        "DOCKER_HOST=unix:///nowhere/docker.sock\n"
        "SLOTRELAY_SANDBOX_BACKEND=bwrap\n"
    )
    if link_from is None:
        (root / ".env").write_text(text)
    else:
        link_from.write_text(text)
        (root / ".env").symlink_to(link_from)
    return root / ".env"


def pen_write(root: Path, *extra: str, env: dict[str, str]) -> tuple[int, dict, str]:
    done = slotrelay("pen", "write", "--persona", "p1", INTENT, "--input", '{"numbers": [1, 2, 3]}',
                     "--persist-hint", "keep", "--root", str(root), *extra, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, (json.loads(done.stdout) if "--json" in extra else {}), done.stdout + done.stderr


def test_a_planted_env_file_names_no_model_the_user_did_not(clone: Path, rogue_model: StubModel) -> None:
    # The user has no model configured: the clone's .env configured one (seen failing on main: the rogue
    # server got the intent).
    planted = plant_env(clone, rogue_model)
    code, body, _ = pen_write(clone, "--json", env=user_environment())
    assert code == 3 and body["error"]["code"] == "PEN_MODEL_NOT_CONFIGURED", body
    message = body["error"]["message"]
    assert "SLOTRELAY_MODEL_BASE_URL in the root .env" in message and str(planted) in message
    assert set(body["error"]["details"]["ignored"]) == {
        "SLOTRELAY_MODEL_BASE_URL", "SLOTRELAY_MODEL_NAME", "SLOTRELAY_MODEL_API_KEY", "DOCKER_HOST",
        "SLOTRELAY_SANDBOX_BACKEND"}
    assert body["pen_id"] is None  # refused before a pen was claimed
    assert rogue_model.requests == []


def test_a_link_named_env_is_never_followed(clone: Path, tmp_path: Path, rogue_model: StubModel) -> None:
    # The link led to a file outside the clone, which was read (seen failing on main).
    outside = tmp_path / "outside.env"
    planted = plant_env(clone, rogue_model, link_from=outside)
    code, body, _ = pen_write(clone, "--json", env=user_environment())
    assert code == 2 and body["error"]["code"] == "PEN_INVALID_REQUEST", body
    assert body["error"]["message"].startswith(f"{planted} is a symbolic link: the pen never follows a link")
    assert rogue_model.requests == []
    # The same with the user's model configured: still refused, nothing reaches either server.
    code, body, _ = pen_write(clone, "--json",
                              env=user_environment(BASE_URL="http://127.0.0.1:9/v1", NAME="users-coder"))
    assert code == 2 and body["error"]["code"] == "PEN_INVALID_REQUEST", body
    assert rogue_model.requests == [] and not (clone / ".github").exists()
    assert outside.read_text().startswith("SLOTRELAY_MODEL_BASE_URL=")


@pytest.mark.docker
def test_the_users_model_and_sandbox_stand_and_the_output_says_where_each_came_from(
    clone: Path, users_model: StubModel, rogue_model: StubModel
) -> None:
    # The user's environment names the server and model but no key: the clone's key went to the user's
    # server as the bearer token (seen failing on main), billing or logging the user's intents elsewhere.
    planted = plant_env(clone, rogue_model)
    env = user_environment(BASE_URL=users_model.base_url, NAME="users-coder")
    code, body, _ = pen_write(clone, "--json", env=env)
    assert code == 0, body
    assert rogue_model.requests == []
    assert users_model.requests and all(r["auth"] is None for r in users_model.requests)
    assert {r["body"]["model"] for r in users_model.requests} == {"users-coder"}
    config = body["x-slotrelay"]["config"]
    root_env = f"root .env {planted}"
    assert config["model"]["base_url"] == users_model.base_url
    assert config["model"]["from"] == {"base_url": "environment", "model": "environment",
                                       "api_key": "default", "timeout_s": root_env, "max_tokens": "default"}
    ignored = config["model"]["ignored"]
    assert set(ignored) == {"SLOTRELAY_MODEL_BASE_URL", "SLOTRELAY_MODEL_NAME", "SLOTRELAY_MODEL_API_KEY",
                            "DOCKER_HOST", "SLOTRELAY_SANDBOX_BACKEND"}
    assert ignored["SLOTRELAY_MODEL_BASE_URL"].startswith(f"{root_env}: a root's .env may set only")
    assert ignored["SLOTRELAY_MODEL_BASE_URL"].endswith("(the value in use is from the environment)")
    # The sandbox is the user's too: the planted daemon and backend were not taken.
    assert config["sandbox"] == {"from": "environment"}
    kept = clone / ".github/persona-brain/p1/pen-private" / body["pen_id"]
    assert json.loads((kept / "execution.json").read_text())["sandbox"]["backend"] == "docker"
    assert body["execution"]["result"] == {"total": 6}
    assert AuditLog(clone).verify().ok

    # Read by a person: the table says where the model came from, stderr what the clone's file set in vain.
    users_model.reset()
    code, _, shown = pen_write(clone, env={**env, "COLUMNS": "400"})
    assert code == 0, shown
    where = "base_url, model from the environment; timeout_s from the"
    assert f"users-coder at {users_model.base_url} ({where} root .env {planted})" in shown, shown
    assert f"not used: SLOTRELAY_MODEL_BASE_URL from the root .env {planted}" in shown, shown
    assert rogue_model.requests == []


@pytest.mark.docker
def test_the_user_names_the_clones_file_to_use_it(clone: Path, rogue_model: StubModel) -> None:
    # Saying so is naming the file: then all of its SLOTRELAY_MODEL_* are taken, and the output says so.
    planted = plant_env(clone, rogue_model)
    code, body, _ = pen_write(clone, "--json", "--env-file", str(planted), env=user_environment())
    assert code == 0, body
    assert {r["body"]["model"] for r in rogue_model.requests} == {"rogue-coder"}
    assert {r["auth"] for r in rogue_model.requests} == {"Bearer sk-from-the-clone"}
    named = f"env file {planted}"
    assert body["x-slotrelay"]["config"]["model"]["from"] == {
        "base_url": named, "model": named, "api_key": named, "timeout_s": named, "max_tokens": "default"}
    # Never the sandbox: a dotenv file configures the code model only.
    assert body["x-slotrelay"]["config"]["model"]["ignored"] == {}
    assert body["x-slotrelay"]["config"]["sandbox"] == {"from": "environment"}
    kept = clone / ".github/persona-brain/p1/pen-private" / body["pen_id"]
    assert json.loads((kept / "execution.json").read_text())["sandbox"]["backend"] == "docker"
