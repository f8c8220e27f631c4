"""The checked types of the options of `slotrelay watch`, `up` and `run`.

Each option's text is parsed once, when the command line is read, into the value the command uses, or
refused with `BadInput` naming the option and what is wrong: a duration is a finite number of seconds
within its bounds, a count a whole number within its bounds, a name matches its pattern, a folder
exists and takes files (`up --home` alone may be created, as its help says), a saved block exists on
the Prefect API. Nothing is started or created before every option has passed, and no value reaches a
command, or a thread it starts, unchecked (`--window inf` once killed the coalescer's thread).

How: `checked(parse, help=...)` is a `typer.Option` whose callback (it knows the option's name) calls
`parse(option, text)`. typer's own conversion is bypassed (`parser=str`): its errors are click's usage
errors, not the CLI's `BAD_INPUT` line (`slotrelay.cli` prints every `SlotrelayError` once).
"""

from __future__ import annotations

import math
import re
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from slotrelay.errors import BadInput, EnvironmentMissing

Parse = Callable[[str, str], Any]
"""`parse(option, text) -> value`: an option's checked type."""

# Work pools, flows and deployments: a letter or digit first (no `..`, no `-x` taken for an option),
# then letters, digits, `_`, `.` and `-` (none of the `/ % & < >` Prefect forbids in names, and nothing a
# URL path would read as a separator).
NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}"
# Prefect's own rule for block document names.
BLOCK_NAME = r"[a-z0-9-]{1,100}"
MAX_WINDOW_SECONDS = 60.0
MAX_WARM = 32


def checked(parse: Parse, *, help: str, **extra: Any) -> Any:
    """A `typer.Option` whose value is `parse(option, text)`, checked as the command line is read.

    Parameters:
        parse: the option's checked type.
        help: the option's help.
        extra: more `typer.Option` settings (e.g. its flag names).
    """
    def callback(param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return None
        # A default comes as the command declares it; it goes through the same check as a typed value.
        return parse(param.opts[0], str(value))

    return typer.Option(parser=str, callback=callback, help=help, **extra)


def seconds(*, minimum: float, maximum: float, why_minimum: str = "") -> Parse:
    """A duration: a finite number of seconds from `minimum` to `maximum` (`why_minimum`: why no less)."""
    def parse(option: str, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise BadInput(f"{option} {text!r}: not a number of seconds") from None
        if not math.isfinite(value):
            raise BadInput(f"{option} {text}: not a finite number of seconds")
        if value < minimum:
            why = f" ({why_minimum})" if why_minimum else ""
            raise BadInput(f"{option} {text}: at least {minimum:g} s{why}")
        if value > maximum:
            raise BadInput(f"{option} {text}: at most {maximum:g} s")
        return value

    return parse


def count(*, minimum: int, maximum: int) -> Parse:
    """A whole number from `minimum` to `maximum`."""
    def parse(option: str, text: str) -> int:
        if not re.fullmatch(r"[+-]?[0-9]{1,10}", text.strip()):
            raise BadInput(f"{option} {text!r}: not a whole number")
        value = int(text)
        if value < minimum:
            raise BadInput(f"{option} {text}: at least {minimum}")
        if value > maximum:
            raise BadInput(f"{option} {text}: at most {maximum}")
        return value

    return parse


PORT = count(minimum=1, maximum=65535)


def work_pool_name(option: str, text: str) -> str:
    """A work pool's name: see `NAME`."""
    if not re.fullmatch(NAME, text):
        raise BadInput(f"{option} {text!r}: a name of letters, digits, '_', '.' and '-', starting with a "
                       "letter or digit (at most 100)")
    return text


def deployment_template(option: str, text: str) -> str:
    """`FLOW/DEPLOYMENT`, each a `NAME` once `{chain_id}` (the only field) is filled in."""
    try:
        fields = [(field, spec, conversion) for _, field, spec, conversion in string.Formatter().parse(text)
                  if field is not None]
    except ValueError as bad:
        raise BadInput(f"{option} {text!r}: not a template ({bad})") from None
    if any(fields_ != ("chain_id", "", None) for fields_ in fields):
        raise BadInput(f"{option} {text!r}: only {{chain_id}} may be filled in")
    if not re.fullmatch(f"{NAME}/{NAME}", text.replace("{chain_id}", "x")):
        raise BadInput(f"{option} {text!r}: FLOW/DEPLOYMENT, two names of letters, digits, '_', '.' and '-' "
                       "(`{chain_id}` filled in)")
    return text


def _takes_files(option: str, folder: Path) -> None:
    # Being root, or a read-only mount, makes permission bits say nothing: try. An unnamed temporary
    # file (O_TMPFILE where the file system has it) leaves nothing behind.
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as refused:
        raise BadInput(f"{option} {folder}: cannot create files there ({refused.strerror})") from None


def writable_folder(option: str, text: str) -> Path:
    """An existing folder that takes files; never created."""
    folder = Path(text)
    if not text or not folder.exists():
        raise BadInput(f"{option} {text}: no such folder (create it first)")
    if not folder.is_dir():
        raise BadInput(f"{option} {text}: not a folder")
    _takes_files(option, folder)
    return folder


def existing_folder(option: str, text: str) -> Path:
    """An existing folder (read, not written)."""
    folder = Path(text)
    if not text or not folder.exists():
        raise BadInput(f"{option} {text}: no such folder")
    if not folder.is_dir():
        raise BadInput(f"{option} {text}: not a folder")
    return folder


def created_folder(option: str, text: str) -> Path:
    """A folder that takes files, or one the command may create inside an existing folder that does."""
    folder = Path(text)
    if folder.exists():
        return writable_folder(option, text)
    parent = folder.absolute().parent
    if not parent.is_dir():
        raise BadInput(f"{option} {text}: no such folder, and no folder {parent} to create it in")
    try:
        _takes_files(option, parent)
    except BadInput:
        raise BadInput(f"{option} {text}: cannot create files in {parent}") from None
    return folder


def block_name(block_class: str, *, on_the_api: bool) -> Parse:
    """The name of a saved block of `block_class` (`module:Class` in blocks/).

    Parameters:
        block_class: the block type.
        on_the_api: also check that the Prefect API (`deployments.server.require_api`) has it; `up`
            checks the name only, as its server starts later (its `watch` checks the block).
    """
    def parse(option: str, text: str) -> str:
        if not re.fullmatch(BLOCK_NAME, text):
            raise BadInput(f"{option} {text!r}: a block name is lowercase letters, digits and dashes")
        if on_the_api:
            _saved_block(block_class, option, text)
        return text

    return parse


def _saved_block(block_class: str, option: str, block: str) -> None:
    import importlib

    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from deployments.server import require_api

    try:
        api_url = require_api().url
    except EnvironmentMissing as missing:
        raise EnvironmentMissing(f"{option} {block}: {missing.message}, to look the block up",
                                 code=missing.code) from None
    module, _, cls = block_class.partition(":")
    kind = getattr(importlib.import_module(module), cls)
    with temporary_settings(updates={PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        try:
            client.read_block_document_by_name(block, kind.get_block_type_slug())
        except ObjectNotFound:
            raise BadInput(f"{option} {block}: no {kind.get_block_type_name()} block named {block!r} on "
                           f"{api_url} (save one first: docs/beyond.md)") from None
        except PrefectHTTPStatusError as refused:
            # e.g. a block saved under another server encryption key cannot be decrypted there (500)
            raise EnvironmentMissing(f"{option} {block}: the API at {api_url} could not read that block "
                                     f"(HTTP {refused.response.status_code})") from None
