"""The PSMR human view (`slotrelay psmr view`): read in a real browser, checked against the MCP tools.

The workspace is the MCP tests' sample package (tests/support/shop_package.py, written from strings into a git
repository). `slotrelay psmr view SHOP` runs as a subprocess on 127.0.0.1; tests/ui/psmr_view.js drives
Debian's headless Chromium with the pinned playwright-core (one browser for the module's browser tests,
tests/support/browser_session.py) through overview, search, the symbol's SVG slice, an edge's evidence,
impact, the unknowns list, the proposed deltas and one delta's recorded validation and diff, and saves
screenshots of the symbol and delta pages under build/artifacts/psmr_view/. The deltas are proposed, validated
and previewed in the test through `slotrelay.psmr.api.call`, as an agent would; the pages only read them. One
state, two projections: the page's counts, slice and deltas equal what `slotrelay mcp serve` answers to an MCP
client for the same store. Bad input (an unknown symbol or delta, a bad page number, a missing store, a store
caught mid-rebuild) gets an HTML page with a 4xx status, through Starlette's TestClient and over real HTTP.
"""

from __future__ import annotations

import ast
import contextlib
import html
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import click
import httpx
import pytest
import rich
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from starlette.testclient import TestClient
from typer.testing import CliRunner

from harness.commands import SLOTRELAY
from harness.ports import free_port
from psmr_view import create_app
from psmr_view.errors import ViewError
from psmr_view.graph_svg import MAX_DRAWN
from psmr_view.links import SYMBOL_RELATIONS
from psmr_view.paging import BUDGETS
from psmr_view.reader import WorkspaceReader
from slotrelay.cli import app
from slotrelay.psmr import api
from slotrelay.psmr.operators import FINDING_KINDS
from slotrelay.psmr.ops.overview import MAP_MODULES, SYMBOL_KINDS
from slotrelay.psmr.workspace.graph import qname, sid
from slotrelay.psmr.workspace.store import Store, Workspace
from tests.support.browser_session import NODE, BrowserSession
from tests.support.services import require_service
from tests.support.shop_package import FIRST_COMMIT, make_shop
from tests.support.slotrelay_servers import ServerProcess, start_server, stop_server, wait_for_url
from tests.support.slotrelay_up import interrupt_up, migrated_home, wait_for_up

HERE = Path(__file__).parent
REPO = HERE.parents[1]
SCRIPT = HERE / "psmr_view.js"
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO / "build" / "artifacts" / "psmr_view"
READY = "PSMR view at "
# Every wait for the server; far above what a loaded 2-core machine needs.
START_TIMEOUT_S = 120
LOGIN = "semantic:shop.auth.login"
CHECKOUT = "semantic:shop.cart.Cart.checkout"
TEST_LOGIN = "semantic:tests.test_auth.test_login"
# The deltas an agent proposes on the served workspace: one validated and previewed, one failing
# validation (a body naming an undefined name), one never validated.
SIGNATURE_CHANGE = {
    "op": "change_signature",
    "target": "shop.auth.login",
    "parameters": "user, token, source='web'",
    "parameter_map": {"source": {"value": "'cart'"}},
}
BROKEN_BODY = {"op": "replace_body", "target": "shop.auth.check", "body": "return token == EXPECTED"}
RENAME = {"op": "rename_symbol", "target": "shop.auth.check", "new_name": "token_is_valid"}
ADDED_CALL = "        login(self.user, token, 'cart')"
# The diff form's two revisions (the sample's two commits), as the browser posts them.
REVISIONS = {"rev_a": "HEAD~1", "rev_b": "HEAD"}
FORM = "application/x-www-form-urlencoded"


def start_view(args: list[str], log: Path) -> ServerProcess:
    """`slotrelay psmr view ARGS` in its own process group, stderr to a log file (never a pipe)."""
    return start_server(args, cwd=None, log=log, command=("psmr", "view"), ready=READY)


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_shop(tmp_path_factory.mktemp("view") / "shop")


@pytest.fixture(scope="module")
def view(shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`slotrelay psmr view SHOP` (which builds the workspace into the session's store first); yields its
    URL."""
    server = start_view(
        [str(shop), "--port", str(free_port())], tmp_path_factory.mktemp("view-log") / "err.log"
    )
    try:
        yield wait_for_url(server, START_TIMEOUT_S)
    finally:
        output = stop_server(server)
    assert "Traceback" not in output, output


@pytest.fixture(scope="module")
def workspace_id(view: str) -> str:
    return view.rstrip("/").rsplit("/", 1)[1]


def _ok(operation: str, request: dict, store: Path | None = None) -> dict:
    answer = api.call(operation, request, store=store)
    assert answer["status"] == "ok", answer.get("error")
    return answer["data"]


@pytest.fixture(scope="module")
def proposed(shop: Path, workspace_id: str) -> dict[str, str]:
    """The three deltas, proposed (and validated, previewed) through the API as an agent would."""
    store = Store.open().path

    def propose(intent: str, operation: dict) -> str:
        request = {"workspace_id": workspace_id, "intent": intent, "operations": [operation]}
        return _ok("delta.propose", request, store)["delta_id"]

    signature = propose("let callers say where a login comes from", SIGNATURE_CHANGE)
    _ok("delta.validate", {"workspace_id": workspace_id, "delta_id": signature}, store)
    _ok("projection.preview", {"workspace_id": workspace_id, "delta_id": signature}, store)
    broken = propose("check tokens against a constant", BROKEN_BODY)
    refused = api.call("delta.validate", {"workspace_id": workspace_id, "delta_id": broken}, store=store)
    assert refused["error"]["code"] == "VALIDATION_FAILED"
    rename = propose("name the token check for what it answers", RENAME)
    return {"signature": signature, "broken": broken, "rename": rename}


@pytest.fixture(scope="module")
def browser_tools() -> None:
    require_service(
        shutil.which(CHROMIUM) is not None
        and NODE.exists()
        and (HERE / "node_modules" / "playwright-core").is_dir(),
        "the browser test needs /usr/bin/chromium (apt chromium), tests/mcp's Node and tests/ui/node_modules "
        "(run scripts/bootstrap.sh)",
    )


@pytest.fixture(scope="module")
def browser(browser_tools: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserSession]:
    """tests/ui/psmr_view.js in one node and one headless Chromium for every browser test of the module
    (a browser's start and close cost about 1 CPU-s); its log and profile in a folder of their own."""
    with BrowserSession(SCRIPT, tmp_path_factory.mktemp("browser")) as session:
        yield session


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.mark.browser
def test_a_person_reads_the_workspace_in_a_browser(
    view: str,
    workspace_id: str,
    shop: Path,
    proposed: dict[str, str],
    browser: BrowserSession,
    tmp_path: Path,
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot, delta_screenshot = ARTIFACTS / "symbol-page.png", ARTIFACTS / "delta-page.png"
    seen = browser.step(
        step="person",
        url=view.removesuffix(f"ws/{workspace_id}/"),
        query="login",
        symbol=LOGIN,
        caller=CHECKOUT,
        symbol_screenshot=str(screenshot),
        screenshot=str(tmp_path / "left.png"),
        delta=proposed["signature"],
        delta_screenshot=str(delta_screenshot),
        **REVISIONS,
    )
    print(f"symbol page screenshot: {screenshot}; delta page screenshot: {delta_screenshot}")
    assert seen["ok"], f"{seen}; page left: {tmp_path / 'left.png'}; browser log: {browser.log}"
    assert seen["refused"] == []

    described = api.call("workspace.describe", {"workspace_id": workspace_id})["data"]
    overview = seen["overview"]
    assert overview["url"].endswith(f"/ws/{workspace_id}/")  # `/` opens the workspace the view was started on
    assert (overview["nodes"], overview["edges"], overview["unknowns"]) == (
        described["node_counts"],
        described["edge_counts"],
        described["unknown_count"],
    )
    assert overview["findings"]["confirmed_defect"] >= 1 and overview["findings"]["anomaly"] >= 1

    login_line = _line_of((shop / "shop" / "auth.py").read_text(), "def login(")
    assert seen["search"]["matches"][0] == {
        "id": LOGIN,
        "kind": "function",
        "file": f"shop/auth.py:{login_line}",
    }

    svg = seen["symbol_page"]["svg"]
    assert seen["symbol_page"]["heading"] == "shop.auth.login"
    assert [n["title"] for n in svg["nodes"] if "anchor" in n["cls"]] == [LOGIN]
    callers = {
        e["title"].split(" calls ")[0]
        for e in svg["edges"]
        if e["title"].split(" (")[0].endswith(" calls shop.auth.login")
    }
    assert callers == {"shop.cart.Cart.checkout", "tests.test_auth.test_login"}
    assert any(e["title"].startswith("shop.auth.login calls shop.auth.check (") for e in svg["edges"])
    assert screenshot.stat().st_size > 10_000

    evidence = seen["evidence"]
    assert evidence["about"] == "shop.cart.Cart.checkout calls shop.auth.login"
    line = _line_of(FIRST_COMMIT["shop/cart.py"], "login(self.user, token)")
    [record] = evidence["records"]
    assert (record["artifact"], record["line"], record["authority"], record["status"]) == (
        "shop/cart.py",
        line,
        "static:ast",
        "confirmed",
    )
    assert record["resolution"] in ("import", "lexical")
    assert [h["line"] for h in record["highlighted"]] == [line]
    assert record["highlighted"][0]["text"].strip() == "login(self.user, token)"
    assert record["in_view"]

    impact = seen["impact"]
    assert set(impact["direct"]) == {CHECKOUT, TEST_LOGIN}
    assert "static reachability, not observed executions" in impact["runtime"]
    assert impact["likely_tests"] == [TEST_LOGIN]
    assert {"shop/auth.py", "shop/cart.py", "tests/test_auth.py"} <= set(impact["review_files"])

    unknowns = api.call("query.unknowns", {"workspace_id": workspace_id})["data"]
    shown = seen["unknowns"]
    assert shown["total"] == unknowns["total"] == len(shown["rows"])
    assert sorted((r["reason"], r["scope"]) for r in shown["rows"]) == sorted(
        (u["reason"], u["scope"].removeprefix("semantic:")) for u in unknowns["unknowns"]
    )

    listed = seen["deltas"]
    assert listed["total"] == 3
    # Oldest first by proposal time, which is to the second: the three may share one, so compare by id.
    assert {r["id"]: (r["stale"], r["validation"], r["status"]) for r in listed["rows"]} == {
        proposed["signature"]: ("false", "passed", "previewed"),
        proposed["broken"]: ("false", "failed", "validation_failed"),
        proposed["rename"]: ("false", "none", "proposed"),
    }

    delta = seen["delta"]
    assert delta["heading"] == f"Delta {proposed['signature']}"
    assert [(c["check"], c["ok"], c["result"]) for c in delta["checks"]] == [
        (name, "true", "pass")
        for name in (
            "projection_feasibility",
            "type_compatibility",
            "graph_invariants",
            "contracts",
            "impact_boundary",
            "known_defects",
            "constraints",
        )
    ]
    recorded = _ok("delta.describe", {"workspace_id": workspace_id, "delta_id": proposed["signature"]})
    assert [(e["kind"], e["evidence"]) for e in delta["edits"]] == [
        (e["kind"], e.get("evidence_ref")) for e in recorded["edits"]
    ]
    assert [CHECKOUT, LOGIN] in [e["symbols"] for e in delta["edits"]]
    diffs = {d["file"]: d for d in delta["diffs"]}
    assert set(diffs) == {"shop/auth.py", "shop/cart.py", "tests/test_auth.py"}
    assert diffs["shop/cart.py"]["added"] == [f"+{ADDED_CALL}"]
    assert diffs["shop/cart.py"]["removed"] == ["-        login(self.user, token)"]
    colours = delta["colours"]
    assert len({colours["add"], colours["del"], colours["ctx"]}) == 3, colours
    assert delta["forms"] == 0 and delta["apply_links"] == []
    assert delta_screenshot.stat().st_size > 10_000

    # Two revisions compared from the diff page's form: a POST from the view's own page, answered
    # with a redirect to the diff of the two workspaces it built.
    revisions = seen["revisions"]
    assert (revisions["method"], revisions["posted"]) == ("post", 303)
    pair = r"/diff\?workspace_a=ws_[0-9a-f]+&workspace_b=ws_[0-9a-f]+$"
    assert re.search(pair, revisions["url"]), revisions
    assert "semantic:shop.audit.who" in revisions["symbols_added"]
    assert "semantic:shop.auth.check" in revisions["symbols_changed"]
    assert revisions["counts"]["symbols_added"] == len(revisions["symbols_added"])


@dataclass(frozen=True)
class RealView:
    """Copies of the installed rich and click built into a store of their own, and the view over it."""

    url: str
    store: Path
    roots: dict[str, Path]
    workspaces: dict[str, str]

    def workspace(self, name: str) -> Workspace:
        return Store.open(self.store).load(self.workspaces[name])

    def page(self, name: str, path: str = "") -> str:
        return f"{self.url}ws/{self.workspaces[name]}/{path}"


@pytest.fixture(scope="module")
def real_view(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealView]:
    work = tmp_path_factory.mktemp("real")
    store, roots, workspaces = work / "store", {}, {}
    for package in (rich, click):
        name = package.__name__
        roots[name] = work / name
        shutil.copytree(
            Path(package.__file__).parent, roots[name], ignore=shutil.ignore_patterns("__pycache__")
        )
        workspaces[name] = api.build_workspace(roots[name], store=store)["workspace_id"]
    server = start_view(["--store", str(store), "--port", str(free_port())], work / "err.log")
    try:
        yield RealView(wait_for_url(server, START_TIMEOUT_S), store, roots, workspaces)
    finally:
        output = stop_server(server)
    assert "Traceback" not in output, output


# What each regression test below reads of the real packages, a step each in the module's browser:
# every step opens its own page of a store no step changes, and answers on its own.
REAL_STEPS = ("overview", "depth2", "raising", "source", "overload", "missing")


@pytest.fixture(scope="module")
def real_pages(
    real_view: RealView, browser: BrowserSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict]:
    """tests/ui/psmr_view.js's REAL_STEPS on `real_view`: each step's answer by its name."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    work = tmp_path_factory.mktemp("real-pages")
    pages = {
        "orient": real_view.page("rich"),
        "busy": real_view.page("rich", "symbol?id=rich.text.Text"),
        "symbol_screenshot": str(ARTIFACTS / "symbol-depth-2.png"),
        "raising": real_view.page("rich", "symbol?id=rich.color.Color.parse"),
        "overload_overview": real_view.page("click"),
        "overload_query": "command",
        "overload_symbol": "semantic:click.decorators.command",
        "missing": real_view.page("rich", "no-such-page"),
    }
    # The overview's screenshot is the page as its step leaves it, whole.
    left = {step: work / f"{step}.png" for step in REAL_STEPS} | {"overview": ARTIFACTS / "overview.png"}
    return {step: browser.step(step=step, screenshot=str(left[step]), **pages) for step in REAL_STEPS}


def _browsed(real_pages: dict, step: str, *, refused: tuple[str, ...] = ()) -> dict:
    """What the browser read at one step of `real_pages`. The pages answered with a 4xx or 5xx during
    it must be exactly `refused` (URLs)."""
    seen = real_pages[step]
    assert seen["ok"], f"{step}: {seen}; page left: {seen.get('page')} ({seen.get('screenshot')})"
    assert seen["refused"] == [f"404 {url}" for url in refused]
    return seen


def _callers(ws: Workspace, node: str) -> int:
    return len({s for s, _, k in ws.graph.in_edges(node, keys=True) if k == "calls" and s != node})


@pytest.mark.browser
def test_regression_the_overview_orients_on_a_real_package(
    real_view: RealView, real_pages: dict
) -> None:
    """Issue 33: the overview led with counts and a conflicts table. On rich it now opens on a map of
    its modules (the largest, framed by package, the rest listed), its entry points (`python -m rich`,
    the `__main__` blocks, the public API from `__all__`), its busiest symbols and the findings worth
    reading first; the counts follow."""
    screenshot = ARTIFACTS / "overview.png"
    seen = _browsed(real_pages, "overview")
    print(f"overview screenshot: {screenshot}")
    ws, root = real_view.workspace("rich"), real_view.roots["rich"]
    modules = {n for n, d in ws.graph.nodes(data=True) if d["kind"] == "module"}
    drawn = [title.split(":")[0] for title in seen["modules"]]
    assert len(drawn) == MAP_MODULES < len(modules)
    assert {"rich.console", "rich.text", "rich.progress"} <= set(drawn)
    assert sorted(drawn + [qname(m) for m in seen["left_out"]]) == sorted(qname(m) for m in modules)
    assert any(p.startswith(f"rich ({MAP_MODULES} of ") for p in seen["packages"]), seen["packages"]
    assert 0 < seen["imports"] <= 2 * MAP_MODULES
    assert seen["map_box"]["left"] >= 0 and seen["map_box"]["right"] <= seen["page_width"]

    assert seen["main_modules"] == ["python -m rich runs __main__.py:1"]
    blocks = {
        f"semantic:{ws.files[p.name]['module']}"
        for p in sorted(root.glob("*.py"))
        if p.name != "__main__.py"
        and re.search(r'^if __name__ == "__main__":', p.read_text(), flags=re.MULTILINE)
    }
    assert blocks and blocks <= set(seen["main_blocks"])
    declared = next(
        node.value
        for node in ast.parse((root / "__init__.py").read_text()).body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__all__"
    )
    assert seen["public_api"] == [{"package": "rich", "names": [e.value for e in declared.elts]}]

    busiest = [(b["id"], b["callers"]) for b in seen["busiest"]]
    assert busiest == [(node, _callers(ws, node)) for node, _ in busiest]
    # The most called of rich's symbols, whichever they are (the resolver decides): none left out is
    # called from more places (a dunder's callers are its class's).
    ranked = sorted(
        (
            _callers(ws, node)
            for node, data in ws.graph.nodes(data=True)
            if data["kind"] in SYMBOL_KINDS
            and (node.endswith(".__call__") or not re.fullmatch(r"__\w+__", node.rsplit(".", 1)[-1]))
        ),
        reverse=True,
    )
    assert [n for _, n in busiest] == ranked[: len(busiest)] and busiest[0][1] >= 20
    # Findings worth reading first: rich has no confirmed defect; its own anomalies, then hotspots.
    kinds = seen["read_first"]
    assert kinds == sorted(kinds, key=FINDING_KINDS.index) and {"anomaly", "hotspot"} <= set(kinds)
    tops = seen["tops"]
    assert tops["module-map"] < tops["entry-points"] == tops["busiest"] < tops["read-first"] < tops["numbers"]
    assert screenshot.stat().st_size > 50_000


@pytest.mark.browser
def test_regression_the_depth_2_picture_opens_on_its_symbol(
    real_view: RealView, real_pages: dict
) -> None:
    """Issue 33: the depth-2 graph was 1,830 by 4,275 px in a 720-px box and opened on an empty corner.
    Switched to depth 2 with the page's form, rich's busiest symbol now draws its nearest neighbours
    (at most MAX_DRAWN), says how many it left out with a link to the list of all of them (paged), and
    opens with the anchor inside the window."""
    screenshot = ARTIFACTS / "symbol-depth-2.png"
    seen = _browsed(real_pages, "depth2")
    print(f"depth-2 screenshot: {screenshot}")
    box = seen["anchor"]
    assert 0 <= box["top"] < box["bottom"] <= box["window"]["height"], box
    assert 0 <= box["left"] < box["right"] <= box["window"]["width"], box
    whole = api.call(
        "query.subgraph",
        {
            "workspace_id": real_view.workspaces["rich"],
            "anchor": {"kind": "symbol", "value": "rich.text.Text"},
            "depth": 2,
            "relations": list(SYMBOL_RELATIONS),
            "budget": {"max_nodes": 1},
        },
        store=real_view.store,
    )["data"]["paging"]["nodes"]["total"]
    note = seen["note"]
    drawn = {n["title"] for n in seen["svg"]["nodes"]}
    assert len(drawn) == note["drawn"] and 10 <= note["drawn"] <= MAX_DRAWN
    assert note["left_out"] == whole - note["drawn"] > 0
    assert f"{note['left_out']} more of the slice's {whole} nodes are not drawn" in note["text"]
    # The link goes to the slice's nodes, nearest first, a page at a time: the drawn ones lead it.
    listed = seen["list"]
    assert listed["total"] == whole and listed["next"] == 1 and MAX_DRAWN < len(listed["ids"]) < whole
    assert drawn <= set(listed["ids"][:MAX_DRAWN])
    assert screenshot.stat().st_size > 20_000


def _raise_sites(path: Path) -> set[tuple[int, int]]:
    """Where each `raise` statement's exception is named (its class, or the callee that builds it)."""
    sites = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            named = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            sites.add((named.lineno, named.col_offset))
    return sites


@pytest.mark.browser
def test_regression_no_raise_is_drawn_as_a_call(real_view: RealView, real_pages: dict) -> None:
    """Issue 33: `raise ColorParseError(...)` was drawn and listed as "calls ColorParseError". Every
    edge of Color.parse's picture and table is checked against the raise statements of the source
    (parsed here): an edge whose every site is a raise's exception reads "raises", no other does."""
    seen = _browsed(real_pages, "raising")
    ws, root = real_view.workspace("rich"), real_view.roots["rich"]
    raised: dict[str, set[tuple[int, int]]] = {}

    def is_raise(source: str, target: str) -> bool:
        records = [ws.evidence[e] for e in ws.graph.edges[sid(source), sid(target), "calls"]["evidence"]]
        for record in records:
            raised.setdefault(record["artifact"], _raise_sites(root / record["artifact"]))
        return all((r["span"]["line"], r["span"]["col"]) in raised[r["artifact"]] for r in records)

    drawn = [e["title"].split(" (")[0].split(" ") for e in seen["svg"]["edges"]]
    calls = [(s, t) for s, relation, t in drawn if relation in ("calls", "raises")]
    assert ["rich.color.Color.parse", "raises", "rich.color.ColorParseError"] in drawn
    for source, relation, target in drawn:
        if relation in ("calls", "raises"):
            assert (relation == "raises") is is_raise(source, target), (source, relation, target)
    assert len(calls) >= 3
    for row in seen["rows"]:
        if row["relation"] in ("calls", "raises"):
            assert (row["relation"] == "raises") is is_raise(row["source"], row["target"]), row
            assert row["stored"] == ("calls" if row["relation"] == "raises" else None), row
    evidence = seen["evidence"]
    assert evidence["about"] == "rich.color.Color.parse raises rich.color.ColorParseError"
    assert evidence["records"] and all(" raises rich.color.ColorParseError" in r for r in evidence["records"])


@pytest.mark.browser
def test_regression_the_source_view_expands(real_view: RealView, real_pages: dict) -> None:
    """Issue 33: the source view showed 12 lines either side with no way to see more. From a symbol's
    file link, "more context" widens it step by step (25, 50, 100, 200 lines either side) and stops
    there; the highlighted line stays in view and the header keeps its navigation."""
    seen = _browsed(real_pages, "source")
    lines = (real_view.roots["rich"] / "color.py").read_bytes().splitlines()
    line = _line_of((real_view.roots["rich"] / "color.py").read_text(), "def parse(")
    steps = seen["steps"]
    assert [s["context"] for s in steps] == [12, 25, 50, 100, 200]
    for step in steps:
        first, last = max(1, line - step["context"]), min(len(lines), line + step["context"])
        assert (step["line"], step["rows"], step["in_view"]) == (line, last - first + 1, True), step
    assert {"Overview", "Search", "Conflicts"} <= set(seen["nav"])


@pytest.mark.browser
def test_regression_an_overload_opens_on_its_implementation(real_view: RealView, real_pages: dict) -> None:
    """Issue 33: click's `command` (four `@t.overload` stubs, then the function) opened on the first
    stub and was listed as a conflict. Searched and opened in the browser, it now shows the
    implementation's line and signature, names the stubs, has no conflict, and its impact opens."""
    seen = _browsed(real_pages, "overload")
    source = (real_view.roots["click"] / "decorators.py").read_text()
    defs = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == "command"
    ]
    stubs = [d for d in defs if any(ast.unparse(x).endswith("overload") for x in d.decorator_list)]
    [implementation] = [d for d in defs if d not in stubs]
    assert len(stubs) == 4 == seen["stubs"]
    assert seen["where"] == f"decorators.py:{implementation.lineno}"
    assert (
        seen["signature"]
        == f"command({ast.unparse(implementation.args)}) -> {ast.unparse(implementation.returns)}"
    )
    assert seen["conflicts"] == 0
    assert "/impact?id=semantic%3Aclick.decorators.command" in seen["impact"]


@pytest.mark.browser
def test_regression_the_404_page_keeps_the_navigation(real_view: RealView, real_pages: dict) -> None:
    """Issue 33: the 404 page dropped the navigation. A page of a workspace that does not exist keeps
    the header: the workspace's pages and its search box."""
    missing = real_view.page("rich", "no-such-page")
    seen = _browsed(real_pages, "missing", refused=(missing,))
    assert (seen["status"], seen["code"]) == (404, "NOT_FOUND")
    assert seen["nav"] == [
        "Workspaces",
        "Overview",
        "Search",
        "Unknowns",
        "Conflicts",
        "Findings",
        "Diff",
        "Deltas",
    ]
    assert seen["search_box"] == 1


def _rows(page: str) -> tuple[list[str], list[tuple[str, ...]]]:
    """The node ids and (source, relation, target) edges listed in a symbol page's tables, in order; an
    edge's relation as the store holds it (a row reading "raises" is a stored `calls`)."""
    nodes = re.findall(r'<tr data-id="([^"]+)"><td><a class="sym"', page.split('class="nodes"')[1])
    edges = [
        (source, stored or relation, target)
        for source, relation, target, stored in re.findall(
            r'data-source="([^"]+)" data-relation="([^"]+)" data-target="([^"]+)"(?: data-stored="([^"]+)")?',
            page,
        )
    ]
    return [html.unescape(n) for n in nodes], [tuple(html.unescape(part) for part in e) for e in edges]


def _counts(page: str, table: str) -> dict[str, int]:
    body = page.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return {k: int(v) for k, v in re.findall(r'data-count="([^"]+)">(\d+)<', body)}


def _svg_edges(page: str) -> set[tuple[str, str, str]]:
    svg = page.split('id="slice-graph"', 1)[1].split("</svg>", 1)[0]
    titles = [
        html.unescape(t)
        for t in re.findall(r'<g id="a_edge&#45;\d+"><a xlink:href="[^"]*" xlink:title="([^"]*)"', svg)
    ]
    return {tuple(t.split(" (")[0].split(" ")) for t in titles}


def _mcp_server(shop: Path) -> StdioServerParameters:
    """`slotrelay mcp serve --workspace SHOP` over stdio, with this process's environment: the SDK's
    default passes only a few variables, and PYTHONPATH must reach it for this tree's code to serve."""
    return StdioServerParameters(
        command=SLOTRELAY, args=["mcp", "serve", "--workspace", str(shop)], cwd=shop, env=dict(os.environ)
    )


async def _over_mcp(shop: Path, delta_id: str) -> dict[str, dict]:
    async with Client(_mcp_server(shop)) as client:
        answers = {
            "described": await client.call_tool("psmr_workspace_describe", {}),
            "sliced": await client.call_tool(
                "psmr_query_subgraph",
                {
                    "anchor": {"kind": "symbol", "value": LOGIN},
                    "depth": 1,
                    "relations": list(SYMBOL_RELATIONS),
                },
            ),
            "deltas": await client.call_tool("psmr_delta_list", {}),
            "delta": await client.call_tool("psmr_delta_describe", {"delta_id": delta_id}),
        }
    assert not any(answer.is_error for answer in answers.values()), answers
    return {name: answer.structured_content["data"] for name, answer in answers.items()}


@pytest.fixture(scope="module")
def over_mcp(shop: Path, proposed: dict[str, str]) -> dict[str, dict]:
    """What `slotrelay mcp serve --workspace SHOP` answers an MCP client, one server for the module's
    comparisons (a start costs about 1 CPU-s): psmr_workspace_describe, psmr_query_subgraph of LOGIN at
    depth 1, psmr_delta_list, and psmr_delta_describe of the signature change."""
    return anyio.run(_over_mcp, shop, proposed["signature"])


def test_the_page_and_the_mcp_tools_show_one_state(view: str, workspace_id: str, over_mcp: dict) -> None:
    """Counts and slice on the pages equal psmr_workspace_describe and psmr_query_subgraph over MCP."""
    described, sliced = over_mcp["described"], over_mcp["sliced"]
    with httpx.Client(base_url=view, timeout=60) as http:
        overview = http.get("").text
        symbol = http.get("symbol", params={"id": "shop.auth.login"}).text
    assert described["workspace_id"] == workspace_id and described["version"] in overview
    assert _counts(overview, "node-counts") == described["node_counts"]
    assert _counts(overview, "edge-counts") == described["edge_counts"]
    assert re.search(r'id="unknown-total" data-count="(\d+)"', overview)[1] == str(described["unknown_count"])
    assert re.search(r'id="conflict-total" data-count="(\d+)"', overview)[1] == str(
        described["conflict_count"]
    )

    assert sliced["truncated"] is False
    page_nodes, page_edges = _rows(symbol)
    assert set(page_nodes) == {n["id"] for n in sliced["nodes"]}
    mcp_edges = {(e["source"], e["relation"], e["target"]) for e in sliced["edges"]}
    assert set(page_edges) == mcp_edges and len(mcp_edges) >= 4
    # The picture draws `raise ValueError(...)` as what it is; the store holds it as a call.
    drawn = _svg_edges(symbol)
    assert ("shop.auth.login", "raises", "<builtin>.ValueError") in drawn
    assert {(s, "calls" if r == "raises" else r, t) for s, r, t in drawn} == {
        (s.removeprefix("semantic:"), r, t.removeprefix("semantic:")) for s, r, t in mcp_edges
    }


def test_a_2000_node_slice_is_paged_by_continuation_tokens(tmp_path: Path) -> None:
    """Every page stays within the page budget; the pages together are exactly the API's answer."""
    callers = "\n".join(f"def caller_{i}():\n    hub()\n" for i in range(2000))
    root = tmp_path / "wide"
    (root / "wide").mkdir(parents=True)
    (root / "wide" / "__init__.py").write_text("def hub():\n    return 1\n\n" + callers)
    workspace_id = api.build_workspace(root)["workspace_id"]
    request = {
        "anchor": {"kind": "symbol", "value": "wide.hub"},
        "depth": 1,
        "relations": list(SYMBOL_RELATIONS),
    }
    whole = api.call(
        "query.subgraph",
        {
            "workspace_id": workspace_id,
            **request,
            "budget": {"max_nodes": 5000, "max_edges": 5000, "max_text_bytes": 2_000_000},
        },
        store=Store.open().path,
    )["data"]
    assert len(whole["nodes"]) == 2001 and not whole["truncated"]

    client = TestClient(create_app(Store.open().path, hosts=["testserver"]))
    url: str | None = f"/ws/{workspace_id}/symbol?id=wide.hub"
    nodes, edges, pages = [], [], 0
    while url:
        answer = client.get(url)
        assert answer.status_code == 200, answer.text
        page = answer.text
        pages += 1
        assert f'data-page="{pages}"' in page
        on_page, edges_on_page = _rows(page)
        assert (
            len(on_page) <= BUDGETS["symbol"]["max_nodes"]
            and len(edges_on_page) <= BUDGETS["symbol"]["max_edges"]
        )
        nodes += on_page
        edges += edges_on_page
        found = re.search(r'<a href="([^"]+)" rel="next">', page)
        url = html.unescape(found[1]) if found else None
    assert pages >= 2001 // BUDGETS["symbol"]["max_nodes"]
    assert nodes == [n["id"] for n in whole["nodes"]]
    assert edges == [(e["source"], e["relation"], e["target"]) for e in whole["edges"]]


@pytest.fixture(scope="module")
def client(shop: Path, workspace_id: str) -> TestClient:
    return TestClient(create_app(Store.open().path, hosts=["testserver"]))


def test_the_other_pages_show_what_their_operators_answer(
    client: TestClient, workspace_id: str, shop: Path
) -> None:
    """Search by file, findings three lists apart, conflicts, a source line, and the semantic diff between
    the sample's two commits (the revisions are built into its store, as psmr_semantic_diff does, by
    the diff form's POST)."""
    base = f"/ws/{workspace_id}"
    files = client.get(f"{base}/search", params={"q": "cart", "kind": "file"})
    assert files.status_code == 200 and 'data-id="artifact:shop/cart.py"' in files.text

    findings = client.get(f"{base}/findings").text
    defects = findings.split('id="confirmed_defect"')[1].split("</section>")[0]
    anomalies = findings.split('id="anomaly"')[1].split("</section>")[0]
    assert "PRICE" in defects and "PRICE" not in anomalies and "json" in anomalies

    conflicts = client.get(f"{base}/conflicts", params={"subject": "shop.auth.logout"}).text
    assert "duplicate_definition" in conflicts and "shop.auth.logout" in conflicts

    line = _line_of((shop / "shop" / "cart.py").read_text(), "handler = getattr(")
    source = client.get(f"{base}/source", params={"artifact": "shop/cart.py", "line": line}).text
    assert re.search(rf'<tr id="shop/cart.py:{line}" class="hl" data-line="{line}">.*getattr', source)

    diff = client.post(
        f"{base}/diff", data={"rev_a": "HEAD~1", "rev_b": "HEAD"}, headers={"Origin": "http://testserver"}
    )
    assert diff.status_code == 200 and diff.history[0].status_code == 303, diff.text
    added = diff.text.split('id="symbols_added"')[1].split("</section>")[0]
    changed = diff.text.split('id="symbols_changed"')[1].split("</section>")[0]
    assert 'data-id="semantic:shop.audit.who"' in added and 'data-id="semantic:shop.auth.check"' in changed
    older = re.search(r"From (ws_[0-9a-f]+)", diff.text)[1]
    against = client.get(f"{base}/diff", params={"against": older})
    assert (
        against.status_code == 200
        and 'data-id="semantic:shop.audit.who"'
        in against.text.split('id="symbols_removed"')[1].split("</section>")[0]
    )


def _delta_rows(page: str) -> dict[str, dict[str, str]]:
    """The deltas list's rows: id -> stale, status and the validation badge."""
    rows = re.findall(
        r'<tr data-id="(dl_[0-9a-f]+)" data-stale="(\w+)" data-status="(\w+)">.*?data-validation="(\w+)"',
        page,
        flags=re.DOTALL,
    )
    return {i: {"stale": st, "status": status, "validation": v} for i, st, status, v in rows}


def _main(page: str) -> str:
    return page.split("<main>", 1)[1].split("</main>", 1)[0]


def test_the_delta_pages_show_what_was_recorded_and_change_nothing(
    client: TestClient, workspace_id: str, shop: Path, proposed: dict[str, str]
) -> None:
    """The list and each delta page read the records (validation as delta.validate stored it, never
    re-run); opening them writes neither a record nor a source file, and no page offers to apply."""
    folder = Store.open().path / "workspaces" / workspace_id / "deltas"
    watched = sorted(folder.glob("*.json")) + sorted((shop / "shop").glob("*.py"))
    before = {p: p.read_bytes() for p in watched}
    base = f"/ws/{workspace_id}"

    overview = client.get(f"{base}/").text
    assert re.search(r'id="delta-total" data-count="(\d+)"', overview)[1] == "3"
    assert f'href="{base}/deltas"' in client.get(f"{base}/diff").text

    listed = client.get(f"{base}/deltas")
    assert listed.status_code == 200
    assert _delta_rows(listed.text) == {
        proposed["signature"]: {"stale": "false", "status": "previewed", "validation": "passed"},
        proposed["broken"]: {"stale": "false", "status": "validation_failed", "validation": "failed"},
        proposed["rename"]: {"stale": "false", "status": "proposed", "validation": "none"},
    }

    broken = client.get(f"{base}/delta", params={"id": proposed["broken"]}).text
    checks = dict(re.findall(r'<tr data-check="(\w+)" data-ok="(\w+)">', broken))
    assert checks.pop("known_defects") == "false" and set(checks.values()) == {"true"}
    failing = broken.split('data-check="known_defects"')[1].split("</tr>")[0]
    assert "undefined name" in failing and "EXPECTED" in failing and "shop/auth.py" in failing
    assert "+    return token == EXPECTED" in broken

    rename = client.get(f"{base}/delta", params={"id": proposed["rename"]}).text
    assert 'id="not-validated"' in rename and 'id="validation-checks"' not in rename
    assert 'data-id="semantic:shop.auth.check"' in rename  # the operation's target, linked to its page

    signature = client.get(f"{base}/delta", params={"id": proposed["signature"]}).text
    evidence = re.findall(r'<a class="evidence" href="([^"]+)">(ev_[0-9a-f]+)</a>', signature)
    assert len(evidence) == 2
    for url, ev in evidence:
        opened = client.get(html.unescape(url))
        assert opened.status_code == 200 and ev in opened.text
    added = [html.unescape(t) for t in re.findall(r'<tr class="add"><td><pre>(.*?)</pre>', signature)]
    assert f"+{ADDED_CALL}" in added
    assert "semantic:shop.cart.Cart.checkout" in signature.split('id="expected"')[1]
    assert "tests/test_auth.py::test_login" in signature.split('id="suggested-tests"')[1]

    for page in (listed.text, broken, rename, signature):
        assert "<form" not in _main(page) and not re.search(r'href="[^"]*apply', page, flags=re.IGNORECASE)
    assert {p: p.read_bytes() for p in watched} == before


def test_the_delta_pages_and_the_mcp_tools_show_one_state(
    client: TestClient, workspace_id: str, proposed: dict[str, str], over_mcp: dict
) -> None:
    """The deltas and one delta's edits, checks and diffs on the pages are psmr_delta_list's and
    psmr_delta_describe's answers over MCP."""
    listed, described = over_mcp["deltas"], over_mcp["delta"]
    page = client.get(f"/ws/{workspace_id}/deltas").text
    badge = {None: "none", True: "passed", False: "failed"}
    assert _delta_rows(page) == {
        d["delta_id"]: {
            "stale": str(d["stale"]).lower(),
            "status": d["status"],
            "validation": badge[d["validation"] and d["validation"]["ok"]],
        }
        for d in listed["deltas"]
    }
    delta = client.get(f"/ws/{workspace_id}/delta", params={"id": proposed["signature"]}).text
    assert re.findall(r'<tr data-kind="(\w+)"', delta) == [e["kind"] for e in described["edits"]]
    assert re.findall(r'<tr data-check="(\w+)" data-ok="(\w+)">', delta) == [
        (c["check"], str(c["ok"]).lower()) for c in described["validation"]["checks"]
    ]
    assert re.findall(r'<section class="file-diff" data-file="([^"]+)">', delta) == [
        d["file"] for d in described["diffs"]
    ]
    shown = "\n".join(html.unescape(t) for t in re.findall(r"<pre>(.*?)</pre>", delta.split('id="diffs"')[1]))
    assert shown == "\n".join(line for d in described["diffs"] for line in d["diff"].splitlines())


def test_a_delta_is_paged_by_continuation_tokens(
    client: TestClient,
    workspace_id: str,
    shop: Path,
    proposed: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With two items a page, the delta's edits, contract and diffs come over several pages whose
    concatenation is delta.describe's whole answer; the recorded summary heads page 1 only."""
    monkeypatch.setitem(BUDGETS, "delta", {"max_nodes": 2})
    whole = _ok("delta.describe", {"workspace_id": workspace_id, "delta_id": proposed["signature"]})
    url: str | None = f"/ws/{workspace_id}/delta?id={proposed['signature']}"
    kinds, files, pages = [], [], 0
    while url:
        answer = client.get(url)
        assert answer.status_code == 200, answer.text
        pages += 1
        assert ('id="validation-checks"' in answer.text) is (pages == 1)
        kinds += re.findall(r'<tr data-kind="(\w+)"', answer.text)
        files += re.findall(r'<section class="file-diff" data-file="([^"]+)">', answer.text)
        found = re.search(r'<a href="([^"]+)" rel="next">', answer.text)
        url = html.unescape(found[1]) if found else None
    items = len(whole["edits"]) + len(whole["affected_contracts"]) + len(whole["diffs"])
    assert pages == -(-items // 2) and pages >= 3
    assert kinds == [e["kind"] for e in whole["edits"]] and files == [d["file"] for d in whole["diffs"]]


def test_a_stale_delta_is_shown_as_stale(shop: Path, tmp_path: Path) -> None:
    """A file edited on disk after the proposal is named on the delta page; once the workspace is
    rebuilt the delta is stale (200, marked in the list and on its page), which validate refuses.
    A damaged record in the deltas folder is a warning on the list and a 404 of its own."""
    root = tmp_path / "tree"
    shutil.copytree(shop, root, ignore=shutil.ignore_patterns(".psmr", ".git"))
    workspace_id = api.build_workspace(root)["workspace_id"]
    store = Store.open().path
    request = {
        "workspace_id": workspace_id,
        "intent": "a source for every login",
        "operations": [SIGNATURE_CHANGE],
    }
    delta_id = _ok("delta.propose", request, store)["delta_id"]
    client = TestClient(create_app(store, hosts=["testserver"]))
    base = f"/ws/{workspace_id}"

    cart = root / "shop" / "cart.py"
    cart.write_text(cart.read_text() + "\n\ndef empty(cart):\n    cart.items.clear()\n")
    moved = client.get(f"{base}/delta", params={"id": delta_id})
    assert moved.status_code == 200 and 'id="stale"' not in moved.text
    assert re.search(r'id="moved-files">[^<]*shop/cart.py', moved.text)

    rebuilt = api.build_workspace(root)["version"]
    listed = client.get(f"{base}/deltas")
    assert listed.status_code == 200
    assert _delta_rows(listed.text)[delta_id]["stale"] == "true"
    assert 'data-stale="1"' in listed.text
    page = client.get(f"{base}/delta", params={"id": delta_id})
    assert page.status_code == 200 and 'id="stale" data-stale="true"' in page.text
    assert f"the workspace is now at {rebuilt}" in page.text
    refused = api.call("delta.validate", {"workspace_id": workspace_id, "delta_id": delta_id}, store=store)
    assert refused["error"]["code"] == "CONFLICT_REQUIRES_REVIEW"

    # A damaged record is named on the list and left out, never a failed page; the folder's other
    # files (a before-image, a temporary) are not deltas.
    folder = store / "workspaces" / workspace_id / "deltas"
    (folder / "dl_00000000000a.json").write_text('{"schema": "psmr-semantic-de')
    (folder / f"{delta_id}.before.json").write_text("{}")
    (folder / f".{delta_id}.json.1.tmp").write_text("{")
    listed = client.get(f"{base}/deltas")
    assert listed.status_code == 200 and list(_delta_rows(listed.text)) == [delta_id]
    assert re.search(r'class="warning">[^<]*dl_00000000000a is left out', listed.text)
    damaged = client.get(f"{base}/delta", params={"id": "dl_00000000000a"})
    assert damaged.status_code == 404 and 'data-code="OBJECT_NOT_FOUND"' in damaged.text


@pytest.mark.parametrize(
    ("path", "status", "code", "says"),
    [
        ("symbol?id=shop.auth.logn", 404, "OBJECT_NOT_FOUND", "did you mean shop.auth.login"),
        ("symbol", 400, "INVALID_QUERY", "parameter &#39;id&#39; is missing"),
        ("symbol?id=shop.auth.login&page=abc", 400, "INVALID_QUERY", "page must be a whole number from 1"),
        ("symbol?id=shop.auth.login&page=0", 400, "INVALID_QUERY", "page must be a whole number from 1"),
        ("symbol?id=shop.auth.login&page=%C2%B2", 400, "INVALID_QUERY", "page must be a whole number from 1"),
        (
            "symbol?id=shop.auth.login&depth=%C2%B2",
            400,
            "INVALID_QUERY",
            "parameter &#39;depth&#39; takes 1, 2",
        ),
        ("symbol?id=shop.auth.login&page=3", 400, "INVALID_QUERY", "page 3 needs the continuation token"),
        (
            "symbol?id=shop.auth.login&page=2&token=bm90IGEgdG9rZW4&v={version}",
            400,
            "INVALID_QUERY",
            "not a token this runtime issued",
        ),
        (
            "symbol?id=shop.auth.login&page=2&token=abc&v=0123",
            409,
            "WORKSPACE_REBUILT",
            "start again from page 1",
        ),
        ("symbol?id=shop.auth.login&depth=7", 400, "INVALID_QUERY", "parameter &#39;depth&#39; takes 1, 2"),
        ("symbol?id=shop.auth.login&rel=eats", 400, "INVALID_QUERY", "relation eats is not one of"),
        (
            "impact?id=shop.auth.logout",
            409,
            "CONFLICT_REQUIRES_REVIEW",
            "analyse anyway, over every definition",
        ),
        ("impact?id=json", 422, "UNRESOLVED_REQUIRED_INPUT", "only referenced from the tree"),
        ("evidence?id=ev_000000000000", 404, "OBJECT_NOT_FOUND", "no evidence ev_000000000000"),
        (
            "source?artifact=../../etc/passwd&line=1",
            404,
            "OBJECT_NOT_FOUND",
            "is not a file of this workspace",
        ),
        ("diff?against=ws_0123456789ab", 404, "WORKSPACE_NOT_FOUND", "no workspace ws_0123456789ab"),
        ("diff?workspace_a=ws_0123456789ab", 400, "INVALID_QUERY", "needs both workspace_a and workspace_b"),
        (
            "diff?against=ws_0123456789ab&workspace_b=ws_0123456789ab",
            400,
            "INVALID_QUERY",
            "not both",
        ),
        ("search?q=x&kind=banana", 400, "INVALID_QUERY", "kind: &#39;banana&#39; is not one of"),
        ("source?artifact=shop/cart.py&line=x", 400, "INVALID_QUERY", "parameter &#39;line&#39; takes"),
        ("delta?id=dl_000000000000", 404, "OBJECT_NOT_FOUND", "no delta dl_000000000000"),
        ("delta?id=../../manifest", 404, "OBJECT_NOT_FOUND", "is not a delta id"),
        ("delta", 400, "INVALID_QUERY", "parameter &#39;id&#39; is missing"),
        ("deltas?page=2", 400, "INVALID_QUERY", "page 2 needs the continuation token"),
        ("nowhere", 404, "NOT_FOUND", "no such page"),
        (
            "source?artifact=shop/cart.py&line=1&context=13",
            400,
            "INVALID_QUERY",
            "parameter &#39;context&#39; takes 12, 25, 50, 100, 200",
        ),
        ("neighbours", 400, "INVALID_QUERY", "parameter &#39;id&#39; is missing"),
        ("neighbours?id=shop.auth.logn", 404, "OBJECT_NOT_FOUND", "did you mean shop.auth.login"),
    ],
)
def test_bad_input_gets_a_clear_page_with_a_4xx_status(
    client: TestClient, workspace_id: str, path: str, status: int, code: str, says: str
) -> None:
    version = client.get(f"/ws/{workspace_id}/").text.split('data-field="version">')[1].split("<")[0]
    answer = client.get(f"/ws/{workspace_id}/{path.format(version=version)}")
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert f'data-code="{code}"' in answer.text and says in answer.text, answer.text
    assert "Traceback" not in answer.text


OVERLOADED = {
    "lib/__init__.py": "",
    "lib/conv.py": """import typing as t


@t.overload
def convert(value: int) -> str: ...


@t.overload
def convert(value: str) -> int: ...


def convert(value):
    \"\"\"Turn an int into text and text into an int.\"\"\"
    if isinstance(value, int):
        return str(value)
    raise TypeError(value)


def use():
    return convert(1), convert("2")
""",
    # Stubs the store itself makes one symbol with their implementation (`overload` by its own name).
    "lib/parse.py": """from typing import overload


@overload
def parse(text: str) -> int: ...


@overload
def parse(text: bytes) -> int: ...


def parse(text):
    \"\"\"Read a number.\"\"\"
    return int(text)
""",
}


def test_regression_overload_stubs_and_their_implementation_are_one_function(tmp_path: Path) -> None:
    """Issue 33: a function with `@t.overload` stubs opened on the first stub and was a conflict. Its
    page now opens on the implementation (line, signature, docstring, raises), names the stubs, and
    neither the overview, the conflicts page nor impact treats it as a conflict. A function whose
    `@overload` stubs the store itself folds into it names its stubs the same way."""
    root = tmp_path / "tree"
    for name, text in OVERLOADED.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    workspace_id = api.build_workspace(root)["workspace_id"]
    client = TestClient(create_app(Store.open().path, hosts=["testserver"]))
    base = f"/ws/{workspace_id}"
    text = OVERLOADED["lib/conv.py"]
    implementation = _line_of(text, "def convert(value):")

    page = client.get(f"{base}/symbol", params={"id": "lib.conv.convert"})
    assert page.status_code == 200, page.text
    assert (
        f'<a class="where" href="{base}/source?artifact=lib%2Fconv.py&amp;line={implementation}"' in page.text
    )
    assert re.search(
        r'<pre class="signature" id="signature" data-line="(\d+)">convert\(value\)</pre>', page.text
    )[1] == str(implementation)
    assert 'id="overloads" data-count="2"' in page.text
    assert "Turn an int into text" in page.text and "<li>raises <code>TypeError</code></li>" in page.text
    touching = page.text.split("Conflicts touching it")[1]
    assert touching.startswith(" (0)")

    assert 'data-count="0"' in client.get(f"{base}/").text.split('id="conflict-total"')[1][:40]
    listed = client.get(f"{base}/conflicts").text
    # The build folds `@t.overload` stubs into their implementation: no conflict group is left to list.
    assert "lib.conv.convert" not in _main(listed).split("</p>", 2)[-1]
    impact = client.get(f"{base}/impact", params={"id": "lib.conv.convert"})
    assert impact.status_code == 200 and "semantic:lib.conv.use" in impact.text

    # The raise in the implementation is drawn and listed as one.
    raised = 'data-relation="raises" data-target="semantic:&lt;builtin&gt;.TypeError" data-stored="calls"'
    assert f'data-source="semantic:lib.conv.convert" {raised}' in page.text

    # Stubs the store already made one symbol with their implementation are named all the same.
    parsed = client.get(f"{base}/symbol", params={"id": "lib.parse.parse"})
    parse_text = OVERLOADED["lib/parse.py"]
    assert re.search(
        r'<pre class="signature" id="signature" data-line="(\d+)">parse\(text\)</pre>', parsed.text
    )[1] == str(_line_of(parse_text, "def parse(text):"))
    stub_lines = [str(n) for n, line in enumerate(parse_text.splitlines(), start=1) if line.endswith(": ...")]
    assert 'id="overloads" data-count="2"' in parsed.text
    named = parsed.text.split('id="overloads"')[1].split("</p>")[0]
    assert re.findall(r"artifact=lib%2Fparse.py&amp;line=(\d+)", named) == stub_lines


def test_regression_a_symbol_page_reads_more_evidence_than_one_request_takes(tmp_path: Path) -> None:
    """A page tells a raise from a call by reading its edges' evidence; query.evidence takes at most
    200 ids a request (docs/mcp.md#request-size-limits), and a page asking for more in one was a 400
    (rich.text.Text's, 277 records). Edges of 250 sites to a class now read in pieces."""
    sites = 250
    root = tmp_path / "tree"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "__init__.py").write_text("")
    built = "".join(f"    Oops({n})\n" for n in range(sites))
    raised = "".join(f"    if x == {n}:\n        raise Oops({n})\n" for n in range(sites))
    (root / "lib" / "noisy.py").write_text(
        f"class Oops(Exception):\n    pass\n\n\ndef noisy():\n{built}\n\ndef loud(x):\n{raised}"
    )
    workspace_id = api.build_workspace(root)["workspace_id"]
    client = TestClient(create_app(Store.open().path, hosts=["testserver"]))

    # Built, not raised: a call. Raised at every one of its sites, the last read in a second request:
    # raises.
    for function, shown in (("noisy", ("calls", None)), ("loud", ("raises", "calls"))):
        page = client.get(f"/ws/{workspace_id}/symbol", params={"id": f"lib.noisy.{function}"})
        assert page.status_code == 200, page.text
        row = re.search(
            rf'data-source="semantic:lib.noisy.{function}" data-relation="([^"]+)" '
            r'data-target="semantic:lib.noisy.Oops"(?: data-stored="([^"]+)")?',
            page.text,
        )
        assert row is not None and (row[1], row[2]) == shown
        assert f"{sites} record(s)" in page.text


@pytest.mark.parametrize(
    ("form", "headers", "status", "code", "says"),
    [
        ({"rev_a": "HEAD~1"}, {}, 400, "INVALID_QUERY", "needs both rev_a and rev_b"),
        ({"rev_a": "no-such-rev", "rev_b": "HEAD"}, {}, 422, "EXECUTION_FAILED", "no-such-rev"),
        ({"rev_a": "--output=/tmp/x", "rev_b": "HEAD"}, {}, 400, "INVALID_QUERY", "does not start with"),
        ({**REVISIONS}, {"Content-Type": "text/plain"}, 415, "INVALID_QUERY", "urlencoded"),
        ({"rev_a": "HEAD" * 2000, "rev_b": "HEAD"}, {}, 413, "INVALID_QUERY", "larger than 4096 bytes"),
    ],
)
def test_a_bad_revisions_form_gets_a_clear_page_with_a_4xx_status(
    client: TestClient, workspace_id: str, form: dict, headers: dict, status: int, code: str, says: str
) -> None:
    body = "&".join(f"{k}={v}" for k, v in form.items())
    answer = client.post(
        f"/ws/{workspace_id}/diff",
        content=body,
        headers={"Origin": "http://testserver", "Content-Type": FORM, **headers},
    )
    assert answer.status_code == status, answer.text
    assert f'data-code="{code}"' in answer.text and says in answer.text, answer.text


PAGES = (
    "",
    "search",
    "symbol",
    "neighbours",
    "evidence",
    "source",
    "impact",
    "unknowns",
    "conflicts",
    "findings",
    "diff",
    "deltas",
    "delta",
)
PARAMS = (
    "q",
    "kind",
    "id",
    "depth",
    "rel",
    "page",
    "token",
    "v",
    "artifact",
    "line",
    "scope",
    "reason",
    "subject",
    "accept_conflicts",
    "against",
    "rev_a",
    "context",
)
VALUES = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "shop.auth.login",
            "semantic:shop.cart.Cart",
            "shop/cart.py",
            "0",
            "1",
            "2",
            "-1",
            "calls",
            "HEAD",
            "ws_0123456789ab",
            "symbol",
            "anomaly",
            "untyped_receiver",
            "eyJzIjowfQ",
            "dl_0123456789ab",
        ]
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(page=st.sampled_from(PAGES), params=st.lists(st.tuples(st.sampled_from(PARAMS), VALUES), max_size=4))
def test_no_query_makes_a_page_fail(client: TestClient, workspace_id: str, page: str, params: list) -> None:
    """Whatever the parameters, a page is shown or refused with a 4xx HTML page: never a 500."""
    answer = client.get(f"/ws/{workspace_id}/{page}", params=params)
    assert answer.status_code < 500, answer.text
    assert answer.headers["content-type"].startswith("text/html")


def test_an_unknown_workspace_or_a_missing_store_is_a_404_page(shop: Path, tmp_path: Path) -> None:
    missing = TestClient(create_app(tmp_path / "no-store", hosts=["testserver"]))
    for path in ("/", "/workspaces", "/ws/ws_0123456789ab/"):
        answer = missing.get(path)
        assert answer.status_code == 404 and "there is no PSMR store at" in answer.text, path
    present = TestClient(create_app(Store.open().path, hosts=["testserver"]))
    for path in ("/ws/ws_0123456789ab/symbol?id=x", "/ws/..%2e/", "/ws/not-an-id/search?q=x"):
        answer = present.get(path)
        assert answer.status_code == 404 and 'data-code="WORKSPACE_NOT_FOUND"' in answer.text, path


def test_a_rebuild_between_two_reads_of_one_page_is_refused(shop: Path, tmp_path: Path) -> None:
    """The reader notes the version first and checks it last: a page straddling a rebuild is a 409."""
    root = tmp_path / "tree"
    shutil.copytree(shop, root, ignore=shutil.ignore_patterns(".psmr", ".git"))
    workspace_id = api.build_workspace(root)["workspace_id"]
    reader = WorkspaceReader(Store.open().path, workspace_id)
    reader.call("workspace.describe", {}, budget={"max_nodes": 1})
    (root / "shop" / "extra.py").write_text("def added():\n    return 1\n")
    api.build_workspace(root)
    with pytest.raises(ViewError) as refused:
        reader.check_unchanged()
    assert (refused.value.code, refused.value.status) == ("WORKSPACE_REBUILT", 409)


def _worktrees(root: Path) -> list[str]:
    """The git worktrees of the repository at `root` (git's own list)."""
    listed = subprocess.run(
        ["git", "-C", str(root), "worktree", "list", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split(" ", 1)[1] for line in listed.splitlines() if line.startswith("worktree ")]


def _built(root: Path, store: Path) -> tuple[list[str], list[str], list[str]]:
    """What a build of revisions leaves: the repository's worktrees, the store's trees and workspaces."""

    def names(folder: Path) -> list[str]:
        return sorted(p.name for p in folder.iterdir()) if folder.exists() else []

    return _worktrees(root), names(store / "trees"), names(store / "workspaces")


@dataclass(frozen=True)
class OwnView:
    """A running view of a copy of the sample repository with a store of its own."""

    root: Path
    store: Path
    url: str
    server: ServerProcess


@pytest.fixture(scope="module")
def own(shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnView]:
    """A view of a copy of the sample repository (its git history included) with a store of its own, on
    its own port; its log must end without a traceback. One for the module's tests of a running view on a
    store they change (a view's start and stop cost about 0.6 CPU-s): each says what it built against
    what was there before it, or builds a workspace of its own."""
    work = tmp_path_factory.mktemp("own-view")
    root, store = work / "shop", work / "store"
    shutil.copytree(shop, root, ignore=shutil.ignore_patterns(".psmr"))
    # Not the worktrees other tests built for the original: this copy starts with its checkout only.
    shutil.rmtree(root / ".git" / "worktrees", ignore_errors=True)
    server = start_view([str(root), "--store", str(store), "--port", str(free_port())], work / "err.log")
    try:
        yield OwnView(root, store, wait_for_url(server, START_TIMEOUT_S), server)
    finally:
        output = stop_server(server)
    assert "Traceback" not in output, output


def test_over_http_a_store_caught_mid_rebuild_and_a_foreign_host_are_refused(
    shop: Path, own: OwnView, tmp_path: Path
) -> None:
    """The state a reader meets inside a rebuild (new graph parts written, manifest not yet) shows the
    old version whole; a manifest whose graph part is gone is a 409 page; once manifest and parts are
    in place, the page shows the new version. A Host other than the bound address is refused with 421 (DNS
    rebinding), a cross-site sub-resource request with 403. The tree is built into the store of `own`'s
    running view: a workspace of its own, which the view has not read before."""
    root = tmp_path / "tree"
    shutil.copytree(shop, root, ignore=shutil.ignore_patterns(".psmr", ".git"))
    store, next_store = own.store, tmp_path / "next-store"
    built = api.build_workspace(root, store=store)
    workspace_id = built["workspace_id"]
    (root / "shop" / "extra.py").write_text("def added():\n    return 1\n")
    rebuilt = api.build_workspace(root, store=next_store)
    assert rebuilt["workspace_id"] == workspace_id
    folder, next_folder = (s / "workspaces" / workspace_id for s in (store, next_store))
    for part in (next_folder / "parts").iterdir():
        shutil.copyfile(part, folder / "parts" / part.name)

    base = own.url.split("ws/", 1)[0]
    port = base.split(":")[2].split("/")[0]
    with httpx.Client(base_url=base, timeout=60) as http:
        caught = http.get(f"ws/{workspace_id}/")
        shutil.copyfile(next_folder / "manifest.json", folder / "manifest.json")
        name = min(name for name, _, _ in Store.open(next_store).manifest(workspace_id)["parts"].values())
        (folder / "parts" / name).unlink()
        damaged = http.get(f"ws/{workspace_id}/")
        shutil.copyfile(next_folder / "parts" / name, folder / "parts" / name)
        settled = http.get(f"ws/{workspace_id}/")
        foreign = http.get(f"ws/{workspace_id}/", headers={"Host": f"evil.example:{port}"})
        embedded = http.get(
            f"ws/{workspace_id}/", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
        )
        followed = http.get(
            f"ws/{workspace_id}/", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
        )
    assert "Traceback" not in own.server.output(), own.server.output()
    assert caught.status_code == 200 and built["version"] in caught.text, caught.text
    assert settled.status_code == 200 and rebuilt["version"] in settled.text
    assert damaged.status_code == 409 and 'data-code="VALIDATION_FAILED"' in damaged.text, damaged.text
    assert foreign.status_code == 421 and "MISDIRECTED_REQUEST" in foreign.text
    assert embedded.status_code == 403 and followed.status_code == 200


def test_regression_no_request_from_another_site_makes_the_view_build(
    own: OwnView,
) -> None:
    """A GET of the diff page with two revisions (a link, or a page another site opened) ran `git worktree
    add` and two builds in the user's repository. Now a GET only fills the form in, and the POST that
    builds is refused unless it comes from the view's own page (Origin, else Referer)."""
    root, store, url = own.root, own.store, own.url
    port = url.split(":")[2].split("/")[0]
    before = _built(root, store)
    crossing = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
    with httpx.Client(base_url=url, timeout=120) as http:
        opened = http.get("diff", params=REVISIONS, headers=crossing)
        refused = {
            name: http.post("diff", data=REVISIONS, headers=headers)
            for name, headers in {
                "another site": {"Origin": "http://evil.example", **crossing},
                "another port": {"Origin": f"http://127.0.0.1:{free_port()}"},
                "an opaque origin": {"Origin": "null"},
                "another site's referer": {"Referer": "http://evil.example/page"},
                "no origin or referer": {},
            }.items()
        }
        assert _built(root, store) == before
        own = http.post("diff", data=REVISIONS, headers={"Origin": f"http://127.0.0.1:{port}"})
        shown = http.get(f"http://127.0.0.1:{port}{own.headers['location']}")
        by_referer = http.post("diff", data=REVISIONS, headers={"Referer": f"{url}diff"})
    assert opened.status_code == 200, opened.text
    assert 'id="revisions"' in opened.text and 'value="HEAD~1"' in opened.text
    assert 'id="diff-counts"' not in opened.text
    for name, answer in refused.items():
        assert answer.status_code == 403 and 'data-code="CROSS_SITE_REFUSED"' in answer.text, name
    assert own.status_code == 303 and "workspace_a=ws_" in own.headers["location"]
    assert shown.status_code == 200 and 'data-id="semantic:shop.audit.who"' in shown.text
    assert by_referer.status_code == 303
    assert len(_worktrees(root)) == 3


@pytest.mark.browser
def test_regression_another_sites_page_in_a_browser_cannot_make_the_view_build(
    own: OwnView, browser: BrowserSession, tmp_path: Path
) -> None:
    """What issue 29 did with a browser: a page on another origin links to the diff page with two
    revisions and posts them to it. Following the link shows the form, nothing built; the post is 403."""
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    root, store, url = own.root, own.store, own.url
    before = _built(root, store)
    site = tmp_path / "site"
    site.mkdir()
    diff = f"{url}diff"
    (site / "index.html").write_text(
        f'<a id="open" href="{diff}?rev_a=HEAD~1&amp;rev_b=HEAD">see the diff</a>'
        f'<form id="post" method="post" action="{diff}"><input name="rev_a" value="HEAD~1">'
        '<input name="rev_b" value="HEAD"><button>compare</button></form>'
    )

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    # The connections the site accepted: the module's browser outlives the test and keeps its idle ones
    # open, each holding a handler thread, until the site closes them.
    accepted: list[socket.socket] = []

    class OtherSite(ThreadingHTTPServer):
        def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:
            accepted.append(request)
            super().process_request(request, client_address)

    other = OtherSite(("127.0.0.1", 0), lambda *a: Quiet(*a, directory=str(site)))
    Thread(target=other.serve_forever, daemon=True).start()
    try:
        seen = browser.step(
            step="attack",
            attack=f"http://127.0.0.1:{other.server_address[1]}/index.html",
            screenshot=str(tmp_path / "left.png"),
        )
    finally:
        other.shutdown()
        for connection in accepted:
            with contextlib.suppress(OSError):  # the handler closed it already
                connection.shutdown(socket.SHUT_RDWR)
        other.server_close()
    assert seen["ok"], f"{seen}; page left: {tmp_path / 'left.png'}; browser log: {browser.log}"
    followed = seen["followed"]
    assert (followed["status"], followed["forms"], followed["diff"]) == (200, 1, 0), followed
    assert (seen["posted"]["status"], seen["posted"]["code"]) == (403, "CROSS_SITE_REFUSED")
    assert _built(root, store) == before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--host", "0.0.0.0"], "binds loopback only"),
        (["--port", "70000"], "less than or equal to 65535"),
        (["--store", "/nonexistent/psmr-store"], "there is no PSMR store at /nonexistent/psmr-store"),
        (["/nonexistent/psmr-folder"], "not a folder"),
    ],
)
def test_view_refuses_bad_options_with_exit_2(args: list[str], says: str) -> None:
    done = CliRunner().invoke(app, ["psmr", "view", *args])
    assert done.exit_code == 2 and says in " ".join(done.stderr.split()), done.stderr


@pytest.mark.prefect_server
def test_up_with_psmr_serves_the_view_and_stops_it(prefect_server: str, shop: Path, tmp_path: Path) -> None:
    """`slotrelay up --psmr PATH` prints the view's URL beside the Prefect UI's; one SIGINT stops both."""
    port, view_port = free_port(), free_port()
    view_url = f"http://127.0.0.1:{view_port}/"
    log = tmp_path / "up.log"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    command = [
        sys.executable,
        "-m",
        "slotrelay.cli",
        "up",
        "--port",
        str(port),
        "--home",
        str(migrated_home(tmp_path / "home")),
        "--psmr",
        str(shop),
        "--psmr-port",
        str(view_port),
    ]
    with log.open("w") as handle:
        up = subprocess.Popen(
            command, cwd=REPO, env={**env, "COLUMNS": "200"}, stdout=handle, stderr=subprocess.STDOUT
        )
    try:
        wait_for_up(
            lambda: f"PSMR view   {view_url}" in log.read_text(), 240, "the view's URL in the panel", up, log
        )
        wait_for_up(lambda: READY in log.read_text(), 120, "the view to listen", up, log)
        # A SIGINT while the watcher still imports Prefect ends it with 130: let it start first.
        wait_for_up(lambda: "slotrelay watch: " in log.read_text(), 240, "the watcher to start", up, log)
        # No chain here: the watcher keeps no warm process, which would only ever run what it routes.
        assert "slotrelay watch: 0 chain(s)" in log.read_text() and "warm process" not in log.read_text()
        with httpx.Client(timeout=60, follow_redirects=True) as http:
            overview = http.get(view_url)
        assert overview.status_code == 200 and 'id="node-counts"' in overview.text
    finally:
        code = interrupt_up(up)
    assert code == 0, log.read_text()
    with pytest.raises(httpx.ConnectError), httpx.Client(timeout=10) as http:
        http.get(view_url)
