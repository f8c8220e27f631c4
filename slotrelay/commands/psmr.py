"""`slotrelay psmr build | call | callgraph | list | view`: build workspaces, call the API, export call
graphs, serve the human view.

Exit codes (each `PsmrError`'s `exit_code`, printed and mapped in slotrelay.cli): 0 ok; 1 the operator
ran and failed (EXECUTION_FAILED, VALIDATION_FAILED); 2 bad input (bad JSON, an unknown workspace,
operator or object, a refused query).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from slotrelay.collector import collector_off
from slotrelay.commands.output import AsJson, print_json
from slotrelay.errors import AlreadyReported, BadInput
from slotrelay.psmr.errors import ERROR_CLASSES, ERROR_CODES

if TYPE_CHECKING:
    from slotrelay.psmr.analysis.buildbudget import BuildBudget

app = typer.Typer(no_args_is_help=True, help="PSMR: a semantic workspace over Python code, and its API.")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

StoreOption = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help="store folder (default: PSMR_STORE, else psmr/ in slotrelay's state folder, "
        "$SLOTRELAY_STATE_HOME or ~/.local/state/slotrelay)",
        envvar="PSMR_STORE",
    ),
]


@app.command()
def build(
    path: Annotated[Path, typer.Argument(help="root of the Python code to analyse")],
    rev: Annotated[
        str | None, typer.Option("--rev", help="analyse this git revision (through a worktree)")
    ] = None,
    store: StoreOption = None,
    as_json: AsJson = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="keep running: update the workspace after each change to PATH's files, replaying only "
            "what the change reaches (Ctrl-C stops); with --json, one summary per line",
        ),
    ] = False,
    max_cpu_s: Annotated[
        float | None,
        typer.Option(
            "--max-cpu-s",
            help="stop resolving past this many CPU seconds: the call sites left become the unknown "
            "budget_exceeded and the workspace is written all the same (default 1800)",
        ),
    ] = None,
    max_memory_mb: Annotated[
        int | None,
        typer.Option(
            "--max-memory-mb",
            help="stop resolving past this resident memory, as --max-cpu-s does (default 12288)",
        ),
    ] = None,
) -> None:
    """Build or incrementally update the workspace of PATH; prints its workspace_id."""
    if watch:
        if max_cpu_s is not None or max_memory_mb is not None:
            raise BadInput(
                "--watch builds with the default budget; leave out --max-cpu-s and --max-memory-mb"
            )
        if rev is not None:
            raise BadInput("--watch watches the files of PATH; a --rev never changes, leave one of them out")
        _watch(path, store, as_json)
        return
    for option, value in (("--max-cpu-s", max_cpu_s), ("--max-memory-mb", max_memory_mb)):
        if value is not None and value <= 0:
            raise BadInput(f"{option} must be above 0, not {value}")
    from slotrelay.psmr.analysis.buildbudget import BuildBudget

    budget = BuildBudget()
    if max_cpu_s is not None:
        budget.cpu_s = max_cpu_s
    if max_memory_mb is not None:
        budget.memory_bytes = max_memory_mb * 1024 * 1024
    # The cyclic collector stays off to the end: once a build is over, the first full collection scans
    # the resolution it leaves (3-5 s on networkx), which this process is about to drop or hand over.
    with collector_off():
        _build_and_answer(path, rev, store, as_json, budget)


def _build_and_answer(
    path: Path, rev: str | None, store: Path | None, as_json: bool, budget: BuildBudget
) -> None:
    """Build, print the summary, then `_after_answering` (which ends the command's own process)."""
    from slotrelay.psmr.api import build_workspace

    with Progress(
        TextColumn("[bold]analysing[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)
        writes: list[Callable[[], None]] = []

        def progress(done: int, total: int, file: str) -> None:
            bar.update(task, completed=done, total=total, description=file)

        summary = build_workspace(
            path, rev=rev, store=store, progress=progress, budget=budget, persist=True, later=writes.append
        )
    if as_json:
        print_json(summary)
    else:
        out.print(summary["workspace_id"])
        err.print(_counts(summary))
    _after_answering(writes)


def _after_answering(writes: list[Callable[[], None]]) -> None:
    """Once the summary is out, run what the build left to write (the resolution the next build
    replays) in a child process the command does not wait for, and end the command at once, without
    tearing down the gigabyte or so of objects a resolution leaves (2-2.5 s on networkx). When the
    command runs inside another program (a test's runner), whose process goes on, write here and now
    and return."""
    if not _own_process():
        for write in writes:
            write()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    if writes and os.fork() == 0:
        # The child: detached from the terminal's signals and from the caller's pipes, which a
        # caller reading the command's output to its end would otherwise wait on.
        code = 1
        try:
            os.setsid()
            quiet = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(quiet, fd)
            for write in writes:
                write()
            code = 0
        finally:
            # Never back into the command's own exit: the parent has answered and exits itself.
            os._exit(code)
    os._exit(0)


def _own_process() -> bool:
    """Whether this process is the command (its output the process's own), not a program running it."""
    try:
        return sys.stdout.fileno() == 1 and sys.stderr.fileno() == 2
    except (OSError, ValueError):
        return False


def _counts(summary: dict[str, Any]) -> str:
    return (
        f"{summary['files']} files ({summary['analysed']} analysed, {summary['reused']} reused), "
        f"{summary['nodes']} nodes, {summary['edges']} edges, {summary['unknowns']} unknowns, "
        f"{summary['conflicts']} conflicts in {summary['duration_s']} s; store {summary['store']}"
    )


def _watch(path: Path, store: Path | None, as_json: bool) -> None:
    """`build --watch`: build, then update after each change until Ctrl-C or SIGTERM."""
    from slotrelay.psmr.errors import PsmrError
    from slotrelay.psmr.workspace.watch import TreeWatcher

    if not path.is_dir():
        raise BadInput(f"PATH {path} is not a folder; give the root of the Python code to watch")
    builds = 0

    def built(summary: dict[str, Any]) -> None:
        nonlocal builds
        builds += 1
        if as_json:
            # One line per build (JSON Lines), flushed: a script reads each as it comes.
            print_json(summary)
            return
        if builds == 1:
            out.print(summary["workspace_id"])
            err.print(f"watching {path} (Ctrl-C stops): {_counts(summary)}", highlight=False)
            return
        err.print(
            f"{time.strftime('%H:%M:%S')} updated ({summary['removed']} removed; call sites resolved: "
            f"{summary['resolved_sites']}, modules assembled: {summary['assembled_modules']}): "
            f"{_counts(summary)}",
            highlight=False,
        )

    def failed(error: Exception) -> None:
        if not isinstance(error, PsmrError):
            err.print_exception()
        err.print(
            f"{time.strftime('%H:%M:%S')} the update failed ({error}); waiting for the next change",
            highlight=False,
        )

    # SIGTERM (a service manager, `kill`) stops the watch as Ctrl-C does.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        TreeWatcher(path, store=store, on_build=built, on_failure=failed).run()
    finally:
        signal.signal(signal.SIGTERM, previous)


@app.command("call")
def call_operation(
    operation: Annotated[str, typer.Argument(help="an operator, e.g. query.subgraph (see operator.list)")],
    request: Annotated[str, typer.Argument(help="the request as a JSON object")] = "{}",
    store: StoreOption = None,
    allow_write: Annotated[
        # Text, not Path: Path('') is '.', and an empty --allow-write must be refused, not read as '.'.
        list[str] | None,
        typer.Option(
            "--allow-write",
            metavar="ROOT",
            help="grant source-write under ROOT (projection.apply may write there); repeatable",
        ),
    ] = None,
    allow_exec: Annotated[
        bool,
        typer.Option("--allow-exec", help="grant process-execution (execution.run_tests, in the sandbox)"),
    ] = False,
) -> None:
    """Call one API operator; prints the psmr-tool-result-0.1 envelope (compact JSON, one line)."""
    from slotrelay.psmr.api import Grants, call
    from slotrelay.psmr.envelope import render

    try:
        body = json.loads(request)
    except json.JSONDecodeError as error:
        raise BadInput(f"the request is not JSON ({error.msg} at column {error.colno})") from error
    grants = Grants.of(write_roots=allow_write or [], process_execution=allow_exec)
    result = call(operation, body, store=store, grants=grants)
    # Printed exactly as budget.max_text_bytes measured it (pipe through `jq .` to indent).
    typer.echo(render(result))
    if result["status"] == "error":
        # The envelope printed above is the report; the exit code is its error class's.
        raise AlreadyReported(ERROR_CLASSES[ERROR_CODES.index(result["error"]["code"])].exit_code)


@app.command()
def callgraph(
    workspace_id: Annotated[str, typer.Argument(help="a workspace id from `psmr build`")],
    output: Annotated[Path, typer.Option("-o", "--output", help="file to write the JSON call graph to")],
    store: StoreOption = None,
) -> None:
    """Export the workspace's call graph as {"caller": ["callee", ...]}."""
    from slotrelay.psmr.workspace.export import callgraph as export_callgraph
    from slotrelay.psmr.workspace.store import Store

    graph = export_callgraph(Store.open(store).load(workspace_id))
    # Written beside the target and renamed, so a failed write never leaves half a graph behind.
    partial = output.with_name(f".{output.name}.partial")
    try:
        partial.write_text(json.dumps(graph, indent=1) + "\n")
        partial.replace(output)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise BadInput(f"cannot write {output} ({error.strerror or error}); pick a writable path") from error
    err.print(f"{len(graph)} callers, {sum(map(len, graph.values()))} edges -> {output}")


@app.command("list")
def list_command(store: StoreOption = None) -> None:
    """List the workspaces in the store."""
    from slotrelay.psmr.api import list_workspaces

    for ws in list_workspaces(store=store):
        out.print(
            f"{ws['workspace_id']}  {ws['files']:>5} files  {ws['commit'] or 'worktree':<12.12}  {ws['root']}"
        )


@app.command()
def view(
    path: Annotated[
        Path | None, typer.Argument(help="root of analysed code: built or updated first, then shown")
    ] = None,
    store: StoreOption = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="port on 127.0.0.1 (0: any free port)")
    ] = 8766,
    host: Annotated[str, typer.Option("--host", help="loopback address to bind (no other is accepted)")] = (
        "127.0.0.1"
    ),
) -> None:
    """Serve the human view of a PSMR store on 127.0.0.1: the same operators the MCP tools call."""
    from psmr_view.serve import NotLoopback, require_loopback, serve
    from slotrelay.psmr.api import build_workspace
    from slotrelay.psmr.workspace.store import Store

    try:
        require_loopback(host)
    except NotLoopback as error:
        raise BadInput(str(error)) from error
    workspace_id = None
    if path is not None:
        err.print(f"building or updating the workspace of {path} ...", highlight=False)
        summary = build_workspace(path, store=store)
        workspace_id, folder = summary["workspace_id"], Path(summary["store"])
    else:
        folder = Store.open(store).path
        if not (folder / "workspaces").is_dir():
            raise BadInput(
                f"there is no PSMR store at {folder}; build one with `slotrelay psmr build PATH`, "
                "or name it with --store"
            )

    def ready(url: str) -> None:
        err.print(f"PSMR view at {url}  (store {folder}; Ctrl-C stops it)", highlight=False, soft_wrap=True)

    try:
        serve(folder, host=host, port=port, workspace_id=workspace_id, on_ready=ready)
    except OSError as error:
        raise BadInput(f"cannot listen on {host}:{port} ({error.strerror or error})") from error
    except KeyboardInterrupt:
        pass
