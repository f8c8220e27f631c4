"""The `slotrelay` command tree and its exits are public surface: a change to either is a reviewed change
of the lists below."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from slotrelay.cli import app, show_flags_as_flags
from slotrelay.errors import ExitCode, SlotrelayError

COMMANDS = """
decide
graph
mcp serve
pen audit verify
pen decide
pen review
pen write
psmr build
psmr call
psmr callgraph
psmr list
psmr view
run
sandbox build
sandbox doctor
sandbox run
up
validate
watch
"""

# Every error the CLI can report: its class, stable code and exit code (1 failed, 2 bad input,
# 3 environment missing). slotrelay.cli prints `CODE: message` and exits with the code.
ERROR_EXITS = """
deployments.server.HomeInUse HOME_IN_USE 3
deployments.server.ServerStartError PREFECT_SERVER_UNAVAILABLE 3
slotrelay.chain.alerts.AlertError ALERT_INVALID 2
slotrelay.chain.errors.AgentNotGranted CAPABILITY_DENIED 2
slotrelay.chain.errors.AgentOutputRejected VALIDATION_FAILED 1
slotrelay.chain.errors.AgentRequestInvalid INVALID_QUERY 2
slotrelay.chain.errors.AgentTargetNotFound OBJECT_NOT_FOUND 2
slotrelay.chain.errors.AgentToolError AGENT_TOOL_ERROR 2
slotrelay.chain.errors.ChainError CHAIN_INVALID 2
slotrelay.chain.errors.ChainValidationError CHAIN_INVALID 2
slotrelay.chain.errors.ExecutorUnavailable SLOTRELAY_ERROR 1
slotrelay.chain.errors.NodeError SLOTRELAY_ERROR 1
slotrelay.chain.errors.NothingToAnswer UNRESOLVED_REQUIRED_INPUT 2
slotrelay.errors.BadInput BAD_INPUT 2
slotrelay.errors.EnvironmentMissing ENVIRONMENT_MISSING 3
slotrelay.errors.SlotrelayError SLOTRELAY_ERROR 1
slotrelay.errors.ToolError TOOL_ERROR 1
slotrelay.pen.errors.CodeGenerationFailed MPP-E003 1
slotrelay.pen.errors.DecisionTimedOut PEN_DECISION_TIMEOUT 1
slotrelay.pen.errors.ExecutionTimedOut MPP-E004 1
slotrelay.pen.errors.IllegalTransition PEN_ILLEGAL_TRANSITION 2
slotrelay.pen.errors.IntentRejected MPP-E001 2
slotrelay.pen.errors.InvalidPenRequest PEN_INVALID_REQUEST 2
slotrelay.pen.errors.ModelNotConfigured PEN_MODEL_NOT_CONFIGURED 3
slotrelay.pen.errors.PenError PEN_ERROR 1
slotrelay.pen.errors.PenNotFound PEN_NOT_FOUND 2
slotrelay.pen.errors.PenRunFailed PEN_RUN_FAILED 1
slotrelay.pen.errors.PermissionViolation MPP-E005 1
slotrelay.pen.errors.SandboxStartFailed MPP-E002 3
slotrelay.pen.errors.ShareRejected MPP-E006 1
slotrelay.psmr.errors.CapabilityDenied CAPABILITY_DENIED 2
slotrelay.psmr.errors.ConflictRequiresReview CONFLICT_REQUIRES_REVIEW 2
slotrelay.psmr.errors.ExecutionFailed EXECUTION_FAILED 1
slotrelay.psmr.errors.InvalidQuery INVALID_QUERY 2
slotrelay.psmr.errors.ObjectNotFound OBJECT_NOT_FOUND 2
slotrelay.psmr.errors.OperatorUnavailable OPERATOR_UNAVAILABLE 2
slotrelay.psmr.errors.PolicyBlocked POLICY_BLOCKED 2
slotrelay.psmr.errors.PsmrError PSMR_ERROR 1
slotrelay.psmr.errors.TypeMismatch TYPE_MISMATCH 2
slotrelay.psmr.errors.UnresolvedRequiredInput UNRESOLVED_REQUIRED_INPUT 2
slotrelay.psmr.errors.UnsupportedProjection UNSUPPORTED_PROJECTION 2
slotrelay.psmr.errors.ValidationFailed VALIDATION_FAILED 1
slotrelay.psmr.errors.WorkspaceNotFound WORKSPACE_NOT_FOUND 2
slotrelay.sandbox.errors.SandboxDaemonRefused SANDBOX_UNAVAILABLE 3
slotrelay.sandbox.errors.SandboxError SANDBOX_ERROR 1
slotrelay.sandbox.errors.SandboxImageError SANDBOX_IMAGE 1
slotrelay.sandbox.errors.SandboxNotFound SANDBOX_UNAVAILABLE 3
slotrelay.sandbox.errors.SandboxRequestError SANDBOX_BAD_REQUEST 2
slotrelay.sandbox.errors.SandboxUnavailable SANDBOX_UNAVAILABLE 3
"""
ERROR_MODULES = (
    "slotrelay.errors",
    "slotrelay.chain.alerts",
    "slotrelay.chain.errors",
    "slotrelay.pen.errors",
    "slotrelay.psmr.errors",
    "slotrelay.sandbox.errors",
    "deployments.server",
)

runner = CliRunner()


def command_paths(command, prefix: str = "") -> list[str]:
    """Every leaf command under `command`, as space-separated paths."""
    if not hasattr(command, "list_commands"):
        return [prefix]
    paths = []
    for name in command.list_commands(None):
        paths += command_paths(command.get_command(None, name), f"{prefix} {name}".strip())
    return paths


def test_the_command_tree_is_the_documented_one() -> None:
    assert sorted(command_paths(typer.main.get_command(app))) == COMMANDS.split("\n")[1:-1]


def subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *subclasses(direct))]


def test_each_error_has_its_pinned_code_and_exit_code() -> None:
    for module in ERROR_MODULES:
        importlib.import_module(module)
    found = {
        f"{cls.__module__}.{cls.__qualname__} {cls.code} {int(cls.exit_code)}"
        for cls in [SlotrelayError, *subclasses(SlotrelayError)]
        if cls.__module__ in ERROR_MODULES
    }
    assert sorted(found) == ERROR_EXITS.split("\n")[1:-1]
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("args", "exit_code", "stderr"),
    [
        (["graph", "x.json", "--format", "png"], 2, "BAD_INPUT: --format png needs --output FILE\n"),
        (["validate", "/nonexistent/c.json"], 2,
         ("CHAIN_INVALID: /nonexistent/c.json: invalid chain, 1 problem(s):\n"
          "  $: cannot read the file: No such file or directory\n")),
        (["decide", "/nonexistent/alert.json", "retry"], 2,
         "ALERT_INVALID: /nonexistent/alert.json: no such alert file, or not a JSON object\n"),
        (["psmr", "call", "query.search", "{not json"], 2,
         ("BAD_INPUT: the request is not JSON "
          "(Expecting property name enclosed in double quotes at column 2)\n")),
        (["sandbox", "run", "-", "--inputs", "{"], 2,
         ("BAD_INPUT: --inputs: not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
          "(char 1))\n")),
        # An option's value is checked as the command line is read, before the chain file is opened.
        (["watch", "--window", "inf", "/nonexistent/c.json"], 2,
         "BAD_INPUT: --window inf: not a finite number of seconds\n"),
        (["run", "--slots-root", "/nonexistent", "/nonexistent/c.json"], 2,
         "BAD_INPUT: --slots-root /nonexistent: no such folder (create it first)\n"),
        (["pen", "decide", "MPP-x-1-1", "keep"], 2,
         "PEN_INVALID_REQUEST: pen_id 'MPP-x-1-1' is not of the form MPP-{persona}-{yyyymmdd}-{nnn}\n"),
    ],
)
def test_an_error_is_one_message_on_stderr_and_its_exit_code(args: list[str], exit_code: int,
                                                              stderr: str) -> None:
    done = runner.invoke(app, args, input="")
    assert (done.exit_code, done.stderr, done.stdout) == (exit_code, stderr, "")


def test_with_json_a_pen_error_is_its_json_object_on_stdout(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    done = runner.invoke(app, ["pen", "audit", "verify", "--root", str(missing), "--json"])
    assert done.exit_code == 2 and done.stderr == ""
    assert json.loads(done.stdout)["error"] == {
        "code": "PEN_INVALID_REQUEST",
        "message": f"--root: {missing} does not exist (create the folder first, or name the pen's folder)",
    }


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["run", "{missing}/c.json", "--json"], "CHAIN_INVALID"),
        (["psmr", "build", "{missing}", "--json"], "INVALID_QUERY"),
        (["sandbox", "run", "{missing}/prog.py", "--json"], "BAD_INPUT"),
        (["pen", "audit", "verify", "--root", "{missing}", "--json"], "PEN_INVALID_REQUEST"),
    ],
)
def test_with_json_every_command_prints_its_error_as_json_on_stdout(tmp_path: Path, args: list[str],
                                                                    code: str) -> None:
    done = runner.invoke(app, [arg.replace("{missing}", str(tmp_path / "absent")) for arg in args])
    # stderr keeps what is for a person (psmr build's progress bar), never the error.
    assert done.exit_code == 2 and code not in done.stderr, done.output
    assert json.loads(done.stdout)["error"]["code"] == code


def test_json_is_one_option_everywhere() -> None:
    from slotrelay.commands.output import AsJson

    with_json = [(path, param) for path, command in every_command(typer.main.get_command(app))
                 for param in getattr(command, "params", []) if "--json" in param.opts]
    assert {path for path, _ in with_json} == {
        "run", "psmr build", "sandbox run", "sandbox doctor", "pen write", "pen decide", "pen review",
        "pen audit verify"}
    help_text = AsJson.__metadata__[0].help
    assert all(param.help == help_text and param.callback is not None for _, param in with_json)


def every_command(command: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """The root, every group and every command under `command`, each with its path."""
    yield path, command
    if hasattr(command, "list_commands"):
        for name in command.list_commands(None):
            yield from every_command(command.get_command(None, name), f"{path} {name}".strip())


ALL_COMMANDS = dict(every_command(typer.main.get_command(app)))


def takes_no_value(param: Any) -> bool:
    return param.param_type_name == "option" and (param.is_flag or param.count)


def test_every_option_and_argument_has_a_help_line() -> None:
    missing = [f"{path or 'slotrelay'} {param.opts[0]}" for path, command in ALL_COMMANDS.items()
               for param in command.params if not (getattr(param, "help", None) or "").strip()]
    assert missing == []


def check_help_shows_flags_as_flags(command: Any, shown: str) -> None:
    """Every flag of `command` (and --help) is in its help with no value after it; every other option
    with its value's type or metavar."""
    options = [param for param in command.params if param.param_type_name == "option" and not param.hidden]
    for param in [*options, command.get_help_option(typer.Context(command))]:
        name = re.escape(param.opts[0] if param.opts[0].startswith("--") else param.opts[-1])
        # Columns: the long name, a short one, the long and short names of a flag's other side, the type.
        row = re.search(rf"^│\s+(\*\s+)?{name}((\s+-[\w-]+)*)\s+(\S+)", shown, re.MULTILINE)
        assert row, f"{param.opts} not in\n{shown}"
        value = row.group(4)
        if takes_no_value(param):
            assert value == param.help.split()[0], f"a value after a flag: {row[0]}"
        else:
            assert value == param.metavar if param.metavar else value.startswith("<"), f"no value: {row[0]}"


@pytest.mark.parametrize("path", list(ALL_COMMANDS), ids=lambda path: path or "slotrelay")
def test_help_shows_a_flag_with_no_value(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # On main every flag read `--json <bool>`, `--help <bool>`: typer's panel prints a flag's type.
    monkeypatch.setenv("COLUMNS", "80")
    done = runner.invoke(app, [*path.split(), "--help"])
    assert done.exit_code == 0, done.output
    check_help_shows_flags_as_flags(ALL_COMMANDS[path], done.stdout)


def test_a_flag_pair_shows_both_names_and_no_value(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    small = typer.Typer()

    @small.command()
    def draw(dry_run: bool = typer.Option(False, "--dry-run/--no-dry-run", help="only say what it would do"),
             width: int = typer.Option(80, help="columns")) -> None:
        """Draw."""

    monkeypatch.setenv("COLUMNS", "80")
    command = typer.main.get_command(small)
    show_flags_as_flags(command)
    assert command.main(["--help"], prog_name="draw", standalone_mode=False) == 0
    shown = capsys.readouterr().out
    assert re.search(r"--dry-run\s+--no-dry-run\s+only say what it would do", shown), shown
    assert re.search(r"--width\s+<int>\s+columns", shown), shown


@pytest.mark.parametrize(
    "path", ALL_COMMANDS,
    ids=lambda path: path or "slotrelay",
)
def test_no_help_text_is_cut_at_80_columns(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Rich ends a word wider than its column with an ellipsis: `postgresql+asyncpg://user:passw…`.
    monkeypatch.setenv("COLUMNS", "80")
    done = runner.invoke(app, [*path.split(), "--help"])
    assert done.exit_code == 0, done.output
    assert "…" not in done.stdout, done.stdout


SHIPPED_PACKAGES = ("slotrelay", "flows", "tasks", "blocks", "deployments", "psmr_mcp", "psmr_view")


def test_only_the_cli_exits() -> None:
    # A command that already printed how its work ended raises AlreadyReported; slotrelay.cli exits.
    root = Path(__file__).resolve().parents[1]
    exiting = [f"{path.relative_to(root)}:{number}"
               for package in SHIPPED_PACKAGES for path in sorted((root / package).rglob("*.py"))
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if re.search(r"\b(typer|click)\.Exit\b|\bimport\b.*\bExit\b", line)]
    assert exiting and all(place.startswith("slotrelay/cli.py:") for place in exiting), exiting


def test_a_reported_failure_is_printed_once_and_exits_with_its_error_code(tmp_path: Path) -> None:
    # The envelope on stdout is the report: nothing on stderr, and the exit code of its error's class.
    done = runner.invoke(app, ["psmr", "call", "query.search", "{}", "--store", str(tmp_path)])
    envelope = json.loads(done.stdout)
    assert (done.exit_code, done.stderr, envelope["error"]["code"]) == (2, "", "INVALID_QUERY")
