"""MkDocs hook: the pages generated from the repository at every build (never copied by hand).

These pages are not files in `docs/`; `on_files` adds them to the build:

- `contracts.md` and `sandbox-contracts.md`: `CONTRACTS.md` and `slotrelay/sandbox/CONTRACTS.md`, the one
  source of the rules the code cites, their links to each other pointed at the site's pages;
- `reference/chain-schema.md`: `slotrelay/chain/schema.json`, the chain's JSON Schema;
- `reference/cli.md`: `--help` of every command in typer's tree (`slotrelay.cli.app`);
- `reference/mcp-tools.md`: the MCP server's tools/list, as pinned by `tests/mcp/tools_list.json`;
- `reference/errors.md`: the exit codes; every error class with its code, exit code and meaning (chain,
  sandbox, pen's MPP codes, PSMR codes); the codes raised by name; the chain error types the engine raises.
"""

from __future__ import annotations

import ast
import functools
import importlib
import itertools
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
# What the help is rendered for: a 100-column terminal without color (set only while typer renders).
HELP_ENV = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}
# The contracts shipped in the repository, each the source of one page of the site.
CONTRACT_PAGES = {"CONTRACTS.md": "contracts.md", "slotrelay/sandbox/CONTRACTS.md": "sandbox-contracts.md"}
ERROR_MODULES = (
    "slotrelay.errors",
    "slotrelay.chain.slots",
    "slotrelay.chain.alerts",
    "slotrelay.chain.errors",
    "slotrelay.chain.preflight",
    "slotrelay.sandbox.errors",
    "slotrelay.pen.errors",
    "slotrelay.psmr.errors",
    "deployments.server",
)
# Where errors are raised with a code of their own (`ChainError(..., code="GRAPHVIZ_FAILED")`).
RAISING_FOLDERS = ("slotrelay", "deployments")
# Modules whose upper-case string constants are error types the engine raises into a chain; a module
# that defines a type comes before those that import it, so each type is listed where it is defined.
ERROR_TYPE_MODULES = (
    "slotrelay.chain.errors",
    "slotrelay.chain.executors.deploy.errors",
)


def contracts_page(source: str) -> str:
    """A contracts file as the repository has it, its links to the other contracts file made site links."""
    text = (REPO / source).read_text()
    for target, page in CONTRACT_PAGES.items():
        written = re.escape(os.path.relpath(target, Path(source).parent))
        text = re.sub(rf"\]\({written}(#[^)]*)?\)", rf"]({page}\1)", text)
    return text


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

    Typed `Any`: typer ships its own copy of click, so a group is recognised by its `list_commands`
    (click's lookup, which also loads the root's lazily imported parts).
    """
    yield path
    if not hasattr(command, "list_commands"):
        return
    for name in sorted(command.list_commands(None)):
        yield from command_paths(command.get_command(None, name), (*path, name))


def cli_page() -> str:
    """`slotrelay ... --help` for every command, as a user's terminal shows it (100 columns, no color)."""
    import typer.main
    from typer.testing import CliRunner

    from slotrelay.cli import app

    runner = CliRunner()
    parts = [
        ("# CLI\n\nThe help of every `slotrelay` command, taken from typer's command tree at build time.\n\n"
        "**`--json`**, on every command that has it, means the same: the result is printed as JSON on "
        "stdout, one document a line, and so is an error, as `{\"error\": {\"code\": ..., \"message\": "
        "...}}`, with the exit code it has without `--json` (0 done, 1 the work failed, 2 bad input, "
        "3 something missing). Without it, an error is one `CODE: message` line on stderr.\n")
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
    """Text fit for one Markdown table cell, its `CONTRACTS.md#rule` citations linked to the rule."""
    text = " ".join(text.split()).replace("|", "\\|")
    return re.sub(r"CONTRACTS\.md#([a-z0-9-]+)", r"[CONTRACTS.md#\1](../contracts.md#\1)", text)


def first_paragraph(docstring: str | None) -> str:
    """A docstring's first paragraph, the class's one-line meaning however many lines it is wrapped on."""
    return (docstring or "").strip().split("\n\n")[0]


def exit_codes() -> list[tuple[int, str, str]]:
    """`ExitCode`'s values and names, each with the docstring under it, read from the source."""
    from slotrelay.errors import ExitCode

    tree = ast.parse((REPO / "slotrelay" / "errors.py").read_text())
    body = next(node.body for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "ExitCode")
    said = {
        assign.targets[0].id: doc.value.value
        for assign, doc in itertools.pairwise(body)
        if isinstance(assign, ast.Assign)
        and isinstance(assign.targets[0], ast.Name)
        and isinstance(doc, ast.Expr)
        and isinstance(doc.value, ast.Constant)
        and isinstance(doc.value.value, str)
    }
    return [(int(member), member.name, said.get(member.name, "")) for member in ExitCode]


def error_classes() -> list[type[Any]]:
    """The `SlotrelayError` classes of `ERROR_MODULES`, parents first, siblings in the modules' order."""
    from slotrelay.errors import SlotrelayError

    for name in ERROR_MODULES:
        importlib.import_module(name)
    classes: list[type[Any]] = []

    def walk(cls: type[Any]) -> None:
        if cls.__module__ in ERROR_MODULES:
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
    return classes


def message(node: ast.expr) -> str:
    """A message as the code writes it, `…` where a value goes in."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return re.sub("…+", "…", "".join(message(part) for part in node.values))
    return "…"


def codes_raised_by_name(classes: list[type[Any]]) -> list[str]:
    """Table rows of the errors raised with a `code="..."` of their own: code, exit code, message, where.

    The exit code is the call's `exit_code=ExitCode.NAME`, else its class's; one computed at run time
    shows as "varies".
    """
    from slotrelay.errors import ExitCode

    by_name = {cls.__name__: cls for cls in classes}
    rows: dict[tuple[str, str], str] = {}
    for folder in RAISING_FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            for call in ast.walk(ast.parse(path.read_text())):
                if not isinstance(call, ast.Call) or not call.args:
                    continue
                name = getattr(call.func, "id", getattr(call.func, "attr", ""))
                keywords = {keyword.arg: keyword.value for keyword in call.keywords}
                code = keywords.get("code")
                if name not in by_name or not isinstance(code, ast.Constant):
                    continue
                if not isinstance(code.value, str):
                    continue
                given = keywords.get("exit_code")
                if given is None:
                    exit_code = str(int(by_name[name].exit_code))
                elif isinstance(given, ast.Attribute) and getattr(given.value, "id", "") == "ExitCode":
                    exit_code = str(int(ExitCode[given.attr]))
                else:
                    exit_code = "varies"
                where = f"`{name}` in `{path.relative_to(REPO)}`"
                rows.setdefault(
                    (code.value, where),
                    f"| `{code.value}` | {exit_code} | {cell(message(call.args[0]))} | {where} |",
                )
    return [rows[key] for key in sorted(rows)]


def errors_page() -> str:
    """Exit codes; error classes with code, exit code and meaning; codes raised by name; chain error types."""
    classes = error_classes()
    exits = [
        f"| {value} | `{name}` | {cell(meaning or name.lower())} |"
        for value, name, meaning in exit_codes()
    ]
    rows = [
        f"| `{cls.code}` | {int(cls.exit_code)} | {cell(first_paragraph(cls.__doc__))} | "
        f"`{cls.__module__}.{cls.__qualname__}` |"
        for cls in classes
    ]
    types: dict[str, str] = {}
    for name in ERROR_TYPE_MODULES:
        module = importlib.import_module(name)
        for constant, value in vars(module).items():
            if constant.isupper() and isinstance(value, str) and re.fullmatch(r"[a-z_]+", value):
                types.setdefault(value, f"| `{value}` | `{name}.{constant}` |")
    return (
        "# Error codes\n\n"
        "Every error slotrelay raises on purpose derives from `SlotrelayError` and carries a stable `code` "
        "and the `exit_code` the `slotrelay` command ends with: the chain's codes, the sandbox's, the pen's "
        "MPP codes (MPP-E001..E006 and `PEN_*`) and the twelve PSMR codes. One handler in `slotrelay/cli.py` "
        "prints `CODE: message` on stderr (with `--json`, `{\"error\": {\"code\", \"message\"}}` on stdout) "
        "and exits with the error's exit code. A command that has already printed how its work ended "
        "(a failed run's summary, a program's output, a PSMR error envelope) raises `AlreadyReported` "
        "with its exit code, and the same handler exits with it, printing nothing more. "
        "Generated from the code at build time.\n\n"
        "## Exit codes\n\n| exit | name | meaning |\n|---|---|---|\n" + "\n".join(exits) + "\n\n"
        "## Error classes\n\n| code | exit | meaning | class |\n|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\n"
        "## Codes raised by name\n\n"
        "Errors raised with a code of their own instead of their class's, with the message they carry:\n\n"
        "| code | exit | message | raised as |\n|---|---|---|---|\n"
        + "\n".join(codes_raised_by_name(classes))
        + "\n\n"
        "## Error types the engine raises into a chain\n\n"
        "A node's failure is a `NodeError` whose code is an `error_type`; the chain decides its handling "
        "(retry, skip, fail) by declaring it in `error_types` ([error types](../contracts.md#error-types)). "
        "Besides the chain's own types, the engine and the deploy executor raise these:\n\n"
        "| error type | constant |\n|---|---|\n"
        + "\n".join(types.values())
        + "\n"
    )


PAGES: dict[str, Callable[[], str]] = {
    **{page: functools.partial(contracts_page, source) for source, page in CONTRACT_PAGES.items()},
    "reference/chain-schema.md": chain_schema_page,
    "reference/cli.md": cli_page,
    "reference/mcp-tools.md": mcp_tools_page,
    "reference/errors.md": errors_page,
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """MkDocs event: add the generated pages to the build."""
    for path, build in PAGES.items():
        files.append(File.generated(config, path, content=build()))
    return files
