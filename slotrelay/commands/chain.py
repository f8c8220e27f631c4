"""`slotrelay validate | graph | run | decide`: the chain engine's commands.

Exit codes (`slotrelay.errors.ExitCode`, printed and mapped in slotrelay.cli): 0 ok, 1 the run failed,
2 bad input (an invalid chain, alert or decision), 3 the environment is missing something (a package, a
writable folder, a Prefect server).
Prefect is imported inside the commands that need it, so `validate` and `graph` stay fast, and so
is the chain engine, so every other `slotrelay` command (`mcp serve` first) starts without it.
"""

from __future__ import annotations

import getpass
import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.console import Console
from rich.table import Table

from slotrelay.chain.alerts import DecisionName
from slotrelay.commands.options import checked, writable_folder
from slotrelay.commands.output import AsJson, print_json
from slotrelay.errors import AlreadyReported, BadInput, ExitCode, SlotrelayError

if TYPE_CHECKING:
    from prefect.client.schemas.objects import State

app = typer.Typer(no_args_is_help=True)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

ChainPath = Annotated[Path, typer.Argument(help="the node_chain.json")]


class GraphFormat(StrEnum):
    mermaid = "mermaid"
    dot = "dot"
    png = "png"


def _load(path: Path, slots_root: Path | None = None) -> Any:
    from slotrelay.chain import load_chain

    return load_chain(path, slots_root=slots_root)


@app.command()
def validate(chain_path: ChainPath) -> None:
    """Check a chain file: JSON Schema (errors carry JSON paths), then the models, then the graph."""
    chain = _load(chain_path)
    out.print(
        f"{chain_path}: valid chain {chain.chain_id!r}: {len(chain.nodes)} nodes, {len(chain.routes)} "
        "routes, "
        f"{len(chain.error_types)} error types", markup=False, highlight=False)


@app.command()
def graph(
    chain_path: ChainPath,
    format: Annotated[GraphFormat,
                      typer.Option("--format", "-f", help="mermaid, dot or png")] = GraphFormat.mermaid,
    output: Annotated[Path | None,
                      typer.Option("--output", "-o", help="file to write (png needs one)")] = None,
) -> None:
    """Draw a chain: Mermaid or Graphviz DOT text, or a PNG rendered by Graphviz."""
    from slotrelay.chain.graph import render_dot, render_mermaid, render_png

    if format is GraphFormat.png and output is None:
        raise BadInput("--format png needs --output FILE")
    if output is not None:
        _check_writable(output)
    chain = _load(chain_path)
    if format is GraphFormat.png:
        drawing = render_png(chain)
    else:
        text = render_mermaid(chain) if format is GraphFormat.mermaid else render_dot(chain)
        if output is None:
            out.print(text, end="", markup=False, highlight=False)
            return
        drawing = text.encode("utf-8")
    assert output is not None  # png without --output was refused, text without one printed and returned
    try:
        output.write_bytes(drawing)
    except OSError as unwritable:
        raise BadInput(f"--output {output}: cannot write: {unwritable.strerror}") from None
    err.print(f"wrote {output}", markup=False, highlight=False)


def _check_writable(output: Path) -> None:
    """Refuse an --output that cannot be a file before any work: a folder, or a file in a missing folder."""
    if output.is_dir():
        raise BadInput(f"--output {output}: is a folder; name a file")
    if not output.parent.is_dir():
        raise BadInput(f"--output {output}: the folder {output.parent} does not exist")


def _short(path: Path) -> str:
    """A path relative to the working folder when it is inside it (shorter in a table)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _summary_table(chain: Any, summary: dict[str, Any], ui_url: str) -> None:
    from slotrelay.chain.provenance import input_slot_path

    colours = {"Completed": "green", "Skipped": "yellow", "Failed": "red", "NotRun": "dim"}
    table = Table(title=f"chain {chain.chain_id}: {summary['state']}")
    for column in ("node", "state", "attempts", "error type", "slots written"):
        table.add_column(column)
    for node_id, node in summary["nodes"].items():
        written = []
        in_path = input_slot_path(chain, node_id)
        if node["state"] != "NotRun" and in_path is not None and in_path.exists():
            written.append(f"in  {_short(in_path)}")
        if node["output_slot"]:
            written.append(f"out {_short(Path(node['output_slot']))}")
        colour = colours.get(node["state"], "white")
        table.add_row(node_id, f"[{colour}]{node['state']}[/]", str(node["attempts"]),
                      node["error_type"] or "",
                      "\n".join(written))
    if not out.is_terminal:
        # Piped or under make: rich would assume 80 columns and cut the slot paths.
        out.width = max(out.width, 160)
    out.print(table)
    for route_id, route in summary["routes"].items():
        if not route["fired"]:
            out.print(f"route {route_id} did not fire: {route['reason']}", markup=False, highlight=False)
    for alert in summary["alerts"]:
        out.print(f"alert: {alert}", markup=False, highlight=False)
    out.print(f"flow run: {ui_url}/runs/flow-run/{summary['flow_run_id']}", markup=False, highlight=False)


@app.command()
def run(
    chain_path: Annotated[Path | None, typer.Argument(
        help="the node_chain.json; default: the one in the current folder", show_default=False)] = None,
    as_json: AsJson = False,
    slots_root: Annotated[Path | None, checked(
        writable_folder, help="folder relative slot paths resolve against, an existing one")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="go on from the slots: nodes whose output slot is completed and made from their "
                         "current input are not run again")] = False,
) -> None:
    """Run a chain as ONE Prefect flow run on a local Prefect server.

    The server: PREFECT_API_URL's (started there if it names a free port of 127.0.0.1), else the one
    holding the current folder's .slotrelay/prefect (a `slotrelay up` there), else one on
    127.0.0.1:4200, else one started there in the background with its home in the current folder,
    left running for the UI and the next run (`slotrelay up` from this folder reuses it).
    """
    from slotrelay.chain.preflight import prepared_chain

    if chain_path is None:
        chain_path = Path.cwd() / "node_chain.json"
        if not chain_path.is_file():
            raise BadInput(f"no chain given, and no node_chain.json in {Path.cwd()}")
    # Loaded, validated and checked (L1, L2) here, once: the flow run below, in this process, takes it.
    chain = prepared_chain(chain_path, slots_root=str(slots_root) if slots_root else None)
    from deployments.server import require_api

    with err.status("connecting to the Prefect server (starting one if none answers)"):
        api = require_api(start=True)
    if api.started is None:
        err.print(f"using the Prefect server at {api.url}", markup=False, highlight=False)
    else:
        err.print(f"started a Prefect server at {api.url} in the background (home {api.started.home}); it "
                  f"keeps running for the UI and the next run, and `slotrelay up` from this folder reuses it "
                  f"(stop it: kill -- -{api.started.process.pid})", markup=False, highlight=False)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.chain import read_summary, run_chain

    with temporary_settings(updates={PREFECT_API_URL: api.url}):
        state = cast("State[Any]", run_chain(str(chain_path), resume=resume, return_state=True,
                                             slots_root=str(slots_root) if slots_root else None))
        summary = read_summary(chain, state)
    if summary is None:
        raise SlotrelayError(
            f"the flow run ended {state.type.value} before it could summarise: {state.message}",
            code="CHAIN_RUN_FAILED")
    if as_json:
        print_json(summary)
    else:
        _summary_table(chain, summary, api.url.removesuffix("/api"))
    if summary["state"] != "COMPLETED":
        # The summary above says what failed: exit without a second report.
        raise AlreadyReported(ExitCode.FAILED)


@app.command()
def decide(
    alert_file: Annotated[Path, typer.Argument(help="the alert JSON in alerts/")],
    decision: Annotated[DecisionName, typer.Argument(help="continue, retry, terminate or reload")],
    comment: Annotated[str | None, typer.Option(help="why; kept in the alert file")] = None,
    data: Annotated[str | None,
                    typer.Option(help="with continue: the node's output data, a JSON object")] = None,
    api_url: Annotated[str | None, typer.Option(
        help="the Prefect API the paused run lives on; default: the one the alert records (the server "
             "that ran it), else PREFECT_API_URL, else the current folder's server, else "
             "http://127.0.0.1:4200/api",
        show_default=False)] = None,
) -> None:
    """Resume a run paused on an alert, with a decision (the same as the form in the Prefect UI)."""
    from slotrelay.chain.alerts import decidable_alert

    alert = decidable_alert(alert_file)
    payload: dict[str, Any] | None = None
    if data is not None:
        try:
            payload = json.loads(data)
        except json.JSONDecodeError as bad:
            raise BadInput(f"--data is not JSON: {bad.msg}") from None
        if not isinstance(payload, dict):
            raise BadInput("--data must be a JSON object")
    from deployments.server import require_api

    api = require_api(api_url or alert.api_url, source="--api-url" if api_url else "recorded in the alert")
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.arbitration import send_decision

    with temporary_settings(updates={PREFECT_API_URL: api.url}):
        send_decision(alert_file, decision, comment=comment, data=payload, decided_by=getpass.getuser(),
                      via="cli", server_hint=f" ({api.source}); give the server of the paused run with "
                                             "--api-url")
    out.print(f"resumed flow run {alert.flow_run_id}: {decision.value} on {alert.node_id}", markup=False,
              highlight=False)
