"""`slotrelay sandbox build | run | doctor`: the sandbox's images, one-off runs, and a health check.

Exit codes (`slotrelay.errors.ExitCode`, printed and mapped in slotrelay.cli): 0 ok; 1 the program ran and
failed or timed out, or an image build failed; 2 bad input (file, limits, inputs, language, backend); 3 the
environment is missing something (no usable backend, no Docker daemon or no debootstrap for `build`).
"""

from __future__ import annotations

import json
import sys
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from slotrelay.commands.output import AsJson, print_json
from slotrelay.errors import AlreadyReported, BadInput, ExitCode

app = typer.Typer(no_args_is_help=True, help="Run untrusted code under limits (docker or bwrap).")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)



@app.command()
def build(
    lang: Annotated[list[str] | None, typer.Option("--lang", help="only these languages")] = None,
    force: Annotated[bool, typer.Option("--force", help="rebuild even when the images are current")] = False,
) -> None:
    """Build the base image (debootstrap, no registry needed) and one image per language."""
    from slotrelay.sandbox import images
    from slotrelay.sandbox.daemon import docker_client
    from slotrelay.sandbox.errors import SandboxUnavailable
    from slotrelay.sandbox.limits import LANGUAGES

    langs = tuple(lang or LANGUAGES)
    unknown = [name for name in langs if name not in LANGUAGES]
    if unknown:
        raise BadInput(f"--lang: {', '.join(unknown)} is not one of {', '.join(LANGUAGES)}")
    try:
        client = docker_client()
    except SandboxUnavailable as error:
        # `build` needs Docker itself (bwrap will not do): say how to get one.
        raise SandboxUnavailable(f"{error.message} (start one with scripts/start-dockerd.sh)") from error
    with closing(client), err.status("checking sandbox images") as status:
        steps = images.build_images(
            client, langs=langs, force=force, say=lambda line: status.update(line, spinner="dots")
        )
    table = Table("image", "action", title="sandbox images")
    for step in steps:
        table.add_row(step.image, step.action)
    out.print(table)


def _limits(
    timeout_ms: int, memory_mb: int, network: str, fs: str, allow_path: list[str] | None
) -> dict[str, Any]:
    limits: dict[str, Any] = {"timeout_ms": timeout_ms, "memory_mb": memory_mb}
    limits["network"] = (
        "none" if network == "none" else {"allow": [h.strip() for h in network.split(",") if h.strip()]}
    )
    if allow_path:
        limits["fs"] = {"allow_paths": allow_path}
    else:
        limits["fs"] = fs
    return limits


@app.command()
def run(
    file: Annotated[str, typer.Argument(help="the program's source file, or - for stdin")],
    lang: Annotated[str, typer.Option(help="python, node or shell")] = "python",
    backend: Annotated[str | None, typer.Option(help="docker or bwrap (default: the first usable)")] = None,
    timeout_ms: Annotated[int, typer.Option("--timeout-ms", help="wall-clock limit")] = 30000,
    memory_mb: Annotated[int, typer.Option("--memory-mb", help="memory limit, swap included")] = 512,
    network: Annotated[
        str, typer.Option(help='"none", or allowed hosts: "api.example.org,localhost:8080"')
    ] = "none",
    fs: Annotated[
        str, typer.Option(help='"none" or "tmp" (a writable /tmp sized in the memory budget)')
    ] = "tmp",
    allow_path: Annotated[
        list[str] | None, typer.Option("--allow-path", help="a host path to mount read-only (repeatable)")
    ] = None,
    inputs: Annotated[str | None, typer.Option(help="the program's inputs, as JSON")] = None,
    as_json: AsJson = False,
) -> None:
    """Run one program in a sandbox and print what it did."""
    from slotrelay import sandbox
    from slotrelay.validation_text import first_problem

    if file == "-":
        code = sys.stdin.read()
    else:
        try:
            code = Path(file).read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise BadInput(f"FILE: cannot read {file}: {error}") from error
    try:
        parsed_inputs = None if inputs is None else json.loads(inputs)
    except ValueError as error:
        raise BadInput(f"--inputs: not JSON ({error})") from error
    try:
        limits = sandbox.SandboxLimits.model_validate(_limits(timeout_ms, memory_mb, network, fs, allow_path))
    except ValidationError as error:
        raise BadInput(first_problem(error)) from error
    # One run, then exit: containers created ahead would only be removed again. Asked of this run's backend,
    # not of the process's environment, which outlives the command when the app runs in-process.
    result = sandbox.run(code, lang=lang, limits=limits, inputs=parsed_inputs, backend=backend,
                         settings=sandbox.SandboxSettings(pool_size=0))
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        colour = "green" if result.status == "success" else "red"
        err.print(
            f"[{colour}]{result.status}[/] exit {result.exit_code} in {result.duration_ms} ms on "
            f"{result.backend}",
            highlight=False,
        )
        if result.result is not None:
            err.print(f"result: {json.dumps(result.result)}", markup=False)
        for violation in result.violations:
            err.print(f"[yellow]{violation.kind}[/]: {violation.detail}", highlight=False)
    if result.status != "success":
        # The lines above say how the program ended: exit without a second report.
        raise AlreadyReported(ExitCode.FAILED)


@app.command()
def doctor(as_json: AsJson = False) -> None:
    """Say which backend can run code here, and why the others cannot."""
    from dataclasses import asdict

    from slotrelay import sandbox

    reports = sandbox.doctor()
    if as_json:
        print_json([asdict(report) for report in reports])
    else:
        for report in reports:
            verdict = "[green]usable[/]" if report.usable else "[red]not usable[/]"
            languages = ", ".join(report.languages) or "no language"
            out.print(f"[bold]{report.name}[/]: {verdict} ({languages})", highlight=False)
            for problem in report.problems:
                out.print(f"  [red]problem[/]: {problem}", highlight=False)
            for note in report.notes:
                out.print(f"  note: {note}", highlight=False)
    if not any(report.usable for report in reports):
        # Each backend's problems are listed above.
        raise AlreadyReported(ExitCode.ENVIRONMENT_MISSING)
