"""Executors: how a node's work is done, chosen by `executor.kind`.

Every executor is a function `fn(spec, data, context) -> dict | NodeOutput`: `spec` is the node's
executor model, `data` the input slot's data (`{}` for a start node), `context` an
`ExecutionContext`. A plain dict return is the output data; a `NodeOutput` also carries the checks
it attests and the capabilities it used. Failures are raised as `NodeError(error_type, message)`;
`run_executor` is the boundary where any other failure that is the network's becomes
`external_unreachable` (slotrelay.chain.network).

Kinds are looked up by import string in `EXECUTORS`, so a kind whose implementation lives in
another part (deploy, pen) costs nothing until a chain uses it, and a missing module is a named
error (`executor_missing`), not an ImportError.
"""

from __future__ import annotations

import contextvars
import ctypes
import hashlib
import importlib
import importlib.util
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from slotrelay.chain.checks import identity_problems
from slotrelay.chain.errors import (
    EXECUTOR_MISSING,
    EXTERNAL_UNREACHABLE,
    IDENTITY_MISMATCH,
    OUTPUT_INVALID,
    SLOT_INVALID,
    TIMEOUT,
    UNKNOWN,
    ExecutorUnavailable,
    NodeError,
)
from slotrelay.chain.models import Chain, CommandExecutor, ExternalExecutor, Node, PythonExecutor
from slotrelay.chain.network import unreachable_reason
from slotrelay.chain.outcomes import OUTPUT_STATUSES
from slotrelay.chain.slots import (
    OutputSlotRead,
    SlotInvalid,
    ask_again,
    content_hash,
    half_written_until,
    make_folder,
    output_slot_from_bytes,
    read_slot_bytes,
)

_IMPORT_LOCK = threading.Lock()

EXECUTORS: dict[str, str] = {
    "python": "slotrelay.chain.executors:run_python",
    "command": "slotrelay.chain.executors:run_command",
    "external": "slotrelay.chain.executors:run_external",
    "deploy": "slotrelay.chain.executors.deploy.node:run_deploy",
    "pen": "slotrelay.pen.node:run_pen_node",
}


@dataclass
class ExecutionContext:
    """What an executor knows about the run it is part of.

    Attributes:
        chain: the chain (bound to its file; `chain.resolve()` turns slot paths into absolute paths).
        node: the node being run.
        attempt: 1 for the first try, 2 for the first retry, ...
        input_slot: the resolved input slot path (None for a start node).
        output_slot: the resolved output slot path.
        since: epoch seconds; an external node only accepts an output slot written after this.
        flow_run_id: the Prefect flow run, when run by a flow (None in plain Python).
        logger: where to log (the engine log, and the run's log under Prefect).
        executor_settings: what the run's caller configured for an executor kind, by kind (the chain
            flow's `pen` settings from its Blocks); a kind without an entry uses its own defaults.
    """

    chain: Chain
    node: Node
    attempt: int
    input_slot: Path | None
    output_slot: Path
    since: float = 0.0
    flow_run_id: str | None = None
    # The parent of every chain's engine log (`slotrelay.chain.enginelog.engine_logger`), not this module's
    # name.
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("slotrelay.engine"))
    executor_settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class NodeOutput:
    """What an executor hands back when it has more to say than the output data.

    Attributes:
        data: the output slot's `data`.
        checks: free-text checks this run attests (`{"<check text>": true}`).
        capabilities_used: capabilities the work used (checked against the node's declared ones).
        document: the whole slot document when it was written outside the engine (external nodes).
        digest: the hash of that slot's bytes (`slots.content_hash`), what its routes record.
    """

    data: dict[str, Any]
    checks: dict[str, bool] = field(default_factory=dict)
    capabilities_used: list[str] = field(default_factory=list)
    document: dict[str, Any] | None = None
    digest: str | None = None


def _import_target(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def _import_callable(target: str, chain_dir: Path) -> Any:
    """`module:function`, preferring `<chain_dir>/<module>.py`, loaded under a name unique to that folder.

    Two chains may both have a `pipeline.py`; keying the module by its folder keeps them apart.
    """
    module_name, _, attribute = target.partition(":")
    beside = chain_dir / (module_name.replace(".", "/") + ".py")
    if not beside.is_file():
        return _import_target(target)
    folder_hash = hashlib.sha1(str(beside).encode()).hexdigest()[:12]
    unique = f"_slotrelay_chain_{folder_hash}_{module_name.replace('.', '_')}"
    # Nodes start in parallel threads: without the lock a second thread could find the module in
    # sys.modules while the first is still executing it, and miss its functions.
    with _IMPORT_LOCK:
        module = sys.modules.get(unique)
        if module is None:
            spec = importlib.util.spec_from_file_location(unique, beside)
            assert spec is not None and spec.loader is not None  # a .py file always has a loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[unique] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[unique]
                raise
    value: Any = module
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def load_executor(kind: str) -> Callable[..., Any]:
    """The executor function for a kind.

    Raises:
        ExecutorUnavailable: the kind is unknown or its module cannot be imported.
    """
    target = EXECUTORS.get(kind)
    if target is None:
        raise ExecutorUnavailable(kind, "<none>", "no executor of this kind")
    try:
        executor: Callable[..., Any] = _import_target(target)
    except (ImportError, AttributeError) as missing:
        raise ExecutorUnavailable(kind, target, str(missing)) from None
    return executor


def run_executor(node: Node, data: dict[str, Any], context: ExecutionContext) -> NodeOutput:
    """Run a node's executor and normalise what it returns to a `NodeOutput`.

    Raises:
        NodeError: the executor failed, or returned something that is not a JSON object; a network
            failure it did not classify itself is `external_unreachable` (slotrelay.chain.network).
    """
    executor = load_executor(node.executor.kind)
    try:
        result = executor(node.executor, data, context)
    except NodeError:
        raise
    except Exception as failure:
        # The one place a node's own failure is translated: the network's is the seed's external_unreachable;
        # anything else goes on as it is (execute_node makes it `unknown`).
        reason = unreachable_reason(failure)
        if reason is None:
            raise
        raise NodeError(EXTERNAL_UNREACHABLE, f"{reason}: {type(failure).__name__}: {failure}") from failure
    if isinstance(result, NodeOutput):
        return result
    if isinstance(result, dict):
        return NodeOutput(data=result)
    raise NodeError(OUTPUT_INVALID,
                    f"executor {node.executor.kind!r} returned {type(result).__name__}, not a dict")


class _CallableTimedOut(BaseException):
    """Raised inside a python callable's thread when its node's timeout_seconds ran out.

    A BaseException so that a callable's own `except Exception` does not swallow it.
    """


def _call_with_timeout(function: Callable[..., Any], data: dict[str, Any], timeout: float, name: str) -> Any:
    """Call `function(data)` in its own thread; give up on it after `timeout` seconds.

    Python cannot kill a thread. On timeout `_CallableTimedOut` is set as the thread's asynchronous
    exception (what Prefect's own sync-task timeout does, but aimed at the callable's thread only,
    so the engine's slot writes are never interrupted): a callable running Python code stops at its
    next bytecode; one blocked in a C call (`time.sleep`, a socket read, file I/O) stops when that
    call returns, having done no more Python work. Either way the node fails with `timeout` at the
    deadline. Context variables (Prefect's run context, loggers) are carried into the thread.

    Raises:
        NodeError: `timeout` when the callable has not returned after `timeout` seconds.
    """
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()
    # Held while deciding to interrupt, and while the thread marks itself done: the exception is
    # never set on a thread that has already left the guarded part.
    finishing = threading.Lock()

    def call() -> None:
        try:
            try:
                outcome["result"] = context.run(function, data)
            except BaseException as failure:  # noqa: BLE001 - re-raised in the caller's thread
                outcome["error"] = failure
            finally:
                with finishing:
                    outcome["done"] = True
        except _CallableTimedOut:
            pass

    worker = threading.Thread(target=call, name=f"slotrelay-callable {name}", daemon=True)
    worker.start()
    worker.join(timeout)
    with finishing:
        timed_out = not outcome.get("done")
        if timed_out:
            assert worker.ident is not None  # started above
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                                       ctypes.py_object(_CallableTimedOut))
    if timed_out:
        raise NodeError(TIMEOUT, f"{name} ran longer than timeout_seconds ({timeout} s)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def run_python(spec: PythonExecutor, data: dict[str, Any],
               context: ExecutionContext) -> dict[str, Any] | NodeOutput:
    """Call `module:function(data)`; modules beside the chain file are importable.

    With the node's `timeout_seconds` set, the callable runs in its own thread and the node fails
    with `timeout` when it runs longer (see `_call_with_timeout` for how the callable is stopped).

    Raises:
        NodeError: `executor_missing` when the callable cannot be imported; `timeout`; whatever the
            callable raises.
    """
    try:
        function = _import_callable(spec.callable, context.chain.base_dir)
    except (ImportError, AttributeError, SyntaxError) as missing:
        raise NodeError(EXECUTOR_MISSING, f"cannot import {spec.callable}: {missing}") from None
    if context.node.timeout_seconds is None:
        result = function(dict(data))
    else:
        result = _call_with_timeout(function, dict(data), context.node.timeout_seconds, spec.callable)
    if not isinstance(result, dict | NodeOutput):
        raise NodeError(OUTPUT_INVALID, f"{spec.callable} returned {type(result).__name__}, not a dict")
    return result


def run_command(spec: CommandExecutor, data: dict[str, Any], context: ExecutionContext) -> dict[str, Any]:
    """Run a program with the input data as JSON on stdin; its stdout must be one JSON object.

    `{python}` in argv is this interpreter, `{chain_dir}` the chain file's folder; the program runs in
    the chain's folder. A non-zero exit maps through `error_map` (exit code -> error type), else `unknown`.

    Raises:
        NodeError: executor_missing, timeout, output_invalid, or the mapped error type.
    """
    chain_dir = str(context.chain.base_dir)
    argv = [a.replace("{python}", sys.executable).replace("{chain_dir}", chain_dir) for a in spec.argv]
    try:
        done = subprocess.run(
            argv,
            check=False,
            input=json.dumps(data),
            capture_output=True,
            text=True,
            cwd=context.chain.base_dir,
            timeout=context.node.timeout_seconds,
        )
    except FileNotFoundError:
        raise NodeError(EXECUTOR_MISSING, f"program not found: {argv[0]}") from None
    except subprocess.TimeoutExpired:
        raise NodeError(TIMEOUT, f"{argv[0]} ran longer than {context.node.timeout_seconds} s") from None
    if done.returncode != 0:
        error_type = spec.error_map.get(str(done.returncode), UNKNOWN)
        raise NodeError(error_type, f"{argv[0]} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    try:
        output = json.loads(done.stdout)
    except json.JSONDecodeError as bad:
        raise NodeError(OUTPUT_INVALID,
                        f"{argv[0]} printed non-JSON ({bad.msg}): {done.stdout[:200]!r}") from None
    if not isinstance(output, dict):
        raise NodeError(OUTPUT_INVALID, f"{argv[0]} printed JSON {type(output).__name__}, not an object")
    return output


class _SlotChanged(FileSystemEventHandler):
    WRITES = frozenset({"created", "modified", "moved", "closed"})

    def __init__(self, target: Path, changed: threading.Event) -> None:
        self.target = str(target)
        self.changed = changed

    def on_any_event(self, event: FileSystemEvent) -> None:
        # Only writes count: our own reads raise "opened" / "closed_no_write" events, which must
        # not wake the waiter (it would spin on them).
        if event.event_type not in self.WRITES:
            return
        if self.target in (event.src_path, getattr(event, "dest_path", "")):
            self.changed.set()


def fresh_output(path: Path, *, since: float) -> OutputSlotRead | None:
    """An external node's output slot when it is finished and written after `since`, else None.

    The time and the content come from one open file: a writer replacing the slot between a
    read and a stat must not make stale content look fresh. A slot naming another node is taken
    too: the identity check refuses it, as it would any node's (`identity_mismatch`).

    Raises:
        SlotInvalid: what is at the path can never be a slot, or a fresh slot has fields of the
            wrong type (`slots.read_output_slot`).
    """
    found = read_slot_bytes(path)
    if found is None or found[1] < since:
        return None
    document = output_slot_from_bytes(path, found[0], written_at=found[1])
    if document is None or document.get("status") not in OUTPUT_STATUSES:
        return None
    return OutputSlotRead(document, found[0], found[1])


def wait_for_output(path: Path, *, since: float, timeout: float | None) -> OutputSlotRead:
    """Wait, on file events (watchdog, no polling), for an external node's finished output slot.

    Raises:
        NodeError: `timeout` when nothing acceptable arrives in `timeout` seconds; `slot_invalid` when
            the slot's folder is a link or not a folder (it is not watched through it).
    """
    try:
        make_folder(path.parent)
    except OSError as refused:
        raise NodeError(SLOT_INVALID, f"output slot {path} cannot be watched: {refused}") from None
    changed = threading.Event()
    observer = Observer()
    observer.schedule(_SlotChanged(path.resolve(), changed), str(path.parent.resolve()), recursive=False)
    observer.start()
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # Clear before reading: an event between the read and the wait is not lost.
            changed.clear()
            try:
                found = fresh_output(path, since=since)
            except SlotInvalid as bad:
                raise NodeError(SLOT_INVALID, bad.message) from None
            if found is not None:
                return found
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise NodeError(TIMEOUT, f"no output slot from the external agent at {path} in {timeout} s")
            # A writer that stops half way sends no more events: wake when its slot is to be refused.
            refused_at = half_written_until(path, since=since)
            if refused_at is not None:
                until_refused = max(0.0, refused_at - time.time()) + 0.05
                remaining = until_refused if remaining is None else min(remaining, until_refused)
            changed.wait(remaining)
    finally:
        observer.stop()
        observer.join()


def reported_failure(document: dict[str, Any]) -> NodeError:
    """The error an agent wrote in its `failed` output slot: its `error_type` (`unknown` if none) and
    `message`, as the engine and the sensor both name it."""
    error = document.get("error")
    if not isinstance(error, dict):
        error = {}
    return NodeError(str(error.get("error_type") or UNKNOWN),
                     str(error.get("message") or "the agent reported failure"))


def run_external(spec: ExternalExecutor, data: dict[str, Any], context: ExecutionContext) -> NodeOutput:
    """Wait for the agent outside the engine to write the output slot (up to the node's timeout).

    The clock is the input slot's own timestamp (`context.since`), so a wait that began before a
    restart of the engine times out when it would have. A retry asks the agent again
    (CONTRACTS.md#error-types): the input slot is written again, `pending` with `attempt` n+1, and only
    an output newer than it counts.

    Raises:
        NodeError: `timeout`; `identity_mismatch` for a slot of another node (or with forbidden or
            undeclared capabilities); or the error type the agent wrote in a `failed` slot (`unknown`
            if none).
    """
    since = context.since
    if context.attempt > 1 and context.input_slot is not None:
        since = ask_again(context.input_slot, attempt=context.attempt)
    timeout = context.node.timeout_seconds
    found = wait_for_output(context.output_slot, since=since,
                            timeout=None if timeout is None else max(0.0, since + timeout - time.time()))
    document = found.document
    problems = identity_problems(context.node, document)
    if problems:
        raise NodeError(IDENTITY_MISMATCH, "; ".join(problems))
    if document.get("status") == "failed":
        raise reported_failure(document)
    raw_data, checks, used = document.get("data"), document.get("checks"), document.get("capabilities_used")
    return NodeOutput(
        data=raw_data if isinstance(raw_data, dict) else {},
        checks=checks if isinstance(checks, dict) else {},
        capabilities_used=used if isinstance(used, list) else [],
        document=document,
        digest=content_hash(found.raw),
    )
