"""Seed 8.6 on a real Prefect server: `slotrelay run` killed with -9 mid-chain, then `run --resume`.

The engine is stateless and the data is in the slots: the resumed run settles what the slots say is
done without running it, and runs only what still has work.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.commands import SLOTRELAY
from slotrelay.chain.slots import content_hash
from tests.support.chain_specs import node, route
from tests.support.processes import wait_while_running

pytestmark = pytest.mark.prefect_server

STEPS = '''
import pathlib, time

HERE = pathlib.Path(__file__).parent


def mark(name):
    with (HERE / "runs.txt").open("a") as runs:
        runs.write(f"{name} {time.time()}\\n")


def first(data):
    mark("first")
    return {"n": 1}


def second(data):
    mark("second")
    deadline = time.monotonic() + 120
    while not (HERE / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"n": data["n"] + 1}


def third(data):
    mark("third")
    return {"n": data["n"] + 1}
'''


def runs(folder: Path) -> list[tuple[str, float]]:
    path = folder / "runs.txt"
    if not path.exists():
        return []
    return [(name, float(at)) for name, at in (line.split() for line in path.read_text().splitlines())]


def test_kill_9_mid_chain_then_resume_runs_each_completed_node_once(prefect_server, write_chain,
                                                                    tmp_path) -> None:
    python = {"kind": "python"}
    path = write_chain({
        "chain_id": "killed",
        "nodes": [node("first", start=True, executor={**python, "callable": "steps:first"}),
                  node("second", executor={**python, "callable": "steps:second"}),
                  node("third", executor={**python, "callable": "steps:third"})],
        "routes": [route("first", "second"), route("second", "third")],
    }, {"steps.py": STEPS})
    folder = path.parent
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    with (tmp_path / "first-run.log").open("w") as log:
        killed = subprocess.Popen([SLOTRELAY, "run", str(path), "--json"], env=env, stdout=log, stderr=log)
    wait_while_running(killed, lambda: [name for name, _ in runs(folder)] == ["first", "second"], timeout=180,
                       what="`second` to start", log=tmp_path / "first-run.log")
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    (folder / "release").touch()

    began = time.time()
    resumed = subprocess.run([SLOTRELAY, "run", str(path), "--resume", "--json"], env=env,
                             capture_output=True,
                             text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert summary["state"] == "COMPLETED"
    assert {n: s["state"] for n, s in summary["nodes"].items()} == {
        "first": "Completed", "second": "Completed", "third": "Completed"}
    assert summary["nodes"]["first"]["attempts"] == 0, "settled from its slot, not run"
    # `first` completed before the kill and ran exactly once; `second` was cut short and ran again.
    assert [name for name, _ in runs(folder)] == ["first", "second", "second", "third"]
    assert json.loads((folder / "slots" / "third_output.json").read_text())["data"] == {"n": 3}
    log = (folder / "logs" / "engine.log").read_text()
    assert "first: its output slot says completed, made from its current input: not run again" in log
    second_again = runs(folder)[2][1]
    print(f"\nresume: {second_again - began:.2f} s from `run --resume` to the first node with work left")


ROUNDS = '''
import pathlib

HERE = pathlib.Path(__file__).parent


def mark(name, n):
    with (HERE / "runs.txt").open("a") as runs:
        runs.write(f"{name} {n}\\n")


def first(data):
    n = int((HERE / "value.txt").read_text())
    mark("first", n)
    return {"n": n}


def step(name):
    def run(data):
        mark(name, data["n"])
        return {"n": data["n"]}
    return run


second, third, fourth = step("second"), step("third"), step("fourth")
'''


@pytest.fixture(scope="module")
def rounds(prefect_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A four-node chain's folder after one run on the value 1 (`after_one`), and after a second run on
    the value 2 (`after_two`), each kept to be copied: the runs before a crash or a power cut are the same
    in every test below, and the engine is stateless, so a copy of the folder is where a resume starts."""
    python = {"kind": "python"}
    base = tmp_path_factory.mktemp("rounds")
    folder = base / "chain"
    folder.mkdir()
    (folder / "rounds.py").write_text(ROUNDS, encoding="utf-8")
    (folder / "node_chain.json").write_text(json.dumps({
        "chain_id": "rounds",
        "nodes": [node("first", start=True, executor={**python, "callable": "rounds:first"}),
                  *(node(n, executor={**python, "callable": f"rounds:{n}"})
                    for n in ("second", "third", "fourth"))],
        "routes": [route("first", "second"), route("second", "third"), route("third", "fourth")],
    }, indent=2), encoding="utf-8")
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    kept = {}
    for value, name in (("1", "after_one"), ("2", "after_two")):
        (folder / "value.txt").write_text(value)
        done = run_json(folder / "node_chain.json", env)
        assert done.returncode == 0, done.stderr[-3000:]
        kept[name] = base / name
        shutil.copytree(folder, kept[name], symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return kept


def run_json(path: Path, env: dict[str, str], *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([SLOTRELAY, "run", str(path), "--json", *options], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def copy_of(kept: Path, tmp_path: Path) -> Path:
    """This test's own copy of a kept chain folder: its node_chain.json."""
    folder = tmp_path / "chain"
    shutil.copytree(kept, folder, symlinks=True)
    return folder / "node_chain.json"


def test_a_crash_between_an_output_and_its_routes_then_resume_runs_everything_downstream_on_the_new_data(
        prefect_server, rounds, tmp_path) -> None:
    path = copy_of(rounds["after_one"], tmp_path)
    folder = path.parent
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    # The second run: `second` writes its output for the new value, then the process dies (the test-only
    # fault hook, kill -9) before second's route writes third's input.
    (folder / "value.txt").write_text("2")
    crashed = run_json(path, {**env, "SLOTRELAY_TEST_CRASH_BEFORE_ROUTE": "second"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert json.loads((folder / "slots" / "second_output.json").read_text())["data"] == {"n": 2}
    assert json.loads((folder / "slots" / "third_input.json").read_text())["data"] == {"n": 1}

    resumed = run_json(path, env, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert {n: (s["state"], s["attempts"]) for n, s in summary["nodes"].items()} == {
        "first": ("Completed", 0), "second": ("Completed", 0), "third": ("Completed", 1),
        "fourth": ("Completed", 1)}
    marks = (folder / "runs.txt").read_text().split("\n")
    assert marks[-3:-1] == ["third 2", "fourth 2"]
    assert json.loads((folder / "slots" / "fourth_output.json").read_text())["data"] == {"n": 2}


def _lose(slot: Path, how: str, earlier: bytes) -> None:
    """Leave a slot as a power cut can leave a file written without fsync: gone, empty, cut short, or
    the version before (the rename lost); its write time long past, as after a reboot."""
    if how == "missing":
        slot.unlink()
        return
    content = {"empty": b"", "truncated": slot.read_bytes()[:40], "previous": earlier}[how]
    slot.write_bytes(content)
    past = time.time() - 3600
    os.utime(slot, (past, past))


@pytest.mark.parametrize("how", ["missing", "empty", "truncated", "previous"])
def test_a_routed_input_slot_a_power_cut_lost_is_written_again_on_resume_and_its_node_runs_on_it(
        prefect_server, rounds, tmp_path, how) -> None:
    """The durability contract (CONTRACTS.md#files-the-product-writes): a python node's input slot a
    route writes is not fsynced, because resume writes it again from its source's output."""
    earlier = (rounds["after_one"] / "slots" / "third_input.json").read_bytes()
    path = copy_of(rounds["after_two"], tmp_path)
    folder, slots = path.parent, path.parent / "slots"
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    # The power cut: every fsynced slot survived (second's and third's outputs among them), third's
    # input, written without fsync, did not.
    _lose(slots / "third_input.json", how, earlier)
    (folder / "runs.txt").write_text("")

    resumed = run_json(path, env, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert {n: (s["state"], s["attempts"]) for n, s in summary["nodes"].items()} == {
        "first": ("Completed", 0), "second": ("Completed", 0), "third": ("Completed", 1),
        "fourth": ("Completed", 1)}, "third's output no longer answers an input that is there: it runs again"
    assert (folder / "runs.txt").read_text().split() == ["third", "2", "fourth", "2"]
    rebuilt = json.loads((slots / "third_input.json").read_text())
    second_output = (slots / "second_output.json").read_bytes()
    assert rebuilt["data"] == {"n": 2} and rebuilt["from_output"] == content_hash(second_output)
    assert json.loads((slots / "fourth_output.json").read_text())["data"] == {"n": 2}
