"""Slots: atomic writes, guarded reads (a racing reader never sees half a file), babel lines."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from slotrelay.chain.slots import (
    HALF_WRITTEN_SECONDS,
    SlotInvalid,
    append_babel,
    content_hash,
    half_written_until,
    input_slot_document,
    output_slot_document,
    parse_slot,
    read_slot,
    slot_bytes,
    write_json_atomic,
    write_slot,
)


def test_write_then_read(tmp_path: Path) -> None:
    path = write_json_atomic(tmp_path / "deep" / "a_output.json",
                             output_slot_document("a", status="completed", data={"x": 1}))
    document = read_slot(path)
    assert document["node_id"] == "a" and document["data"] == {"x": 1} and document["status"] == "completed"
    assert set(document) == {"node_id", "status", "data", "error", "capabilities_used", "checks", "attempt",
                             "updated_at", "produced_from"}
    assert [p.name for p in path.parent.iterdir()] == ["a_output.json"], "no .tmp left behind"


def test_reads_treat_missing_tmp_half_written_and_non_objects_as_absent(tmp_path: Path) -> None:
    assert read_slot(tmp_path / "none.json") is None
    (tmp_path / "a.json.1234.tmp").write_text('{"status": "completed"}')
    assert read_slot(tmp_path / "a.json.1234.tmp") is None
    (tmp_path / "half.json").write_text('{"status": "compl')
    assert read_slot(tmp_path / "half.json") is None
    (tmp_path / "list.json").write_text("[1, 2]")
    assert read_slot(tmp_path / "list.json") is None
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    assert read_slot(tmp_path / "binary.json") is None


def test_a_reader_racing_a_writer_never_sees_half_a_document(tmp_path: Path) -> None:
    path = tmp_path / "race.json"
    write_json_atomic(path, {"n": 0, "pad": "x" * 20000})
    stop = threading.Event()
    seen: list[int] = []
    broken: list[object] = []

    def reader() -> None:
        while not stop.is_set():
            document = read_slot(path)
            if document is None or len(document["pad"]) != 20000:
                broken.append(document)
            else:
                seen.append(document["n"])

    thread = threading.Thread(target=reader)
    thread.start()
    for n in range(1, 300):
        write_json_atomic(path, {"n": n, "pad": "x" * 20000})
    stop.set()
    thread.join()
    assert broken == []
    assert len(seen) > 10 and seen == sorted(seen)


def test_input_slot_and_babel_lines(tmp_path: Path) -> None:
    document = input_slot_document(from_node="a", route_id="r", data={"k": 1})
    assert document["status"] == "pending" and document["from_node"] == "a" and document["route_id"] == "r"
    babel = tmp_path / "a_babel.jsonl"
    append_babel(babel, sender="a", recipients=["b"], kind="slot.completed", payload={"x": 1})
    append_babel(babel, sender="a", recipients=["b"], kind="slot.completed", payload={"x": 2})
    lines = [json.loads(line) for line in babel.read_text().splitlines()]
    assert [line["payload"]["x"] for line in lines] == [1, 2]
    assert set(lines[0]) == {"ts", "from", "to", "type", "payload"}


def test_bytes_that_can_never_become_a_slot_are_refused_and_half_an_object_waits(tmp_path: Path) -> None:
    path = tmp_path / "x_output.json"
    for waiting in (b"", b"  ", b'{"status": "compl', b"\xef\xbb\xbf{\"node_id\": ", b'{"a": "\xe4\xb8'):
        assert parse_slot(path, waiting) is None, waiting
    for never in (b"status: completed", b"<html>", b"[1, 2", b"\xff\xfe\x00", b"completed"):
        with pytest.raises(SlotInvalid, match="is not JSON"):
            parse_slot(path, never)


def test_half_an_object_is_refused_once_its_writer_has_stopped(tmp_path: Path) -> None:
    path = tmp_path / "x_output.json"
    path.write_bytes(b'{"node_id": "x", "status": "compl')
    written = path.stat().st_mtime
    assert parse_slot(path, path.read_bytes(), written_at=time.time()) is None
    assert half_written_until(path) == written + HALF_WRITTEN_SECONDS
    assert half_written_until(path, since=written + 1) is None  # older than what the reader waits for
    with pytest.raises(SlotInvalid, match=r"x_output.json.*half written.*5 s after its last write"):
        parse_slot(path, path.read_bytes(), written_at=time.time() - HALF_WRITTEN_SECONDS)
    path.write_bytes(b'{"node_id": "x", "status": "completed"}')
    assert half_written_until(path) is None


def test_a_slot_is_encoded_without_the_pure_python_json_encoder(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """json.dumps(indent=2) runs json's pure-Python encoder (up to 0.5 ms a slot); a slot must not."""
    import json.encoder

    def pure_python_encoder(*args: object, **kwargs: object) -> None:
        raise AssertionError("a slot was encoded by json's pure-Python encoder")

    document = output_slot_document("a", status="completed", data={"x": 1.5, "name": "é", "items": [1, {}]})
    layout = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    monkeypatch.setattr(json.encoder, "_make_iterencode", pure_python_encoder)
    path = write_json_atomic(tmp_path / "a_output.json", document)
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == document
    assert text == layout, "the same layout: two-space indent, UTF-8, one newline at the end"


@pytest.mark.parametrize("data", [
    {"nan": float("nan"), "inf": float("inf"), "minus_inf": float("-inf")},
    {"big": 2**70, "small": -(2**64)},
    {"lone": "\ud800 half of a pair"},
    {"deep": json.loads("[" * 300 + "]" * 300)},
    {"floats": [1e-7, 1e16, -0.0, 0.1]},
], ids=["non-finite", "big-integers", "lone-surrogate", "deep", "floats"])
def test_slot_bytes_mean_what_json_writes_for_values_orjson_would_change(tmp_path: Path, data: dict) -> None:
    document = {"status": "pending", "data": data}
    raw = slot_bytes(document)
    assert raw.endswith(b"\n")
    expected = json.loads(json.dumps(document, ensure_ascii=True))
    assert json.dumps(json.loads(raw)) == json.dumps(expected), "the slot reads back as json would write it"
    digest = write_slot(tmp_path / "b_input.json", document)
    assert digest == content_hash((tmp_path / "b_input.json").read_bytes()) == content_hash(raw)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_a_slot_nested_past_the_limit_is_refused_however_it_is_encoded(encoding: str) -> None:
    """parse_slot walks a document for its depth only when its bytes hold more than MAX_NESTING `{` and
    `[`: a document cannot nest deeper than that, in any encoding json reads."""
    path = Path("x_output.json")

    def nested(levels: int) -> bytes:
        return ('{"data": ' + '{"d": ' * (levels - 2) + "[]" + "}" * (levels - 2) + "}").encode(encoding)

    assert parse_slot(path, nested(100)) is not None
    with pytest.raises(SlotInvalid, match="nested deeper than 100 levels"):
        parse_slot(path, nested(101))
    wide = json.dumps({"data": [[] for _ in range(300)]}).encode(encoding)
    assert parse_slot(path, wide) is not None, "many containers, two levels deep"
