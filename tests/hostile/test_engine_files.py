"""Issue 29/35: an agent's slots folder is hostile, so every file the chain engine writes there goes
through slotrelay.fsio (CONTRACTS.md#files-the-product-writes).

Each case plants what an agent could leave in the chain's folder: a symbolic link at an output slot,
an input slot, a babel log, `logs/engine.log`, the routing ledger or the `alerts/` folder, pointing
outside the chain's folder, or a FIFO at one of them. The file outside is never touched, nothing
hangs, and the engine says what it refused by its existing rules: a write the engine makes while a
chain runs fails as `slot_unwritable` (an alert, an engine log line), a file refused before the start
is an L2 problem (`cannot start: ...`, exit 3). One case runs a chain on a real Prefect server.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slotrelay import fsio
from slotrelay.chain import Chain, load_chain
from slotrelay.chain.alerts import Alert, alert_path, read_alert, write_alert
from slotrelay.chain.enginelog import engine_logger
from slotrelay.chain.ledger import LEDGER_FILE_NAME, RoutingLedger, new_routed_entry
from slotrelay.chain.preflight import path_problems
from slotrelay.chain.runner import dual_write, publish_output
from slotrelay.chain.slots import output_slot_document, read_slot, write_slot
from slotrelay.errors import EnvironmentMissing
from slotrelay.timestamps import now_iso

OUTSIDE_TEXT = "the outside file: nothing of the chain's may land here\n"
STEPS = "def ok(data):\n    return {'ok': True}\n"
# A planted FIFO must fail at once; a hang shows as this thread still alive (never a wall-time bound).
HANG_LIMIT_S = 60


def chain_in(folder: Path, *, babel: bool = False, **extra: Any) -> Chain:
    """A two-node chain `a -> b` of python nodes in `folder/chain`, slots under `slots/`."""
    root = folder / "chain"
    root.mkdir()
    (root / "steps.py").write_text(STEPS)
    output_a: dict[str, Any] = {"slot_id": "a", "path": "slots/a_output.json"}
    if babel:
        output_a["babel_path"] = "slots/a.babel.jsonl"
    document = {
        "chain_id": "hostile",
        "nodes": [
            {"node_id": "a", "input_slot": None, "output_slot": output_a,
             "executor": {"kind": "python", "callable": "steps:ok"}},
            {"node_id": "b", "input_slot": {"slot_id": "b-in", "path": "slots/b_input.json"},
             "output_slot": {"slot_id": "b", "path": "slots/b_output.json"},
             "executor": {"kind": "python", "callable": "steps:ok"}},
        ],
        "routes": [{"route_id": "a-to-b", "from_node": "a", "to_node": "b",
                    "condition": {"field": "status", "operator": "equals", "value": "completed"}}],
        **extra,
    }
    (root / "node_chain.json").write_text(json.dumps(document))
    (root / "slots").mkdir()
    return load_chain(root / "node_chain.json")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the chain's folder, with content a test checks is never changed."""
    path = tmp_path / "outside.txt"
    path.write_text(OUTSIDE_TEXT)
    return path


def plant_link(path: Path, target: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def untouched(path: Path) -> bool:
    return path.read_text() == OUTSIDE_TEXT


@pytest.fixture
def no_hang() -> Iterator[Callable[[Callable[[], Any], Path], BaseException | None]]:
    """Run a call that may open a planted FIFO in a thread; returns what it raised (None if nothing).

    A call still blocked after HANG_LIMIT_S fails the test; the FIFO is then opened from this side so
    the blocked thread ends (it must not outlive the test)."""
    def run(call: Callable[[], Any], fifo: Path) -> BaseException | None:
        raised: list[BaseException] = []

        def target() -> None:
            try:
                call()
            except BaseException as error:  # noqa: BLE001 (handed to the test)
                raised.append(error)

        worker = threading.Thread(target=target, name="fifo-call")
        worker.start()
        worker.join(HANG_LIMIT_S)
        if worker.is_alive():
            for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
                try:
                    os.close(os.open(fifo, flags))
                except OSError:
                    continue
            worker.join()
            pytest.fail(f"the engine blocked on the FIFO at {fifo}")
        return raised[0] if raised else None

    yield run


def test_an_output_slot_that_is_a_link_out_of_the_chain_is_refused(tmp_path, outside) -> None:
    chain = chain_in(tmp_path)
    plant_link(chain.resolve("slots/a_output.json"), outside)
    with pytest.raises(fsio.LinkRefused) as refused:
        publish_output(chain, "a", output_slot_document("a", status="completed", data={"x": 1}))
    # An OSError naming the slot: tasks/node.py and the sensor turn it into `slot_unwritable`.
    assert isinstance(refused.value, OSError)
    assert refused.value.filename == str(chain.resolve("slots/a_output.json"))
    assert untouched(outside)
    assert chain.resolve("slots/a_output.json").is_symlink()


def test_a_slots_folder_that_is_a_link_out_of_the_chain_is_refused(tmp_path) -> None:
    chain = chain_in(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (chain.base_dir / "slots").rmdir()
    plant_link(chain.base_dir / "slots", elsewhere)
    with pytest.raises(fsio.LinkRefused):
        write_slot(chain.resolve("slots/b_input.json"), {"status": "pending", "data": {}})
    assert list(elsewhere.iterdir()) == []
    assert read_slot(chain.resolve("slots/b_input.json")) is None
    # Before a start, L2 names it.
    assert any("slots is a symbolic link" in problem for problem in path_problems(chain))


def test_a_babel_log_that_is_a_link_out_of_the_chain_is_refused(tmp_path, outside) -> None:
    chain = chain_in(tmp_path, babel=True)
    plant_link(chain.resolve("slots/a.babel.jsonl"), outside)
    with pytest.raises(fsio.LinkRefused):
        dual_write(chain, "a", output_slot_document("a", status="completed", data={"x": 1}))
    assert untouched(outside)


def test_a_babel_log_that_is_a_fifo_never_hangs(tmp_path, no_hang) -> None:
    chain = chain_in(tmp_path, babel=True)
    fifo = chain.resolve("slots/a.babel.jsonl")
    os.mkfifo(fifo)
    raised = no_hang(lambda: dual_write(chain, "a", output_slot_document("a", status="completed", data={})),
                     fifo)
    assert isinstance(raised, fsio.NotRegular) and raised.kind == "a FIFO"


def test_an_input_slot_that_is_a_fifo_is_replaced_by_no_write_and_never_hangs(tmp_path, no_hang) -> None:
    chain = chain_in(tmp_path)
    fifo = chain.resolve("slots/b_input.json")
    os.mkfifo(fifo)
    raised = no_hang(lambda: write_slot(fifo, {"status": "pending", "data": {}}), fifo)
    assert isinstance(raised, fsio.NotRegular) and raised.kind == "a FIFO"
    assert fifo.is_fifo()


def test_an_engine_log_that_is_a_link_out_of_the_chain_is_refused_and_said(tmp_path, outside, capfd) -> None:
    chain = chain_in(tmp_path)
    plant_link(chain.logs_dir / "engine.log", outside)
    assert any("engine.log is a symbolic link" in problem for problem in path_problems(chain))
    logger = engine_logger(chain.logs_dir)
    logger.info("a line of the engine")
    assert untouched(outside)
    said = capfd.readouterr().err
    assert f"engine log {chain.logs_dir / 'engine.log'} refused" in said and "symbolic link" in said
    assert "a line of the engine" in said and "Traceback" not in said
    for handler in logger.handlers:
        logger.removeHandler(handler)


def test_an_engine_log_that_is_a_fifo_never_hangs(tmp_path, no_hang, capfd) -> None:
    chain = chain_in(tmp_path)
    chain.logs_dir.mkdir()
    fifo = chain.logs_dir / "engine.log"
    os.mkfifo(fifo)
    logger: list[logging.Logger] = []
    assert no_hang(lambda: logger.append(engine_logger(chain.logs_dir)), fifo) is None
    assert "a FIFO" in capfd.readouterr().err
    for handler in logger[0].handlers:
        logger[0].removeHandler(handler)


def test_a_ledger_that_is_a_link_out_of_the_chain_is_refused(tmp_path, outside) -> None:
    chain = chain_in(tmp_path)
    ledger_path = chain.work_dir / LEDGER_FILE_NAME
    ledger = RoutingLedger(ledger_path)  # read while still absent
    plant_link(ledger_path, outside)
    entry = new_routed_entry(chain_id="hostile", route_id="a-to-b", source_hash="sha256:0", from_node="a",
                             to_node="b", input_slot=str(chain.resolve("slots/b_input.json")))
    with pytest.raises(fsio.LinkRefused):
        ledger.record_routed([entry])
    with pytest.raises(EnvironmentMissing, match="symbolic link"):
        RoutingLedger(ledger_path)
    assert untouched(outside)
    assert any(LEDGER_FILE_NAME in problem for problem in path_problems(chain))


def test_an_alerts_folder_that_is_a_link_out_of_the_chain_is_refused(tmp_path) -> None:
    chain = chain_in(tmp_path)
    elsewhere = tmp_path / "elsewhere-alerts"
    elsewhere.mkdir()
    plant_link(chain.alerts_dir, elsewhere)
    alert = Alert(alert_id="x", created_at=now_iso(), chain_id="hostile", chain_path=None, flow_run_id="r",
                  node_id="a", error_type="unknown", message="", attempts=1, input_slot=None,
                  output_slot=None, handling="fail", reason="test")
    with pytest.raises(fsio.LinkRefused):
        write_alert(alert_path(chain.alerts_dir, "a"), alert)
    assert list(elsewhere.iterdir()) == []
    assert any("alerts is a symbolic link" in problem for problem in path_problems(chain))


@pytest.mark.prefect_server
def test_a_run_whose_input_slot_is_a_link_out_of_the_chain_alerts_slot_unwritable(
    prefect_server: str, tmp_path, outside
) -> None:
    from flows.chain import read_summary, run_chain

    chain = chain_in(tmp_path, pause_timeout_seconds=1)  # nobody decides: the pause ends the run
    plant_link(chain.resolve("slots/b_input.json"), outside)
    state = run_chain(str(chain.source), return_state=True)
    summary = read_summary(chain, state)
    assert summary["nodes"]["a"]["state"] == "Completed"
    assert summary["nodes"]["b"]["state"] == "Failed"
    assert summary["nodes"]["b"]["error_type"] == "slot_unwritable"
    [alert] = [read_alert(path) for path in summary["alerts"]]
    assert (alert.node_id, alert.error_type) == ("b", "slot_unwritable")
    assert "symbolic link" in alert.message
    log = (chain.logs_dir / "engine.log").read_text()
    assert "b: a slot cannot be written (slot_unwritable)" in log and "symbolic link" in log
    assert untouched(outside)
    assert chain.resolve("slots/b_input.json").is_symlink()
