"""`slotrelay watch` and `slotrelay up`: the sensor on a Prefect API, and the whole local stack.

`watch CHAIN.json ...` routes the chains' output slots as agents write them (watchdog, ledger,
exactly once) and starts runs of each chain's deployment; unless `--no-serve`, it also serves those
deployments in its own process, so `watch` against a server runs chains end to end on its own.

`up [CHAIN.json ...]` starts a Prefect server with its UI on 127.0.0.1, runs `watch` for the chains
in a child process (with `--psmr PATH`, `slotrelay psmr view PATH` in another), prints the UI
addresses, and on one Ctrl-C stops everything it started: the watch process and every flow-run
process under it, the view, then the server and its process group, killing what does not stop in
time (a worker has been seen ignoring SIGTERM for 70 s).

Both work from the current folder, a user's project: the default chain is its `node_chain.json`, and
`up`'s server home is its `.slotrelay/prefect`. A home takes one server (deployments/server.py locks
it): `up` refuses a home another `up` holds, and reuses the server `slotrelay run` left running on it
(on the same port), which its Ctrl-C then leaves running.

Exit codes (printed and mapped in slotrelay.cli): 0 after a clean stop, 2 for a bad chain or option, 3 when no
Prefect API answers or the server cannot start (for `up`, also when its watcher ended with 2 or 3), 1 when the
watcher failed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.panel import Panel

from deployments.pool import CRASH_AFTER, MAX_CRASH_AFTER, MIN_CRASH_AFTER
from slotrelay.commands.options import (
    MAX_WARM,
    MAX_WINDOW_SECONDS,
    PORT,
    block_name,
    checked,
    count,
    created_folder,
    deployment_template,
    existing_folder,
    seconds,
    work_pool_name,
    writable_folder,
)
from slotrelay.errors import BadInput, EnvironmentMissing, ExitCode, SlotrelayError

if TYPE_CHECKING:
    from slotrelay.chain.sensor import ChainRouter

app = typer.Typer()
console = Console(stderr=True)

CHAIN_FILE = "node_chain.json"
CHAINS_HELP = (f"Chain files (node_chain.json) to watch; default: {CHAIN_FILE} in the current folder, if "
               "there is one.")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
STOP_GRACE_SECONDS = 10.0
# How a watcher `up` stopped ends: 0, killed by the signal, or typer's 130 (128 + SIGINT) for a
# KeyboardInterrupt, raised when the SIGINT came while it was still starting.
STOPPED = (0, -signal.SIGINT, -signal.SIGTERM, -signal.SIGKILL, 128 + signal.SIGINT)

# The options `watch` and `up` share (`up` hands them to the `watch` it starts). `up` checks a block's
# name only: its server starts later, and the `watch` it starts looks the block up there.
WARM_PROCESSES = 2
WarmOption = Annotated[int, checked(
    count(minimum=0, maximum=MAX_WARM),
    help=f"Processes kept warm (Prefect and the chain flow imported) that a routed run starts in at "
         f"once; 0: every run waits for the runner's poll and a new process (at most {MAX_WARM}).")]
FOLDERS_BLOCK_HELP = "A saved ChainFolders Block: the chains' slots root, alerts and logs."
MODEL_BLOCK_HELP = "A saved CodeModel Block: the code model of the chains' pen nodes."
SANDBOX_POLICY_HELP = "A saved SandboxPolicy Block: the daemon and rules of the chains' pen nodes' sandbox."
CHAIN_FOLDERS = "blocks.chain_folders:ChainFolders"
CODE_MODEL = "blocks.code_model:CodeModel"
SANDBOX_POLICY = "blocks.sandbox_policy:SandboxPolicy"


def _log_to_console() -> None:
    root = logging.getLogger("slotrelay")
    root.setLevel(logging.INFO)
    root.addHandler(RichHandler(console=console, show_path=False, rich_tracebacks=False))
    # Prefect, once imported, logs to the console from the root logger too: say each line once.
    root.propagate = False


def chains_or_here(chains: list[Path] | None) -> list[Path]:
    """The chain files given, or the current folder's node_chain.json when none is (none if it has none)."""
    if chains:
        return chains
    here = Path.cwd() / CHAIN_FILE
    return [here] if here.is_file() else []


def _load_routers(chains: list[Path], slots_root: Path | None,
                  folders_block: str | None = None) -> list[ChainRouter]:
    from slotrelay.chain.sensor import ChainRouter

    if not folders_block:
        return [ChainRouter(path, slots_root=slots_root) for path in chains]
    from flows.chain import chain_folders
    from slotrelay.chain import load_chain

    # The sensor watches the slots where the runs write them: the block's folders, as the chain flow
    # resolves them.
    try:
        folders = chain_folders(folders_block, str(slots_root) if slots_root else None)
    except ValueError as missing:
        raise BadInput(f"--folders-block: {missing}") from None
    return [ChainRouter(path, chain=load_chain(path, **folders)) for path in chains]


def _preflight(routers: list[ChainRouter]) -> None:
    """L1 and L2 for every chain, as `run` checks them: a problem stops the start (exit 3), named."""
    from slotrelay.chain.preflight import preflight_chains

    preflight_chains([router.chain for router in routers])


@app.command("watch")
def watch(
    chains: Annotated[list[Path] | None, typer.Argument(help=CHAINS_HELP, show_default=False)] = None,
    slots_root: Annotated[Path | None, checked(
        writable_folder,
        help="Folder relative slot paths resolve against, an existing one (default: each chain's folder).")
    ] = None,
    no_serve: Annotated[
        bool, typer.Option("--no-serve", help="Do not serve the deployments here: workers run them.")
    ] = False,
    deployment: Annotated[str, checked(
        deployment_template,
        help="With --no-serve: the deployment to run, FLOW/DEPLOYMENT, `{chain_id}` filled in.")
    ] = "chain/{chain_id}",
    window: Annotated[float, checked(
        seconds(minimum=0, maximum=MAX_WINDOW_SECONDS),
        help=f"Seconds routed targets wait to share one run (0 to {MAX_WINDOW_SECONDS:g}).")] = 0.1,
    pool: Annotated[str | None, checked(
        work_pool_name,
        help="Request the chain runs on this Prefect work pool (created as a process pool if missing) "
             "instead of serving them here: `prefect worker start --pool NAME` processes run them. A name "
             "of letters, digits, '_', '.' and '-'.")] = None,
    crash_after: Annotated[float | None, checked(
        seconds(minimum=MIN_CRASH_AFTER.total_seconds(), maximum=MAX_CRASH_AFTER.total_seconds(),
                why_minimum="a heartbeat and a margin, or a live run whose heartbeat came late is crashed"),
        help="With --pool: seconds without a heartbeat after which a run is marked Crashed and rescheduled "
             f"(its worker died). Heartbeats come every 30 s; at least {MIN_CRASH_AFTER.total_seconds():g}, "
             f"default {CRASH_AFTER.total_seconds():g}.")] = None,
    warm: WarmOption = WARM_PROCESSES,
    folders_block: Annotated[str | None, checked(block_name(CHAIN_FOLDERS, on_the_api=True),
                                                 help=FOLDERS_BLOCK_HELP)] = None,
    model_block: Annotated[str | None, checked(block_name(CODE_MODEL, on_the_api=True),
                                               help=MODEL_BLOCK_HELP)] = None,
    sandbox_policy: Annotated[str | None, checked(block_name(SANDBOX_POLICY, on_the_api=True),
                                                  help=SANDBOX_POLICY_HELP)] = None,
) -> None:
    """Route output slots written by agents outside the engine, and run what they feed, exactly once."""
    _log_to_console()
    if pool is not None and no_serve:
        raise BadInput("--pool and --no-serve: choose one (--pool creates its deployments on the pool)")
    if crash_after is not None and pool is None:
        raise BadInput("--crash-after is the crash window of runs on a work pool: give --pool too")
    crashed_after = _crash_window(crash_after)
    if no_serve and (folders_block or model_block or sandbox_policy):
        raise BadInput("--no-serve runs your deployment with its own parameters: name the blocks there")
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from deployments.server import require_api

    # The ChainFolders block is read from the API before the chains load in its folders; without one,
    # a bad chain is named before a missing server.
    api = require_api() if folders_block else None
    with temporary_settings(updates={PREFECT_API_URL: api.url}) if api else contextlib.nullcontext():
        routers = _load_routers(chains_or_here(chains), slots_root, folders_block)
    _preflight(routers)
    api = api or require_api()
    # In force for everything below, the threads and processes it starts included (they are made here).
    with temporary_settings(updates={PREFECT_API_URL: api.url}):
        _route_and_serve(routers, api.url, slots_root=slots_root, no_serve=no_serve, deployment=deployment,
                         window=window, pool=pool, crashed_after=crashed_after, warm=warm,
                         folders_block=folders_block, model_block=model_block, sandbox_policy=sandbox_policy)


def _route_and_serve(routers: list[ChainRouter], url: str, *, slots_root: Path | None, no_serve: bool,
                     deployment: str, window: float, pool: str | None, crashed_after: timedelta, warm: int,
                     folders_block: str | None, model_block: str | None, sandbox_policy: str | None) -> None:
    """`watch` once its chains are loaded and checked: serve the deployments here, or request runs of
    them (`--no-serve`, `--pool`), and route the slots until stopped."""
    # The chain flow's parameters of the same names, as defaults of the deployments created here.
    named = {"folders_block": folders_block, "model_block": model_block, "sandbox_policy": sandbox_policy}
    blocks = {parameter: name for parameter, name in named.items() if name}
    if pool is not None:
        _watch_on_pool(routers, pool, slots_root is not None, window, url, blocks, crashed_after)
        return

    from deployments.sensor import ChainTarget, DeploymentStarter
    from deployments.serve import (
        chain_deployment,
        chain_flow_deployment_name,
        generic_chain_deployment,
        pen_deployments,
        serve_until_stopped,
    )
    from deployments.warm import WarmPool
    from slotrelay.chain.sensor import SlotSensor

    served = []
    if not no_serve:
        served = [generic_chain_deployment(), *(chain_deployment(r.chain, blocks=blocks) for r in routers),
                  *pen_deployments()]
    targets = {
        r.chain_id: ChainTarget(
            chain_flow_deployment_name(r.chain_id) if not no_serve else deployment.format(
                chain_id=r.chain_id),
            r.chain_path,
            r.chain.work_dir if slots_root else None,
        )
        for r in routers
    }
    # With no chain to watch, the one chain deployment served is `chain/run-chain`, run from the UI now and
    # then: a fork server's Prefect import and idle processes of ~100 MB each are not kept for it.
    warm_pool = (WarmPool(size=warm, chains=[r.chain_path for r in routers])
                 if warm and routers and not no_serve else None)
    starter = DeploymentStarter(targets, warm=warm_pool)
    sensor = SlotSensor(routers, starter, window_seconds=window)
    console.print(f"slotrelay watch: {len(routers)} chain(s) on {url}"
                  + ("" if no_serve else f", serving {len(served)} deployment(s)")
                  + (f", {warm} warm process(es)" if warm_pool else ""))
    try:
        if no_serve:
            sensor.run_until_stopped()
        else:
            # The sensor starts once the deployments are on the API: its first requests may come at its start.
            serve_until_stopped(served, warm=warm_pool, on_applied=sensor.start)
    except KeyboardInterrupt:
        pass
    finally:
        sensor.stop()
        starter.close()
    console.print("slotrelay watch: stopped")


def _crash_window(crash_after: float | None) -> timedelta:
    """`--crash-after` (checked within its bounds as it is read) as the crash automation's window, its
    default when not given."""
    return CRASH_AFTER if crash_after is None else timedelta(seconds=crash_after)


def _watch_on_pool(routers: list[ChainRouter], pool: str, own_slots_root: bool, window: float,
                   url: str, blocks: dict[str, str], crash_after: timedelta) -> None:
    """`watch --pool`: one `chain/<chain_id>` deployment per chain on the pool; the sensor requests runs of
    them; a run silent for `crash_after` is crashed and rescheduled."""
    from deployments.pool import PoolRunReports, apply_on_pool, pool_chain_deployment
    from deployments.pool import logger as pool_logger
    from deployments.sensor import ChainTarget, DeploymentStarter
    from deployments.serve import chain_flow_deployment_name
    from slotrelay.chain.sensor import SlotSensor

    deployments = [pool_chain_deployment(r.chain, blocks) for r in routers]
    deployment_ids = apply_on_pool(deployments, pool, crash_after)
    # A run no worker could start (the flow does not import there, its process died) is an error here.
    reports = PoolRunReports(deployment_ids, pool_logger.error)
    reports.start()
    targets = {
        r.chain_id: ChainTarget(chain_flow_deployment_name(r.chain_id), r.chain_path,
                                r.chain.work_dir if own_slots_root else None)
        for r in routers
    }
    starter = DeploymentStarter(targets)
    sensor = SlotSensor(routers, starter, window_seconds=window)
    console.print(f"slotrelay watch: {len(routers)} chain(s) on {url}, runs on work pool {pool} "
                  f"(start workers: prefect worker start --pool {pool})")
    try:
        sensor.run_until_stopped()
    except KeyboardInterrupt:
        pass
    finally:
        sensor.stop()
        starter.close()
        reports.stop()
    console.print("slotrelay watch: stopped")


def _stop_tree(process: subprocess.Popen[bytes], first: signal.Signals, grace: float) -> None:
    """Stop a child and all its descendants (found before signalling, as they may leave the group)."""
    import psutil

    try:
        root = psutil.Process(process.pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        process.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, first)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace)
    # Whatever is still alive, including flow runs started in a session of their own, and their children.
    late = [p for p in tree if p.is_running()]
    for proc in list(late):
        try:
            late.extend(c for c in proc.children(recursive=True) if c not in late)
        except psutil.NoSuchProcess:
            continue
    for proc in late:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            continue
    _gone, alive = psutil.wait_procs(late, timeout=3)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=5)
    if process.poll() is None:
        process.wait()


def _shown(database: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(database).render_as_string(hide_password=True)


@app.command("up")
def up(
    chains: Annotated[list[Path] | None, typer.Argument(help=CHAINS_HELP, show_default=False)] = None,
    host: Annotated[str, typer.Option(
        help="Interface to bind: loopback only (see the README for remote use).")] = "127.0.0.1",
    port: Annotated[int, checked(PORT, help="Port of the Prefect server and its UI.")] = 4200,
    home: Annotated[Path | None, checked(
        created_folder,
        help="PREFECT_HOME of the server (its SQLite database, log and lock), created if missing; one "
             "server to a home. Default: .slotrelay/prefect in the current folder.",
        show_default=False)] = None,
    psmr: Annotated[Path | None, checked(
        existing_folder, help="Also serve the PSMR view of this code root (`slotrelay psmr view`).")] = None,
    psmr_port: Annotated[int, checked(PORT, help="Port of the PSMR view on 127.0.0.1.")] = 8766,
    database: Annotated[str | None, typer.Option(
        help="The server's database: a postgresql+asyncpg:// URL, user:password@host:port/db (default: "
             "SQLite in --home).",
    )] = None,
    warm: WarmOption = WARM_PROCESSES,
    folders_block: Annotated[str | None, checked(block_name(CHAIN_FOLDERS, on_the_api=False),
                                                 help=FOLDERS_BLOCK_HELP)] = None,
    model_block: Annotated[str | None, checked(block_name(CODE_MODEL, on_the_api=False),
                                               help=MODEL_BLOCK_HELP)] = None,
    sandbox_policy: Annotated[str | None, checked(block_name(SANDBOX_POLICY, on_the_api=False),
                                                  help=SANDBOX_POLICY_HELP)] = None,
) -> None:
    """Start a Prefect server with its UI, serve the flows, watch the chains; Ctrl-C stops it all.

    Run it from your project's folder: its node_chain.json is watched and its .slotrelay/prefect holds
    the server's data. The server `slotrelay run` left running there (same port) is reused, not started
    again.
    """
    if host not in LOOPBACK:
        raise BadInput(f"--host {host}: slotrelay up binds loopback only; the Prefect server has no "
                       "authentication. Put an authenticating proxy in front for remote use (README).")
    chain_files = [p.resolve() for p in chains_or_here(chains)]
    _preflight(_load_routers(chain_files, None))

    from deployments.server import (
        HomeInUse,
        ServerHandle,
        api_answers,
        default_home,
        home_holder,
        server_database,
        start_server,
    )

    if database is not None:
        try:
            server_database(database)
        except ValueError as bad:
            raise BadInput(f"--database: {bad}") from None
    home = (home or default_home()).absolute()
    api_url = f"http://{host}:{port}/api"
    holder = home_holder(home)
    if holder is not None:
        # `slotrelay run` (as `make run` does) leaves its server up for the UI: `up` takes it as it is.
        reusable = holder.started_by == "run" and holder.api_url == api_url and database is None
        if not (reusable and api_answers(api_url)):
            raise HomeInUse(holder.refusal(home))
    elif api_answers(api_url):
        raise EnvironmentMissing(f"Something already answers on {host}:{port}; stop it or choose --port.",
                                 code="PORT_IN_USE")
    named = {"--folders-block": folders_block, "--model-block": model_block,
             "--sandbox-policy": sandbox_policy}
    watch_blocks = [part for option, name in named.items() if name for part in (option, name)]
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    server: ServerHandle | None = None
    watcher: subprocess.Popen[bytes] | None = None
    view: subprocess.Popen[bytes] | None = None
    try:
        if holder is None:
            with console.status(f"starting the Prefect server on {host}:{port} ..."):
                server = start_server(host=host, port=port, home=home, database=database)
        try:
            watcher = subprocess.Popen(
                [sys.executable, "-m", "slotrelay.cli", "watch", "--warm", str(warm), *watch_blocks,
                 *map(str, chain_files)],
                env={**os.environ, "PREFECT_API_URL": api_url},
                stdin=subprocess.DEVNULL,
                # Its own group: the terminal's Ctrl-C reaches `up` only, which stops the child in order.
                start_new_session=True,
            )
            started = watcher

            def stop_when_watcher_ends() -> None:
                started.wait()
                stop.set()

            threading.Thread(target=stop_when_watcher_ends, daemon=True).start()
            if psmr is not None:
                view = subprocess.Popen(
                    [sys.executable, "-m", "slotrelay.cli", "psmr", "view", str(psmr), "--port",
                     str(psmr_port)],
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )
            console.print(_panel(api_url, home, reused=holder.pid if holder else None, database=database,
                                 psmr=psmr, psmr_port=psmr_port, chain_files=chain_files))
            stop.wait()
        finally:
            with console.status("stopping ..."):
                if watcher is not None:
                    _stop_tree(watcher, signal.SIGINT, STOP_GRACE_SECONDS)
                if view is not None:
                    _stop_tree(view, signal.SIGINT, STOP_GRACE_SECONDS)
                if server is not None:
                    _stop_tree(server.process, signal.SIGTERM, STOP_GRACE_SECONDS)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if watcher is not None and watcher.returncode not in STOPPED:
        # Bad input (2) or a missing environment (3) seen by the watcher is the same for `up`; else it failed.
        same = watcher.returncode in (ExitCode.BAD_INPUT, ExitCode.ENVIRONMENT_MISSING)
        raise SlotrelayError(f"the watcher ended with exit code {watcher.returncode}", code="WATCHER_FAILED",
                             exit_code=ExitCode(watcher.returncode) if same else ExitCode.FAILED)
    console.print("slotrelay up: stopped" + (f" (the server `slotrelay run` started, pid {holder.pid}, is "
                                             "still running)" if holder else ""))


def _panel(api_url: str, home: Path, *, reused: int | None, database: str | None, psmr: Path | None,
           psmr_port: int, chain_files: list[Path]) -> Panel:
    """What `up` prints once everything runs: where to look, and the line other shells need."""
    ui_url = api_url.removesuffix("/api")
    server = (f"reused: the one `slotrelay run` left running (pid {reused}); Ctrl-C leaves it running"
              if reused else "started here; Ctrl-C stops it")
    return Panel.fit(
        f"Prefect UI  [bold]{ui_url}[/bold]\nAPI         {api_url}\n"
        f"server      {server}\nhome        {home}\n"
        + (f"database    {_shown(database)}\n" if database else "")
        + (f"PSMR view   [bold]http://127.0.0.1:{psmr_port}/[/bold] ({psmr})\n" if psmr else "")
        + f"watching    {', '.join(map(str, chain_files)) or f'(no chain: no {CHAIN_FILE} here)'}\n"
        "Other shells (slotrelay run, slotrelay decide, prefect) reach this server with:\n"
        f"  [bold]export PREFECT_API_URL={api_url}[/bold]\n"
        "Ctrl-C stops the watcher and every run it started.",
        title="slotrelay up",
    )
