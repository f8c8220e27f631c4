"""Workspaces end to end: a real installed package, incremental update against a full rebuild,
how each edge was resolved, and the `slotrelay psmr` commands."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import requests
from typer.testing import CliRunner

from slotrelay.cli import app
from slotrelay.psmr.api import build_workspace, call
from slotrelay.psmr.workspace.export import callgraph, callgraph_of
from slotrelay.psmr.workspace.store import Store, Workspace
from tests.support.psmr_trees import write_tree


def _graph_state(ws: Workspace) -> tuple:
    nodes = sorted((n, json.dumps(d, sort_keys=True, default=str)) for n, d in ws.graph.nodes(data=True))
    edges = sorted(
        (u, v, k, json.dumps(d, sort_keys=True)) for u, v, k, d in ws.graph.edges(keys=True, data=True)
    )
    return nodes, edges, ws.evidence, ws.unknowns, ws.conflicts, ws.version


def test_a_real_installed_package_builds_end_to_end(tmp_path: Path) -> None:
    root = Path(requests.__file__).parent
    summary = build_workspace(root, store=tmp_path)
    assert summary["files"] == len(list(root.rglob("*.py"))) and summary["analysed"] == summary["files"]
    ws = Store.open(tmp_path).load(summary["workspace_id"])
    edge = ws.graph.edges["semantic:requests.api.get", "semantic:requests.api.request", "calls"]
    record = ws.evidence[edge["evidence"][0]]
    line = (root / record["artifact"]).read_text().splitlines()[record["span"]["line"] - 1]
    assert "request(" in line and record["resolution"] == "lexical" and record["status"] == "confirmed"
    session_send = ws.graph.edges[
        "semantic:requests.sessions.Session.request", "semantic:requests.sessions.Session.send", "calls"
    ]
    assert ws.evidence[session_send["evidence"][0]]["resolution"] == "self_mro"
    assert any(e["authority"] == "static:grimp" for e in ws.evidence.values())
    assert "requests.api.request" in callgraph(ws)["requests.api.get"]
    again = build_workspace(root, store=tmp_path)
    assert (
        again["analysed"] == 0
        and again["reused"] == summary["files"]
        and again["version"] == summary["version"]
    )
    inferred = call(
        "query.subgraph",
        {
            "workspace_id": summary["workspace_id"],
            "infer": True,
            "depth": 0,
            "anchor": {"kind": "symbol", "value": "requests.sessions.Session.send"},
        },
        store=tmp_path,
    )
    assert inferred["status"] == "ok" and inferred["data"]["provenance"]["passes"] == ["ast", "jedi"]
    by_jedi = [e for e in inferred["data"]["edges"] if e["resolution"] == "inference"]
    assert by_jedi and all(e["status"] == "inferred" for e in by_jedi)
    assert list((tmp_path / "cache" / "jedi").iterdir())


TREE = {
    "app/__init__.py": "from .core import run\n",
    "app/core.py": "from .util import helper\n\n\ndef run():\n    return helper()\n",
    "app/util.py": "def helper():\n    return 1\n",
    "app/cli.py": "from app.core import run\n\n\ndef main():\n    run()\n",
}


def test_incremental_update_equals_a_full_rebuild(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    first = build_workspace(root, store=tmp_path / "inc")
    assert first["analysed"] == 4
    (root / "app" / "util.py").write_text(
        "def helper():\n    return other()\n\n\ndef other():\n    return 2\n"
    )
    (root / "app" / "extra.py").write_text("from .util import other\n\nVALUE = other()\n")
    (root / "app" / "cli.py").unlink()
    update = build_workspace(root, store=tmp_path / "inc")
    assert (update["analysed"], update["reused"], update["removed"]) == (2, 2, 1)
    assert update["dependents"] >= 1
    full = build_workspace(root, store=tmp_path / "full")
    assert full["analysed"] == 4
    inc_ws = Store.open(tmp_path / "inc").load(update["workspace_id"])
    full_ws = Store.open(tmp_path / "full").load(full["workspace_id"])
    assert _graph_state(inc_ws) == _graph_state(full_ws)
    assert inc_ws.graph.has_edge("semantic:app.util.helper", "semantic:app.util.other", "calls")
    assert "semantic:app.cli.main" not in inc_ws.graph


def test_incremental_update_of_a_real_package_equals_a_full_rebuild(tmp_path: Path) -> None:
    # On real code the resolver's argument flow crosses files, so one edited file can change the
    # resolution of files that never import it: the update must still equal a full rebuild.
    root = tmp_path / "requests"
    shutil.copytree(Path(requests.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    first = build_workspace(root, store=tmp_path / "inc")
    utils = root / "utils.py"
    text = utils.read_text()
    assert "def super_len(o: Any) -> int:" in text
    # A changed signature, and a new function whose argument flows into another file's function.
    utils.write_text(
        text.replace("def super_len(o: Any) -> int:", "def super_len(o: Any, hook: Any = len) -> int:")
        + "\n\ndef _added(session):\n"
        + "    from .hooks import dispatch_hook\n\n"
        + "    dispatch_hook('response', {'response': [super_len]}, None)\n"
        + "    return session.request('GET', '/')\n"
    )
    update = build_workspace(root, store=tmp_path / "inc")
    assert (update["analysed"], update["reused"]) == (1, first["files"] - 1)
    full = build_workspace(root, store=tmp_path / "full")
    inc_ws = Store.open(tmp_path / "inc").load(update["workspace_id"])
    full_ws = Store.open(tmp_path / "full").load(full["workspace_id"])
    assert _graph_state(inc_ws) == _graph_state(full_ws)
    assert inc_ws.graph.has_edge(
        "semantic:requests.utils._added", "semantic:requests.hooks.dispatch_hook", "calls"
    )


RESOLUTION = {
    "lib/__init__.py": "",
    "lib/base.py": """import functools
import os


class Base:
    registry = {}

    def __init__(self):
        self.count = 0

    def step(self):
        self.count += 1
        return self.helper()

    def helper(self):
        return os.getcwd()


def traced(func):
    @functools.wraps(func)
    def inner(*args):
        return func(*args)
    return inner


class Child(Base):
    def step(self):
        return super().step()


@traced
def work():
    item = Child()
    item.step()
""",
}


def test_each_edge_says_how_it_was_resolved(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", RESOLUTION)
    ws = Store.open(tmp_path / "s").load(build_workspace(root, store=tmp_path / "s")["workspace_id"])

    def resolution(source: str, target: str, relation: str = "calls") -> str:
        edge = ws.graph.edges[f"semantic:{source}", f"semantic:{target}", relation]
        return ws.evidence[edge["evidence"][0]]["resolution"]

    assert resolution("lib.base.Base.step", "lib.base.Base.helper") == "self_mro"
    assert resolution("lib.base.Child.step", "lib.base.Base.step") == "self_mro"
    assert resolution("lib.base.work", "lib.base.Child.step") == "constructor"
    assert resolution("lib.base.work", "lib.base.Base.__init__") == "constructor"
    assert resolution("lib.base.Base.helper", "os.getcwd") == "import"
    assert resolution("lib.base.traced.inner", "lib.base.work") == "heuristic"
    assert resolution("lib.base", "lib.base.traced") == "lexical"
    assert ws.graph.has_edge("semantic:lib.base.Child", "semantic:lib.base.Base", "inherits")
    assert ws.graph.has_edge("semantic:lib.base.traced", "semantic:lib.base.work", "decorates")
    assert ws.graph.has_edge("semantic:lib.base.Base.step", "semantic:lib.base.Base.count", "writes_state")
    assert ws.graph.has_edge("semantic:lib.base.Base.step", "semantic:lib.base.Base.count", "reads_state")
    assert ws.graph.nodes["semantic:lib.base.Child"]["mro"] == ["lib.base.Child", "lib.base.Base"]
    assert ws.graph.nodes["semantic:lib.base.Base.registry"]["subkind"] == "class_attribute"


def test_the_psmr_commands(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    runner = CliRunner()
    built = runner.invoke(app, ["psmr", "build", str(root), "--store", str(tmp_path / "s"), "--json"])
    assert built.exit_code == 0, built.output
    ws = json.loads(built.stdout)["workspace_id"]
    called = runner.invoke(
        app,
        [
            "psmr",
            "call",
            "query.search",
            json.dumps({"workspace_id": ws, "text": "run"}),
            "--store",
            str(tmp_path / "s"),
        ],
    )
    assert (
        called.exit_code == 0
        and json.loads(called.stdout)["data"]["matches"][0]["id"] == "semantic:app.core.run"
    )
    exported = runner.invoke(
        app, ["psmr", "callgraph", ws, "-o", str(tmp_path / "cg.json"), "--store", str(tmp_path / "s")]
    )
    assert exported.exit_code == 0
    assert json.loads((tmp_path / "cg.json").read_text())["app.cli.main"] == ["app.core.run"]
    unwritable = runner.invoke(
        app, ["psmr", "callgraph", ws, "-o", str(tmp_path / "no" / "cg.json"), "--store", str(tmp_path / "s")]
    )
    assert unwritable.exit_code == 2 and "cannot write" in unwritable.output
    assert not (tmp_path / "no").exists()
    listed = runner.invoke(app, ["psmr", "list", "--store", str(tmp_path / "s")])
    assert ws in listed.stdout
    missing = runner.invoke(
        app,
        ["psmr", "call", "workspace.describe", '{"workspace_id": "ws_0000"}', "--store", str(tmp_path / "s")],
    )
    assert missing.exit_code == 2 and json.loads(missing.stdout)["error"]["code"] == "WORKSPACE_NOT_FOUND"
    assert runner.invoke(app, ["psmr", "call", "query.search", "{not json"]).exit_code == 2
    assert (
        runner.invoke(
            app, ["psmr", "build", str(tmp_path / "nope"), "--store", str(tmp_path / "s")]
        ).exit_code
        == 2
    )


def test_resolution_corner_cases_from_strings() -> None:
    graph = callgraph_of(
        {
            "a": ("from b import *\n\n\ndef fa():\n    fb()\n", False),
            "b": ("from a import *\n\n\ndef fb():\n    pass\n\n\ndef use(cb=fb):\n    cb()\n", False),
            "c": (
                """class Registry:
    def __init__(self, func):
        self.func = func

    def __call__(self):
        return self.func()


@Registry
def task():
    pass


def chain(n):
    return chain(n - 1) if n else task()


task()
""",
                False,
            ),
        }
    )
    assert graph["a.fa"] == ["b.fb"]  # star import, in a cycle of star imports
    assert graph["b.use"] == ["b.fb"]  # a default argument, looked up where the function is defined
    assert graph["c"] == ["c.Registry.__call__", "c.Registry.__init__", "c.task"]  # class used as decorator
    assert graph["c.Registry.__call__"] == ["c.task"]
    assert graph["c.chain"] == ["c.Registry.__call__", "c.chain", "c.task"]


def test_jedi_resolves_unknowns_and_flags_where_it_disagrees(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "tree",
        {
            "m.py": """import re


def a():
    pass


def b():
    pass


def run(f=b):
    f()


class Box:
    def open(self):
        return 1


def opener(box: Box):
    return box.open()


def decode(text):
    pattern = re.compile("x")
    return pattern.match(text)


run(a)
"""
        },
    )
    ws = build_workspace(root, store=tmp_path / "s")["workspace_id"]
    typed = call(
        "query.subgraph",
        {
            "workspace_id": ws,
            "anchor": {"kind": "symbol", "value": "m.opener"},
            "depth": 1,
            "relations": ["calls"],
        },
        store=tmp_path / "s",
    )["data"]
    assert [e["target"] for e in typed["edges"]] == ["semantic:m.Box.open"]  # from the annotation
    plain = call(
        "query.subgraph",
        {"workspace_id": ws, "anchor": {"kind": "symbol", "value": "m.decode"}, "depth": 0},
        store=tmp_path / "s",
    )["data"]
    assert [u["reason"] for u in plain["unknowns"]] == ["untyped_receiver"]
    inferred = call(
        "query.subgraph",
        {
            "workspace_id": ws,
            "anchor": {"kind": "symbol", "value": "m.decode"},
            "depth": 0,
            "infer": True,
            "include_evidence": True,
        },
        store=tmp_path / "s",
    )
    data = inferred["data"]
    assert ("semantic:re.Pattern.match", "inference", "inferred") in [
        (e["target"], e["resolution"], e["status"]) for e in data["edges"]
    ]
    assert data["unknowns"] == [] and data["provenance"]["resolved_by_inference"] == [
        plain["unknowns"][0]["id"]
    ]
    assert {e["authority"] for e in data["evidence"]} == {"static:jedi"}
    # The fast pass lets both the argument and the default flow into f; jedi infers only the argument.
    run = call(
        "query.subgraph",
        {"workspace_id": ws, "anchor": {"kind": "symbol", "value": "m.run"}, "depth": 0, "infer": True},
        store=tmp_path / "s",
    )
    assert [(c["kind"], c["subject"]) for c in run["data"]["conflicts"]] == [
        ("passes_disagree", "semantic:m.run")
    ]
    assert "m.b" in run["data"]["conflicts"][0]["detail"] and run["conflict_refs"] == [
        run["data"]["conflicts"][0]["id"]
    ]
    # The disagreement is recorded: query.conflicts and a slice without inference list it afterwards.
    listed = call("query.conflicts", {"workspace_id": ws}, store=tmp_path / "s")["data"]["conflicts"]
    assert listed == run["data"]["conflicts"]
    plain_run = call(
        "query.subgraph",
        {"workspace_id": ws, "anchor": {"kind": "symbol", "value": "m.run"}, "depth": 0},
        store=tmp_path / "s",
    )["data"]
    assert plain_run["conflicts"] == listed
    described = call("workspace.describe", {"workspace_id": ws}, store=tmp_path / "s")["data"]
    assert described["conflict_count"] == 1
    # Once the file changes so that no default flows into f, the record no longer holds.
    source = (root / "m.py").read_text()
    (root / "m.py").write_text(source.replace("def run(f=b):", "def run(f):"))
    build_workspace(root, store=tmp_path / "s")
    assert call("query.conflicts", {"workspace_id": ws}, store=tmp_path / "s")["data"]["conflicts"] == []


def test_the_src_layout_names_modules_without_src(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "proj",
        {
            "src/tool/__init__.py": "",
            "src/tool/core.py": "def work():\n    return 1\n",
            "src/tool/cli.py": "from tool.core import work\n\n\ndef main():\n    work()\n",
        },
    )
    ws = Store.open(tmp_path / "s").load(build_workspace(root, store=tmp_path / "s")["workspace_id"])
    assert callgraph(ws)["tool.cli.main"] == ["tool.core.work"]
    imports = ws.graph.edges["semantic:tool.cli", "semantic:tool.core", "imports"]
    assert ws.evidence[imports["evidence"][0]]["authority"] == "static:grimp"


def test_unknowns_name_their_reason() -> None:
    from slotrelay.psmr.analysis.extract import extract
    from slotrelay.psmr.analysis.link import Linker

    source = """import os


def each(*handlers, **options):
    for handler in handlers:
        handler()
    options["x"]()


def forward(callback, *args):
    callback()
    args()
    missing()
    getattr(os, name)()
    os.environ.copy().clear()


class Local:
    pass


Local().nothing()
"""
    facts = extract(source, "m")
    link = Linker({"m": facts}).run()
    reasons = {(facts["calls"][i]["scope"], reason) for (_, i), reason in link.unresolved.items()}
    assert reasons == {
        ("m.each", "container_element"),
        ("m.forward", "parameter_call"),
        ("m.forward", "variadic_parameter"),
        ("m.forward", "unresolved_name"),
        ("m.forward", "dynamic_getattr"),
        ("m.forward", "untyped_receiver"),
        ("m", "attribute_not_found"),
    }
