"""Fuzzed chains against `validate` and `graph`: every input is a chain or exit 2, never a traceback.

Most examples drive the core in process (`load_chain`, `validate_document`, the renderers), which is
what the commands call; a few go through the real `slotrelay` command in a subprocess, to prove the
exit code and that no traceback reaches the user. Inputs: documents drawn from `schema.json`
(hypothesis-jsonschema), the example chain with one value replaced by any JSON, any JSON at all, any
bytes, and graphs of random shape (cycles included). Each test has a fixed number of examples so the
suite stays bounded in CI.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from harness.commands import SLOTRELAY
from slotrelay.chain import Chain, ChainValidationError, load_chain, validate_document
from slotrelay.chain.graph import MAX_LABEL_CHARS, render_dot, render_mermaid
from slotrelay.chain.schema import MAX_MESSAGE_CHARS, SCHEMA_PATH
from tests.support.schema_draws import strategies_built_once

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_DOC = json.loads((ROOT / "examples" / "phase2" / "node_chain.json").read_text(encoding="utf-8"))

# No example database: a fuzz run must not leave files in the working tree.
FUZZ = settings(
    deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example]
)

# Integers of over 4300 digits come as bytes (test_any_bytes_as_a_chain_file): hypothesis cannot print them.
json_scalars = st.none() | st.booleans() | st.floats(allow_nan=False) | st.text() | st.integers()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


def check_outcome(document: Any) -> None:
    """The document is a chain that draws, or refused with bounded problems; nothing else may happen."""
    try:
        chain = validate_document(document)
    except ChainValidationError as refused:
        check_problems(refused)
        return
    check_drawings(chain)


def check_problems(refused: ChainValidationError) -> None:
    assert refused.problems
    for problem in refused.problems:
        assert len(problem.message) <= MAX_MESSAGE_CHARS and len(problem.path) <= MAX_MESSAGE_CHARS
        str(problem).encode("utf-8")


def check_drawings(chain: Chain) -> None:
    for text in (render_mermaid(chain), render_dot(chain)):
        text.encode("utf-8")
        lines = text.splitlines()
        assert len(lines) == len(chain.nodes) + len(chain.routes) + (1 if text.startswith("flowchart") else 6)
        assert max(map(len, lines)) < 4 * MAX_LABEL_CHARS


@pytest.fixture(scope="module")
def built_once() -> Iterator[None]:
    with strategies_built_once():
        yield


@pytest.mark.usefixtures("built_once")
@settings(FUZZ, max_examples=40)
@given(from_schema(json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))))
def test_documents_the_schema_allows(document: dict[str, Any]) -> None:
    check_outcome(document)


def _replace_at(document: Any, choices: list[int], value: Any) -> Any:
    """The document with the value at a path (picked by `choices`) replaced."""
    document = copy.deepcopy(document)
    parent, key = None, None
    node = document
    for choice in choices:
        if isinstance(node, dict) and node:
            key = sorted(node)[choice % len(node)]
        elif isinstance(node, list) and node:
            key = choice % len(node)
        else:
            break
        parent, node = node, node[key]
    if parent is None:
        return value
    parent[key] = value
    return document


@settings(FUZZ, max_examples=400)
@given(st.lists(st.integers(min_value=0, max_value=50), max_size=7), json_values)
def test_the_example_with_one_value_replaced(choices: list[int], value: Any) -> None:
    check_outcome(_replace_at(EXAMPLE_DOC, choices, value))


@settings(FUZZ, max_examples=300)
@given(json_values)
def test_any_json_document(document: Any) -> None:
    check_outcome(document)


@settings(FUZZ, max_examples=300)
@given(
    st.binary(max_size=300)
    | st.text(max_size=300).map(str.encode)
    | st.integers(min_value=1, max_value=200_000).map(lambda depth: b"[" * depth)
    | st.integers(min_value=4290, max_value=6000).map(lambda digits: b'{"version": ' + b"9" * digits + b"}")
    | st.sampled_from([b"NaN", b"-Infinity", b"\xef\xbb\xbf{}", b'"\\ud800"', b"1e999999"])
)
def test_any_bytes_as_a_chain_file(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "node_chain.json"
        path.write_bytes(content)
        try:
            chain = load_chain(path)
        except ChainValidationError as refused:
            check_problems(refused)
        else:
            check_drawings(chain)


def _graph_document(size: int, edges: list[tuple[int, int]], starts: set[int]) -> dict[str, Any]:
    def node(i: int) -> dict[str, Any]:
        slot = {"slot_id": f"n{i}-in", "path": f"slots/n{i}_in.json"}
        return {
            "node_id": f"n{i}",
            "input_slot": None if i in starts else slot,
            "output_slot": {"slot_id": f"n{i}", "path": f"slots/n{i}_out.json"},
        }

    routes = [
        {"route_id": f"r{k}", "from_node": f"n{a % size}", "to_node": f"n{b % size}"}
        for k, (a, b) in enumerate(edges)
    ]
    return {"chain_id": "shape", "nodes": [node(i) for i in range(size)], "routes": routes}


@settings(FUZZ, max_examples=200)
@given(
    st.integers(min_value=1, max_value=60),
    st.lists(st.tuples(st.integers(0, 59), st.integers(0, 59)), max_size=400),
    st.sets(st.integers(0, 59), max_size=3),
)
def test_graphs_of_any_shape(size: int, edges: list[tuple[int, int]], starts: set[int]) -> None:
    document = _graph_document(size, edges, starts)
    try:
        validate_document(document)
    except ChainValidationError as refused:
        check_problems(refused)
        cycles = [p for p in refused.problems if p.message.startswith("cycle: ")]
        assert len(cycles) <= size
    else:
        assert edges or size == len(starts & set(range(size)))


def _slotrelay(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [SLOTRELAY, *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        errors="backslashreplace",
    )


@settings(FUZZ, max_examples=4)
@given(
    st.one_of(
        json_values.map(lambda v: json.dumps(v).encode()),
        st.tuples(st.lists(st.integers(min_value=0, max_value=50), max_size=7), json_values).map(
            lambda cv: json.dumps(_replace_at(EXAMPLE_DOC, *cv)).encode()
        ),
        st.binary(max_size=200),
    )
)
def test_the_real_commands_exit_0_or_2_without_a_traceback(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "node_chain.json"
        path.write_bytes(content)
        for args in (["validate", str(path)], ["graph", str(path), "-f", "dot", "-o", f"{folder}/c.dot"]):
            done = _slotrelay(*args)
            assert done.returncode in (0, 2), (args, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr + done.stdout
