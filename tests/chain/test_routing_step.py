"""The one routing step from plain Python: what a finished node leads to, and nothing is written by it.

`route_finished` and `release_held_joins` are what a run's schedule and the sensor both call
(slotrelay/chain/routing.py); here they are called directly, with a `RoutingState` that names the nodes
that may still write an output.
"""

from __future__ import annotations

import os
from typing import Any

from slotrelay.chain import load_chain
from slotrelay.chain.routing import (
    HoldJoin,
    LoopBoundExceeded,
    RefuseInput,
    ReleaseJoin,
    StartNode,
    WriteInput,
    release_held_joins,
    route_finished,
    write_input,
)
from slotrelay.chain.slots import (
    content_hash,
    input_slot_document,
    output_slot_document,
    write_json_atomic,
    write_slot,
)
from tests.support.chain_specs import node, route

DIGEST = "sha256:" + "ab" * 32


class Pending:
    """A routing state: these nodes may still write an output; every other one has settled."""

    def __init__(self, *nodes: str) -> None:
        self.nodes = set(nodes)

    def pending(self, node_id: str) -> bool:
        return node_id in self.nodes


def build(write_chain, nodes: list, routes: list, **extra: Any):
    return load_chain(write_chain({"chain_id": "step", "nodes": nodes, "routes": routes, **extra}))


def done(node_id: str, **data: Any) -> dict[str, Any]:
    return output_slot_document(node_id, status="completed", data=data)


def kinds(steps: list) -> list[tuple[str, str]]:
    return [(type(s).__name__, getattr(s, "to_node", None) or getattr(s, "node_id", "")) for s in steps]


def test_conditions_decide_every_route_in_priority_order_and_nothing_is_written(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True), node("b"), node("c")],
                  [route("a", "c", priority="P2",
                         condition={"field": "data.n", "operator": "equals", "value": 9}),
                   route("a", "b", priority="P1")])
    routed = route_finished(chain, "a", done("a", n=1), DIGEST, state=Pending())
    assert [(d.route_id, d.fired, d.reason) for d in routed.decisions] == [
        ("a-to-b", True, 'status equals "completed"'), ("a-to-c", False, "data.n is 1, not 9")]
    assert kinds(routed.steps) == [("WriteInput", "b"), ("StartNode", "b")]
    write = routed.steps[0]
    assert isinstance(write, WriteInput)
    assert (write.document["status"], write.document["data"], write.document["from_output"]) == (
        "pending", {"n": 1}, DIGEST)
    assert not chain.resolve("slots/b_input.json").exists(), "the step says what to write; it writes nothing"


def test_a_skip_leads_on_with_the_data_the_node_received(write_chain) -> None:
    on_n = {"field": "data.n", "operator": "equals"}
    chain = build(write_chain, [node("a", start=True), node("cdn"), node("archive"), node("when-one"),
                                node("when-two")],
                  [route("a", "cdn"), route("cdn", "archive"),
                   route("cdn", "when-one", condition={**on_n, "value": 1}),
                   route("cdn", "when-two", condition={**on_n, "value": 2})])
    write_json_atomic(chain.resolve("slots/cdn_input.json"),
                      input_slot_document(from_node="a", route_id="a-to-cdn", data={"n": 1}))
    skipped = output_slot_document("cdn", status="skipped", data={},
                                   error={"error_type": "external_unreachable", "message": "no answer"})
    routed = route_finished(chain, "cdn", skipped, DIGEST, state=Pending())
    fired = {d.route_id: d.reason for d in routed.decisions if d.fired}
    assert fired == {"cdn-to-archive": "fired from a skip of cdn: the condition is only on status",
                     "cdn-to-when-one": "fired from a skip of cdn, on the data it received: data.n equals 1"}
    writes = [s for s in routed.steps if isinstance(s, WriteInput)]
    assert {w.to_node: w.document["data"] for w in writes} == {"archive": {"n": 1}, "when-one": {"n": 1}}


def test_a_join_runs_once_after_every_source_that_can_fire_with_every_sources_data(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True), node("x", start=True), node("b"), node("j")],
                  [route("a", "j"), route("x", "b"), route("b", "j")])
    # b has not answered yet: j waits for it, and says so in its input slot.
    routed = route_finished(chain, "a", done("a", a=1), "sha256:a", state=Pending("b"))
    assert kinds(routed.steps) == [("WriteInput", "j"), ("HoldJoin", "j")]
    assert routed.steps[1] == HoldJoin("j", ("b",))
    waiting = routed.steps[0]
    assert isinstance(waiting, WriteInput)
    assert (waiting.document["status"], waiting.document["waiting_for"]) == ("waiting", ["b"])
    write_input(waiting)
    # b itself settled, but x upstream of it may still write: b can still fire, j still waits.
    assert release_held_joins(chain, state=Pending("x")) == []
    # b fires: j starts once, with both sources' data merged in the order of the chain's routes.
    routed = route_finished(chain, "b", done("b", b=2), "sha256:b", state=Pending())
    assert kinds(routed.steps) == [("WriteInput", "j"), ("StartNode", "j")]
    joined = routed.steps[0].document
    assert joined["status"] == "pending" and joined["data"] == {"a": 1, "b": 2}
    assert {s: (e["route_id"], e["from_output"]) for s, e in joined["sources"].items()} == {
        "a": ("a-to-j", "sha256:a"), "b": ("b-to-j", "sha256:b")}
    input_hash = write_input(routed.steps[0])

    # j answered that input: its sources were consumed, and the next firing of a starts a new round.
    write_slot(chain.resolve("slots/j_output.json"),
               output_slot_document("j", status="completed", data={}, produced_from=input_hash))
    again = route_finished(chain, "a", done("a", a=3), "sha256:a2", state=Pending("b"))
    assert list(again.steps[0].document["sources"]) == ["a"] and again.steps[1] == HoldJoin("j", ("b",))


def test_a_waiting_join_whose_other_source_settles_without_firing_is_released(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True), node("b", start=True), node("j")],
                  [route("a", "j"), route("b", "j")])
    write_input(route_finished(chain, "a", done("a", a=1), "sha256:a", state=Pending("b")).steps[0])
    [release, start] = release_held_joins(chain, state=Pending())
    assert isinstance(release, ReleaseJoin) and start == StartNode("j")
    assert release.document["status"] == "pending" and release.document["data"] == {"a": 1}
    assert "waiting_for" not in release.document


def test_a_rework_loop_counts_its_firings_in_the_slots_and_asks_a_person_past_its_bound(write_chain) -> None:
    verdict = {"field": "data.verdict", "operator": "equals"}
    chain = build(write_chain, [node("draft", start=True), node("work"), node("review"), node("publish")],
                  [route("draft", "work"), route("work", "review"),
                   route("review", "work", condition={**verdict, "value": "rework"}, max_iterations=2),
                   route("review", "publish", condition={**verdict, "value": "ok"})])

    def review_received(loops: dict[str, int] | None) -> None:
        write_json_atomic(chain.resolve("slots/review_input.json"), input_slot_document(
            from_node="work", route_id="work-to-review", data={}, loops=loops))

    review_received(None)
    first = route_finished(chain, "review", done("review", verdict="rework"), DIGEST, state=Pending())
    assert first.steps[0].document["loops"] == {"review-to-work": 1}
    assert first.decisions[0].reason.endswith("(rework loop, iteration 1 of 2)")
    # Inside the loop the count travels with the data; leaving it, it is dropped.
    write_json_atomic(chain.resolve("slots/work_input.json"), first.steps[0].document)
    onward = route_finished(chain, "work", done("work"), DIGEST, state=Pending())
    assert onward.steps[0].document["loops"] == {"review-to-work": 1}
    review_received({"review-to-work": 1})
    published = route_finished(chain, "review", done("review", verdict="ok"), DIGEST, state=Pending())
    assert published.steps[0].to_node == "publish" and "loops" not in published.steps[0].document
    # Data entering the loop from outside starts the count again.
    entering = route_finished(chain, "draft", done("draft"), DIGEST, state=Pending())
    assert "loops" not in entering.steps[0].document

    review_received({"review-to-work": 2})
    past = route_finished(chain, "review", done("review", verdict="rework"), DIGEST, state=Pending())
    message = "rework loop review-to-work reached its max_iterations (2) and fired again: a person decides"
    assert past.steps == [LoopBoundExceeded("review-to-work", "review", "work", message)]
    assert not past.decisions[0].fired and past.decisions[0].reason.startswith("not looped: ")


def test_an_external_targets_pre_execution_checks_hold_before_its_input_slot_is_written(write_chain) -> None:
    agent = node("ext", executor={"kind": "external"},
                 check_rules={"pre_execution": [{"field_equals": ["data.ready", True]}]})
    chain = build(write_chain, [node("a", start=True), agent], [route("a", "ext")])
    [refused] = route_finished(chain, "a", done("a", ready=False), DIGEST, state=Pending()).steps
    assert isinstance(refused, RefuseInput) and refused.to_node == "ext"
    assert (refused.error.error_type, refused.error.message) == (
        "check_failed", "pre_execution: data.ready is False, expected True")
    ready = route_finished(chain, "a", done("a", ready=True), DIGEST, state=Pending())
    assert kinds(ready.steps) == [("WriteInput", "ext"), ("StartNode", "ext")]


def test_a_route_already_written_from_this_answer_is_not_written_again(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True), node("b")], [route("a", "b")])
    output = done("a", n=1)
    digest = content_hash(b"the output's bytes")
    write_input(route_finished(chain, "a", output, digest, state=Pending()).steps[0])
    assert route_finished(chain, "a", output, digest, state=Pending()).steps == [StartNode("b")]
    # Another output of a (a crash cut its routes short): written again.
    other = route_finished(chain, "a", output, "sha256:other", state=Pending())
    assert kinds(other.steps) == [("WriteInput", "b"), ("StartNode", "b")]


def test_the_same_bytes_answering_a_newer_input_are_another_answer(write_chain) -> None:
    # An agent's output records nothing of its input: the same words to a newer input (a reviewer sending
    # the work back twice) are handed on again.
    chain = build(write_chain, [node("a", start=True), node("review", executor={"kind": "external"}),
                                node("b")], [route("a", "review"), route("review", "b")])
    answer = done("review", verdict="rework")
    digest = content_hash(b"the reviewer's bytes")
    write_slot(chain.resolve("slots/review_input.json"), input_slot_document(
        from_node="a", route_id="a-to-review", data={"draft": 1}, from_output="sha256:" + "01" * 32))
    write_input(route_finished(chain, "review", answer, digest, state=Pending()).steps[0])
    assert route_finished(chain, "review", answer, digest, state=Pending()).steps == [StartNode("b")]
    review_input = chain.resolve("slots/review_input.json")
    write_slot(review_input, input_slot_document(
        from_node="a", route_id="a-to-review", data={"draft": 2}, from_output="sha256:" + "02" * 32))
    # Newer than b's input, whatever the file system's clock granularity.
    later = chain.resolve("slots/b_input.json").stat().st_mtime_ns + 10_000_000
    os.utime(review_input, ns=(later, later))
    again = route_finished(chain, "review", answer, digest, state=Pending())
    assert kinds(again.steps) == [("WriteInput", "b"), ("StartNode", "b")]
