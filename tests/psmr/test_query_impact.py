"""analysis.impact on packages written from strings: possible callers from unresolved sites, and the
relations impact walks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import build_workspace, call
from tests.support.psmr_trees import write_tree

APP = {
    "app/__init__.py": "",
    "app/console.py": """class Console:
    def print(self, text):
        return text

    def flush(self):
        return None


def shout(text):
    return Console().print(text.upper())
""",
    "app/progress.py": """class Progress:
    def __init__(self, console):
        self.console = console

    def stop(self):
        self.console.print("done")
        self.console.flush()

    def rewind(self, other):
        other.lines.clear()
""",
    "app/deco.py": """def traced(fn):
    return fn


@traced
def work():
    return 1


def caller():
    return work()
""",
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = write_tree(tmp_path_factory.mktemp("app"), APP)
    store = root.parent / f"{root.name}-store"
    return build_workspace(root, store=store)["workspace_id"], store


def impact(app: tuple[str, Path], target: str, **extra: Any) -> dict[str, Any]:
    ws, store = app
    result = call("analysis.impact", {"workspace_id": ws, "target": target, "depth": 2, **extra}, store=store)
    assert result["status"] == "ok", result.get("error")
    return result["data"]


def test_an_unresolved_site_with_the_target_name_is_a_possible_caller(app: tuple[str, Path]) -> None:
    data = impact(app, "app.console.Console.print")
    # Resolved callers stay direct; the untyped `self.console.print` is only possible, with its span.
    assert [d["id"] for d in data["direct"]] == ["semantic:app.console.shout"]
    possible = [u for u in data["uncertainty"] if u.get("possible_caller_of")]
    assert [(u["scope"], u["detail"], u["artifact"], u["span"]["line"]) for u in possible] == [
        ("semantic:app.progress.Progress.stop", "self.console.print", "app/progress.py", 6)
    ]
    assert possible[0]["possible_caller_of"] == "semantic:app.console.Console.print"
    assert data["counts"]["possible_callers"] == 1
    # Another attribute on the same receiver is no candidate, and a candidate is never a caller.
    assert all(u["detail"] != "self.console.flush" for u in data["uncertainty"])
    assert "semantic:app.progress.Progress.stop" not in {d["id"] for d in data["direct"] + data["derived"]}
    # Nearest-first: the possible caller shares the first page with the target's file and its caller.
    first = impact(app, "app.console.Console.print", budget={"max_nodes": 3})
    assert first["review_files"] == ["app/console.py"]
    assert [d["id"] for d in first["direct"]] == ["semantic:app.console.shout"]
    assert [u["id"] for u in first["uncertainty"]] == [possible[0]["id"]]


def test_a_change_to_a_decorator_reaches_what_it_decorates(app: tuple[str, Path]) -> None:
    data = impact(app, "app.deco.traced")
    # The module calls the decorator when it applies it; the decorated function changes with it.
    assert [(d["id"], d["via"]["relation"]) for d in data["direct"]] == [
        ("semantic:app.deco", "calls"),
        ("semantic:app.deco.work", "decorated_by"),
    ]
    assert [(d["id"], d["via"]["relation"]) for d in data["derived"]] == [
        ("semantic:app.deco.caller", "calls")
    ]
