"""`slotrelay up --database postgresql+asyncpg://...`: the Prefect server on a real PostgreSQL cluster
(started by the test), its API and UI on loopback, a chain run whose flow and task runs land in
PostgreSQL, and one SIGINT that stops everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.chains import small_chain
from harness.ports import free_port
from tests.support.beyond_page import README_RUN, README_UP
from tests.support.prefect_api import http_status
from tests.support.slotrelay_up import interrupt_up, wait_for_up

ROOT = Path(__file__).resolve().parents[2]
def command(template: str, chain: Path, **values: str) -> tuple[dict[str, str], list[str]]:
    """(environment variables, argv) of a documented command, `slotrelay` run as this Python's module."""
    words = template.format(**values).replace("CHAIN.json", str(chain)).split()
    env = dict(word.split("=", 1) for word in words if "=" in word and not word.startswith("-"))
    args = [word for word in words if word not in {f"{k}={v}" for k, v in env.items()}]
    assert args[0] == "slotrelay"
    return env, [sys.executable, "-m", "slotrelay.cli", *args[1:]]


@pytest.mark.postgres
def test_up_on_postgresql_runs_a_chain_into_the_database_and_stops_on_sigint(postgres,
                                                                             tmp_path: Path) -> None:
    chain = small_chain(tmp_path / "chain")
    home = tmp_path / "home"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "up.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    _, up_command = command(README_UP, chain, database=postgres.url)
    with log.open("w") as handle:
        up = subprocess.Popen(
            [*up_command, "--port", str(port), "--home", str(home)],
            cwd=ROOT, env={**env, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}, stdout=handle,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for_up(lambda: base in log.read_text(), 300, "the UI address to be printed", up, log)
        wait_for_up(lambda: http_status(f"{base}/") == 200, 60, "the UI to answer 200 on /", up, log)
        assert postgres.password not in log.read_text()  # the panel shows the database without it
        run_env, run_command = command(README_RUN, chain, api=f"{base}/api")
        done = subprocess.run(
            run_command, cwd=ROOT, env={**env, **run_env, "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["state"] == "COMPLETED"
        flow_run = postgres.query(f"select state_type from flow_run where id = '{summary['flow_run_id']}'")
        assert flow_run == [["COMPLETED"]]
        tasks = postgres.query(
            f"select name, state_type from task_run where flow_run_id = '{summary['flow_run_id']}' order by "
            "start_time"
        )
        names = [row[0] for row in tasks]
        assert len(tasks) == 2 and all(row[1] == "COMPLETED" for row in tasks), tasks
        assert names == ["count", "double"], names
        assert not (home / "prefect.db").exists()
    finally:
        code = interrupt_up(up)
    assert code == 0, log.read_text()
    assert http_status(f"{base}/") == 0
    # The server is gone, the database stays: the runs are still there.
    assert postgres.query(f"select count(*) from flow_run where id = '{summary['flow_run_id']}'") == [["1"]]


def test_up_names_a_database_it_cannot_use(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "slotrelay.cli", "up", "--home", str(tmp_path), "--database",
         "mysql://root:hunter2@127.0.0.1/prefect"],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--database" in done.stderr and "PostgreSQL" in done.stderr and "hunter2" not in done.stderr


def test_database_urls_name_their_driver_and_hide_the_password() -> None:
    from deployments.server import server_database

    assert server_database("postgresql://u:p@db.local:5433/prefect") == "postgresql+asyncpg://u:p@db.local:5433/prefect"
    assert server_database("postgresql+asyncpg://u:p@127.0.0.1/prefect") == "postgresql+asyncpg://u:p@127.0.0.1/prefect"
    assert server_database("sqlite:////srv/prefect.db") == "sqlite+aiosqlite:////srv/prefect.db"
    for bad, why in (("postgresql://u:secret@db.local", "needs a host and a database"),
                     ("mysql://u:secret@db.local/prefect",
                      r"PostgreSQL \(postgresql\+asyncpg://\) or SQLite"),
                     ("not a url", "is not a database URL")):
        with pytest.raises(ValueError, match=why) as refused:
            server_database(bad)
        assert "secret" not in str(refused.value)
