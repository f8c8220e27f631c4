"""The change operators in the core, on packages built from strings: adding symbols, moving a call
site, replacing a body, and the atomic multi-file write that restores every file when one fails."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slotrelay.cli import app
from slotrelay.psmr.api import Grants, build_workspace, call
from slotrelay.psmr.change.projection import write_all
from tests.support.psmr_trees import write_tree

SOURCE = '''"""Greetings."""


def hello(name):
    """Say hello."""
    return "hello " + name


def polite(name):
    return hello(name) + "!"


class Greeter:
    """Greets."""

    def greet(self, name):
        return hello(name)
'''


def ok(operation: str, request: dict[str, Any], store: Path, **kwargs: Any) -> dict[str, Any]:
    answer = call(operation, request, store=store, **kwargs)
    assert answer["status"] == "ok", answer.get("error")
    return answer["data"]


def loop(
    root: Path, store: Path, ws: str, operations: list[dict[str, Any]], *, accept_review: bool = False
) -> dict[str, Any]:
    """propose, validate, preview, apply, rebuild; returns the roundtrip."""
    delta = ok("delta.propose", {"workspace_id": ws, "intent": "t", "operations": operations}, store)
    request = {"workspace_id": ws, "delta_id": delta["delta_id"]}
    ok("delta.validate", {**request, "accept_review": accept_review}, store)
    ok("projection.preview", request, store)
    ok("projection.apply", request, store, grants=Grants.of(write_roots=[root]))
    ok("verification.rebuild", request, store)
    return ok("verification.roundtrip", request, store)


def call_site(store: Path, ws: str, caller: str, callee: str) -> str:
    """The evidence id of the (first) call of callee in caller, as an agent finds it with a query."""
    request = {"workspace_id": ws, "anchor": {"kind": "symbol", "value": caller}, "relations": ["calls"]}
    sliced = ok("query.subgraph", {**request, "depth": 1}, store)
    return str(next(e for e in sliced["edges"] if e["target"] == f"semantic:{callee}")["evidence_refs"][0])


def workspace(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path, str]:
    """The files written under tmp_path/proj, built into tmp_path/store: (root, store, workspace id)."""
    root = write_tree(tmp_path / "proj", files)
    store = tmp_path / "store"
    return root, store, build_workspace(root, store=store)["workspace_id"]


@pytest.fixture
def greet(tmp_path: Path) -> tuple[Path, Path, str]:
    return workspace(tmp_path, {"greet/__init__.py": "", "greet/words.py": SOURCE})


def test_add_symbols_then_move_a_call_site_to_one(greet: tuple[Path, Path, str]) -> None:
    root, store, ws = greet
    added = [
        {"op": "add_symbol", "module": "greet.words", "after": "greet.words.hello",
         "source": "def hi(name):\n    return 'hi ' + name\n"},
        {"op": "add_symbol", "module": "greet/words.py", "parent": "greet.words.Greeter",
         "source": "def wave(self):\n    return 'o/'\n"},
        {"op": "add_symbol", "module": "greet.words", "source": "def bye(name):\n    return 'bye ' + name\n"},
    ]  # fmt: skip
    roundtrip = loop(root, store, ws, added)
    assert roundtrip["all_matched"], (
        roundtrip["intended_but_missing"],
        roundtrip["changed_but_not_intended"],
    )
    text = (root / "greet/words.py").read_text()
    assert text.index("def hi(name)") < text.index("def polite(name)")
    assert "    def wave(self):\n        return 'o/'\n" in text
    assert text.endswith("\n\n\ndef bye(name):\n    return 'bye ' + name\n")
    assert '"""Say hello."""' in text

    # Point Greeter.greet at hi: the site is named by its evidence id from a query.
    site = call_site(store, ws, "greet.words.Greeter.greet", "greet.words.hello")
    moved = [{"op": "move_call_site", "evidence_id": site, "new_callee": "greet.words.hi"}]
    roundtrip = loop(root, store, ws, moved)
    assert roundtrip["all_matched"], (
        roundtrip["intended_but_missing"],
        roundtrip["changed_but_not_intended"],
    )
    kinds = {(m["kind"], m.get("caller"), m.get("callee")) for m in roundtrip["matched"]}
    assert ("call_site_added", "semantic:greet.words.Greeter.greet", "semantic:greet.words.hi") in kinds
    assert ("call_site_removed", "semantic:greet.words.Greeter.greet", "semantic:greet.words.hello") in kinds
    assert "        return hi(name)\n" in (root / "greet/words.py").read_text()


def test_replace_body_keeps_the_docstring_and_comments_elsewhere(greet: tuple[Path, Path, str]) -> None:
    root, store, ws = greet
    body = [{"op": "replace_body", "target": "greet.words.hello", "body": "return f'hello {name}'\n"}]
    roundtrip = loop(root, store, ws, body)
    assert roundtrip["all_matched"], (
        roundtrip["intended_but_missing"],
        roundtrip["changed_but_not_intended"],
    )
    text = (root / "greet/words.py").read_text()
    assert 'def hello(name):\n    """Say hello."""\n    return f\'hello {name}\'\n' in text
    assert text.replace("    return f'hello {name}'\n", '    return "hello " + name\n') == SOURCE


def test_an_invalid_delta_is_refused_with_every_check(greet: tuple[Path, Path, str]) -> None:
    # A new body calling a name that does not exist: a confirmed defect and a new unresolved name.
    root, store, ws = greet
    body = [{"op": "replace_body", "target": "greet.words.polite", "body": "return shout(name)\n"}]
    delta = ok("delta.propose", {"workspace_id": ws, "intent": "t", "operations": body}, store)
    documentation = call(
        "projection.preview",
        {"workspace_id": ws, "delta_id": delta["delta_id"], "projections": ["documentation"]},
        store=store,
    )
    assert documentation["error"]["code"] == "UNSUPPORTED_PROJECTION"
    answer = call("delta.validate", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store=store)
    assert answer["status"] == "error" and answer["error"]["code"] == "VALIDATION_FAILED"
    assert set(answer["data"]["failed"]) == {"known_defects", "graph_invariants"}
    problems = {c["check"]: c["problems"] for c in answer["data"]["checks"]}
    assert problems["known_defects"][0]["message"] == "undefined name 'shout'"
    applied = call("projection.apply", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store=store,
                   grants=Grants.of(write_roots=[root]))  # fmt: skip
    assert applied["error"]["code"] == "VALIDATION_FAILED"
    assert (root / "greet/words.py").read_text() == SOURCE


def test_a_failed_write_restores_every_file_of_the_apply(tmp_path: Path) -> None:
    first = tmp_path / "a.py"
    first.write_text("a = 1\n")
    blocked = tmp_path / "b.py"
    blocked.mkdir()
    (blocked / "inside").write_text("x")
    with pytest.raises(OSError):
        write_all(tmp_path, {"a.py": ("a = 1\n", "a = 2\n"), "b.py": ("", "b = 2\n")})
    assert first.read_text() == "a = 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


def test_the_cli_grants_source_write_only_with_its_flag(greet: tuple[Path, Path, str]) -> None:
    root, store, ws = greet
    runner = CliRunner()

    def psmr_call(operation: str, request: dict[str, Any], *flags: str) -> tuple[int, dict[str, Any]]:
        done = runner.invoke(
            app, ["psmr", "call", operation, json.dumps(request), "--store", str(store), *flags]
        )
        return done.exit_code, json.loads(done.stdout)

    body = [{"op": "replace_body", "target": "greet.words.hello", "body": "return 'hey ' + name\n"}]
    code, proposed = psmr_call("delta.propose", {"workspace_id": ws, "intent": "t", "operations": body})
    assert code == 0
    request = {"workspace_id": ws, "delta_id": proposed["data"]["delta_id"]}
    assert psmr_call("delta.validate", request)[0] == 0
    assert psmr_call("projection.preview", request)[0] == 0
    code, denied = psmr_call("projection.apply", request)
    assert code == 2 and denied["error"]["code"] == "CAPABILITY_DENIED"
    assert (root / "greet/words.py").read_text() == SOURCE
    code, outside = psmr_call("projection.apply", request, "--allow-write", str(store))
    assert code == 2 and "outside the roots" in outside["error"]["message"]
    code, applied = psmr_call("projection.apply", request, "--allow-write", str(root))
    assert code == 0 and applied["data"]["status"] == "applied"
    assert "return 'hey ' + name" in (root / "greet/words.py").read_text()


def test_unresolved_and_spread_sites_are_listed_not_edited(tmp_path: Path) -> None:
    extra = (
        SOURCE + "\n\ndef relay(obj, name):\n    return obj.hello(name)\n\n\ndef fan(names):\n    return "
        "hello(*names)\n"
    )
    root = write_tree(tmp_path / "proj", {"greet/__init__.py": "", "greet/words.py": extra})
    store = tmp_path / "store"
    ws = build_workspace(root, store=store)["workspace_id"]
    change = {"op": "change_signature", "target": "greet.words.hello", "parameters": "name, punctuation"}
    change["parameter_map"] = {"punctuation": {"value": "''"}}
    proposed = ok("delta.propose", {"workspace_id": ws, "intent": "t", "operations": [change]}, store)
    affected = {(u["scope"], u["detail"]) for u in proposed["possibly_affected"]}
    assert ("semantic:greet.words.relay", "obj.hello") in affected
    assert [(e["caller"], e["status"]) for e in proposed["needs_review"]] == [
        ("semantic:greet.words.fan", "needs_review")
    ]
    diff = "".join(
        f["diff"]
        for f in ok("projection.preview", {"workspace_id": ws, "delta_id": proposed["delta_id"]}, store)[
            "patch"
        ]
    )
    assert "+    return hello(name, '') + \"!\"" in diff
    assert "obj.hello" not in diff and "hello(*names)" not in diff


# `slow`: a build of rich (about a minute of one worker). The sqlparse change loop
# (tests/mcp/test_change_loop.py) renames across modules through the same round trip, and
# tests/hostile/test_rename_shadowing.py refuses the renames a local name shadows.
@pytest.mark.slow
def test_renames_across_a_real_package(tmp_path: Path) -> None:
    """On a copy of rich: a class renamed across 22 files round-trips and the package still renders;
    a rename whose new name a local variable shadows at one call site is refused."""
    import rich

    root = tmp_path / "rich"
    shutil.copytree(Path(rich.__file__).parent, root / "rich", ignore=shutil.ignore_patterns("__pycache__"))
    store = tmp_path / "store"
    ws = build_workspace(root, store=store)["workspace_id"]

    shadowed = [{"op": "rename_symbol", "target": "rich.cells.cell_len", "new_name": "cell_length"}]
    delta = ok("delta.propose", {"workspace_id": ws, "intent": "t", "operations": shadowed}, store)
    refused = call("delta.validate", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store=store)
    assert refused["error"]["code"] == "VALIDATION_FAILED"
    problems = {c["check"]: c["problems"] for c in refused["data"]["checks"]}["graph_invariants"]
    assert [p["scope"] for p in problems] == ["semantic:rich.segment.Segment._split_cells"]

    roundtrip = loop(
        root, store, ws, [{"op": "rename_symbol", "target": "rich.segment.Segment", "new_name": "Piece"}]
    )
    assert roundtrip["all_matched"], (
        roundtrip["intended_but_missing"],
        roundtrip["changed_but_not_intended"],
    )
    program = "import rich.console, rich.table; rich.console.Console(width=20).print(rich.table.Table('a'))"
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=root, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "a" in done.stdout, done.stderr
    assert "class Piece(NamedTuple):" in (root / "rich/segment.py").read_text()


def test_review_reports_new_state_writes_cycles_and_defects(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "COUNT = 0\n\n\ndef ping(n):\n    return n\n",
        "pkg/b.py": "from pkg.a import ping\n\n\ndef pong(n):\n    return ping(n)\n",
    }
    root = write_tree(tmp_path / "proj", files)
    store = tmp_path / "store"
    ws = build_workspace(root, store=store)["workspace_id"]
    body = "global COUNT\nCOUNT += 1\nfrom pkg.b import pong\nif n > 3:\n    return pong(n - 1)\nreturn n\n"
    operations = [{"op": "replace_body", "target": "pkg.a.ping", "body": body}]
    roundtrip = loop(root, store, ws, operations)
    assert roundtrip["all_matched"], (
        roundtrip["intended_but_missing"],
        roundtrip["changed_but_not_intended"],
    )
    delta_id = roundtrip["delta_id"]
    review = ok("verification.review", {"workspace_id": ws, "delta_id": delta_id}, store)
    events = {(e["event"], e.get("relation"), e.get("target")) for e in review["semantic_events"]}
    assert ("new_state_write", "writes_state", "semantic:pkg.a.COUNT") in events
    cycles = [e["members"] for e in review["semantic_events"] if e["event"] == "new_cycle"]
    assert ["semantic:pkg.a.ping", "semantic:pkg.b.pong"] in cycles
    assert review["new_defects"] == [] and review["unexpected_changes"] == []


HELPERS = '''"""A helper and its callers, shaped as sqlparse's `imt` and `grouping`."""


def imt(token, i=None, t=None):
    if i and isinstance(token, i):
        return True
    return bool(t) and token in t


def valid(token):
    return imt(token, i=int, t="ab")


def keyed(token):
    return imt(token, t="xy")


def relay(token, i):
    return imt(token, i)


def options_of(options):
    options = dict(options)
    return options.get("reindent"), options.get("indent")
'''
KEYWORD_ONLY = {
    "op": "change_signature",
    "target": "kit.helpers.imt",
    "parameters": "token, *, instance=None, types=None",
}
NEW_BODY = {
    "op": "replace_body",
    "target": "kit.helpers.imt",
    "body": "if instance and isinstance(token, instance):\n    return True\n"
    "return bool(types) and token in types\n",
}


@pytest.fixture
def kit(tmp_path: Path) -> tuple[Path, Path, str]:
    return workspace(tmp_path, {"kit/__init__.py": "", "kit/helpers.py": HELPERS})


def test_call_sites_a_delta_leaves_unfit_are_refused_though_unlinked(kit: tuple[Path, Path, str]) -> None:
    """Without a parameter map the calls are left as written (never stripped of `i=`/`t=`), and
    validate checks them though the analysis of W~ no longer links them (they do not bind)."""
    root, store, ws = kit
    operations = [KEYWORD_ONLY, NEW_BODY]
    delta = ok("delta.propose", {"workspace_id": ws, "intent": "t", "operations": operations}, store)
    assert {(e["caller"], e["status"]) for e in delta["needs_review"]} == {
        ("semantic:kit.helpers.valid", "needs_review"),
        ("semantic:kit.helpers.keyed", "needs_review"),
        ("semantic:kit.helpers.relay", "needs_review"),
    }
    answer = call("delta.validate", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store=store)
    assert answer["error"]["code"] == "VALIDATION_FAILED"
    check = {c["check"]: c for c in answer["data"]["checks"]}["type_compatibility"]
    assert check["call_sites_checked"] == 3
    reasons = {p["caller"].rsplit(".", 1)[-1]: p["reason"] for p in check["problems"]}
    assert reasons["valid"].endswith("got an unexpected keyword argument 'i'")
    assert reasons["keyed"].endswith("got an unexpected keyword argument 't'")
    assert "takes 1 positional arguments but 2 given" in reasons["relay"]

    mapped = {**KEYWORD_ONLY, "parameter_map": {"instance": {"from": "i"}, "types": {"from": "t"}}}
    roundtrip = loop(root, store, ws, [mapped, NEW_BODY])
    assert roundtrip["all_matched"], roundtrip
    text = (root / "kit/helpers.py").read_text()
    assert 'imt(token, instance=int, types="ab")' in text and "imt(token, instance=i)" in text


def test_unknowns_inside_a_renamed_function_are_not_new(kit: tuple[Path, Path, str]) -> None:
    """sqlparse's `validate_options` renamed: the `options.get` calls inside it stay as unknown as they
    were, under the function's new name; neither validate nor review reports them as new."""
    root, store, ws = kit
    rename = [{"op": "rename_symbol", "target": "kit.helpers.options_of", "new_name": "checked"}]
    delta = ok("delta.propose", {"workspace_id": ws, "intent": "t", "operations": rename}, store)
    before = ok("query.unknowns", {"workspace_id": ws, "scope": "kit.helpers.options_of"}, store)
    assert {u["detail"] for u in before["unknowns"]} == {"options.get"}
    request = {"workspace_id": ws, "delta_id": delta["delta_id"]}
    ok("delta.validate", request, store)
    ok("projection.preview", request, store)
    ok("projection.apply", request, store, grants=Grants.of(write_roots=[root]))
    ok("verification.rebuild", request, store)
    assert ok("verification.review", request, store)["new_unknowns"] == []


@pytest.mark.docker
def test_a_large_suite_s_observations_fit_the_sandbox_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """600 tests each reaching 150 functions: named once each, the observations stay far below the
    sandbox's 1 MiB result (written out per test, as for sqlparse's 540 tests, they did not)."""
    from slotrelay.sandbox import SandboxUnavailable, get_backend
    from tests.support.services import require_service

    try:
        get_backend("docker", lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the docker sandbox cannot run python here: {missing.message}")
    functions = "".join(f"def function_{i}():\n    return {i}\n\n\n" for i in range(150))
    calls = " + ".join(f"many.function_{i}()" for i in range(150))
    suite = (
        "import pytest\n\nfrom kit import many\n\n\n@pytest.mark.parametrize('n', range(600))\n"
        f"def test_all(n):\n    assert {calls} == {sum(range(150))}\n"
    )
    files = {"kit/__init__.py": "", "kit/many.py": functions, "tests/__init__.py": ""}
    root, store, ws = workspace(tmp_path, {**files, "tests/test_many.py": suite})
    site = Path(pytest.__file__).resolve().parent.parent
    monkeypatch.setenv("SLOTRELAY_SANDBOX_ROOTS", f"{root}:{site}")
    ran = ok(
        "execution.run_tests",
        {"workspace_id": ws, "tests": ["tests/test_many.py"], "budget": {"max_nodes": 1}},
        store,
        grants=Grants.of(process_execution=True),
    )
    assert ran["passed"] and ran["counts"]["passed"] == 600, ran
    assert len(ran["results"][0]["reached"]) == 151  # the 150 functions and the test itself


def test_unresolved_calls_of_the_same_name_that_would_not_bind_need_review(tmp_path: Path) -> None:
    """sqlparse's `tlist.token_next_by(m=...)`: 37 calls through untyped parameters, unresolved. They are
    listed as possibly affected, and validate says which of them would not bind to the new signature
    (without failing: they may call something else); the delta needs review, never all-ok."""
    box = (
        "class Box:\n    def put(self, i=None, t=None):\n        return i or t\n\n\n"
        "def typed():\n    return Box().put(t=1)\n\n\n"
        "def untyped(box):\n    return box.put(t=1), box.put()\n"
    )
    _, store, ws = workspace(tmp_path, {"kit/__init__.py": "", "kit/box.py": box})
    change = {
        "op": "change_signature",
        "target": "kit.box.Box.put",
        "parameters": "self, *, instance=None, types=None",
        "parameter_map": {"instance": {"from": "i"}, "types": {"from": "t"}},
    }
    body = {"op": "replace_body", "target": "kit.box.Box.put", "body": "return instance or types\n"}
    delta = ok("delta.propose", {"workspace_id": ws, "intent": "t", "operations": [change, body]}, store)
    assert [u["detail"] for u in delta["possibly_affected"]] == ["box.put", "box.put"]
    validated = ok("delta.validate", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store)
    check = {c["check"]: c for c in validated["checks"]}["type_compatibility"]
    assert check["ok"] and check["call_sites_checked"] == 1 and check["possibly_affected_unfit"] == 1
    assert validated["status"] == "needs_review" and validated["needs_review_count"] == 2
    unfit, fits = check["needs_review"]
    assert {fits["caller"], unfit["caller"]} == {"semantic:kit.box.untyped"}
    assert (unfit["unresolved"], unfit["line"], unfit["column"], unfit["text"]) == (
        "box.put",
        11,
        11,
        "return box.put(t=1), box.put()",
    )
    assert (fits["line"], fits["column"]) == (11, 25)
    assert unfit["reason"].endswith("got an unexpected keyword argument 't'")
    assert fits["reason"].endswith("it binds")


def test_a_rename_follows_attributes_of_imported_modules(tmp_path: Path) -> None:
    """sqlparse's grouping refers to `sql.Comparison` as a value (a tuple of classes, isinstance), never
    calling it: those references are renamed by scope, however the module was imported, and a local
    of the module's name is left alone."""
    users = (
        "import kit.shapes\nimport kit.shapes as sh\nfrom kit import shapes\n\n"
        "KINDS = (shapes.Square, sh.Square, kit.shapes.Square)\n\n\n"
        "def is_square(x):\n    return isinstance(x, shapes.Square)\n\n\n"
        "def other(shapes):\n    return shapes.Square  # a parameter, not the module\n"
    )
    files = {"kit/__init__.py": "", "kit/shapes.py": "class Square:\n    pass\n", "kit/users.py": users}
    root, store, ws = workspace(tmp_path, files)
    rename = [{"op": "rename_symbol", "target": "kit.shapes.Square", "new_name": "Box"}]
    delta = ok("delta.propose", {"workspace_id": ws, "intent": "t", "operations": rename}, store)
    # The parameter's attribute may be the class or not: validate lists it, the agent accepts it.
    listed = ok("delta.validate", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store)
    assert [(s["file"], s["line"], s["column"]) for s in listed["needs_review"]] == [("kit/users.py", 13, 11)]
    roundtrip = loop(root, store, ws, rename, accept_review=True)
    assert roundtrip["all_matched"], roundtrip
    text = (root / "kit/users.py").read_text()
    assert "KINDS = (shapes.Box, sh.Box, kit.shapes.Box)" in text
    assert "return isinstance(x, shapes.Box)" in text
    assert "return shapes.Square  # a parameter, not the module" in text


def test_a_helper_added_and_a_call_site_moved_to_it_in_one_delta(greet: tuple[Path, Path, str]) -> None:
    """As an agent would factor out a helper: add it and point a call site at it, in one delta."""
    root, store, ws = greet
    site = call_site(store, ws, "greet.words.polite", "greet.words.hello")
    operations = [
        {"op": "add_symbol", "module": "greet.words", "after": "greet.words.hello",
         "source": "def hi(name):\n    return 'hi ' + name\n"},
        {"op": "move_call_site", "evidence_id": site, "new_callee": "greet.words.hi"},
    ]  # fmt: skip
    roundtrip = loop(root, store, ws, operations)
    assert roundtrip["all_matched"], roundtrip
    kinds = {(m["kind"], m.get("caller"), m.get("callee")) for m in roundtrip["matched"]}
    assert ("call_site_added", "semantic:greet.words.polite", "semantic:greet.words.hi") in kinds
    assert '    return hi(name) + "!"\n' in (root / "greet/words.py").read_text()
