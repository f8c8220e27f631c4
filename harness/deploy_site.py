"""What the deploy tests share: a folder served over HTTP, a byte-exact picture of a target, a deploy call."""

from __future__ import annotations

import functools
import logging
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

from slotrelay.chain.executors.deploy.node import run_deploy
from slotrelay.chain.models import DeployExecutor


class _Handler(SimpleHTTPRequestHandler):
    refused: ClassVar[set[str]] = set()

    def do_GET(self) -> None:
        if self.path in self.refused:
            self.send_error(503, "refused by the test")
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        return


@contextmanager
def serving(folder: Path, *, refused: set[str] | None = None) -> Iterator[str]:
    """Serve a folder (resolved again for every request, so a `current` link is followed as it is then)
    on a free port of 127.0.0.1; yields its base URL. Paths in `refused` answer 503."""
    handler = type("Handler", (_Handler,), {"refused": refused if refused is not None else set()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def get(url: str) -> bytes | int:
    """The body a URL answers 200 with, else the status."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read()
    except urllib.error.HTTPError as refused:
        refused.close()
        return refused.code


def served(base_url: str, paths: list[str]) -> dict[str, bytes | int]:
    """What each path answers under a served base URL."""
    return {path: get(base_url + path) for path in paths}


def picture(folder: Path) -> dict[str, object]:
    """Everything under a folder, exactly: each file's bytes, each link's target, each folder (no link
    is followed). A folder that does not exist pictures as {}."""
    found: dict[str, object] = {}
    for here, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            path = Path(here) / name
            relative = path.relative_to(folder).as_posix()
            if path.is_symlink():
                found[relative] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                found[relative + "/"] = None
            else:
                found[relative] = path.read_bytes()
    return found


def in_chain(folder: Path) -> SimpleNamespace:
    """The part of an ExecutionContext the deploy executor reads: the chain's folder, the engine's logger."""
    return SimpleNamespace(chain=SimpleNamespace(base_dir=folder),
                           logger=logging.getLogger("slotrelay.engine"))


def deploy(folder: Path, data: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """Run the deploy executor on `spec` (quick URL retries) from the chain folder `folder`."""
    document: dict[str, Any] = {"kind": "deploy", "url_retry": {"backoff_factor": 0.01}, **spec}
    return run_deploy(DeployExecutor(**document), data or {}, in_chain(folder))
