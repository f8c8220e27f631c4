"""The chain spec: the example is valid; every kind of invalid chain is refused with its JSON path."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from slotrelay.chain import ChainValidationError, load_chain, validate_document
from slotrelay.chain.provenance import input_slot_path, output_slot_path
from slotrelay.chain.schema import SCHEMA_PATH, generate_schema, warm_up
from tests.support.chain_specs import EXAMPLE, node, route

EXAMPLE_DOC = json.loads((EXAMPLE / "node_chain.json").read_text(encoding="utf-8"))


def problems(document: dict) -> list[str]:
    with pytest.raises(ChainValidationError) as refused:
        validate_document(document)
    return [str(p) for p in refused.value.problems]


def test_committed_schema_is_generated_from_the_models() -> None:
    assert json.loads(SCHEMA_PATH.read_text(encoding="utf-8")) == generate_schema()


def test_example_chain_is_valid_and_keeps_the_seed_fields() -> None:
    chain = load_chain(EXAMPLE / "node_chain.json")
    assert chain.start_nodes() == ["exec-scan"]
    assert len(chain.error_types) == 21
    assert chain.node("exec-deploy").executor.kind == "deploy"
    assert {e.error_type for e in chain.error_types} >= {"deploy_source_missing", "deploy_hash_mismatch"}
    scan = chain.node("exec-scan")
    assert scan.retry.max_retries == 1 and scan.output_slot.babel_path
    assert chain.resolve(scan.output_slot.path) == EXAMPLE / "slots" / "exec-scan_output.json"
    assert [r.route_id for r in chain.routes_from("exec-dedup")] == ["route-dedup-to-enrich",
                                                                     "route-dedup-to-empty-report"]


def test_slots_root_overrides_relative_slot_paths(tmp_path: Path) -> None:
    chain = load_chain(EXAMPLE / "node_chain.json", slots_root=tmp_path)
    assert chain.resolve("slots/x.json") == tmp_path / "slots" / "x.json"
    assert chain.base_dir == EXAMPLE


def test_slot_paths_follow_a_new_binding(tmp_path: Path) -> None:
    """Slot paths are resolved once per chain: binding it to other folders resolves them again."""
    chain = load_chain(EXAMPLE / "node_chain.json")
    assert output_slot_path(chain, "exec-scan") == EXAMPLE / "slots" / "exec-scan_output.json"
    chain.bind(source=chain.source, slots_root=tmp_path)
    assert output_slot_path(chain, "exec-scan") == tmp_path / "slots" / "exec-scan_output.json"
    assert input_slot_path(chain, "exec-dedup") == tmp_path / chain.node("exec-dedup").input_slot.path
    assert input_slot_path(chain, "exec-scan") is None


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["nodes"][1].update(retyr=1),
         "$.nodes[1]: Additional properties are not allowed ('retyr' was unexpected)"),
        (lambda d: d.update(chian_id="x"),
         "$: Additional properties are not allowed ('chian_id' was unexpected)"),
        (lambda d: d["nodes"][0].pop("output_slot"), "$.nodes[0]: 'output_slot' is a required property"),
        (lambda d: d["nodes"][0]["retry"].update(max_retries=-1),
         "$.nodes[0].retry.max_retries: -1 is less than the minimum of 0"),
        (lambda d: d["routes"][0]["condition"].update(operator="eq"),
         "$.routes[0].condition.operator: 'eq' is not one of"),
        (lambda d: d["nodes"][2].update(executor={"kind": "shell"}),
         "$.nodes[2].executor.kind: \"shell\" is not one of \"python\""),
        (lambda d: d["nodes"][2].update(executor={"kind": "python"}),
         "$.nodes[2].executor: 'callable' is a required property"),
        (lambda d: d["error_types"][0].update(handling="ignore"),
         "$.error_types[0].handling: 'ignore' is not one of"),
        (lambda d: d["routes"][0].update(priority="high"), "$.routes[0].priority: 'high' does not match"),
        (lambda d: d["nodes"][1]["check_rules"]["pre_execution"].append({"path_exist": "x"}),
         ("$.nodes[1].check_rules.pre_execution[1]: Additional properties are not allowed ('path_exist' was "
         "unexpected)")),
    ],
)
def test_schema_errors_name_their_json_path(change, expected: str) -> None:
    document = copy.deepcopy(EXAMPLE_DOC)
    change(document)
    found = problems(document)
    assert any(p.startswith(expected) for p in found), found


def test_every_schema_error_is_reported_at_once() -> None:
    document = copy.deepcopy(EXAMPLE_DOC)
    document["nodes"][1]["retyr"] = 1
    document["error_types"][0]["handling"] = "ignore"
    document["routes"][0]["priority"] = "high"
    assert len(problems(document)) == 3


def test_graph_errors() -> None:
    document = {
        "chain_id": "g",
        "nodes": [node("a", start=True), node("b"), node("b"), node("c"), node("d"), node("orphan")],
        "routes": [route("a", "b"), route("b", "c"), route("c", "b", route_id="loop"), route("a", "ghost"),
                   route("b", "a", route_id="to-start"), route("a", "d"), route("a", "d")],
    }
    found = problems(document)
    assert "$.nodes[2].node_id: duplicate node_id 'b'" in found
    assert "$.routes[6].route_id: duplicate route_id 'a-to-d'" in found
    assert "$.routes[3].to_node: unknown node 'ghost'" in found
    assert "$.routes[4].to_node: 'a' is a start node (input_slot null): a route cannot feed it" in found
    assert "$.nodes[5]: no route reaches 'orphan' and it is not a start node" in found
    assert "$.routes: cycle: b -> c -> b; 3 nodes reach each other through routes: a, b, c" in found, found


def fully_connected(size: int) -> dict:
    """A start node routing to every other node, and every other node routing to every other one."""
    names = [f"n{i}" for i in range(size)]
    routes = [route(a, b) for a in names for b in names[1:] if a != b]
    nodes = [node(names[0], start=True), *map(node, names[1:])]
    return {"chain_id": "full", "nodes": nodes, "routes": routes}


@pytest.mark.parametrize("size", [12, 200])
def test_regression_cycles_of_a_fully_connected_chain_are_one_bounded_problem(size: int) -> None:
    # Listing every simple cycle took 19 s and 1.6 GB for 10 nodes and ran out of memory at 12.
    found = problems(fully_connected(size))
    assert found == [(f"$.routes: cycle: n1 -> n2 -> n1; {size - 1} nodes reach each other through routes: "
                     f"n1, n2, n3, n4, n5, n6, n7, n8, n9, n10 and {size - 11} more")]


def test_each_strongly_connected_component_is_reported_once_and_a_self_loop_is_a_cycle() -> None:
    names = [f"c{i}" for i in range(15)]
    ring = [route(a, b) for a, b in zip(names, names[1:] + names[:1], strict=True)]
    document = {"chain_id": "g", "nodes": [node("a", start=True), node("s"), *map(node, names)],
                "routes": [route("a", "s"), route("s", "s"), route("a", "c0"), *ring]}
    assert problems(document) == [
        "$.routes: cycle: s -> s",
        ("$.routes: cycle: c0 -> c1 -> c2 -> c3 -> c4 -> c5 -> c6 -> c7 -> c8 -> … -> c0"
        " (a cycle of 15 nodes)"),
    ]


def test_regression_graph_problems_quoting_a_long_value_are_cut() -> None:
    # Found by tests/fuzz/test_fuzz_chains.py: "unknown node '<400 characters>'" was not cut.
    document = {"chain_id": "g", "nodes": [node("a", start=True), node("b")],
                "routes": [route("a", "b"), route("x" * 400, "b", route_id="r2")]}
    found = problems(document)
    assert found[0].startswith("$.routes[1].from_node: unknown node 'xxx") and found[0].endswith("…"), found
    assert len(found[0]) <= len("$.routes[1].from_node: ") + 300


def test_no_start_node() -> None:
    found = problems(
        {"chain_id": "g", "nodes": [node("a"), node("b")], "routes": [route("a", "b"), route("b", "a")]})
    assert '$.nodes: no start node: at least one node needs "input_slot": null' in found


def chain_file(tmp_path: Path, content: bytes | str) -> Path:
    path = tmp_path / "node_chain.json"
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def nested(depth: int) -> str:
    return '{"chain_id": "x", "nodes": [], "description": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(
            b'{"chain_id": "\xff"}', r"\$: not UTF-8 text: byte 0xff at line 1 \(offset 14\)$", id="non_utf8"
        ),
        # Whether the parser's own recursion gives up first depends on the stack already in use.
        pytest.param(
            nested(980),
            r"\$(\.description(\[0\])+: nested more than 64 levels deep"
            r"|: not valid JSON: nested too deeply \(the limit is 64 levels\))$",
            id="nesting_980",
        ),
        pytest.param(nested(100_000), r"\$: not valid JSON: nested too deeply", id="nesting_100k"),
        pytest.param('{"chain_id": "x", "version": ' + "9" * 5000 + "}",
                     r"\$: not valid JSON: Exceeds the limit \(4300 digits\) for integer string conversion",
                     id="integer_of_5000_digits"),
        pytest.param(
            '{"chain_id": "x", "pause_timeout_seconds": NaN}',
            r"\$: not valid JSON: NaN is not a JSON number",
            id="nan",
        ),
    ],
)
def test_regression_hostile_files_are_one_problem_each(
    tmp_path: Path, content: bytes | str, expected: str
) -> None:
    with pytest.raises(ChainValidationError) as refused:
        load_chain(chain_file(tmp_path, content))
    assert len(refused.value.problems) == 1
    assert re.match(expected, str(refused.value.problems[0])), refused.value.problems


def test_regression_a_priority_run_cannot_rank_is_refused_by_validate() -> None:
    # "P" + 5000 nines passed validate, then int() refused it in Route.rank during `run`.
    document = copy.deepcopy(EXAMPLE_DOC)
    document["routes"][0]["priority"] = "P" + "9" * 5000
    found = problems(document)
    assert len(found) == 1 and found[0].startswith("$.routes[0].priority: 'P99999"), found
    assert found[0].endswith("…") and len(found[0]) < 400
    document["routes"][0]["priority"] = "P999999999"
    assert validate_document(document).routes[0].rank == 999_999_999


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ChainValidationError, match=r"\$: cannot read the file"):
        load_chain(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"chain_id": "x", "nodes": [', encoding="utf-8")
    with pytest.raises(ChainValidationError, match=r"\$: not valid JSON: .* at line 1"):
        load_chain(bad)


def test_a_chain_checked_ahead_is_checked_again_once_it_changes(tmp_path: Path) -> None:
    # A warm process checks the chains it may run before its run (warm_up); the file may change
    # between that and the run, and a missing or broken one must be left for the run to report.
    path = tmp_path / "node_chain.json"
    path.write_text(json.dumps(EXAMPLE_DOC), encoding="utf-8")
    warm_up([path, tmp_path / "missing.json"])
    assert load_chain(path).chain_id == EXAMPLE_DOC["chain_id"]
    changed = copy.deepcopy(EXAMPLE_DOC)
    changed["nodes"][0]["node_id"] = 7
    path.write_text(json.dumps(changed), encoding="utf-8")
    warm_up([path])
    with pytest.raises(ChainValidationError, match=r"\$\.nodes\[0\]\.node_id: 7 is not of type 'string'"):
        load_chain(path)
