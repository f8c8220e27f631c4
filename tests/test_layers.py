"""The layers of the shipped packages are one import-linter `layers` contract (pyproject.toml), which
`make lint` checks. This holds that contract to placing every package: a new top-level package, or a new
module or package directly under `slotrelay/`, fails here until it is given its layer."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def shipped_packages() -> list[str]:
    return [name.rstrip("*") for name in pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]]


def core_children() -> list[str]:
    core = REPO / "slotrelay"
    return [f"slotrelay.{path.stem}" for path in core.iterdir()
            if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()]


def test_import_linter_reads_every_shipped_package() -> None:
    assert sorted(pyproject()["tool"]["importlinter"]["root_packages"]) == sorted(shipped_packages())


def package_layers() -> list[str]:
    """The layers of the one `layers` contract over the packages (the others hold inside a package)."""
    contracts = [contract for contract in pyproject()["tool"]["importlinter"]["contracts"]
                 if contract["type"] == "layers" and "containers" not in contract]
    assert len(contracts) == 1
    assert "ignore_imports" not in contracts[0]
    layers: list[str] = contracts[0]["layers"]
    return layers


def test_one_layers_contract_places_every_package_and_ignores_no_import() -> None:
    placed = [module.strip() for layer in package_layers() for module in re.split(r"[|:]", layer)]
    expected = [package for package in shipped_packages() if package != "slotrelay"] + core_children()
    assert sorted(placed) == sorted(expected)


def test_the_pen_and_psmr_are_independent_and_the_engine_imports_neither() -> None:
    # What they share sits below them: the screen's types (slotrelay.effect_screen), the audit log,
    # the tool errors (slotrelay.errors.ToolError). The pen is a kind of chain node, so it sits above.
    layers = [[module.strip() for module in layer.split("|")] for layer in package_layers()]
    pen_and_psmr = layers.index(["slotrelay.pen", "slotrelay.psmr"])
    assert layers[pen_and_psmr + 1] == ["slotrelay.chain"]


def test_every_core_module_is_held_free_of_prefect_and_mcp() -> None:
    contracts = pyproject()["tool"]["importlinter"]["contracts"]
    contract = next(contract for contract in contracts if contract["type"] == "forbidden"
                    and contract["forbidden_modules"] == ["prefect", "mcp"])
    cli = {"slotrelay.cli", "slotrelay.commands"}
    assert sorted(contract["source_modules"]) == sorted(set(core_children()) - cli)


def test_no_import_contract_ignores_an_import() -> None:
    contracts = pyproject()["tool"]["importlinter"]["contracts"]
    assert [contract["name"] for contract in contracts if contract.get("ignore_imports")] == []
    assert {contract["type"] for contract in contracts} == {"layers", "forbidden", "acyclic_siblings"}


def test_psmrs_rooms_contract_places_every_module_of_psmr() -> None:
    # A module added flat to slotrelay/psmr/ fails here until it is put in a room or at the root.
    contracts = [contract for contract in pyproject()["tool"]["importlinter"]["contracts"]
                 if contract.get("containers") == ["slotrelay.psmr"]]
    assert len(contracts) == 1 and contracts[0]["type"] == "layers" and "ignore_imports" not in contracts[0]
    placed = [module.strip() for layer in contracts[0]["layers"] for module in re.split(r"[|:]", layer)]
    psmr = REPO / "slotrelay" / "psmr"
    children = [path.stem for path in psmr.iterdir()
                if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()]
    assert sorted(placed) == sorted(children)
    assert [layer for layer in placed if layer in ("change", "ops", "workspace", "analysis")] == [
        "change", "ops", "workspace", "analysis"
    ]
