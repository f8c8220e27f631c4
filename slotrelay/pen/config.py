"""Where the pen's configuration comes from, and what a root's `.env` may set.

    the code model   a `CodeModel` Block (flows), else SLOTRELAY_MODEL_* in the environment, then a
                     dotenv file the user names (`--env-file`, a flow's `env_file`, a pen node's
                     `env_file` option), then the few keys a root's `.env` may set
    the sandbox      a `SandboxPolicy` Block (flows), else the environment (DOCKER_HOST,
                     SLOTRELAY_SANDBOX_*); never a root's `.env`

A pen's root can be a cloned repository, and its `.env` comes with the clone: were it read like the
user's own settings, a clone could send every intent, and the user's API key, to a server of its
choosing, or pick the model that writes the code. So a root's `.env` is read as any file of a tree
the product did not create (CONTRACTS.md#files-the-product-writes): never through a link, only
if it is a regular file, within a size limit; and only `ROOT_KEYS` are taken from it, which bound how
long the pen waits for the model and how long its answer may be, and cannot send anything anywhere.
The endpoint, the key and the model's name come from the user: the environment, a Block, or a file
the user names, which is read as named (a link the user names is theirs to follow). Keys of the
pen or its sandbox that a root's `.env` sets and the pen did not take are reported (`ignored`), and the
settings say where each value came from (`sources`): both reach the output's `x-slotrelay.config`.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values

from slotrelay import fsio
from slotrelay.pen.errors import InvalidPenRequest, ModelNotConfigured
from slotrelay.pen.model_client import ENV_PREFIX, ModelSettings

ROOT_ENV = ".env"
# A dotenv file is a few lines; a larger one in a root is refused rather than read.
ROOT_ENV_LIMIT = 64 * 1024
# The settings and the variable each is read from.
VARIABLES = {
    "base_url": f"{ENV_PREFIX}BASE_URL",
    "model": f"{ENV_PREFIX}NAME",
    "api_key": f"{ENV_PREFIX}API_KEY",
    "timeout_s": f"{ENV_PREFIX}TIMEOUT_S",
    "max_tokens": f"{ENV_PREFIX}MAX_TOKENS",
}
# What a root's .env may set: how long to wait and how much to read, never where or from whom.
ROOT_KEYS = frozenset({f"{ENV_PREFIX}TIMEOUT_S", f"{ENV_PREFIX}MAX_TOKENS"})
# Variables that configure the pen or its sandbox, reported when a root's .env sets them in vain.
CONFIG_PREFIXES = ("SLOTRELAY_", "DOCKER_")


def root_env(root: str | Path) -> dict[str, str]:
    """The variables of `<root>/.env` ({} when there is none), read as a file of an untrusted tree.

    Raises:
        InvalidPenRequest: it is a symbolic link, not a regular file, or too large (naming it).
    """
    path = Path(root) / ROOT_ENV
    try:
        text = fsio.read_file(root, ROOT_ENV, limit=ROOT_ENV_LIMIT).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    except fsio.LinkRefused:
        raise InvalidPenRequest(
            f"{path} is a symbolic link: the pen never follows a link in its root (a root can be a "
            "clone); to use that file, name it with --env-file",
            details={"file": str(path)},
        ) from None
    except (fsio.NotRegular, fsio.FileTooLarge) as refused:
        raise InvalidPenRequest(f"{path}: {refused}", details={"file": str(path)}) from None
    except OSError as error:
        raise InvalidPenRequest(
            f"{path}: cannot read it: {error.strerror}", details={"file": str(path)}
        ) from None
    return _values(dotenv_values(stream=io.StringIO(text)))


def named_env(path: str | Path) -> dict[str, str]:
    """The variables of a dotenv file the user named.

    Raises:
        InvalidPenRequest: it is missing or not a readable file (naming it).
    """
    file = Path(path)
    if not file.is_file():
        raise InvalidPenRequest(f"env file {file}: no such file", details={"file": str(file)})
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise InvalidPenRequest(f"env file {file}: cannot read it: {error.strerror}",
                                details={"file": str(file)}) from None
    return _values(dotenv_values(stream=io.StringIO(text)))


def _values(parsed: Mapping[str, str | None]) -> dict[str, str]:
    return {key: value for key, value in parsed.items() if value is not None}


def model_settings(*, root: str | Path | None, env_file: str | Path | None = None) -> ModelSettings:
    """The code model's settings from the environment, a dotenv file the user names, and the root's `.env`.

    Parameters:
        root: the pen's root, whose `.env` may set `ROOT_KEYS` (None: no root file is read).
        env_file: a dotenv file the user names, read for every SLOTRELAY_MODEL_* variable (the root's
            own `.env` too, when named).

    Returns:
        The settings, with `sources` (where each came from) and `ignored` (what the root's `.env` set
        that was not taken, and why).

    Raises:
        ModelNotConfigured: the base URL or the model name is missing, or a number is not one; the
            message names what the root's `.env` set in vain.
        InvalidPenRequest: the root's `.env` is a link or not a regular file, or the named file is missing.
    """
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    ignored: dict[str, str] = {}
    # Naming the root's own .env is saying it is trusted: it is then read as the named file, and only so.
    named_the_roots = (
        root is not None and env_file is not None
        and os.path.abspath(env_file) == os.path.abspath(Path(root) / ROOT_ENV)
    )
    if root is not None and not named_the_roots:
        where = f"root .env {Path(root) / ROOT_ENV}"
        for key, value in root_env(root).items():
            if key in ROOT_KEYS:
                values[key], sources[key] = value, where
            elif key.startswith(CONFIG_PREFIXES):
                ignored[key] = f"{where}: a root's .env may set only {', '.join(sorted(ROOT_KEYS))}"
    if env_file is not None:
        for key, value in named_env(env_file).items():
            if key.startswith(ENV_PREFIX):
                values[key], sources[key] = value, f"env file {env_file}"
    for key, value in os.environ.items():
        if key.startswith(ENV_PREFIX):
            values[key], sources[key] = value, "environment"
    for key in ignored:
        if key in sources:
            # Set elsewhere too: say where the value in use came from, and that the root's was not taken.
            ignored[key] += f" (the value in use is from the {sources[key]})"
    return _settings(values, sources, ignored)


def _settings(values: dict[str, str], sources: dict[str, str], ignored: dict[str, str]) -> ModelSettings:
    missing = [name for name in ("BASE_URL", "NAME") if not values.get(f"{ENV_PREFIX}{name}")]
    if missing:
        refused = "".join(
            f"; {key} in the {why}" for key, why in ignored.items() if key.startswith(ENV_PREFIX)
        )
        raise ModelNotConfigured(
            "no code model configured: set "
            + " and ".join(f"{ENV_PREFIX}{m}" for m in missing)
            + " (environment, or a file named with --env-file), or pass a code-model Block"
            + refused,
            details={"ignored": ignored} if ignored else None,
        )
    timeout = values.get(f"{ENV_PREFIX}TIMEOUT_S") or "60"
    try:
        timeout_s = float(timeout)
    except ValueError as exc:
        raise ModelNotConfigured(f"{ENV_PREFIX}TIMEOUT_S={timeout!r} is not a number of seconds") from exc
    max_tokens = values.get(f"{ENV_PREFIX}MAX_TOKENS") or "1024"
    if not max_tokens.isdigit() or int(max_tokens) < 1:
        raise ModelNotConfigured(f"{ENV_PREFIX}MAX_TOKENS={max_tokens!r} is not a positive whole number")
    return ModelSettings(
        base_url=values[f"{ENV_PREFIX}BASE_URL"],
        model=values[f"{ENV_PREFIX}NAME"],
        api_key=values.get(f"{ENV_PREFIX}API_KEY") or None,
        timeout_s=timeout_s,
        max_tokens=int(max_tokens),
        sources={name: sources.get(variable, "default") for name, variable in VARIABLES.items()},
        ignored=ignored,
    )
