"""The sensor core on real temporary folders with real watchdog: exactly once, reconcile, bursts, signals."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from harness.chains import RunRecorder, agent_writes, make_chain, whole_json_lines
from slotrelay.chain.ledger import LEDGER_FILE_NAME, RoutingLedger
from slotrelay.chain.slots import read_slot
from tests.support.sensor_processes import start_sensor_process
from tests.support.waiting import wait_until
from tests.support.watch_chains import ledger_lines, routed_keys


def test_same_content_routes_once_new_content_routes_again(tmp_path, sensor_for):
    chain = make_chain(tmp_path, "one", 2)
    recorder = RunRecorder()
    sensor = sensor_for([chain], recorder)
    input_slot = tmp_path / "slots" / "work-0_input.json"

    agent_writes(tmp_path, "src-0", {"n": 1})
    wait_until(lambda: input_slot.exists(), timeout=20, what="the input slot")
    document = read_slot(input_slot)
    assert document["status"] == "pending"
    assert document["from_node"] == "src-0" and document["route_id"] == "route-0"
    assert document["data"] == {"n": 1}
    # The input slot is written before the route is recorded and its run requested.
    wait_until(lambda: recorder.runs, timeout=20, what="the run")
    assert recorder.started_nodes() == [("one", "work-0")]

    # The very same bytes written again (touch, rewrite): no new route, no new run.
    path = tmp_path / "slots" / "src-0_output.json"
    raw = path.read_bytes()
    seen = sensor.handled[path]
    path.write_bytes(raw)
    os.utime(path)
    sensor.settle(path.parent)
    assert sensor.handled[path] > seen, "the rewrite's events were handled, and routed nothing"
    assert len(routed_keys(tmp_path)) == 1
    assert len(recorder.runs) == 1

    agent_writes(tmp_path, "src-0", {"n": 2})
    wait_until(lambda: read_slot(input_slot)["data"] == {"n": 2}, timeout=20, what="the new content routed")
    wait_until(lambda: len(recorder.runs) == 2, timeout=20, what="the second run")
    assert sorted(recorder.started_nodes()) == [("one", "work-0"), ("one", "work-0")]
    assert list(routed_keys(tmp_path).values()) == [1, 1]
    assert not (tmp_path / "slots" / "work-1_input.json").exists()


def test_a_non_atomic_write_routes_once_when_complete(tmp_path, sensor_for):
    chain = make_chain(tmp_path, "partial", 1)
    recorder = RunRecorder()
    sensor = sensor_for([chain], recorder)
    path = tmp_path / "slots" / "src-0_output.json"
    text = json.dumps({"node_id": "src-0", "status": "completed", "data": {"big": "x" * 5000},
                       "error": None, "capabilities_used": ["Write"], "checks": {}, "attempt": 1,
                       "updated_at": "2026-11-30T00:00:00+00:00"})
    with path.open("w") as handle:
        handle.write(text[: len(text) // 2])
        handle.flush()
        sensor.settle(path.parent)
        assert sensor.handled[path], "the half write's event was handled, and routed nothing"
        assert not (tmp_path / "slots" / "work-0_input.json").exists()
        assert routed_keys(tmp_path) == Counter()
        handle.write(text[len(text) // 2:])
    wait_until(lambda: (tmp_path / "slots" / "work-0_input.json").exists(), timeout=20, what="the input slot")
    sensor.settle(path.parent)
    assert list(routed_keys(tmp_path).values()) == [1]
    assert len(recorder.runs) == 1


def test_identity_mismatch_and_failed_slots_are_handed_to_the_engine_and_unfinished_ones_wait(tmp_path,
                                                                                              sensor_for):
    chain = make_chain(tmp_path, "identity", 3)
    recorder = RunRecorder()
    sensor = sensor_for([chain], recorder)
    slots = tmp_path / "slots"
    (slots / "src-0_output.json").write_text(json.dumps(
        {"node_id": "src-0", "status": "completed", "data": {}, "capabilities_used": ["scp"]}))
    (slots / "src-1_output.json").write_text(
        json.dumps({"node_id": "someone-else", "status": "completed", "data": {}}))
    (slots / "src-2_output.json").write_text(
        json.dumps({"node_id": "src-2", "status": "running", "data": {}}))
    (slots / "src-2_output.json.tmp").write_text(
        json.dumps({"node_id": "src-2", "status": "completed", "data": {}}))
    sensor.settle(slots)
    agent_writes(tmp_path, "src-0", {"ok": True}, status="failed")
    wait_until(lambda: sum(routed_keys(tmp_path).values()) == 3, timeout=20, what="three hand-overs")
    assert sensor.coalescer.wait_idle(5)
    # Nothing routed downstream: each slot goes to a run of the chain at its own node, where the
    # engine's rules (identity check, error types, alerts) apply as in `slotrelay run`.
    assert not list(slots.glob("work-*_input.json"))
    assert sorted(route for _, route, _ in routed_keys(tmp_path)) == ["engine:src-0", "engine:src-0",
                                                                      "engine:src-1"]
    assert {node for _, node in recorder.started_nodes()} == {"src-0", "src-1"}
    log = (tmp_path / "logs" / "engine.log").read_text()
    assert "src-1 handed to the engine's rules (identity_mismatch: slot node_id is 'someone-else'" in log


def test_start_reconciles_routes_runs_and_missing_input_slots(tmp_path, sensor_for):
    chain = make_chain(tmp_path, "recon", 3, downstream="python")
    # Written while no sensor ran.
    agent_writes(tmp_path, "src-0", {"i": 0})
    agent_writes(tmp_path, "src-1", {"i": 1})
    recorder = RunRecorder()
    sensor = sensor_for([chain], recorder)
    assert sensor.coalescer.wait_idle(5)
    assert sorted(n for _, n in recorder.started_nodes()) == ["work-0", "work-1"]
    sensor.stop()

    # An input slot lost after it was routed is written again; nothing is routed or run twice.
    (tmp_path / "slots" / "work-1_input.json").unlink()
    again = sensor_for([chain], recorder)
    assert again.coalescer.wait_idle(5)
    assert read_slot(tmp_path / "slots" / "work-1_input.json")["data"] == {"i": 1}
    assert list(routed_keys(tmp_path).values()) == [1, 1]
    assert recorder.calls == 1  # both targets went in one coalesced run, and the restart started none


def test_external_targets_get_their_input_but_no_run(tmp_path, sensor_for):
    chain = make_chain(tmp_path, "handoff", 1, downstream="external")
    recorder = RunRecorder()
    sensor = sensor_for([chain], recorder)
    agent_writes(tmp_path, "src-0", {"to": "another agent"})
    wait_until(lambda: (tmp_path / "slots" / "work-0_input.json").exists(), timeout=20, what="the input slot")
    assert sensor.coalescer.wait_idle(5)
    assert recorder.runs == {}


def test_a_burst_of_1000_across_3_chains_routes_each_once_in_few_runs(tmp_path, sensor_for):
    sizes = {"burst-a": 334, "burst-b": 333, "burst-c": 333}
    chains = {cid: make_chain(tmp_path / cid, cid, n) for cid, n in sizes.items()}
    recorder = RunRecorder()
    sensor = sensor_for(list(chains.values()), recorder, window_seconds=0.1)

    # As agents write: a complete temporary file renamed onto the slot. The temporary files are written
    # beforehand, outside the watched folders, so that the burst itself is 1,000 renames and nothing else
    # (the windows it may take are counted from how long routing took).
    staging = tmp_path / "staging"
    staging.mkdir()
    documents = []
    for i in range(334):
        for cid, n in sizes.items():
            if i < n:
                tmp = staging / f"{cid}-src-{i}_output.json.tmp"
                tmp.write_text(json.dumps(
                    {"node_id": f"src-{i}", "status": "completed", "data": {"i": i},
                     "capabilities_used": ["Write"]}))
                documents.append((tmp, tmp_path / cid / "slots" / f"src-{i}_output.json"))
    began = time.monotonic()
    for tmp, path in documents:
        os.replace(tmp, path)

    wait_until(lambda: sum(sum(routed_keys(tmp_path / c).values()) for c in sizes) == 1000, timeout=60,
               what="1,000 routes")
    routing_seconds = time.monotonic() - began
    assert sensor.coalescer.wait_idle(30)
    for cid, n in sizes.items():
        assert set(routed_keys(tmp_path / cid).values()) == {1}
        assert all((tmp_path / cid / "slots" / f"work-{i}_input.json").exists() for i in range(n))
    started = Counter(recorder.started_nodes())
    assert len(started) == 1000 and set(started.values()) == {1}
    # Coalesced: at most one run per chain per window while the burst was being routed.
    windows = routing_seconds / 0.1 + 2
    runs_per_chain = Counter(chain for chain, _, _ in recorder.runs.values())
    assert max(runs_per_chain.values()) <= windows, f"{runs_per_chain} runs in {routing_seconds:.1f} s"


def test_kill_9_at_any_moment_then_restart_fires_every_route_once(tmp_path):
    n = 80
    chains = [make_chain(tmp_path / "k1", "kill-a", n), make_chain(tmp_path / "k2", "kill-b", n)]
    runs_file = tmp_path / "runs.jsonl"
    rng = random.Random(9)
    process = start_sensor_process(runs_file, chains)
    kills = 0
    for i in range(n):
        agent_writes(tmp_path / "k1", f"src-{i}", {"i": i})
        agent_writes(tmp_path / "k2", f"src-{i}", {"i": i})
        time.sleep(rng.uniform(0, 0.01))
        if i % 16 == 15:
            process.send_signal(signal.SIGKILL)
            process.wait()
            kills += 1
            process = start_sensor_process(runs_file, chains)
    try:
        def all_started() -> bool:
            ledgers = [RoutingLedger(tmp_path / k / LEDGER_FILE_NAME) for k in ("k1", "k2")]
            done = all(len(ledger.routed_entries()) == n for ledger in ledgers)
            return done and all(not ledger.unstarted_runs(c) and not ledger.unbatched(c)
                                for ledger, c in zip(ledgers, ("kill-a", "kill-b"), strict=True))
        wait_until(all_started, timeout=30, what="every route fired and its run started")
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    assert kills == 5
    for folder in ("k1", "k2"):
        assert set(routed_keys(tmp_path / folder).values()) == {1}
        for i in range(n):
            assert read_slot(tmp_path / folder / "slots" / f"work-{i}_input.json")["data"] == {"i": i}
    started = Counter((r["chain_id"], node) for r in whole_json_lines(runs_file) for node in r["start_nodes"])
    assert len(started) == 2 * n and set(started.values()) == {1}


def test_sigint_finishes_and_flushes_waiting_runs_then_exits_0(tmp_path):
    chain = make_chain(tmp_path, "stop", 5)
    runs_file = tmp_path / "runs.jsonl"
    process = start_sensor_process(runs_file, [chain])
    for i in range(5):
        agent_writes(tmp_path, f"src-{i}", {"i": i})
    wait_until(lambda: sum(routed_keys(tmp_path).values()) == 5, timeout=20, what="5 routes")
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=20) == 0
    started = sorted(node for r in whole_json_lines(runs_file) for node in r["start_nodes"])
    assert started == [f"work-{i}" for i in range(5)]


def test_an_input_slot_the_sensor_cannot_write_is_logged_and_handed_to_the_engine(tmp_path, sensor_for):
    chain = make_chain(tmp_path, "blocked", 1)
    document = json.loads(chain.read_text())
    document["nodes"][1]["input_slot"]["path"] = "blocked/work-0_input.json"
    chain.write_text(json.dumps(document))
    (tmp_path / "blocked").write_text("a file where the input slot's folder should be")
    recorder = RunRecorder()
    sensor = sensor_for([chain], recorder)
    agent_writes(tmp_path, "src-0", {"n": 1})
    wait_until(lambda: recorder.runs, timeout=20, what="the hand-over")
    assert sensor.coalescer.wait_idle(5)
    # Nothing routed; a run of the chain at src-0 applies the chain's rules (`slot_unwritable`, an alert).
    assert recorder.started_nodes() == [("blocked", "src-0")]
    assert [route for _, route, _ in routed_keys(tmp_path)] == ["engine:src-0"]
    log = (tmp_path / "logs" / "engine.log").read_text()
    assert "work-0_input.json of work-0 cannot be written (slot_unwritable)" in log


def test_a_failed_agent_slot_names_the_agents_error_type_and_is_not_an_error_again_on_restart(tmp_path,
                                                                                            sensor_for):
    chain = make_chain(tmp_path, "failing", 1)
    document = json.loads(chain.read_text())
    # A post check the failed slot cannot pass: the engine reports the agent's own error type regardless.
    document["nodes"][0]["check_rules"] = {"post_execution": [{"path_exists": "data.review_file"}]}
    chain.write_text(json.dumps(document))
    slot = tmp_path / "slots" / "src-0_output.json"
    slot.parent.mkdir(parents=True, exist_ok=True)
    failed = {"node_id": "src-0", "status": "failed", "data": {}, "capabilities_used": ["Write"],
              "error": {"error_type": "source_busy", "message": "the reviewer's queue is full"}}
    slot.write_text(json.dumps(failed))
    log = tmp_path / "logs" / "engine.log"
    first = sensor_for([chain], RunRecorder())
    wait_until(lambda: sum(routed_keys(tmp_path).values()) == 1, timeout=20, what="the hand-over")
    assert first.coalescer.wait_idle(5)
    said = log.read_text()
    assert "output of src-0 not routed: source_busy: the reviewer's queue is full" in said, said
    assert "src-0 handed to the engine's rules (source_busy: the reviewer's queue is full)" in said, said
    assert "check_failed" not in said, said
    first.stop()

    # Started again (up restarted): the slot was handled, so it is neither an ERROR nor handed over again.
    before = log.read_text().splitlines()
    again = RunRecorder()
    second = sensor_for([chain], again)
    assert second.coalescer.wait_idle(5)
    new = log.read_text().splitlines()[len(before):]
    assert not [line for line in new if "ERROR" in line], new
    assert sum(routed_keys(tmp_path).values()) == 1 and not again.runs


def _routed_by_run(folder: Path, chain_path: Path, *, target_ran: bool) -> None:
    """What `slotrelay run` leaves: src-0's answer carried to work-0's input slot (no ledger line), and,
    when the target ran, work-0's output made from that input."""
    from slotrelay.chain import load_chain
    from slotrelay.chain.routing import SlotState, WriteInput, route_finished, write_input
    from slotrelay.chain.slots import content_hash, output_slot_document, write_slot

    chain = load_chain(chain_path)
    raw = agent_writes(folder, "src-0", {"n": 1}).read_bytes()
    routed = route_finished(chain, "src-0", json.loads(raw), content_hash(raw), state=SlotState(chain))
    written = write_input(next(s for s in routed.steps if isinstance(s, WriteInput)))
    if target_ran:
        write_slot(folder / "slots" / "work-0_output.json", output_slot_document(
            "work-0", status="completed", data={"stamped": True}, produced_from=written))


def test_start_routes_nothing_a_run_already_carried_and_starts_a_target_that_did_not_run(tmp_path,
                                                                                        sensor_for):
    done, cut = tmp_path / "done", tmp_path / "cut"
    chains = [make_chain(done, "carried", 1), make_chain(cut, "not-run", 1)]
    _routed_by_run(done, chains[0], target_ran=True)
    _routed_by_run(cut, chains[1], target_ran=False)
    inputs = {folder: (folder / "slots" / "work-0_input.json").read_bytes() for folder in (done, cut)}
    recorder = RunRecorder()
    sensor = sensor_for(chains, recorder)
    assert sensor.coalescer.wait_idle(5)
    # work-0 answered the input src-0's answer gave it: nothing to route, nothing to run.
    assert ledger_lines(done) == []
    # work-0 never ran on it: started, from the input slot as it is (not written again).
    assert recorder.started_nodes() == [("not-run", "work-0")]
    assert [(r["route_id"], r["starts"]) for r in ledger_lines(cut) if r["kind"] == "routed"] == [
        ("route-0", True)]
    assert {folder: (folder / "slots" / "work-0_input.json").read_bytes() for folder in (done, cut)} == inputs
