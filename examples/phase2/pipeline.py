"""The example content pipeline's python executors: real small work on the files beside this module.

scan reads `inbox/`, dedup drops repeated articles, enrich adds word counts (its first attempt finds
the source busy and asks for a retry; while a file named `store-busy` is beside this module, every
attempt does, so the retries run out and the run pauses for a person: the tutorial's switch), the
reviewer agent plays an agent outside the engine (a process of its own, `python pipeline.py review`) that
writes the review node's output slot, publish writes an index and lists it in `files` (the chain's
deploy node takes that list, `files_from`, and makes a release of it in `work/site` and
`work/mirror-b`), check_site serves the site's live release (`work/site/current`) over HTTP on
127.0.0.1 and compares what it serves with what was deployed, notify_cdn finds the CDN unreachable
(skipped, by the chain's rules), archive bundles what was published.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from slotrelay.chain import NodeError, NodeOutput
from slotrelay.chain.slots import output_slot_document, write_json_atomic

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"
# The switch that makes a run pause (docs/tutorial.md): while it exists, the article store stays busy.
STORE_BUSY = HERE / "store-busy"


def scan(data: dict) -> NodeOutput:
    """List the inbox's articles with a content hash; starts a fresh `work/` folder."""
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    items = []
    for path in sorted((HERE / "inbox").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        items.append({"file": str(path), "title": text.splitlines()[0].lstrip("# "),
                      "sha256": hashlib.sha256(text.encode()).hexdigest()})
    scan_file = write_json_atomic(WORK / "scan.json", items)
    return NodeOutput(
        data={"scan_file": str(scan_file), "count": len(items)},
        checks={"output slot written atomically (tmp, fsync, rename)": True},
        capabilities_used=["Read", "Write"],
    )


def dedup(data: dict) -> dict:
    """Keep the first article of each content hash."""
    items = json.loads(Path(data["scan_file"]).read_text(encoding="utf-8"))
    seen, unique = set(), []
    for item in items:
        if item["sha256"] not in seen:
            seen.add(item["sha256"])
            unique.append(item)
    unique_file = write_json_atomic(WORK / "unique.json", unique)
    return {"unique_file": str(unique_file), "items": [i["title"] for i in unique],
            "duplicates": len(items) - len(unique)}


def empty_report(data: dict) -> dict:
    """Only reached when the inbox held nothing new."""
    return {"report": "nothing new today"}


def enrich(data: dict) -> dict:
    """Add word counts. The first attempt of a run finds the source busy (a retry type), and so does every
    attempt while the `store-busy` switch is on."""
    marker = WORK / "enrich.attempts"
    attempts = int(marker.read_text()) + 1 if marker.exists() else 1
    marker.write_text(str(attempts))
    if STORE_BUSY.exists():
        raise NodeError("source_busy", f"the article store is busy while {STORE_BUSY} exists")
    if attempts == 1:
        raise NodeError("source_busy", "the article store is being re-indexed; try again shortly")
    unique = json.loads(Path(data["unique_file"]).read_text(encoding="utf-8"))
    for item in unique:
        item["words"] = len(Path(item["file"]).read_text(encoding="utf-8").split())
    enriched_file = write_json_atomic(WORK / "enriched.json", unique)
    return {"enriched_file": str(enriched_file), "items": [i["title"] for i in unique]}


def reviewer_agent(data: dict) -> dict:
    """Stand in for a reviewer outside the engine: a process of its own writes the review node's output slot
    a moment later. A process, not a thread: a served run that stops at the review node ends its process
    before the answer, and an agent outside outlives the run that asked it."""
    subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "review", data["enriched_file"]],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    return {"asked": "exec-review"}


def review(enriched_file: str) -> None:
    """The reviewer's answer: the articles of at least five words approved."""
    time.sleep(0.5)
    enriched = json.loads(Path(enriched_file).read_text(encoding="utf-8"))
    approved = [item for item in enriched if item["words"] >= 5]
    document = output_slot_document(
        "exec-review", status="completed",
        data={"approved": True, "enriched_file": enriched_file, "titles": [i["title"] for i in approved]},
        capabilities_used=["Read"], checks={"a person read every article": True},
    )
    write_json_atomic(HERE / "slots" / "exec-review_output.json", document)


def publish(data: dict) -> dict:
    """Write the approved titles as a Markdown index."""
    lines = [f"- {title}" for title in data["titles"]]
    index = WORK / "published" / "index.md"
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text("# Today\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return {"index_file": str(index), "published": len(lines), "files": [index.relative_to(HERE).as_posix()]}


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """No request lines on stderr: the run's own log says what was checked."""


def check_site(data: dict) -> dict:
    """Serve the live release of `work/site` (its `current`) on a free port of 127.0.0.1, GET every file
    deployed to C there, compare sha256.

    A free port per run (not a fixed one in the chain file) keeps parallel runs of copies of this
    example, and the long-lived `slotrelay up` process, from clashing.
    """
    site = WORK / "site" / "current"
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    threading.Thread(target=server.serve_forever, name="site-server", daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    checked = []
    try:
        for copy in data["deployed"]:
            if copy["target_name"] != "C":
                continue
            url = base + urllib.parse.quote(copy["path"])
            with urllib.request.urlopen(url, timeout=10) as answer:
                served = hashlib.sha256(answer.read()).hexdigest()
            if served != copy["sha256"]:
                raise NodeError("site_mismatch",
                                f"GET {url} served sha256 {served}, deployed {copy['sha256']}")
            checked.append(url)
    finally:
        server.shutdown()
        server.server_close()
    if not checked:
        raise NodeError("site_mismatch", f"nothing was deployed under {site}")
    return {"checked_urls": checked, "served_matches": True}


def notify_cdn(data: dict) -> dict:
    """Ask the CDN to purge its cache; from here the CDN is not reachable (skipped by the chain's rules)."""
    raise NodeError("external_unreachable", f"cdn.example.invalid not reachable (pid {os.getpid()})")


def archive(data: dict) -> dict:
    """Bundle what was published into a dated archive file."""
    index = Path(data["index_file"])
    stamp = datetime.now(UTC).strftime("%Y%m%d")
    target = WORK / f"archive-{stamp}.md"
    shutil.copyfile(index, target)
    return {"archive_file": str(target), "bytes": target.stat().st_size}


if __name__ == "__main__" and sys.argv[1:2] == ["review"]:
    review(sys.argv[2])
