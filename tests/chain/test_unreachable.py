"""A network failure no executor classified becomes `external_unreachable`, a skip by the seed's own rule.

The failures are real: a TCP connection to a loopback port nothing listens on (refused), a name in the
`.invalid` domain, which never resolves (RFC 2606), and a connect that times out. Each reaches the engine
the way a node's own code raises it (urllib, requests, a bare socket), so the mapping is tested where it
happens: at the boundary the executor's failure crosses.
"""

from __future__ import annotations

import pytest

from harness.ports import free_port
from slotrelay.chain import NodeError, load_chain
from slotrelay.chain.runner import decide_handling, execute_node
from tests.support.chain_specs import node, route

CALLS = '''
import socket
import urllib.request

import requests

PORT = {port}


def urllib_refused(data):
    urllib.request.urlopen(f"http://127.0.0.1:{{PORT}}/", timeout=5)


def requests_refused(data):
    requests.get(f"http://127.0.0.1:{{PORT}}/", timeout=5)


def socket_refused(data):
    socket.create_connection(("127.0.0.1", PORT), timeout=5)


def urllib_dns(data):
    urllib.request.urlopen("http://slotrelay-test.invalid/", timeout=5)


def requests_dns(data):
    requests.get("http://slotrelay-test.invalid/", timeout=5)


def connect_timeout(data):
    # A listening socket whose backlog is full: the kernel never completes the handshake.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        held = [socket.socket() for _ in range(8)]
        try:
            for extra in held:
                extra.setblocking(False)
                extra.connect_ex(("127.0.0.1", port))
            urllib.request.urlopen(f"http://127.0.0.1:{{port}}/", timeout=0.5)
        finally:
            for extra in held:
                extra.close()


def not_the_network(data):
    raise TimeoutError("the lock was not released in time")


def fine(data):
    return {{"fine": True, **data}}
'''

NETWORK_CALLS = ["urllib_refused", "requests_refused", "socket_refused", "urllib_dns", "requests_dns"]


def chain_of(write_chain, callables: list[str], **extra):
    nodes = [node(name.replace("_", "-"), start=True,
                  executor={"kind": "python", "callable": f"calls:{name}"}) for name in callables]
    return load_chain(write_chain({"chain_id": "net", "nodes": nodes, **extra},
                                  {"calls.py": CALLS.format(port=free_port())}))


@pytest.mark.parametrize("call", NETWORK_CALLS)
def test_a_refused_connection_or_an_unknown_name_is_external_unreachable(call: str, write_chain) -> None:
    chain = chain_of(write_chain, [call])
    with pytest.raises(NodeError) as failed:
        execute_node(chain, call.replace("_", "-"))
    assert failed.value.error_type == "external_unreachable", failed.value.message
    says = "name" if call.endswith("dns") else "refused"
    assert says in failed.value.message, failed.value.message
    # Not declared by the chain: the seed's own rule, a skip ("标记为 skip，不重试").
    assert decide_handling(chain, failed.value, type_failures=1) == "skip"


def test_a_connect_that_times_out_is_external_unreachable(write_chain) -> None:
    chain = chain_of(write_chain, ["connect_timeout"])
    with pytest.raises(NodeError) as failed:
        execute_node(chain, "connect-timeout")
    assert failed.value.error_type == "external_unreachable", failed.value.message
    assert "timed out" in failed.value.message


def test_a_timeout_that_is_not_the_network_stays_unknown(write_chain) -> None:
    chain = chain_of(write_chain, ["not_the_network"])
    with pytest.raises(NodeError) as failed:
        execute_node(chain, "not-the-network")
    assert failed.value.error_type == "unknown"
    assert decide_handling(chain, failed.value, type_failures=1) == "arbitrate"


def test_a_chain_maps_external_unreachable_otherwise(write_chain) -> None:
    chain = chain_of(write_chain, ["urllib_refused"], error_types=[
        {"error_type": "external_unreachable", "handling": "retry", "max_retries": 2}])
    with pytest.raises(NodeError) as failed:
        execute_node(chain, "urllib-refused")
    assert [decide_handling(chain, failed.value, type_failures=n) for n in (1, 2, 3)] == [
        "retry", "retry", "fail"]


@pytest.mark.prefect_server
def test_an_unreachable_node_is_skipped_and_downstream_goes_on(prefect_server, write_chain) -> None:
    from flows.chain import read_summary, run_chain

    nodes = [node("call", start=True, executor={"kind": "python", "callable": "calls:urllib_refused"}),
             node("after", executor={"kind": "python", "callable": "calls:fine"})]
    path = write_chain({"chain_id": "net-run", "nodes": nodes, "routes": [route("call", "after")]},
                       {"calls.py": CALLS.format(port=free_port())})
    state = run_chain(str(path), return_state=True)
    summary = read_summary(load_chain(path), state)
    assert summary["state"] == "COMPLETED", summary
    assert summary["nodes"]["call"]["state"] == "Skipped"
    assert summary["nodes"]["call"]["error_type"] == "external_unreachable"
    assert summary["nodes"]["after"]["state"] == "Completed"
    assert summary["alerts"] == []
