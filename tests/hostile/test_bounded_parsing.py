"""Bounded parsing (issue 29 item 5): a `replace_body` of 5,000 nested parentheses segfaulted libcst's
parser and killed the MCP server with no reply; a 5 MB body took 62 s and 7.1 GB. Now every request is
size-limited (POLICY_BLOCKED naming the field and the limit), nesting is checked before libcst sees
the text, and the parse runs in a child process, so a crash there is an error reply."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from harness.commands import SLOTRELAY
from slotrelay.psmr.api import build_workspace, call
from slotrelay.psmr.change import snippets
from tests.support.psmr_trees import write_tree

FILES = {"kit/__init__.py": "", "kit/calc.py": "def add(a, b):\n    return a + b\n"}
DEEP = "return " + "(" * 5000 + "1" + ")" * 5000 + "\n"
HUGE = "x = 1\n" * 900_000  # 5.4 MB


def replace(body: str) -> dict[str, Any]:
    return {"intent": "t", "operations": [{"op": "replace_body", "target": "kit.calc.add", "body": body}]}


@pytest.fixture
def kit(tmp_path: Path) -> tuple[Path, Path, str]:
    root = write_tree(tmp_path / "proj", FILES)
    store = tmp_path / "store"
    return root, store, build_workspace(root, store=store)["workspace_id"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def refused(answer: dict[str, Any], code: str) -> str:
    assert answer["status"] == "error", answer.get("data")
    assert answer["error"]["code"] == code, answer["error"]
    return str(answer["error"]["message"])


def test_a_huge_body_is_refused_by_its_size_naming_the_field(kit: tuple[Path, Path, str]) -> None:
    _, store, ws = kit
    message = refused(
        call("delta.propose", {"workspace_id": ws, **replace(HUGE)}, store=store), "POLICY_BLOCKED"
    )
    assert "operations[0].body is 5,400,000 characters long, above the limit of 100,000" in message
    # Bodies each within their limit, together past the request's.
    many = [{"op": "replace_body", "target": "kit.calc.add", "body": "x = 1\n" * 16_000} for _ in range(12)]
    message = refused(
        call("delta.propose", {"workspace_id": ws, "intent": "t", "operations": many}, store=store),
        "POLICY_BLOCKED",
    )
    assert "above the limit of 1,000,000" in message


@pytest.mark.parametrize(
    "body",
    [
        DEEP,
        "return " + "[" * 5000 + "]" * 5000 + "\n",
        "return " + "lambda: " * 3000 + "1\n",
        "return " + "-" * 5000 + "1\n",
        "return " + "not " * 300 + "x\n",
    ],
    ids=["parentheses", "lists", "lambdas", "unary", "not-300"],
)
def test_deep_nesting_is_refused_before_libcst_parses_it(kit: tuple[Path, Path, str], body: str) -> None:
    _, store, ws = kit
    message = refused(
        call("delta.propose", {"workspace_id": ws, **replace(body)}, store=store), "POLICY_BLOCKED"
    )
    assert f"operations[0].body nests deeper than {snippets.MAX_NESTING} levels" in message


def test_a_parser_crash_is_an_error_reply(
    kit: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the nesting check out of the way, libcst itself crashes on the text: in the child process
    that parses it, so this process (the server) answers."""
    _, store, ws = kit
    monkeypatch.setattr(snippets, "bounded", lambda where, kind, text: None)
    message = refused(
        call("delta.propose", {"workspace_id": ws, **replace(DEEP)}, store=store), "POLICY_BLOCKED"
    )
    assert message.startswith("operations[0].body: the parser died on it (signal SIGSEGV)")


@pytest.mark.anyio
async def test_the_server_answers_deep_and_huge_bodies_and_lives(kit: tuple[Path, Path, str]) -> None:
    root, _, _ = kit
    # The server builds its own workspace of the root (into the session's state folder).
    params = StdioServerParameters(
        command=SLOTRELAY, args=["mcp", "serve", "--workspace", str(root)], cwd=root, env=dict(os.environ)
    )
    async with Client(params) as client:
        for body, code, words in (
            (DEEP, "POLICY_BLOCKED", "nests deeper than"),
            (HUGE, "POLICY_BLOCKED", "operations[0].body is 5,400,000 characters long"),
        ):
            result = await client.call_tool("psmr_delta_propose", replace(body))
            assert result.is_error and result.content[0].text.startswith(f"{code}: ")
            assert words in result.content[0].text
        alive = await client.call_tool("psmr_workspace_describe", {})
        assert not alive.is_error
        proposed = await client.call_tool("psmr_delta_propose", replace("return b + a\n"))
        assert not proposed.is_error, proposed.content[0].text
