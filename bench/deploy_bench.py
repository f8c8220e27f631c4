"""Deploy time: 50 files to a remote target over SSH, next to `scp -r` of the same files to the same host.

A private sshd on 127.0.0.1 (tests/chain/deploy_sshd.py: Debian's openssh-server, a non-root user,
keys made for the run). Rows, each the median of ROUNDS runs into a fresh remote folder:

- `scp -r` of the folder holding the 50 files (the baseline: OpenSSH's own client, one connection);
- the deploy node to the remote only: SFTP to temporary names, one remote `sha256sum` over all of
  them, 50 renames into place;
- the same plus a local B mirror, the sitemap and the URL check of every file (the seed's whole
  step 4.4 except the feature points, which cost one parse per page on top of the fetch).

The ratio is each row's median over the baseline's. Run: PYTHONPATH=$PWD .venv/bin/python
bench/deploy_bench.py
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slotrelay.chain.deploy import run_deploy
from slotrelay.chain.models import DeployExecutor
from tests.chain.deploy_sshd import running_sshd

FILES = 50
FILE_BYTES = 16 * 1024
ROUNDS = 7
console = Console()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return


def make_site(base: Path) -> list[str]:
    """50 pages of FILE_BYTES each under base/site/, returned as paths relative to base."""
    listed = []
    for number in range(FILES):
        relative = f"site/page-{number:02d}.html"
        body = f"<!doctype html><title>Page {number}</title><h1>Page {number}</h1>".encode()
        (base / relative).parent.mkdir(parents=True, exist_ok=True)
        (base / relative).write_bytes(
            body + os.urandom(FILE_BYTES - len(body)).hex().encode()[: FILE_BYTES - len(body)])
        listed.append(relative)
    return listed


def timed(call: Callable[[int], object]) -> list[float]:
    samples = []
    for round_number in range(ROUNDS):
        started = time.perf_counter()
        call(round_number)
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    with running_sshd() as sshd, tempfile.TemporaryDirectory() as work:
        base = Path(work)
        listed = make_site(base)
        remote_root = sshd.folder("bench")
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(remote_root)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        served = f"http://127.0.0.1:{server.server_address[1]}/"
        context = SimpleNamespace(chain=SimpleNamespace(base_dir=base))

        def fresh(name: str) -> Path:
            folder = remote_root / name
            shutil.rmtree(folder, ignore_errors=True)
            return sshd.folder(f"bench/{name}")

        def scp(round_number: int) -> None:
            target = fresh(f"scp-{round_number}")
            subprocess.run(
                ["scp", "-r", "-q", "-i", str(sshd.key), "-P", str(sshd.port), "-o", "BatchMode=yes",
                 "-o", f"UserKnownHostsFile={sshd.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                 str(base / "site"), f"{sshd.user}@127.0.0.1:{target}/"],
                check=True,
            )

        def deploy(round_number: int, *, whole: bool) -> None:
            target = fresh(f"deploy-{whole}-{round_number}")
            os.environ.pop("BENCH_C_URL", None)
            os.environ.update(sshd.env("BENCH_C", target, url=served + target.name + "/" if whole else None))
            spec = {"kind": "deploy", "files": listed, "targets": [{"name": "C", "ssh": "BENCH_C"}]}
            if whole:
                spec["targets"].append({"name": "B", "folder": f"mirror-{round_number}"})
                spec["sitemap"] = {"path": "site/sitemap.xml", "site_url": "https://example.org/"}
                spec["feature_points"] = None
            run_deploy(DeployExecutor(**spec), {}, context)

        rows = [
            ("scp -r (baseline)", timed(scp)),
            ("deploy node, remote C only", timed(functools.partial(deploy, whole=False))),
            ("deploy node, C + B + sitemap + URL check", timed(functools.partial(deploy, whole=True))),
        ]
        server.shutdown()
        server.server_close()

    baseline = statistics.median(rows[0][1])
    table = Table(
        title=f"deploy of {FILES} files x {FILE_BYTES // 1024} KiB to sshd on 127.0.0.1, {ROUNDS} runs (ms)")
    for column in ("way", "median", "min", "max", "ratio to scp -r"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for name, samples in rows:
        median = statistics.median(samples)
        table.add_row(name, f"{median * 1000:.0f}", f"{min(samples) * 1000:.0f}",
                      f"{max(samples) * 1000:.0f}",
                      f"{median / baseline:.2f}x")
    console.print(table)


if __name__ == "__main__":
    main()
