"""MkDocs hook: the reference pages, generated from the code at every build (never copied by hand).

`docs/reference/*.md` do not exist in the repository; `on_files` adds them to the build:

- `reference/chain-schema.md`: `slotrelay/chain/schema.json`, the chain's JSON Schema;
- `reference/cli.md`: `--help` of every command in typer's tree (`slotrelay.cli.app`);
- `reference/mcp-tools.md`: the MCP server's tools/list, as pinned by `tests/mcp/tools_list.json`;
- `reference/errors.md`: every error class with its code (chain, sandbox, pen's MPP codes, PSMR codes)
  and the chain error types the engine itself raises.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
# What the help is rendered for: a 100-column terminal without color (set only while typer renders).
HELP_ENV = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}
ERROR_MODULES = (
    "slotrelay.errors",
    "slotrelay.slots",
    "slotrelay.chain.errors",
    "slotrelay.chain.preflight",
    "slotrelay.sandbox.errors",
    "slotrelay.pen.errors",
    "slotrelay.psmr.errors",
)
# Modules whose upper-case string constants are error types the engine raises into a chain; a module
# that defines a type comes before those that import it, so each type is listed where it is defined.
ERROR_TYPE_MODULES = (
    "slotrelay.chain.errors",
    "slotrelay.chain.deploy_ssh",
    "slotrelay.chain.deploy_http",
    "slotrelay.chain.deploy",
)


def fenced(text: str, language: str = "") -> str:
    """`text` in a fenced code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}\n"


def chain_schema_page() -> str:
    """The chain's JSON Schema, as shipped in the package."""
    schema = (REPO / "slotrelay" / "chain" / "schema.json").read_text()
    return (
        "# Chain JSON Schema\n\n"
        "`slotrelay/chain/schema.json`, generated from the pydantic models in `slotrelay/chain/models.py` "
        "by `python -m slotrelay.chain.schema`. `slotrelay validate` checks a chain file against it.\n\n"
        + fenced(schema, "json")
    )


def command_paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path of typer's click tree, parents first, subcommands in name order.

    Typed `Any`: typer ships its own copy of click, so a group is recognised by its `commands`.
    """
    yield path
    subcommands = getattr(command, "commands", {})
    for name in sorted(subcommands):
        yield from command_paths(subcommands[name], (*path, name))


def cli_page() -> str:
    """`slotrelay ... --help` for every command, as a user's terminal shows it (100 columns, no color)."""
    import typer.main
    from typer.testing import CliRunner

    from slotrelay.cli import app

    runner = CliRunner()
    parts = [
        "# CLI\n\nThe help of every `slotrelay` command, taken from typer's command tree at build time.\n"
    ]
    for path in command_paths(typer.main.get_command(app)):
        result = runner.invoke(app, [*path, "--help"], prog_name="slotrelay", env=HELP_ENV)
        if result.exit_code != 0:
            raise RuntimeError(
                f"slotrelay {' '.join(path)} --help exited {result.exit_code}: {result.output}"
            )
        title = " ".join(("slotrelay", *path))
        parts.append(f"## `{title}`\n\n" + fenced(result.output, "text"))
    return "\n".join(parts)


def mcp_tools_page() -> str:
    """One section per MCP tool: title, hints, description and input schema."""
    tools: list[dict[str, Any]] = json.loads((REPO / "tests" / "mcp" / "tools_list.json").read_text())
    parts = [
        (
            "# MCP tools\n\n"
            f"The {len(tools)} tools `slotrelay mcp serve` lists (tools/list), from the snapshot "
            "`tests/mcp/tools_list.json` that `tests/mcp/test_surface.py` checks against the live server.\n"
        )
    ]
    for tool in tools:
        hints = tool.get("annotations", {})
        flags = ", ".join(f"{key}: {value}" for key, value in sorted(hints.items()) if key.endswith("Hint"))
        parts.append(
            f"## `{tool['name']}`\n\n**{hints.get('title', tool['name'])}** ({flags})\n\n"
            f"{tool.get('description', '')}\n\nInput schema:\n\n"
            + fenced(json.dumps(tool.get("inputSchema", {}), indent=2, ensure_ascii=False), "json")
        )
    return "\n".join(parts)


def cell(text: str) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def errors_page() -> str:
    """Error classes with their codes, and the error types the engine raises into a chain."""
    from slotrelay.errors import SlotrelayError

    for name in ERROR_MODULES:
        importlib.import_module(name)
    classes: list[type[SlotrelayError]] = []

    def walk(cls: type[SlotrelayError]) -> None:
        classes.append(cls)
        for sub in sorted(
            cls.__subclasses__(),
            key=lambda sub: (
                ERROR_MODULES.index(sub.__module__)
                if sub.__module__ in ERROR_MODULES
                else len(ERROR_MODULES),
                sub.__name__,
            ),
        ):
            walk(sub)

    walk(SlotrelayError)
    rows = [
        f"| `{cls.code}` | `{cls.__module__}.{cls.__qualname__}` | "
        f"{cell((cls.__doc__ or '').strip().splitlines()[0] if cls.__doc__ else '')} |"
        for cls in classes
        if cls.__module__ in ERROR_MODULES
    ]
    types: dict[str, str] = {}
    for name in ERROR_TYPE_MODULES:
        module = importlib.import_module(name)
        for constant, value in vars(module).items():
            if constant.isupper() and isinstance(value, str) and re.fullmatch(r"[a-z_]+", value):
                types.setdefault(value, f"| `{value}` | `{name}.{constant}` |")
    return (
        "# Error codes\n\n"
        "Every error slotrelay raises on purpose derives from `SlotrelayError` and carries a stable `code`: "
        "the chain's, the sandbox's, the pen's MPP codes (MPP-E001..E006 and `PEN_*`) and the twelve PSMR "
        "codes. Generated from the error classes at build time. How the CLI turns them into exit codes is "
        "on each part's page.\n\n"
        "## Error classes\n\n| code | class | meaning |\n|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "## Error types the engine raises into a chain\n\n"
        "A node's failure is a `NodeError` whose code is an `error_type`; the chain decides its handling "
        "(retry, skip, fail) by declaring it in `error_types`. Besides the chain's own types, the engine and "
        "the deploy executor raise these:\n\n| error type | constant |\n|---|---|\n"
        + "\n".join(types.values())
        + "\n"
    )


PAGES = {
    "reference/chain-schema.md": chain_schema_page,
    "reference/cli.md": cli_page,
    "reference/mcp-tools.md": mcp_tools_page,
    "reference/errors.md": errors_page,
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """MkDocs event: add the generated reference pages to the build."""
    for path, build in PAGES.items():
        files.append(File.generated(config, path, content=build()))
    return files
