"""`slotrelay mcp serve`: the PSMR MCP server, on stdio (for an MCP host) or streamable HTTP.

The MCP SDK and `psmr_mcp` are imported inside the command, once its options are checked: `slotrelay
--help` stays fast, the core never depends on them, and a bad option is refused without the SDK's import
(about 1 CPU-s); the cyclic garbage collector is off while they are imported (`frozen_imports`).
Exit codes (printed and mapped in slotrelay.cli): 2 for a bad option or a folder that cannot be
served, 1 when building a workspace at start fails, 3 when the MCP SDK is missing; 0 after a clean
stop (stdin closed, or Ctrl-C).
"""

from __future__ import annotations

import gc
import logging
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slotrelay.collector import collector_off
from slotrelay.errors import BadInput, EnvironmentMissing
from slotrelay.loopback import is_loopback
from slotrelay.psmr.errors import CapabilityDenied, InvalidQuery
from slotrelay.psmr.grants import Grants

if TYPE_CHECKING:
    from psmr_mcp import WorkspaceRegistry
    from slotrelay.chain.agent_view import AgentGrants, ServedChains

# Live HTTP sessions at once: a loopback server has a few MCP hosts, not thousands; an open session
# holds about 37 kB (docs/mcp.md), and the SDK's own default of 10,000 let 3,000 pile up in 7 s.
DEFAULT_MAX_SESSIONS = 100
SESSION_IDLE_TIMEOUT_VARIABLE = "PSMR_MCP_SESSION_IDLE_TIMEOUT_S"
DEFAULT_SESSION_IDLE_TIMEOUT_S = 600.0

app = typer.Typer(name="mcp", help="Serve PSMR workspaces to AI agents over MCP.", no_args_is_help=True)


def _say(line: str) -> None:
    """Print one line for a person on stderr: on stdio, stdout carries only MCP messages.

    Plain text, not rich: a folder named like markup or an emoji code (`[b]`, `:fire:`) is printed as
    it is, and the first answer does not wait for rich's import (docs/mcp.md#cold-start).
    """
    print(line, file=sys.stderr, flush=True)


@app.command("serve")
def serve(
    workspace: Annotated[
        list[Path] | None,
        typer.Option(
            "--workspace",
            "-w",
            metavar="PATH",
            help="A Python source folder to build (or load) at start and serve; repeat for several. "
            "These folders are also the only roots psmr_workspace_build may analyse.",
        ),
    ] = None,
    chain: Annotated[
        list[Path] | None,
        typer.Option(
            "--chain",
            metavar="CHAIN.json",
            help="A chain to serve to agents (chain_list, chain_describe, node_inbox, node_submit); repeat "
            "for several. `slotrelay watch` on the same chains routes what agents submit.",
        ),
    ] = None,
    slots_root: Annotated[
        Path | None,
        typer.Option("--slots-root", help="Where the chains' relative slot paths resolve (as watch's)."),
    ] = None,
    agent: Annotated[
        list[str] | None,
        typer.Option(
            "--agent",
            metavar="NODE_ID",
            help="Grant node_submit as this node of a served chain (repeatable). Without it node_submit "
            "answers CAPABILITY_DENIED.",
        ),
    ] = None,
    allow_decide: Annotated[
        bool,
        typer.Option("--allow-decide", help="Grant alert_decide: decide alerts of the served chains, as "
                     "`slotrelay decide` does (the runs record who decided, via mcp)."),
    ] = False,
    allow_pen: Annotated[
        Path | None,
        typer.Option("--allow-pen", metavar="ROOT", help="Grant pen_write, the magic pen with ROOT as its "
                     "folder (personas, audit log, kept pens); the code model from SLOTRELAY_MODEL_*."),
    ] = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve streamable HTTP at http://HOST:PORT/mcp (loopback only) instead of stdio.",
        ),
    ] = None,
    max_sessions: Annotated[
        int,
        typer.Option(
            "--max-sessions",
            min=1,
            metavar="N",
            help="With --http: at most N live sessions; a client opening one more gets 503 until one "
            "ends or expires.",
        ),
    ] = DEFAULT_MAX_SESSIONS,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            help="The store folder for every workspace (default: PSMR_STORE, else psmr/ in slotrelay's state "
            "folder).",
        ),
    ] = None,
    allow_write: Annotated[
        # Text, not Path: Path('') is '.', and an empty --allow-write must be refused, not read as '.'.
        list[str] | None,
        typer.Option(
            "--allow-write",
            metavar="ROOT",
            help="Grant source-write under ROOT: psmr_projection_apply may write files there (repeatable). "
            "Without it the server never writes a source file.",
        ),
    ] = None,
    allow_exec: Annotated[
        bool,
        typer.Option(
            "--allow-exec",
            help="Grant process-execution: psmr_run_tests may run tests, inside the sandbox.",
        ),
    ] = False,
) -> None:
    """Start the MCP server: read-only tools over the served workspaces, plus psmr_workspace_build;
    applying deltas and running tests only with --allow-write / --allow-exec. With --chain, the
    engine's tools too; submitting a node's output only with --agent NODE_ID."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    workspace = workspace or []
    if allow_pen is not None and not allow_pen.is_dir():
        raise BadInput(f"--allow-pen {allow_pen}: not a folder")
    if not workspace and not chain and allow_pen is None:
        raise BadInput("give --workspace PATH (a Python source folder) or --chain CHAIN.json (a chain)")
    agent_view = _agent_view(chain or [], slots_root, agent or [], allow_decide=allow_decide)
    address = parse_http_address(http) if http else None
    idle_timeout_s = session_idle_timeout()
    grants = Grants.of(write_roots=allow_write or [], process_execution=allow_exec)
    for root in allow_write or []:
        if not Path(root).is_dir():
            raise BadInput(f"--allow-write {root}: not a folder")
    for folder in workspace:
        if not folder.is_dir():
            raise BadInput(f"--workspace {folder}: not a folder")
    try:
        with frozen_imports():
            import anyio

            from psmr_mcp import WorkspaceRegistry, build_server
            from psmr_mcp.engine_tools import EngineTools
            from psmr_mcp.transports import serve_http, serve_stdio
    except ImportError as exc:
        raise EnvironmentMissing(f"the MCP SDK is not installed ({exc}); run `pip install -e .`") from exc

    if agent_view is None:
        # No chain served: the engine's modules stay unimported until a tool asks (cold start).
        engine = EngineTools()
    else:
        served_chains, agent_grants = agent_view
        engine = EngineTools(served_chains, grants=agent_grants)
    engine.pen_root = allow_pen
    registry = WorkspaceRegistry(workspace, store=store)
    for folder in workspace:
        _build_at_start(registry, folder)

    server = build_server(registry, grants=grants, engine=engine)
    served = ", ".join([*(w.workspace_id for w in registry.served()),
                        *(f"chain {c}" for c in (engine.chains.chains if chain else ()))])
    if grants.names():
        _say(
            f"granted: {', '.join(grants.names())} (write roots: "
            f"{', '.join(map(str, grants.write_roots)) or 'none'})"
        )
    try:
        if address is None:
            _say(f"PSMR MCP server on stdio, serving {served}")
            anyio.run(serve_stdio, server)
        else:
            host, port = address

            def ready(url: str) -> None:
                # One line: scripts and tests read the URL from it.
                _say(f"PSMR MCP server at {url} serving {served} (Ctrl-C stops it)")

            anyio.run(
                lambda: serve_http(
                    server,
                    host,
                    port,
                    on_ready=ready,
                    idle_timeout_s=idle_timeout_s,
                    max_sessions=max_sessions,
                )
            )
    except OSError as exc:
        raise BadInput(f"--http {http}: cannot listen ({exc.strerror or exc}); pick another port") from exc
    except KeyboardInterrupt:
        _say("PSMR MCP server stopped")


@contextmanager
def frozen_imports() -> Iterator[None]:
    """Import the server's modules with the cyclic garbage collector off, then freeze every object alive.

    The MCP SDK's import makes about 120,000 objects (modules, classes, pydantic's schemas) that live as
    long as the process, as the CLI's do. While they are made, the collector scans them over and over
    (about 180 passes, a tenth of the import's CPU: 70-85 ms, docs/benchmarks.md#psmr-over-mcp); once
    made, each of its full passes scans them all again. Frozen (`gc.freeze`), the collector never looks
    at them: the few hundred objects of cyclic garbage the imports leave stay, and everything made after
    (the workspaces, the answers) is collected as before. Frozen before the workspaces are built, so
    that the resolutions the server keeps and replaces are never frozen.
    """
    with collector_off():
        try:
            yield
        finally:
            gc.freeze()


def parse_http_address(address: str) -> tuple[str, int]:
    """Split `HOST:PORT` (IPv6 as `[::1]:PORT`) and check it is a loopback address.

    Parameters:
        address: the value of `--http`, e.g. `127.0.0.1:8765`.

    Returns:
        The host (without brackets) and the port.

    Raises:
        InvalidQuery: the value is not `HOST:PORT` with a port from 1 to 65535.
        CapabilityDenied: the host is not a loopback address.
    """
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise InvalidQuery(
            f"--http {address!r}: expected HOST:PORT with a port from 1 to 65535, e.g. 127.0.0.1:8765"
        )
    host = host.strip("[]")
    if not is_loopback(host):
        raise CapabilityDenied(
            f"--http {address!r}: the MCP server has no authentication and binds to loopback only; "
            "use 127.0.0.1, ::1 or localhost"
        )
    return host, int(port_text)


def session_idle_timeout() -> float:
    """Seconds an HTTP session may stay without a request before it is closed.

    Returns:
        `PSMR_MCP_SESSION_IDLE_TIMEOUT_S`, or DEFAULT_SESSION_IDLE_TIMEOUT_S when it is unset.

    Raises:
        InvalidQuery: the variable is not a positive, finite number.
    """
    text = os.environ.get(SESSION_IDLE_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_SESSION_IDLE_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise InvalidQuery(f"{SESSION_IDLE_TIMEOUT_VARIABLE}={text!r}: expected a positive number of seconds")
    return seconds


def _agent_view(chains: list[Path], slots_root: Path | None, agents: list[str], *,
                allow_decide: bool) -> tuple[ServedChains, AgentGrants] | None:
    """The `--chain` files served to agents, with `--agent` grants each naming a node of one of them (None:
    no chain served)."""
    if not chains and not agents and not allow_decide:
        return None
    if slots_root is not None and not slots_root.is_dir():
        raise BadInput(f"--slots-root {slots_root}: not a folder")
    for path in chains:
        if not path.is_file():
            raise BadInput(f"--chain {path}: not a file")
    # The chain engine's modules only once the files are there to load.
    from slotrelay.chain.agent_view import AgentGrants, ServedChains

    served = ServedChains(chains, slots_root=slots_root)
    known = {n.node_id: c.node(n.node_id).executor.kind for c in served.chains.values() for n in c.nodes}
    for node_id in agents:
        if node_id not in known:
            raise BadInput(f"--agent {node_id}: no node of that id in the served chains (--chain)")
        if known[node_id] != "external":
            raise BadInput(f"--agent {node_id}: that node runs inside the engine ({known[node_id]} "
                           "executor); only an agent's node (executor external) can be granted")
    if agents:
        _say(f"granted: node_submit as {', '.join(agents)}")
    if allow_decide:
        _say("granted: alert_decide")
    return served, AgentGrants(nodes=frozenset(agents), decide=allow_decide)


def _build_at_start(registry: WorkspaceRegistry, folder: Path) -> None:
    """Build or load one `--workspace` folder (checked as an option), with a progress bar when stderr is a
    terminal."""
    if sys.stderr.isatty():
        summary = _build_with_bar(registry, folder)
    else:
        # An MCP host keeps stderr as a log: a bar is noise there, and loading it delays the first answer.
        summary = registry.build(folder, at_startup=True)
    _say(
        f"workspace {summary['workspace_id']} <- {summary['root']}: {summary['files']} files "
        f"({summary['analysed']} analysed, {summary['reused']} reused) in {summary['duration_s']:.1f}s"
    )


def _build_with_bar(registry: WorkspaceRegistry, folder: Path) -> dict[str, Any]:
    """`registry.build` under a transient progress bar on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True, emoji=False),
        transient=True,
    ) as bar:
        task = bar.add_task(f"workspace {folder}", total=None)

        def progress(done: int, total: int, file: str) -> None:
            bar.update(task, completed=done, total=total)

        return registry.build(folder, progress=progress, at_startup=True)
