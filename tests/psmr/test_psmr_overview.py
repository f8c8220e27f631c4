"""What the overview tells a new reader (`slotrelay.psmr.ops.overview`), on trees built from strings:
the module map (largest modules by package, each one's most-used imports, the rest left out), the
entry points (console scripts, `python -m`, `__main__` blocks, public API), the busiest symbols and
the findings to read first."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotrelay.psmr.api import build_workspace
from slotrelay.psmr.ops import overview
from slotrelay.psmr.workspace.store import Store, Workspace
from tests.support.psmr_trees import write_tree

TOOL = {
    "pyproject.toml": """
[project]
name = "tool"
[project.scripts]
tool = "tool.cli:main"
tool-gone = "tool.missing:run"
[project.gui-scripts]
tool-gui = "tool.cli:Window.show"
""",
    "setup.cfg": """
[options.entry_points]
console_scripts =
    tool-legacy = tool.cli:main
""",
    "src/tool/__init__.py": """from .core import Engine, start
from .util import helper as _helper
from . import util

__all__ = ["Engine", "start"]
__all__ += ["util"]
""",
    "src/tool/__main__.py": "from .cli import main\n\nmain()\n",
    "src/tool/cli.py": """from tool.core import Engine, start
from tool.util import fmt


class Window:
    def show(self):
        return fmt("window")


def main():
    engine = Engine()
    start(engine)
    return fmt(engine.name)


if __name__ == "__main__":
    main()
""",
    "src/tool/core.py": """from tool.util import fmt, clean


class Engine:
    def __init__(self):
        self.name = fmt("engine")

    def run(self):
        return clean(self.name)


def start(engine):
    return engine.run() + fmt("started")
""",
    "src/tool/util.py": """def fmt(text):
    return text.strip()


def clean(text):
    return fmt(text).lower()


def helper():
    return clean("x")
""",
    "src/tool/plugins/__init__.py": "",
    "src/tool/plugins/extra.py": """from tool.util import fmt


def extra():
    return fmt("extra")
""",
}


def _build(root: Path, files: dict[str, str]) -> tuple[Workspace, Store]:
    write_tree(root / "tree", files)
    summary = build_workspace(root / "tree", store=root / "store")
    store = Store.open(root / "store")
    return store.load(summary["workspace_id"]), store


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, Store]:
    return _build(tmp_path_factory.mktemp("tool"), TOOL)


def test_the_module_map_draws_the_largest_modules_by_package_and_lists_the_rest(
    tool: tuple[Workspace, Store],
) -> None:
    ws, _ = tool
    drawn = overview.module_map(ws, limit=4, per_module=1)
    assert [(m["name"], m["package"], m["symbols"]) for m in drawn.modules] == [
        ("tool.core", "tool", 4),
        ("tool.cli", "tool", 3),
        ("tool.util", "tool", 3),
        ("tool.plugins.extra", "tool.plugins", 1),
    ]
    assert [m["name"] for m in drawn.left_out] == ["tool", "tool.__main__", "tool.plugins"]
    assert drawn.total == 7
    # One import a module, the one it calls through most: cli calls core twice (Engine, start) and
    # util once; core calls only util.
    assert drawn.imports == sorted(
        [
            ("semantic:tool.cli", "semantic:tool.core"),
            ("semantic:tool.core", "semantic:tool.util"),
            ("semantic:tool.plugins.extra", "semantic:tool.util"),
        ]
    )
    assert drawn.imports_among == 4
    assert len(overview.module_map(ws).modules) == 7


def test_entry_points_are_scripts_main_modules_main_blocks_and_the_public_api(
    tool: tuple[Workspace, Store],
) -> None:
    ws, _ = tool
    found = overview.entry_points(ws)
    assert [(s["name"], s["id"], s["declared"]) for s in found.scripts] == [
        ("tool", "semantic:tool.cli.main", "pyproject.toml [project.scripts]"),
        ("tool-gone", None, "pyproject.toml [project.scripts]"),
        ("tool-gui", "semantic:tool.cli.Window.show", "pyproject.toml [project.gui-scripts]"),
        ("tool-legacy", "semantic:tool.cli.main", "setup.cfg [options.entry_points] console_scripts"),
    ]
    assert found.main_modules == [
        {"id": "semantic:tool.__main__", "run": "python -m tool", "artifact": "src/tool/__main__.py"}
    ]
    assert found.main_blocks == [{"id": "semantic:tool.cli", "artifact": "src/tool/cli.py", "line": 16}]
    [api] = found.public_api
    assert (api["package"], api["declared"]) == ("tool", "__all__")
    assert api["names"] == [
        {"name": "Engine", "id": "semantic:tool.core.Engine"},
        {"name": "start", "id": "semantic:tool.core.start"},
        {"name": "util", "id": "semantic:tool.util"},
    ]
    assert found.warnings == []


def test_without_all_the_public_api_is_the_public_names_of_init(tmp_path: Path) -> None:
    ws, _ = _build(
        tmp_path,
        {
            "pkg/__init__.py": """from __future__ import annotations

import os
from .a import Thing as Thing, _hidden
from .a import *

VERSION = "1"


def top():
    return Thing()
""",
            "pkg/a.py": "class Thing:\n    pass\n\n\ndef _hidden():\n    pass\n",
        },
    )
    [api] = overview.entry_points(ws).public_api
    assert api["declared"] == "public names of __init__"
    assert api["names"] == [
        {"name": "Thing", "id": "semantic:pkg.a.Thing"},
        {"name": "VERSION", "id": "semantic:pkg.VERSION"},
        {"name": "top", "id": "semantic:pkg.top"},
    ]


def test_a_broken_pyproject_or_setup_cfg_is_a_warning_not_an_error(tmp_path: Path) -> None:
    ws, _ = _build(
        tmp_path,
        {
            "pyproject.toml": "[project.scripts\ntool = 'x:y'\n",
            "setup.cfg": "[options.entry_points\nconsole_scripts = x\n",
            "tool/__init__.py": "__all__ = [name for name in ('a',)]\n",
        },
    )
    found = overview.entry_points(ws)
    assert found.scripts == []
    assert [w.split(" (")[0] for w in found.warnings] == [
        "pyproject.toml does not parse",
        "setup.cfg does not parse",
    ]
    # An `__all__` that is not a literal list is not guessed at: the public names are shown instead.
    assert found.public_api[0]["declared"] == "public names of __init__"


def test_a_link_out_of_the_tree_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.toml"
    outside.write_text('[project.scripts]\nstolen = "x:y"\n')
    write_tree(tmp_path / "tree", {"tool/__init__.py": ""})
    (tmp_path / "tree" / "pyproject.toml").symlink_to(outside)
    ws = Store.open(tmp_path / "store").load(
        build_workspace(tmp_path / "tree", store=tmp_path / "store")["workspace_id"]
    )
    found = overview.entry_points(ws)
    assert found.scripts == []
    assert found.warnings and "pyproject.toml cannot be read" in found.warnings[0]


def test_the_busiest_symbols_count_distinct_callers_and_leave_dunders_to_their_class(
    tool: tuple[Workspace, Store],
) -> None:
    ws, _ = tool
    busiest = [(b["id"], b["callers"]) for b in overview.busiest(ws)]
    # fmt: Window.show, main, Engine.__init__, start, clean and extra; main: the module's demo block and
    # __main__; ties by name.
    assert busiest[:3] == [
        ("semantic:tool.util.fmt", 6),
        ("semantic:tool.cli.main", 2),
        ("semantic:tool.util.clean", 2),
    ]
    assert not any(identity.endswith("__init__") for identity, _ in busiest)


def test_read_first_puts_defects_then_own_anomalies_then_the_worst_hotspots() -> None:
    def finding(kind: str, n: int, **extra: object) -> dict:
        return {"id": f"fd_{kind}_{n}", "kind": kind, "rule": "r", "artifact": "m.py", **extra}

    found = {
        "confirmed_defect": [finding("confirmed_defect", n) for n in range(12)],
        "anomaly": [
            finding("anomaly", 0, label="main_block"),
            finding("anomaly", 1),
            finding("anomaly", 2, rule="pyflakes:UnusedImport", artifact="pkg/__init__.py"),
            finding("anomaly", 3, label="guarded_name"),
            finding("anomaly", 4),
        ],
        "hotspot": [
            finding("hotspot", 0, measures={"fan_in": 15}),
            finding("hotspot", 1, measures={"lines": 600, "fan_in": 16}),
            finding("hotspot", 2, measures={"fan_out": 50}),
        ],
    }
    first = [f["id"] for f in overview.read_first(found)]
    assert first == [f"fd_confirmed_defect_{n}" for n in range(10)] + [
        "fd_anomaly_1",
        "fd_anomaly_4",
        "fd_hotspot_1",
        "fd_hotspot_2",
        "fd_hotspot_0",
    ]


def test_orient_gathers_everything_with_the_findings_counts(tool: tuple[Workspace, Store]) -> None:
    ws, store = tool
    oriented = overview.orient(ws, store)
    assert oriented.modules.total == 7 and oriented.entries.main_modules
    assert set(oriented.finding_counts) == {"confirmed_defect", "anomaly", "hotspot"}
    assert oriented.busiest[0]["id"] == "semantic:tool.util.fmt"
