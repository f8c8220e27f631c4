"""Fuzz: slots against the router — no exception escapes, and the sensor keeps routing a control chain.

Hypothesis writes what an agent might leave at an external node's output slot: arbitrary JSON,
slot-shaped documents whose fields hold any JSON type, raw bytes, deep nesting, lone surrogates,
and other file types (a FIFO, a symlink, a folder). Two properties:

1. `ChainRouter.route_output` never raises on any of it (the router itself, not its guard), and a
   control slot of the same chain written next is routed.
2. Under the real sensor (watchdog, ledger, coalescer), a stream of such writes never stops routing
   a second, well-behaved chain watched by the same process.

Bounded time: the example counts are fixed below (1,000 + 200 cases, about 30 s on 2 cores); no
deadline per example, since the machine's load must not make the suite flaky.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slotrelay.chain.sensor import ChainRouter, SlotSensor
from tests.support.waiting import wait_until

ROUTER_EXAMPLES = 1000
SENSOR_EXAMPLES = 200

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
slot_shaped = st.fixed_dictionaries(
    {},
    optional={
        "node_id": st.sampled_from(["src-0", "src-1", "control", ""]) | json_values,
        "status": st.sampled_from(["completed", "failed", "skipped", "running"]) | json_values,
        "data": st.fixed_dictionaries({}, optional={
            "kind": st.sampled_from(["a", "b"]) | json_values,
            "items": json_values,
            "file": st.sampled_from(
                ["node_chain.json", "missing.txt", "bad\x00name", "x" * 5000]) | json_values,
        }) | json_values,
        "error": json_values | st.fixed_dictionaries({"error_type": json_values, "message": json_values}),
        "capabilities_used": st.lists(st.sampled_from(["Write", "scp"]) | json_values,
                                      max_size=3) | json_values,
        "checks": json_values,
        "attempt": json_values,
    },
)


def _deep(levels: int) -> bytes:
    head = b'{"node_id": "src-0", "status": "completed", "data": {"d": '
    return head + b"[" * levels + b"]" * levels + b"}}"


raw_bytes = (
    st.binary(max_size=200)
    | st.builds(_deep, st.integers(min_value=50, max_value=200_000))
    | st.just(
        b'{"node_id": "src-0", "status": "completed", "data": {"s": "\\ud800"}, "capabilities_used": '
        b'["Write"]}')
)
contents = (
    st.tuples(st.just("json"), slot_shaped | json_values)
    | st.tuples(st.just("bytes"), raw_bytes)
    | st.tuples(st.sampled_from(["fifo", "symlink", "folder"]), st.none())
)


def make_fuzz_chain(folder: Path, chain_id: str) -> Path:
    """Two external sources: `src-0` (fuzzed) with routes on every operator and check kind, `src-1`
    (control)."""
    (folder / "slots").mkdir(parents=True, exist_ok=True)
    (folder / "item.schema.json").write_text(json.dumps({"type": "object", "required": ["node_id"]}))
    external = {"kind": "external"}
    nodes = [
        {"node_id": "src-0", "output_slot": {"slot_id": "s0", "path": "slots/src-0_output.json"},
         "capabilities": ["Write"], "forbidden_capabilities": ["scp"], "executor": external},
        {"node_id": "src-1", "output_slot": {"slot_id": "s1", "path": "slots/src-1_output.json"},
         "capabilities": ["Write"], "executor": external},
    ]
    routes = []
    conditions = [
        {"field": "status", "operator": "equals", "value": "completed"},
        {"field": "data.kind", "operator": "in", "value": ["a", "b"]},
        {"field": "data.items", "operator": "length_greater_than", "value": 0,
         "additional_checks": [{"path_exists": "data.file"}, {"field_equals": ["status", "completed"]},
                               {"json_schema": "item.schema.json"}, "attested by the agent"]},
        {"field": "data.items", "operator": "length_equals", "value": 2},
    ]
    for i, condition in enumerate(conditions):
        nodes.append(
            {"node_id": f"t-{i}", "input_slot": {"slot_id": f"t{i}-in", "path": f"slots/t-{i}_input.json"},
                      "output_slot": {"slot_id": f"t{i}", "path": f"slots/t-{i}_output.json"},
                      "executor": external})
        routes.append(
            {"route_id": f"r-{i}", "from_node": "src-0", "to_node": f"t-{i}", "condition": condition})
    nodes.append({"node_id": "ctl", "input_slot": {"slot_id": "ctl-in", "path": "slots/ctl_input.json"},
                  "output_slot": {"slot_id": "ctl", "path": "slots/ctl_output.json"}, "executor": external})
    routes.append({"route_id": "r-ctl", "from_node": "src-1", "to_node": "ctl",
                   "condition": {"field": "status", "operator": "equals", "value": "completed"}})
    path = folder / "node_chain.json"
    path.write_text(json.dumps({"chain_id": chain_id, "nodes": nodes, "routes": routes}))
    return path


def place(slot: Path, kind: str, value: object) -> None:
    """Put fuzzed content at a slot path, replacing whatever is there (as an agent's rename would)."""
    staged = slot.with_name(f"{slot.name}.{uuid.uuid4().hex[:6]}.tmp")
    if kind == "json":
        staged.write_text(json.dumps(value))
    elif kind == "bytes":
        staged.write_bytes(value)
    elif kind == "fifo":
        os.mkfifo(staged)
    elif kind == "symlink":
        staged.symlink_to(slot.parent.parent / "node_chain.json")
    if kind == "folder":
        if slot.is_dir() and not slot.is_symlink():
            return
        slot.unlink(missing_ok=True)
        slot.mkdir()
        return
    if slot.is_dir() and not slot.is_symlink():
        shutil.rmtree(slot)
    os.replace(staged, slot)


def control_slot(folder: Path, n: int) -> None:
    slot = folder / "slots" / "src-1_output.json"
    staged = slot.with_name(f"{slot.name}.tmp")
    staged.write_text(json.dumps({"node_id": "src-1", "status": "completed", "data": {"n": n},
                                  "capabilities_used": ["Write"]}))
    os.replace(staged, slot)


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzz-slots-") as folder:
        yield Path(folder)


class _Counter:
    n = 0


_ROUTERS: dict[Path, ChainRouter] = {}


@settings(max_examples=ROUTER_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(content=contents)
def test_no_slot_content_makes_the_router_raise(workdir: Path, content: tuple[str, object]) -> None:
    folder = workdir / "router"
    if folder not in _ROUTERS:
        _ROUTERS[folder] = ChainRouter(make_fuzz_chain(folder, "fuzz-router"))
    router = _ROUTERS[folder]
    kind, value = content
    place(folder / "slots" / "src-0_output.json", kind, value)
    router.route_output("src-0")  # must not raise, whatever is at the path
    _Counter.n += 1
    control_slot(folder, _Counter.n)
    fired = router.route_output("src-1")
    assert [e.to_node for e in fired] == [], "ctl is external: routed, no run"
    assert json.loads((folder / "slots" / "ctl_input.json").read_text())["data"] == {"n": _Counter.n}


class _Recorder:
    def __init__(self) -> None:
        self.runs: list[tuple[str, list[str]]] = []

    def __call__(self, chain_id: str, start_nodes: list[str], key: str) -> str:
        self.runs.append((chain_id, list(start_nodes)))
        return key


@pytest.fixture(scope="module")
def watched(workdir: Path) -> Iterator[tuple[Path, Path, SlotSensor]]:
    fuzzed = workdir / "sensor-fuzzed"
    control = workdir / "sensor-control"
    sensor = SlotSensor([ChainRouter(make_fuzz_chain(fuzzed, "fuzz-a")),
                         ChainRouter(make_fuzz_chain(control, "fuzz-b"))], _Recorder())
    before = set(threading.enumerate())
    sensor.start()
    try:
        yield fuzzed, control, sensor
    finally:
        sensor.stop()

        def running() -> list[str]:
            return [t.name for t in threading.enumerate() if t not in before and t.is_alive()]

        # Whatever it met, stopping ends every thread the sensor started (its watcher, timers, coalescer).
        wait_until(lambda: not running(), timeout=60, what="the sensor's threads to end once it stopped",
                   details=lambda: f"still running: {running()}")


@settings(max_examples=SENSOR_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(content=contents)
def test_the_sensor_keeps_routing_a_control_chain(watched: tuple[Path, Path, SlotSensor],
                                                  content: tuple[str, object]) -> None:
    fuzzed, control, _ = watched
    kind, value = content
    place(fuzzed / "slots" / "src-0_output.json", kind, value)
    _Counter.n += 1
    n = _Counter.n
    control_slot(control, n)
    routed = control / "slots" / "ctl_input.json"

    def routed_now() -> bool:
        try:
            return bool(json.loads(routed.read_text())["data"] == {"n": n})
        except (OSError, ValueError, KeyError, TypeError):
            return False

    wait_until(routed_now, timeout=60, interval=0.005,
               what=f"the control chain's slot to be routed after {kind} {value!r:.200}")
