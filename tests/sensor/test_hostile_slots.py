"""Regressions of issue 11 (items 2, 3, 14): what an agent leaves at a slot path never stops the sensor.

Each test is one reproduction from the fault sweep: a malformed slot present when the sensor starts
(the start-up reconcile used to raise and end `watch` with exit 1), a FIFO at a watched slot (the
handler thread blocked in a read, and after SIGINT the process stayed in `observer.join()`), and a
symlink at a slot path (it was followed). The sensor refuses each with the file and the field in the
engine log and goes on routing the chain's other slots.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from harness.chains import RunRecorder, agent_writes, make_chain
from slotrelay.chain import NodeError
from slotrelay.chain.errors import SLOT_INVALID
from slotrelay.chain.executors import wait_for_output
from slotrelay.chain.slots import SlotInvalid, read_output_slot
from tests.support.sensor_processes import start_sensor_process
from tests.support.waiting import wait_until
from tests.support.watch_chains import routed_keys

MALFORMED = {
    "status_is_a_list": b'{"node_id": "src-0", "status": ["completed"]}',
    "capability_is_an_object": (b'{"node_id": "src-0", "status": "completed", '
                                b'"capabilities_used": [{"a": 1}]}'),
    "nested_100k_levels": b'{"node_id": "src-0", "status": "completed", "data": '
    + b'[' * 100_000 + b']' * 100_000
    + b'}',
    "not_an_object": b"[1, 2, 3]",
    "not_json": b"status: completed\nnode_id: src-0\n",
    "status_missing": b'{"node_id": "src-0", "data": {}}',
}
FIELD_NAMED = {
    "status_is_a_list": "status",
    "capability_is_an_object": "capabilities_used.0",
    "nested_100k_levels": "nested deeper than",
    "not_an_object": "not an object",
    "not_json": "is not JSON",
    "status_missing": "status",
}


def engine_log(folder: Path) -> str:
    path = folder / "logs" / "engine.log"
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_slot_present_at_start_is_refused_and_the_rest_is_routed(tmp_path, sensor_for, case):
    chain = make_chain(tmp_path, "bad-at-start", 2)
    bad = tmp_path / "slots" / "src-0_output.json"
    bad.parent.mkdir()
    bad.write_bytes(MALFORMED[case])
    agent_writes(tmp_path, "src-1", {"fine": True})
    recorder = RunRecorder()
    sensor = sensor_for([chain], recorder)  # the reconcile used to raise here
    assert sensor.coalescer.wait_idle(10)
    # The good slot is routed; the bad one is handed to a run at its own node, where it fails as
    # slot_invalid by the chain's error types (an alert; tests/sensor/test_watch_rules.py on a server).
    assert sorted(recorder.started_nodes()) == [("bad-at-start", "src-0"), ("bad-at-start", "work-1")]
    assert not (tmp_path / "slots" / "work-0_input.json").exists()
    log = engine_log(tmp_path)
    assert f"output slot of src-0 refused (slot_invalid): {bad}" in log and FIELD_NAMED[case] in log

    # And the same content arriving as an event: refused the same way, the sensor goes on.
    agent_writes(tmp_path, "src-1", {"fine": "again"})
    wait_until(lambda: recorder.started_nodes().count(("bad-at-start", "work-1")) == 2, timeout=20.0,
               what="the next run")


def test_a_fifo_at_a_watched_slot_never_blocks_and_sigint_still_stops(tmp_path):
    chain = make_chain(tmp_path, "fifo", 2)
    (tmp_path / "slots").mkdir()
    os.mkfifo(tmp_path / "slots" / "src-0_output.json")  # present at start: the reconcile reads it
    runs_file = tmp_path / "runs.jsonl"
    process = start_sensor_process(runs_file, [chain])
    try:
        os.mkfifo(tmp_path / "slots" / "src-1_output.json.fifo")
        os.replace(tmp_path / "slots" / "src-1_output.json.fifo", tmp_path / "slots" / "src-1_output.json")
        wait_until(lambda: "src-1_output.json: is a FIFO, not a regular file" in engine_log(tmp_path),
                   timeout=20.0,
                   what="the sensor to meet the FIFO moved onto src-1's slot")
        (tmp_path / "slots" / "src-1_output.json").unlink()
        agent_writes(tmp_path, "src-1", {"after": "the fifo"})
        wait_until(lambda: any(route == "route-1" for _, route, _ in routed_keys(tmp_path)), timeout=20.0,
                   what="src-1 routed after the FIFOs")
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0, "SIGINT must stop a sensor that met a FIFO"
    assert "is a FIFO, not a regular file" in engine_log(tmp_path)


def test_a_symlink_at_a_slot_path_is_not_followed(tmp_path, sensor_for):
    chain = make_chain(tmp_path, "link", 2)
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"node_id": "src-0", "status": "completed", "data": {"secret": 1},
                                   "capabilities_used": ["Write"]}))
    (tmp_path / "slots").mkdir()
    (tmp_path / "slots" / "src-0_output.json").symlink_to(outside)
    recorder = RunRecorder()
    sensor = sensor_for([chain], recorder)
    agent_writes(tmp_path, "src-1", {"i": 1})
    wait_until(lambda: ("link", "work-1") in recorder.started_nodes(), timeout=20.0, what="src-1's run")
    assert sensor.coalescer.wait_idle(5)
    assert sorted(recorder.started_nodes()) == [("link", "src-0"), ("link", "work-1")]
    assert not (tmp_path / "slots" / "work-0_input.json").exists()
    assert "is a symbolic link, not a regular file" in engine_log(tmp_path)
    with pytest.raises(SlotInvalid, match="symbolic link"):
        read_output_slot(tmp_path / "slots" / "src-0_output.json")


def test_an_external_node_waiting_on_a_fifo_fails_as_slot_invalid_at_once(tmp_path):
    slot = tmp_path / "x_output.json"
    os.mkfifo(slot)
    with pytest.raises(NodeError) as failed:
        wait_for_output(slot, since=0.0, timeout=30)
    # Failed as slot_invalid, not as the 30 s timeout: a FIFO is refused at once, never opened and waited on.
    assert failed.value.error_type == SLOT_INVALID and "FIFO" in failed.value.message


def test_an_input_slot_that_is_a_link_out_of_the_chain_is_not_written_through(tmp_path, sensor_for):
    chain = make_chain(tmp_path, "linked-input", 1)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text("the agent's link points here\n")
    (tmp_path / "slots").mkdir()
    (tmp_path / "slots" / "work-0_input.json").symlink_to(outside)
    recorder = RunRecorder()
    sensor = sensor_for([chain], recorder)
    agent_writes(tmp_path, "src-0", {"n": 1})
    wait_until(lambda: recorder.runs, timeout=20.0, what="the hand-over")
    assert sensor.coalescer.wait_idle(5)
    # The link is refused, not replaced or followed; a run at src-0 applies the chain's rules.
    assert outside.read_text() == "the agent's link points here\n"
    assert (tmp_path / "slots" / "work-0_input.json").is_symlink()
    assert recorder.started_nodes() == [("linked-input", "src-0")]
    log = engine_log(tmp_path)
    assert "work-0_input.json of work-0 cannot be written (slot_unwritable)" in log and "symbolic link" in log
