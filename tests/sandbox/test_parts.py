"""The sandbox's pure parts, from strings: limits validation, the output protocol, the proxy's rules."""

from __future__ import annotations

import itertools
import json
import struct
import threading

import pytest
from pydantic import ValidationError

from slotrelay.sandbox import SandboxLimits, seccomp
from slotrelay.sandbox.egress import host_allowed, request_target
from slotrelay.sandbox.pool import ContainerPool
from slotrelay.sandbox.protocol import CappedCapture, decode_output
from slotrelay.validation_text import first_problem

MARKER = "@@m@@"


def captured(data: bytes, limit: int, tail: int = 1 << 20) -> CappedCapture:
    capture = CappedCapture(limit, tail_size=tail)
    for at in range(0, len(data), 7):
        capture.feed(data[at : at + 7])
    return capture


@pytest.mark.parametrize(
    ("printed", "limit", "visible", "cut"),
    [
        (b"hello\n", 100, "hello\n", False),
        (b"no newline", 100, "no newline", False),
        (b"x" * 50, 10, "x" * 10, True),
        (b"x" * 10, 10, "x" * 10, False),
    ],
)
def test_the_trailer_is_stripped_and_the_cap_counts_only_the_program(printed, limit, visible, cut) -> None:
    stdout = captured(printed + b"\n" + MARKER.encode() + json.dumps({"r": [1]}).encode() + b"\n", limit)
    outcome = decode_output(stdout, captured(b"", 10), MARKER)
    assert (outcome.stdout, outcome.stdout_truncated, outcome.result) == (visible, cut, {"r": [1]})
    assert [v.kind for v in outcome.violations] == (["output"] if cut else [])


def test_no_trailer_means_no_result_and_a_bad_one_is_a_violation() -> None:
    plain = decode_output(captured(b"just text\n", 100), captured(b"", 10), MARKER)
    assert (plain.stdout, plain.result, plain.violations) == ("just text\n", None, [])
    broken = decode_output(captured(b"\n" + MARKER.encode() + b"{nope\n", 100), captured(b"", 10), MARKER)
    assert broken.result is None and [v.kind for v in broken.violations] == ["result"]


@pytest.mark.parametrize(
    ("host", "port", "allow", "admitted"),
    [
        ("api.example.org", 443, ("api.example.org",), True),
        ("api.example.org", 80, ("api.example.org",), True),
        ("api.example.org", 8443, ("api.example.org",), False),
        ("API.Example.org.", 443, ("api.example.org",), True),
        ("localhost", 8080, ("localhost:8080",), True),
        ("localhost", 443, ("localhost:8080",), False),
        ("a.b.example.org", 443, ("*.example.org",), True),
        ("example.org", 443, ("*.example.org",), False),
        ("evil-example.org", 443, ("*.example.org",), False),
        ("127.0.0.1", 80, ("localhost",), False),
        ("::1", 80, ("localhost",), False),
        ("other.org", 443, ("api.example.org",), False),
    ],
)
def test_the_proxy_admits_listed_names_only(host, port, allow, admitted) -> None:
    assert host_allowed(host, port, allow) is admitted


@pytest.mark.parametrize(
    ("head", "target"),
    [
        (b"CONNECT api.example.org:443 HTTP/1.1\r\nHost: x", ("CONNECT", "api.example.org", 443)),
        (b"GET http://h.org:8080/a?b=1 HTTP/1.1\r\nHost: h.org", ("GET", "h.org", 8080)),
        (b"GET /a HTTP/1.1\r\nHost: h.org", ("GET", "h.org", 80)),
        (b"GET /a HTTP/1.1\r\nHost: [::1]:81", ("GET", "::1", 81)),
        (b"CONNECT h.org:99999 HTTP/1.1", None),
        (b"GET /a HTTP/1.1\r\nAccept: */*", None),
        (b"garbage", None),
    ],
)
def test_the_proxy_reads_the_target_of_a_request(head, target) -> None:
    parsed = request_target(head)
    assert (parsed[:3] if parsed else None) == target


def test_an_absolute_url_is_forwarded_in_origin_form() -> None:
    parsed = request_target(b"GET http://h.org/path?q=1 HTTP/1.1\r\nHost: h.org")
    assert parsed is not None and parsed[3].split(b"\r\n")[0] == b"GET /path?q=1 HTTP/1.1"


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"network": {"allow": ["10.0.0.1"]}}, "network.allow: '10.0.0.1' is an IP address"),
        ({"network": "all"}, 'network: must be "none"'),
        ({"fs": {"allow_paths": ["relative/x"]}}, "fs.allow_paths: 'relative/x' is not an absolute path"),
        ({"fs": "home"}, 'fs: must be "none", "tmp"'),
        ({"network": {"allow": []}}, "network.allow: Tuple should have at least 1 item"),
        ({"memory_mb": 8}, "memory_mb: Input should be greater than or equal to 32"),
        ({"timeout": 5}, "timeout: Extra inputs are not permitted"),
        # Regression: `--allow-path /` with "/" among the operator's roots was SANDBOX_UNAVAILABLE (exit 3).
        ({"fs": {"allow_paths": ["/"]}}, "fs.allow_paths: '/' is the whole file system"),
        ({"fs": {"allow_paths": ["//"]}}, "fs.allow_paths: '//' is the whole file system"),
        ({"fs": {"allow_paths": ["/tmp/.."]}}, "fs.allow_paths: '/tmp/..' is the whole file system"),
        (
            {"fs": {"allow_paths": ["/opt"]}},
            "fs.allow_paths: '/opt' would hide the sandbox's own /opt/slotrelay",
        ),
        ({"fs": {"allow_paths": ["/tmp"]}}, "fs.allow_paths: '/tmp' would hide the sandbox's own /tmp"),
        (
            {"fs": {"allow_paths": ["/proc/self"]}},
            "fs.allow_paths: '/proc/self' is inside the sandbox's own /proc",
        ),
        (
            {"fs": {"allow_paths": ["/dev/shm"]}},
            "fs.allow_paths: '/dev/shm' is inside the sandbox's own /dev",
        ),
    ],
)
def test_limits_name_the_field_that_is_wrong(limits, message) -> None:
    with pytest.raises(ValidationError) as caught:
        SandboxLimits.model_validate(limits)
    # What the CLI and the pen show: one line that starts with the field, without pydantic's "Value error, ".
    assert first_problem(caught.value).startswith(message)


def test_the_seed_defaults_and_tmp_inside_the_memory_budget() -> None:
    limits = SandboxLimits()
    assert (limits.timeout_ms, limits.memory_mb, limits.network, limits.fs) == (30000, 512, "none", "tmp")
    assert limits.tmp_mb == 256
    assert SandboxLimits(fs="none").tmp_mb == 0


def test_the_bpf_filter_is_well_formed() -> None:
    program = seccomp.bpf_program()
    assert len(program) % 8 == 0
    instructions = [struct.unpack("<HBBI", program[at : at + 8]) for at in range(0, len(program), 8)]
    for index, (code, true_jump, false_jump, _) in enumerate(instructions):
        if code & 0x07 == 0x05:  # a jump: both targets inside the program
            assert index + 1 + max(true_jump, false_jump) < len(instructions)
    denied = {value for code, _, _, value in instructions if code == 0x15}
    assert {425, 426, 427, 272, 308, 101, 56} <= denied
    assert instructions[-1] == (0x06, 0, 0, 0x7FFF0000)


def test_output_after_the_trailer_is_kept() -> None:
    stream = b"before\n\n" + MARKER.encode() + b'"r"\n' + b"after\n"
    outcome = decode_output(captured(stream, 100), captured(b"", 10), MARKER)
    assert (outcome.stdout, outcome.result, outcome.violations) == ("before\nafter\n", "r", [])


def test_allow_paths_are_normalised_and_may_sit_inside_tmp() -> None:
    limits = SandboxLimits.model_validate(
        {"fs": {"allow_paths": ["//srv/data/", "/tmp/in", "/usr/share/../lib"]}}
    )
    assert limits.allow_paths == ("/srv/data", "/tmp/in", "/usr/lib")


def test_regression_a_lone_surrogate_in_the_result_becomes_a_replacement_character() -> None:
    # `return {'s': '\ud800'}` made `sandbox run --json` and `pen write` crash on writing the result.
    trailer = b"\n" + MARKER.encode() + b'{"s": "\\ud800", "\\udfff": ["\\ud83d\\ude00", "ok"]}\n'
    outcome = decode_output(captured(trailer, 100), captured(b"", 10), MARKER)
    assert outcome.result == {"s": "\ufffd", "\ufffd": ["\U0001f600", "ok"]}
    assert outcome.violations == []
    json.dumps(outcome.result, ensure_ascii=False).encode("utf-8")


def test_a_result_nested_past_the_recursion_limit_is_a_violation() -> None:
    trailer = b"\n" + MARKER.encode() + b"[" * 200_000 + b"]" * 200_000 + b"\n"
    outcome = decode_output(captured(trailer, 100, tail=1 << 20), captured(b"", 10), MARKER)
    assert outcome.result is None
    assert [v.detail for v in outcome.violations] == ["the result is nested too deeply to read"]


# How long a test waits for the pool's worker before it fails (it returns as soon as the pool's state is
# reached: this bounds a hang, it does not time anything).
WAIT_S = 120


def _pool(budget: int, removed: list[str], size: int = 2,
          create=None) -> ContainerPool[int, str]:
    """A pool of plain strings whose shape is their memory cap in MB (no daemon: the pool's own logic)."""
    made = itertools.count()
    return ContainerPool(
        create=create or (lambda shape: f"{shape}-{next(made)}"),
        remove=removed.append,
        ident=lambda item: item,
        cost=lambda shape: shape,
        budget=budget,
        size=size,
    )


def test_the_pool_keeps_idle_caps_within_its_budget_emptying_the_least_recently_used_shape() -> None:
    removed: list[str] = []
    pool = _pool(300, removed)
    try:
        pool.warm(100)
        pool.wait_ready(100, 2, WAIT_S)
        pool.warm(150)  # 200 + 150 > 300: the 100 MB shape gives way, one container at a time
        pool.wait_ready(150, 2, WAIT_S)
        pool.wait_idle(WAIT_S)
        assert pool.ready(100) == [] and pool.held() == 300
        assert sorted(removed) == ["100-0", "100-1"]
        pool.warm(400)  # one alone would break the budget: nothing is emptied for it
        assert pool.acquire(400) == "400-4"  # served all the same, made on the spot
        pool.wait_idle(WAIT_S)  # the fills that warm and acquire asked for are done
        assert pool.held() == 300 and len(pool.ready(150)) == 2
    finally:
        pool.close()


def test_waiting_for_more_than_the_pool_keeps_fails_at_once_and_says_why() -> None:
    """A pool that keeps none of a shape (size 0, as SLOTRELAY_SANDBOX_POOL_SIZE=0 makes it) never fills:
    a wait for it ends as soon as the worker is idle, naming the pool's size, instead of running out its
    time (the pool tests' "waited 90 s for 2 ready")."""
    pool = _pool(1024, [], size=0)
    try:
        pool.warm(96)
        with pytest.raises(RuntimeError, match=r"idle with 0 of 2 ready for 96: it keeps 0 a shape"):
            pool.wait_ready(96, 2, timeout=WAIT_S)  # a TimeoutError after WAIT_S would fail the match
    finally:
        pool.close()


def test_a_wait_for_the_pool_ends_on_its_signal_not_on_a_clock() -> None:
    """The worker blocked in a creation (a daemon slow to answer): a wait for ready sandboxes runs out with
    the worker still at work; released, the worker makes them and the wait returns them."""
    removed: list[str] = []
    released = threading.Event()
    entered = threading.Event()
    made = itertools.count()

    def create(shape: int) -> str:
        entered.set()
        released.wait()
        return f"{shape}-{next(made)}"

    pool = _pool(1024, removed, create=create)
    try:
        pool.warm(96)
        assert entered.wait(WAIT_S)
        with pytest.raises(TimeoutError, match="still at work"):
            pool.wait_ready(96, 2, timeout=0.05)
        with pytest.raises(TimeoutError, match="still at work"):
            pool.wait_idle(timeout=0.05)
        released.set()
        assert pool.wait_ready(96, 2, WAIT_S) == ["96-0", "96-1"]
        taken = pool.acquire(96)
        pool.release(taken)
        pool.wait_idle(WAIT_S)  # the refill and the removal are both done
        assert removed == ["96-0"] and pool.ready(96) == ["96-1", "96-2"]
    finally:
        released.set()
        pool.close()


def test_the_pool_refuses_to_hand_out_one_sandbox_twice() -> None:
    pool: ContainerPool[int, str] = ContainerPool(
        create=lambda shape: "same", remove=lambda item: None, ident=lambda item: item,
        cost=lambda shape: shape, budget=0, size=0,
    )  # fmt: skip
    try:
        assert pool.acquire(1) == "same"
        with pytest.raises(RuntimeError, match="handed out same twice"):
            pool.acquire(1)
    finally:
        pool.close()
