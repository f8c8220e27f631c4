"""A guard on what a PSMR build costs across popular packages: CPU seconds and peak memory per line.

    .venv/bin/python bench/psmr_build_cost.py [PACKAGE ...] [--json FILE]

Each package of PACKAGES (pure Python, or the pure-Python part named by its folder: sqlalchemy's ORM)
is installed as a wheel, pinned, without dependencies, into a bench venv kept in
~/.cache/slotrelay/bench/cost-venv (nothing of it is imported: only its files are read). Its folder is
copied to a temporary folder and built cold into a fresh store by `slotrelay psmr build` in a child
process of its own, so the child's CPU time (user + system) and peak resident memory, read with
`os.wait4`, are that build's alone. The budget is BUDGET_CPU_S_PER_10K_LINES CPU seconds per 10,000
lines of Python (every line of every `.py` file) and BUDGET_PEAK_MB of peak memory; a package over
either is marked, and the bench exits 1. A build that met its own default budget (`budget_exceeded`,
see slotrelay.psmr.analysis.buildbudget) is marked too: the build budget must never be the normal path. The
baseline of each figure is the package's own size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

CACHE = Path.home() / ".cache" / "slotrelay" / "bench"
BUDGET_CPU_S_PER_10K_LINES = 5.0
BUDGET_PEAK_MB = 1024
CHILD_TIMEOUT_S = 1800
CHILD_ADDRESS_SPACE = 8 * 1024**3
# (distribution, version, the folder built, relative to site-packages)
PACKAGES = [
    ("attrs", "26.1.0", "attr"),
    ("marshmallow", "4.4.0", "marshmallow"),
    ("pydantic", "2.14.3", "pydantic"),
    ("click", "8.5.1", "click"),
    ("rich", "15.0.0", "rich"),
    ("requests", "2.34.2", "requests"),
    ("jinja2", "3.1.6", "jinja2"),
    ("sqlalchemy", "2.1.9", "sqlalchemy/orm"),
    ("httpx", "0.28.1", "httpx"),
    ("python-dateutil", "4.0.0", "dateutil"),
    ("tomlkit", "0.15.2", "tomlkit"),
    ("packaging", "26.3", "packaging"),
    ("idna", "3.20", "idna"),
    ("urllib3", "2.8.0", "urllib3"),
    ("cattrs", "26.2.1", "cattrs"),
    ("jsonschema", "4.26.0", "jsonschema"),
    ("pygments", "2.21.0", "pygments"),
    ("docutils", "0.23", "docutils"),
    ("networkx", "3.6.1", "networkx"),
    ("werkzeug", "3.1.9", "werkzeug"),
    ("flask", "3.1.3", "flask"),
    ("typer", "0.29.1", "typer"),
    ("pyparsing", "3.3.3", "pyparsing"),
    ("anyio", "4.16.0", "anyio"),
    ("starlette", "1.10.0", "starlette"),
    ("prompt-toolkit", "3.0.53", "prompt_toolkit"),
]
ONE = """
import json, sys
from slotrelay.psmr.api import build_workspace
summary = build_workspace(sys.argv[1], store=sys.argv[2])
print(json.dumps({k: summary[k] for k in ("files", "nodes", "edges", "unknowns", "budget_exceeded")}))
"""


def bench_venv() -> Path:
    """site-packages of the venv holding the pinned wheels (installed into when a pin is missing)."""
    venv = CACHE / "cost-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    marker = venv / "pins.txt"
    wanted = "\n".join(f"{name}=={version}" for name, version, _ in PACKAGES)
    if not marker.exists() or marker.read_text() != wanted:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--target",
                str(site),
                "--upgrade",
                *wanted.split("\n"),
            ],
            check=True,
        )
        marker.write_text(wanted)
    return site


def lines_of(root: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in root.rglob("*.py"))


def measure(name: str, version: str, folder: Path) -> dict[str, Any]:
    """Build a copy of the folder in a child process; its CPU seconds and peak memory."""
    work = Path(tempfile.mkdtemp(prefix="psmr-cost-"))
    try:
        root = work / folder.name
        shutil.copytree(folder, root, ignore=shutil.ignore_patterns("__pycache__"))
        lines = lines_of(root)
        out, err = work / "out", work / "err"
        with out.open("w") as stdout, err.open("w") as stderr:
            child = subprocess.Popen(
                # prlimit execs the build in its own process: the pid waited for is the build's.
                [
                    "prlimit",
                    f"--as={CHILD_ADDRESS_SPACE}",
                    sys.executable,
                    "-c",
                    ONE,
                    str(root),
                    str(work / "store"),
                ],
                stdout=stdout,
                stderr=stderr,
            )
        timer = threading.Timer(CHILD_TIMEOUT_S, child.kill)
        timer.start()
        # wait4, not Popen.wait: the child's own rusage (RUSAGE_CHILDREN would mix the children's).
        _, status, usage = os.wait4(child.pid, 0)
        timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        row: dict[str, Any] = {"package": name, "version": version, "folder": folder.name, "lines": lines}
        if child.returncode != 0:
            row["error"] = err.read_text().strip().splitlines()[-1:] or [f"exit {child.returncode}"]
            return row
        row |= json.loads(out.read_text().strip().splitlines()[-1])
        row["cpu_s"] = usage.ru_utime + usage.ru_stime
        row["peak_mb"] = usage.ru_maxrss / 1024
        row["cpu_s_per_10k"] = row["cpu_s"] / max(lines, 1) * 10_000
        row["within"] = (
            row["cpu_s_per_10k"] <= BUDGET_CPU_S_PER_10K_LINES
            and row["peak_mb"] <= BUDGET_PEAK_MB
            and not row["budget_exceeded"]
        )
        return row
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("packages", nargs="*", help="names from PACKAGES (default: all)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    chosen = [p for p in PACKAGES if not args.packages or p[0] in args.packages]
    console = Console(width=max(Console().width, 120))
    site = bench_venv()
    rows = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("building", total=len(chosen))
        for name, version, folder in chosen:
            progress.update(task, description=f"{name} {version}")
            rows.append(measure(name, version, site / folder))
            progress.advance(task)
    table = Table(
        title=f"PSMR build cost (budget: {BUDGET_CPU_S_PER_10K_LINES:g} CPU-s per 10k lines, "
        f"{BUDGET_PEAK_MB} MB)"
    )
    for column in (
        "package",
        "folder",
        "files",
        "lines",
        "CPU s",
        "CPU s / 10k lines",
        "peak MB",
        "call edges",
        "within",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        if "error" in r:
            table.add_row(
                f"{r['package']} {r['version']}",
                r["folder"],
                "",
                str(r["lines"]),
                "",
                "",
                "",
                "",
                f"[red]failed: {r['error'][0]}[/]",
            )
            continue
        table.add_row(
            f"{r['package']} {r['version']}",
            r["folder"],
            str(r["files"]),
            f"{r['lines']:,}",
            f"{r['cpu_s']:.1f}",
            f"{r['cpu_s_per_10k']:.2f}",
            f"{r['peak_mb']:.0f}",
            f"{r['edges']:,}",
            "yes" if r["within"] else "[red]NO[/]",
        )
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if not all(r.get("within") for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
