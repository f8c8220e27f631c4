"""The documented commands: validate and graph (in-process), and run's refusals before any flow starts."""

from __future__ import annotations

import gc
import json
import os
import struct
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slotrelay.cli import app
from tests.support.chain_specs import EXAMPLE, ROOT, node, route
from tests.support.slotrelay_up import migrated_home

runner = CliRunner()
CHAIN = str(EXAMPLE / "node_chain.json")


def test_validate_the_example() -> None:
    done = runner.invoke(app, ["validate", CHAIN])
    assert done.exit_code == 0
    assert "valid chain 'phase2-content': 11 nodes, 10 routes, 21 error types" in done.output


def test_validate_lists_every_problem_with_its_path_and_exits_2(tmp_path: Path) -> None:
    document = json.loads(Path(CHAIN).read_text())
    document["nodes"][0]["retyr"] = 1
    document["routes"][0]["priority"] = "high"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    done = runner.invoke(app, ["validate", str(bad)])
    assert done.exit_code == 2
    assert "2 problem(s)" in done.output
    assert "$.nodes[0]: Additional properties are not allowed ('retyr' was unexpected)" in done.output
    assert "$.routes[0].priority: 'high' does not match" in done.output


def test_graph_formats(tmp_path: Path) -> None:
    mermaid = runner.invoke(app, ["graph", CHAIN, "--format", "mermaid"])
    assert mermaid.exit_code == 0 and mermaid.output.startswith("flowchart TB")
    assert '-->|"route-dedup-to-empty-report<br/>data.items length_equals 0"|' in mermaid.output
    dot_file = tmp_path / "chain.dot"
    assert runner.invoke(app, ["graph", CHAIN, "--format", "dot", "-o", str(dot_file)]).exit_code == 0
    assert dot_file.read_text().startswith('digraph "phase2-content" {')
    png = tmp_path / "chain.png"
    done = runner.invoke(app, ["graph", CHAIN, "--format", "png", "-o", str(png)])
    assert done.exit_code == 0, done.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert runner.invoke(app, ["graph", CHAIN, "--format", "png"]).exit_code == 2


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height of a PNG, from the IHDR chunk that always follows its signature."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def line_of(length: int) -> dict:
    """A chain of `length` nodes one after the other."""
    names = [f"step-{i:02}" for i in range(length)]
    return {"chain_id": f"line-{length}", "nodes": [node(name, start=name == names[0]) for name in names],
            "routes": [route(a, b) for a, b in pairwise(names)]}


def diamonds(count: int) -> dict:
    """`count` diamonds one after the other (a node forks to two that join again), and a loop back."""
    nodes, routes = [node("join-0", start=True)], []
    for d in range(1, count + 1):
        nodes += [node(f"left-{d}"), node(f"right-{d}"), node(f"join-{d}")]
        routes += [route(f"join-{d - 1}", f"left-{d}"), route(f"join-{d - 1}", f"right-{d}"),
                   route(f"left-{d}", f"join-{d}"), route(f"right-{d}", f"join-{d}")]
    routes.append(route(f"join-{count}", "left-2", max_iterations=3))
    return {"chain_id": f"diamonds-{count}", "nodes": nodes, "routes": routes}


@pytest.mark.parametrize(
    "chain",
    [ROOT / "examples" / "phase2" / "node_chain.json", ROOT / "examples" / "relay" / "node_chain.json",
     line_of(12), line_of(40), line_of(80), diamonds(12)],
    ids=lambda chain: chain.parent.name if isinstance(chain, Path) else chain["chain_id"],
)
def test_a_drawing_fits_a_page_however_long_the_chain(tmp_path: Path, chain: Path | dict) -> None:
    # On main ranks ran left to right: the example was a 4,883x211 strip, 80 nodes one of 32,767x58.
    if isinstance(chain, dict):
        (tmp_path / "c.json").write_text(json.dumps(chain))
        chain = tmp_path / "c.json"
    done = runner.invoke(app, ["graph", str(chain), "-f", "png", "-o", str(tmp_path / "c.png")])
    assert done.exit_code == 0, done.output
    width, height = png_size((tmp_path / "c.png").read_bytes())
    assert 1 / 2 <= width / height <= 2, (width, height)
    if chain.parent.parent.name == "examples":
        assert width <= 1000, "shown 1000 px wide, an example's text is drawn at its own size"
    dot = runner.invoke(app, ["graph", str(chain), "-f", "dot"])
    assert dot.exit_code == 0, dot.output
    for spec in json.loads(chain.read_text())["nodes"]:
        assert f'[label="{spec["node_id"]}\\n' in dot.output, spec["node_id"]


def test_run_refuses_bad_input_and_a_missing_environment_before_any_flow(tmp_path: Path, monkeypatch) -> None:
    missing = runner.invoke(app, ["run", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "cannot read the file" in missing.output
    monkeypatch.delenv("SLOTRELAY_TEST_SECRET", raising=False)
    chain = tmp_path / "c.json"
    chain.write_text(json.dumps({"chain_id": "c", "required_env": ["SLOTRELAY_TEST_SECRET"],
                                 "nodes": [
                                     node("a", start=True, executor={"kind": "python", "callable": "m:f"})]}))
    done = runner.invoke(app, ["run", str(chain)])
    assert done.exit_code == 3
    assert "cannot start: SLOTRELAY_TEST_SECRET is not set" in done.output
    (tmp_path / ".env").write_text("SLOTRELAY_TEST_SECRET=present\n")
    from slotrelay.chain import load_chain
    from slotrelay.chain.preflight import preflight

    preflight(load_chain(chain))
    assert (tmp_path / "slots").is_dir() and (tmp_path / "alerts").is_dir()


# docker SDK's unix-socket connection does not close its socket when connect() fails.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_pen_nodes_need_a_sandbox(tmp_path: Path, monkeypatch) -> None:
    from slotrelay.chain import load_chain
    from slotrelay.chain.preflight import sandbox_problems

    chain = tmp_path / "pen.json"
    chain.write_text(json.dumps({"chain_id": "p", "nodes": [
        node("p", start=True, executor={"kind": "pen", "intent": "add two numbers", "persona_id": "x"})]}))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert sandbox_problems(load_chain(chain)) == [
        ("pen nodes run generated code in a sandbox: no Docker daemon answers (start dockerd) "
        "and bwrap is not installed (apt-get install bubblewrap)")]
    # Collect the leaked socket here, inside this test's warning filter, not during a later test.
    gc.collect()
    monkeypatch.undo()
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"chain_id": "q", "nodes": [node("q", start=True)]}))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    assert sandbox_problems(load_chain(plain)) == []


def minimal_chain(tmp_path: Path, **condition_value: object) -> Path:
    """A two-node chain whose route compares `status` with the given value."""
    path = tmp_path / "c.json"
    document = {"chain_id": "c", "nodes": [node("a", start=True), node("b")],
                "routes": [{"route_id": "a-b", "from_node": "a", "to_node": "b",
                            "condition": {"field": "status", "operator": "equals", **condition_value}}]}
    path.write_text(json.dumps(document))
    return path


def refused_in_one_line(done, fragment: str) -> None:
    assert done.exit_code == 2, done.output
    assert not isinstance(done.exception, Exception) or isinstance(done.exception, SystemExit), done.exception
    assert fragment in done.output, done.output
    assert "Traceback" not in done.output


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        pytest.param(b'{"chain_id": "\xff"}', "$: not UTF-8 text: byte 0xff", id="non_utf8"),
        pytest.param(
            ('{"chain_id": "x", "nodes": [], "description": ' + "[" * 980 + "]" * 980 + "}").encode(),
            "nested",
            id="nesting_980",
        ),
        pytest.param(
            b'{"chain_id": "x", "version": ' + b"9" * 5000 + b"}",
            "(4300 digits)",
            id="integer_of_5000_digits",
        ),
    ],
)
def test_regression_validate_and_graph_refuse_hostile_files_with_exit_2(tmp_path: Path, content: bytes,
                                                                        fragment: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    for command in (["validate", str(bad)], ["graph", str(bad)]):
        refused_in_one_line(runner.invoke(app, command), fragment)


def test_regression_graph_output_naming_a_folder_or_a_missing_folder_is_exit_2(tmp_path: Path) -> None:
    refused_in_one_line(runner.invoke(app, ["graph", CHAIN, "-o", str(tmp_path)]), "is a folder; name a file")
    refused_in_one_line(runner.invoke(app, ["graph", CHAIN, "-f", "png", "-o", str(tmp_path)]), "is a folder")
    refused_in_one_line(runner.invoke(app, ["graph", CHAIN, "-o", str(tmp_path / "nope" / "c.md")]),
                        f"the folder {tmp_path / 'nope'} does not exist")


def test_regression_a_two_megabyte_label_is_cut_and_drawn(tmp_path: Path) -> None:
    # The whole label made Graphviz `dot` segfault; labels are now cut to MAX_LABEL_CHARS.
    chain = minimal_chain(tmp_path, value="x" * 2_000_000)
    png = tmp_path / "c.png"
    done = runner.invoke(app, ["graph", str(chain), "-f", "png", "-o", str(png)])
    assert done.exit_code == 0, done.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    mermaid = runner.invoke(app, ["graph", str(chain)])
    assert mermaid.exit_code == 0 and len(mermaid.output) < 1000


def test_a_dot_that_crashes_is_a_one_line_error(tmp_path: Path, monkeypatch) -> None:
    crashing = tmp_path / "bin" / "dot"
    crashing.parent.mkdir()
    crashing.write_text("#!/bin/sh\necho 'dot: out of memory' >&2\nkill -SEGV $$\n")
    crashing.chmod(0o755)
    monkeypatch.setenv("PATH", f"{crashing.parent}:/usr/bin:/bin")
    done = runner.invoke(app, ["graph", CHAIN, "-f", "png", "-o", str(tmp_path / "c.png")])
    refused_in_one_line(
        done, "GRAPHVIZ_FAILED: Graphviz `dot` could not draw this chain (exit -11: dot: out of memory)"
    )
    assert not (tmp_path / "c.png").exists()


def test_a_lone_surrogate_in_a_condition_is_escaped_when_drawn(tmp_path: Path) -> None:
    chain = tmp_path / "c.json"
    chain.write_text(minimal_chain(tmp_path).read_text().replace('"equals"', '"equals", "value": "\\ud800"'))
    done = runner.invoke(app, ["graph", str(chain), "-f", "dot", "-o", str(tmp_path / "c.dot")])
    assert done.exit_code == 0, done.output
    assert 'status equals \\"\\\\ud800\\"\\l"' in (tmp_path / "c.dot").read_text(encoding="utf-8")
    mermaid = runner.invoke(app, ["graph", str(chain)])
    assert mermaid.exit_code == 0 and 'status equals \'\\ud800\'"|' in mermaid.output, mermaid.output


def test_line_breaks_and_escape_sequences_in_a_condition_stay_on_one_line(tmp_path: Path) -> None:
    # Found by tests/fuzz/test_fuzz_chains.py: "\x85" (a line break to str.splitlines) split a label.
    chain = minimal_chain(tmp_path, value={"\x85": "\u2028", "x": "\x1b[31m"})
    for fmt in ("mermaid", "dot"):
        done = runner.invoke(app, ["graph", str(chain), "-f", fmt])
        assert done.exit_code == 0, done.output
        edge = [line for line in done.output.splitlines() if "->" in line or "-->" in line]
        assert len(
            edge) == 1 and "\\x85" in edge[0] and "\\u2028" in edge[0] and "\\u001b[31m" in edge[0], edge
        assert "\x1b" not in done.output


@pytest.mark.prefect_server
def test_run_in_process_leaves_no_prefect_api_url_in_the_environment(prefect_server: str, tmp_path: Path,
                                                                    monkeypatch) -> None:
    """`run` finds the server of the current folder's home, and runs on it under `temporary_settings`:
    a command run in-process (a test, the MCP server) leaves nothing in `os.environ` for the next one."""
    from deployments.server import HOME_FOLDER, start_server
    from harness.ports import free_port

    server = start_server(port=free_port(), home=migrated_home(tmp_path / HOME_FOLDER), ready_timeout=240)
    try:
        monkeypatch.chdir(tmp_path)
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
        chain = tmp_path / "c.json"
        echo = {"kind": "command", "argv": [sys.executable, "-c", "print('{}')"]}
        chain.write_text(json.dumps({"chain_id": "c", "nodes": [node("a", start=True, executor=echo)]}))
        done = runner.invoke(app, ["run", str(chain), "--json"])
        assert f"using the Prefect server at {server.api_url}" in done.stderr, done.output
        assert json.loads(done.stdout)["flow_run_id"], done.output
        assert "PREFECT_API_URL" not in os.environ
    finally:
        server.stop()
