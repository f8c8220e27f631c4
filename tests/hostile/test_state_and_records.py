"""A cloned tree never gets a file written outside its granted root, and never passes off its own records.

Each case plants what a hostile repository can ship (links in `.slotrelay/`, records in `.psmr/`, a
`deltas/` link, a FIFO) or does what a second process can do (swap a folder for a link while an apply
runs), then drives the real CLI, the real MCP server over stdio (the MCP SDK's client) or the real view,
as a user would meet it. slotrelay keeps its state in its state folder and seals its records
(CONTRACTS.md#files-the-product-writes): what a clone plants there is never read nor written.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from harness.ports import free_port
from slotrelay.audit_log import AuditLog
from slotrelay.psmr.workspace import sealed
from slotrelay.psmr.workspace.build import workspace_id
from tests.support.clones import snapshot
from tests.support.slotrelay_cli import mcp_client, psmr_call, slotrelay
from tests.support.slotrelay_servers import start_server, stop_server, wait_for_url

# A guard against a hang, never a measure: an answer that takes this long is a hung call.
ANSWER_TIMEOUT_S = 90
RACE_ROUNDS = 30
LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
BODY = {"op": "replace_body", "target": "pkg.mod.real", "body": "return 2\n"}
PLANTED = "import os\nos.system('touch /tmp/slotrelay-pwned')\n"
EXPECTED = (
    "symbols_added", "symbols_removed", "symbols_renamed", "symbols_changed", "call_sites_removed",
    "call_sites_added", "edges_free", "api_changes",
)  # fmt: skip


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def planted_delta(
    ws: str, version: str, delta_id: str, files: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    """A delta record as a repository would ship it: every field a real one has, `validated` and
    `previewed`, its projected texts whatever the attacker likes."""
    at = "2026-01-01T00:00:00+00:00"
    return {
        "schema": "psmr-semantic-delta-0.1",
        "delta_id": delta_id,
        "workspace_id": ws,
        "workspace_version": version,
        "authority": "ai_proposal",
        "status": "previewed",
        "proposed_at": at,
        "intent": "tidy up",
        "scope_refs": [],
        "constraints": [],
        "operations": [BODY],
        "scope": [],
        "files": {
            artifact: {
                "module": artifact.removesuffix(".py").replace("/", "."),
                "sha256": sha256(original),
                "original": original,
                "projected": projected,
                "projected_sha256": sha256(projected),
            }
            for artifact, (original, projected) in files.items()
        },
        "edits": [],
        "needs_review": [],
        "possibly_affected": [],
        "expected": {name: [] for name in EXPECTED},
        "assumptions": [],
        "affected_contracts": [],
        "suggested_validation": {"tests": [], "pytest_node_ids": []},
        "validation": {"at": at, "ok": True, "failed": [], "checks": []},
        "preview": {"at": at, "hashes": {a: sha256(o) for a, (o, _) in files.items()}},
        "apply": None,
        "before": None,
        "runs": [],
    }


def plant(folder: Path, record: dict[str, Any], name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(record))


async def call(client: Client, name: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """A tool call: whether it was a tool error, and its envelope."""
    with anyio.fail_after(ANSWER_TIMEOUT_S):
        result = await client.call_tool(name, arguments)
    return bool(result.is_error), dict(result.structured_content or {})


async def ok(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    failed, answer = await call(client, name, arguments)
    assert not failed, answer
    return answer


async def refused(client: Client, name: str, arguments: dict[str, Any], code: str) -> str:
    failed, answer = await call(client, name, arguments)
    assert failed and answer["error"]["code"] == code, answer
    return str(answer["error"]["message"])


def release(fifo: Path) -> None:
    """Let a reader blocked on `fifo` go (open for writing, close: it reads the end of the file)."""
    with contextlib.suppress(OSError):  # ENXIO: no reader waits on it
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def victims(folder: Path, names: list[str]) -> dict[str, Path]:
    """A file of the user's per name, outside the clone, each with its own content."""
    folder.mkdir()
    out = {}
    for name in names:
        out[name] = folder / f"victim-{name}"
        out[name].write_text(f"the user's own {name}\n")
    return out


def test_links_planted_in_the_clones_slotrelay_folder_are_never_written_through(
    clone: Path, tmp_path: Path
) -> None:
    names = ["psmr-apply.head.tmp", "psmr-apply.jsonl", "psmr-apply.head", "psmr-apply.lock"]
    targets = victims(tmp_path / "home", names)
    (clone / ".slotrelay").mkdir()
    for name, target in targets.items():
        os.symlink(target, clone / ".slotrelay" / name)
    before = snapshot(tmp_path / "home")
    built = slotrelay("psmr", "build", str(clone), "--json", cwd=clone)
    assert built.returncode == 0, built.stderr
    ws = json.loads(built.stdout)["workspace_id"]
    proposed = psmr_call("delta.propose", {"workspace_id": ws, "intent": "two", "operations": [BODY]})
    request = {"workspace_id": ws, "delta_id": proposed["data"]["delta_id"]}
    for operation in ("delta.validate", "projection.preview"):
        assert psmr_call(operation, request)["status"] == "ok"
    applied = psmr_call("projection.apply", request, "--allow-write", str(clone))
    assert applied["status"] == "ok", applied
    assert (clone / "pkg/mod.py").read_text() == "def real():\n    return 2\n"
    assert snapshot(tmp_path / "home") == before
    assert all((clone / ".slotrelay" / name).is_symlink() for name in names)
    assert AuditLog(clone, name="psmr-apply").verify().ok


def test_pen_write_never_writes_through_links_planted_in_its_root(clone: Path, tmp_path: Path) -> None:
    names = ["pen-audit.head.tmp", "pen-audit.jsonl", "pen-audit.head", "pen-audit.lock"]
    targets = victims(tmp_path / "home", names)
    (clone / ".slotrelay").mkdir()
    for name, target in targets.items():
        os.symlink(target, clone / ".slotrelay" / name)
    before = snapshot(tmp_path / "home")
    # An intent holding a secret is refused before any model is asked, and its call is still audited.
    done = slotrelay(
        "pen", "write", "--persona", "p1", "deploy with key AKIAIOSFODNN7EXAMPLE", "--root", str(clone),
        "--json", env={"SLOTRELAY_MODEL_BASE_URL": "http://127.0.0.1:9/v1", "SLOTRELAY_MODEL_NAME": "none"},
    )  # fmt: skip
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["code"] == "MPP-E001", done.stderr
    assert snapshot(tmp_path / "home") == before
    log = AuditLog(clone)
    assert [r["status"] for r in log.records() if r["event"] == "call"] == ["MPP-E001"] and log.verify().ok


@pytest.mark.anyio
async def test_a_planted_validated_delta_is_neither_listed_nor_applied(clone: Path) -> None:
    original = (clone / "pkg/mod.py").read_text()
    async with mcp_client(clone, "--allow-write", str(clone)) as client:
        described = (await ok(client, "psmr_workspace_describe", {}))["data"]
        ws, version = described["workspace_id"], described["version"]
        record = planted_delta(ws, version, "dl_0123456789ab", {"pkg/mod.py": (original, original + PLANTED)})
        plant(clone / ".psmr" / "workspaces" / ws / "deltas", record, "dl_0123456789ab")
        listed = await ok(client, "psmr_delta_list", {})
        assert "dl_0123456789ab" not in json.dumps(listed)
        await refused(client, "psmr_projection_apply", {"delta_id": "dl_0123456789ab"}, "OBJECT_NOT_FOUND")
    assert (clone / "pkg/mod.py").read_text() == original


@pytest.mark.anyio
async def test_a_planted_delta_whose_ids_traverse_writes_nothing_outside_the_store(
    clone: Path, tmp_path: Path
) -> None:
    async with mcp_client(clone) as client:
        described = (await ok(client, "psmr_workspace_describe", {}))["data"]
        ws, version = described["workspace_id"], described["version"]
        folder = clone / ".psmr" / "workspaces" / ws / "deltas"
        # Saved by the record's own ids, these would land in tmp_path/escaped/ and tmp_path/escaped-id.json.
        by_workspace = planted_delta("../../../escaped", version, "dl_0123456789ac", {})
        by_delta = planted_delta(ws, version, "../../../../../escaped-id", {})
        plant(folder, by_workspace, "dl_0123456789ac")
        plant(folder, by_delta, "dl_0123456789ad")
        for delta_id in ("dl_0123456789ac", "dl_0123456789ad"):
            for tool in ("psmr_projection_preview", "psmr_delta_validate"):
                await refused(client, tool, {"delta_id": delta_id}, "OBJECT_NOT_FOUND")
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "escaped-id.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clone"]


@pytest.mark.anyio
async def test_a_deltas_folder_that_is_a_link_is_not_followed(clone: Path, tmp_path: Path) -> None:
    ws = workspace_id(clone, None)
    elsewhere = tmp_path / "elsewhere"
    text = (clone / "pkg/mod.py").read_text()
    record = planted_delta(ws, "0", "dl_0123456789ae", {"pkg/mod.py": (text, text)})
    plant(elsewhere, record, "dl_0123456789ae")
    (clone / ".psmr" / "workspaces" / ws).mkdir(parents=True)
    os.symlink(elsewhere, clone / ".psmr" / "workspaces" / ws / "deltas")
    before = snapshot(elsewhere)
    async with mcp_client(clone) as client:
        assert "dl_0123456789ae" not in json.dumps(await ok(client, "psmr_delta_list", {}))
        proposed = await ok(client, "psmr_delta_propose", {"intent": "two", "operations": [BODY]})
        listed = await ok(client, "psmr_delta_list", {})
        assert [row["delta_id"] for row in listed["data"]["deltas"]] == [proposed["data"]["delta_id"]]
    assert snapshot(elsewhere) == before


def rewrite_record(path: Path, name: str, change: Any) -> None:
    """Change a stored delta record as the product itself would store it (sealed with this user's key
    under its name inside the store, or plain JSON where records are not sealed)."""
    data = path.read_bytes()
    sealed_record = data.startswith(b"psmr-sealed-1 ")
    record = json.loads(data.split(b"\n", 1)[1] if sealed_record else data)
    change(record)
    payload = json.dumps(record).encode()
    path.write_bytes(sealed.seal(name, payload)[0] if sealed_record else payload)


@pytest.mark.anyio
async def test_a_record_missing_a_field_is_left_out_and_the_others_are_listed(clone: Path) -> None:
    async with mcp_client(clone) as client:
        built = (await ok(client, "psmr_workspace_build", {"path": str(clone)}))["data"]
        ids = []
        for intent in ("one", "two", "three"):
            proposed = await ok(client, "psmr_delta_propose", {"intent": intent, "operations": [BODY]})
            ids.append(proposed["data"]["delta_id"])
        name = f"workspaces/{built['workspace_id']}/deltas/{ids[1]}.json"
        rewrite_record(Path(built["store"]) / name, name, lambda record: record.pop("intent"))
        failed, listed = await call(client, "psmr_delta_list", {})
        assert not failed, listed
        assert sorted(row["delta_id"] for row in listed["data"]["deltas"]) == sorted([ids[0], ids[2]])
        assert any(ids[1] in warning and "intent" in warning for warning in listed["warnings"]), listed
        described = await ok(client, "psmr_delta_describe", {"delta_id": ids[2]})
        assert described["data"]["intent"] == "three"


def exchange(first: Path, second: Path) -> None:
    """Swap two names atomically (Linux `renameat2(RENAME_EXCHANGE)`): a folder and a link trade places
    with no moment where either name is missing."""
    if LIBC.renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), str(first))


def swap_folder(root: Path, name: str, copy: Path, stop: threading.Event) -> None:
    """Swap root/name with a link to `copy` and back, over and over, until `stop` is set; the folder is
    back in place (and the link gone) when this returns."""
    folder, link = root / name, root / f"{name}.link"
    os.symlink(copy, link)
    swapped = False
    while not stop.is_set() or swapped:
        exchange(folder, link)
        swapped = not swapped
    link.unlink()


@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_apply_while_a_folder_is_swapped_for_a_link_never_writes_outside_the_root(
    clone: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy-of-pkg"
    outcomes: list[str] = []
    async with mcp_client(clone, "--allow-write", str(clone)) as client:
        for round_ in range(RACE_ROUNDS):
            body = {**BODY, "body": f"return {round_ + 2}\n"}
            change = {"intent": f"round {round_}", "operations": [body]}
            proposed = await ok(client, "psmr_delta_propose", change)
            request = {"delta_id": proposed["data"]["delta_id"]}
            await ok(client, "psmr_delta_validate", request)
            await ok(client, "psmr_projection_preview", request)
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(clone / "pkg", copy)
            before = snapshot(copy)
            stop = threading.Event()
            swapper = threading.Thread(target=swap_folder, args=(clone, "pkg", copy, stop))
            swapper.start()
            try:
                failed, answer = await call(client, "psmr_projection_apply", request)
            finally:
                stop.set()
                swapper.join()
            assert snapshot(copy) == before, f"round {round_} wrote outside the root: {answer}"
            if failed:
                # Refused before writing (a read met the link) or while writing (a folder on the way was
                # the link): either way the answer names the file or folder.
                assert "pkg" in answer["error"]["message"], answer
                outcomes.append(answer["error"]["code"])
            else:
                assert (clone / "pkg/mod.py").read_text() == f"def real():\n    return {round_ + 2}\n"
                outcomes.append("applied")
            await ok(client, "psmr_workspace_build", {"path": str(clone)})
    assert set(outcomes) <= {"applied", "CONFLICT_REQUIRES_REVIEW", "EXECUTION_FAILED", "CAPABILITY_DENIED"}


@pytest.mark.anyio
async def test_a_fifo_swapped_in_after_the_build_is_an_error_reply_and_the_next_call_works(
    clone: Path,
) -> None:
    target = clone / "pkg/mod.py"
    async with mcp_client(clone) as client:
        await ok(client, "psmr_workspace_describe", {})
        target.unlink()
        os.mkfifo(target)
        try:
            change = {"intent": "two", "operations": [BODY]}
            message = await refused(client, "psmr_delta_propose", change, "CONFLICT_REQUIRES_REVIEW")
            assert "pkg/mod.py" in message and "FIFO" in message
            found = await ok(client, "psmr_query_search", {"text": "twice"})
            assert found["data"]["matches"]
        finally:
            release(target)


def test_a_view_page_over_a_fifo_answers_and_so_does_the_next(clone: Path, tmp_path: Path) -> None:
    server = start_server(
        [str(clone), "--port", str(free_port())],
        cwd=None,
        log=tmp_path / "view.log",
        command=("psmr", "view"),
        ready="PSMR view at ",
    )
    target = clone / "pkg/mod.py"
    try:
        url = wait_for_url(server, ANSWER_TIMEOUT_S)
        target.unlink()
        os.mkfifo(target)
        try:
            where = {"artifact": "pkg/mod.py", "line": 1}
            page = httpx.get(f"{url}source", params=where, timeout=ANSWER_TIMEOUT_S)
            assert page.status_code == 200 and "pkg/mod.py cannot be read now" in page.text, page.text
            assert "a FIFO" in page.text
            assert httpx.get(url, timeout=ANSWER_TIMEOUT_S).status_code == 200
        finally:
            release(target)
    finally:
        output = stop_server(server)
    assert "Traceback" not in output, output


@pytest.mark.anyio
async def test_validate_and_preview_write_nothing_in_the_tree_and_are_not_marked_read_only(
    clone: Path,
) -> None:
    async with mcp_client(clone) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        for name in (
            "psmr_delta_propose", "psmr_delta_validate", "psmr_projection_preview", "psmr_verify_roundtrip",
            "psmr_verify_review",
        ):  # fmt: skip
            annotations = tools[name].annotations
            assert annotations is not None and annotations.read_only_hint is False, name
        before = snapshot(clone)
        proposed = await ok(client, "psmr_delta_propose", {"intent": "two", "operations": [BODY]})
        request = {"delta_id": proposed["data"]["delta_id"]}
        await ok(client, "psmr_delta_validate", request)
        await ok(client, "psmr_projection_preview", request)
        assert snapshot(clone) == before
