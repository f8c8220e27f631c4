"""The example content pipeline's python executors: real small work on the files beside this module.

scan reads `inbox/`, dedup drops repeated articles, enrich adds word counts (its first attempt finds
the source busy and asks for a retry), the reviewer agent plays an agent outside the engine that
writes the review node's output slot, publish writes an index, notify_cdn finds the CDN unreachable
(skipped, by the chain's rules), archive bundles what was published.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from slotrelay.chain import NodeError, NodeOutput
from slotrelay.slots import output_slot_document, write_json_atomic

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"


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
    return {"unique_file": str(unique_file), "items": [i["title"] for i in unique], "duplicates": len(items) - len(unique)}


def empty_report(data: dict) -> dict:
    """Only reached when the inbox held nothing new."""
    return {"report": "nothing new today"}


def enrich(data: dict) -> dict:
    """Add word counts. The first attempt of a run finds the source busy (a retry type)."""
    marker = WORK / "enrich.attempts"
    attempts = int(marker.read_text()) + 1 if marker.exists() else 1
    marker.write_text(str(attempts))
    if attempts == 1:
        raise NodeError("source_busy", "the article store is being re-indexed; try again shortly")
    unique = json.loads(Path(data["unique_file"]).read_text(encoding="utf-8"))
    for item in unique:
        item["words"] = len(Path(item["file"]).read_text(encoding="utf-8").split())
    enriched_file = write_json_atomic(WORK / "enriched.json", unique)
    return {"enriched_file": str(enriched_file), "items": [i["title"] for i in unique]}


def reviewer_agent(data: dict) -> dict:
    """Stand in for a reviewer outside the engine: a moment later it writes the review node's output slot."""
    def review_later() -> None:
        time.sleep(0.5)
        enriched = json.loads(Path(data["enriched_file"]).read_text(encoding="utf-8"))
        approved = [item for item in enriched if item["words"] >= 5]
        document = output_slot_document(
            "exec-review", status="completed",
            data={"approved": True, "enriched_file": data["enriched_file"], "titles": [i["title"] for i in approved]},
            capabilities_used=["Read"], checks={"a person read every article": True},
        )
        write_json_atomic(HERE / "slots" / "exec-review_output.json", document)

    threading.Thread(target=review_later, name="reviewer-agent", daemon=True).start()
    return {"asked": "exec-review"}


def publish(data: dict) -> dict:
    """Write the approved titles as a Markdown index."""
    lines = [f"- {title}" for title in data["titles"]]
    index = WORK / "published" / "index.md"
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text("# Today\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return {"index_file": str(index), "published": len(lines)}


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
