"""Chains, agent writes and a run recorder for the sensor and scale tests and the routing benches, built on
real temporary folders; a small two-node chain that runs without an agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

from slotrelay.chain.slots import output_slot_document

ROOT = Path(__file__).resolve().parents[1]

WORK_CALLABLE = "sensor_work:stamp"
WORK_MODULE = '''
def stamp(data):
    return {"seen": data, "stamped": True}
'''


def make_chain(
    folder: Path,
    chain_id: str,
    sources: int,
    *,
    downstream: str = "python",
    extra: dict | None = None,
) -> Path:
    """Write a chain with `sources` external nodes `src-i`, each routed to its own node `work-i`.

    Parameters:
        folder: where the chain file and its `slots/` go.
        chain_id: the chain's id.
        sources: how many source/target pairs.
        downstream: the targets' executor kind: "python" (runs inside a flow run) or "external".
        extra: extra top-level keys (e.g. error_types).

    Returns:
        The chain file.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sensor_work.py").write_text(WORK_MODULE)
    nodes, routes = [], []
    for i in range(sources):
        nodes.append({
            "node_id": f"src-{i}",
            "output_slot": {"slot_id": f"src-{i}", "path": f"slots/src-{i}_output.json"},
            "capabilities": ["Write"],
            "executor": {"kind": "external"},
        })
        target = {
            "node_id": f"work-{i}",
            "input_slot": {"slot_id": f"work-{i}-in", "path": f"slots/work-{i}_input.json"},
            "output_slot": {"slot_id": f"work-{i}", "path": f"slots/work-{i}_output.json"},
            "executor": {"kind": "python", "callable": WORK_CALLABLE} if downstream == "python" else {
                "kind": "external"},
        }
        nodes.append(target)
        routes.append({
            "route_id": f"route-{i}",
            "from_node": f"src-{i}",
            "to_node": f"work-{i}",
            "condition": {"field": "status", "operator": "equals", "value": "completed"},
        })
    chain = {"chain_id": chain_id, "nodes": nodes, "routes": routes, **(extra or {})}
    path = folder / "node_chain.json"
    path.write_text(json.dumps(chain, indent=1))
    return path


def agent_writes(folder: Path, node_id: str, data: dict, *, status: str = "completed",
                 atomic: bool = True) -> Path:
    """Write a node's output slot as an agent outside would: tmp + rename, no fsync (fast, like most
    agents)."""
    path = folder / "slots" / f"{node_id}_output.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(output_slot_document(node_id, status=status, data=data, capabilities_used=["Write"]))
    if not atomic:
        path.write_text(text)
        return path
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


class RunRecorder:
    """The start-run action for core tests: records each run; like Prefect, a repeated key returns the same
    run.

    With `path`, runs are appended to a JSON-lines file, so a sensor in another process can be checked.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.runs: dict[str, tuple[str, list[str], str]] = {}
        self.calls = 0
        self._lock = threading.Lock()
        if path is not None and path.exists():
            for line in path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except ValueError:  # torn by a kill -9: that run is requested again and recorded anew
                    continue
                self.runs[record["key"]] = (record["chain_id"], record["start_nodes"], record["run_id"])

    def __call__(self, chain_id: str, start_nodes: list[str], idempotency_key: str) -> str:
        with self._lock:
            self.calls += 1
            if idempotency_key in self.runs:
                return self.runs[idempotency_key][2]
            run_id = uuid.uuid4().hex
            self.runs[idempotency_key] = (chain_id, list(start_nodes), run_id)
            if self.path is not None:
                with self.path.open("a") as handle:
                    handle.write(json.dumps({"key": idempotency_key, "chain_id": chain_id,
                                             "start_nodes": start_nodes, "run_id": run_id}) + "\n")
                    handle.flush()
                    os.fsync(handle.fileno())
            return run_id

    def started_nodes(self) -> list[tuple[str, str]]:
        """Every (chain_id, node) a run was started at, once per run."""
        return [(chain, node) for chain, nodes, _ in self.runs.values() for node in nodes]


def whole_json_lines(path: Path) -> list[dict]:
    """The entries of a JSON-lines file another process appends to (the runs a `RunRecorder(path)`
    recorded, a ledger), but a line not yet whole, which a writer killed mid-line leaves."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


# The small chain's nodes: two plain functions, no agent.
SMALL_NODES = '''
def count(data):
    return {"numbers": [1, 2, 3]}


def double(data):
    return {"doubled": [2 * n for n in data["numbers"]]}
'''


def small_chain(folder: Path, chain_id: str = "small") -> Path:
    """A two-node python chain (count, then double) that runs on its own, without any agent."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{chain_id}_nodes.py").write_text(SMALL_NODES)
    chain = {
        "chain_id": chain_id,
        "nodes": [
            {"node_id": "count", "output_slot": {"slot_id": "count", "path": "slots/count_output.json"},
             "executor": {"kind": "python", "callable": f"{chain_id}_nodes:count"}},
            {"node_id": "double", "input_slot": {"slot_id": "double-in", "path": "slots/double_input.json"},
             "output_slot": {"slot_id": "double", "path": "slots/double_output.json"},
             "executor": {"kind": "python", "callable": f"{chain_id}_nodes:double"}},
        ],
        "routes": [{"route_id": "count-to-double", "from_node": "count", "to_node": "double"}],
    }
    path = folder / "node_chain.json"
    path.write_text(json.dumps(chain))
    return path


# The nodes of `asking_chains`: `ask` fails with an error type no rule covers, so a person decides.
ASK_MODULE = '''
from slotrelay.chain import NodeError


def first(data):
    return {"prepared": True}


def ask(data):
    raise NodeError("needs_a_person", "no rule covers this: a person decides")


def after(data):
    return {"after": data}
'''


def _ask_node(node_id: str, function: str, *, with_input: bool) -> dict:
    """A python node of `asking_chains` running `ask_work:function`."""
    return {
        "node_id": node_id,
        "input_slot": {"slot_id": f"{node_id}-in",
                       "path": f"slots/{node_id}_input.json"} if with_input else None,
        "output_slot": {"slot_id": node_id, "path": f"slots/{node_id}_output.json"},
        "executor": {"kind": "python", "callable": f"ask_work:{function}"},
    }


def asking_chains(folder: Path) -> tuple[Path, Path]:
    """Two chains of python nodes in `folder`: `waits`, first -> ask (fails with an undeclared type: a
    person decides) -> after, and `other`, one node. Returns their files."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ask_work.py").write_text(ASK_MODULE)
    always = {"field": "status", "operator": "equals", "value": "completed"}
    waits = {
        "chain_id": "waits",
        "nodes": [_ask_node("first", "first", with_input=False), _ask_node("ask", "ask", with_input=True),
                  _ask_node("after", "after", with_input=True)],
        "routes": [{"route_id": "first-to-ask", "from_node": "first", "to_node": "ask", "condition": always},
                   {"route_id": "ask-to-after", "from_node": "ask", "to_node": "after", "condition": always}],
    }
    other = {"chain_id": "other", "nodes": [_ask_node("first", "first", with_input=False)]}
    (folder / "waits.json").write_text(json.dumps(waits))
    (folder / "other.json").write_text(json.dumps(other))
    return folder / "waits.json", folder / "other.json"


def start_watch_warm(chain: Path, warm: int, api_url: str, log: Path) -> subprocess.Popen[bytes]:
    """`slotrelay watch CHAIN --warm N` on `api_url`, run from the repository's root, its output in `log`
    (the benches' variants of a served chain)."""
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "watch", str(chain), "--warm", str(warm)],
            cwd=ROOT, env={**os.environ, "PREFECT_API_URL": api_url, "COLUMNS": "200"},
            stdout=out, stderr=subprocess.STDOUT)
