"""A private PostgreSQL cluster on 127.0.0.1 for the tests of the Prefect server on PostgreSQL.

Debian's `postgresql` binaries (`initdb`, `pg_ctl`; no service is enabled) make a cluster in a
temporary folder on a free port, with a generated password (scram-sha-256 on TCP) and a unix socket
in the same folder. PostgreSQL refuses to run as root, so as root (CI) the cluster belongs to the
`postgres` user the Debian package creates; otherwise to the current user. Stopped with
`pg_ctl stop -m fast` and removed at the end.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.ports import free_port

DATABASE = "prefect"
ROLE = "slotrelay"
START_SECONDS = 120


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (the one holding initdb), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def cluster_user() -> str | None:
    """Who owns the cluster: `postgres` when we are root, else ourselves; None when root has no `postgres`."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid()).pw_name
    try:
        return pwd.getpwnam("postgres").pw_name
    except KeyError:
        return None


@dataclass(frozen=True)
class PostgresCluster:
    """A running cluster: where it listens and how to log in."""

    port: int
    password: str
    folder: Path
    bin: Path
    user: str

    @property
    def url(self) -> str:
        """The database URL for Prefect (asyncpg)."""
        return f"postgresql+asyncpg://{ROLE}:{self.password}@127.0.0.1:{self.port}/{DATABASE}"

    def query(self, sql: str, *, database: str = DATABASE) -> list[list[str]]:
        """Rows of `sql` run by psql over TCP with the password, each a list of column texts."""
        done = subprocess.run(
            [str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", ROLE, "-d", database,
             "-At", "-F", "\t", "-c", sql],
            env={**os.environ, "PGPASSWORD": self.password}, capture_output=True, text=True, check=True,
            timeout=60,
        )  # fmt: skip
        return [line.split("\t") for line in done.stdout.splitlines()]


def _as(user: str, command: list[str], **kwargs) -> subprocess.CompletedProcess:
    entry = pwd.getpwnam(user)
    as_other = entry.pw_uid != os.geteuid()
    return subprocess.run(
        command, user=entry.pw_uid if as_other else None, group=entry.pw_gid if as_other else None,
        extra_groups=[] if as_other else None, capture_output=True, text=True, check=False,
        timeout=START_SECONDS,
        env={"PATH": "/usr/bin:/bin", "HOME": entry.pw_dir, "LANG": "C.UTF-8"}, **kwargs,
    )  # fmt: skip


@contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    """initdb, start on a free port, create the role and database; stop and remove afterwards.

    Raises:
        RuntimeError: a step failed (its output is in the message).
    """
    bin_dir = postgres_bin()
    user = cluster_user()
    if bin_dir is None or user is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="slotrelay-pg-"))
    entry = pwd.getpwnam(user)
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    password = secrets.token_urlsafe(16)
    (folder / "pwfile").write_text(password + "\n")
    os.chown(folder / "pwfile", entry.pw_uid, entry.pw_gid)
    cluster = PostgresCluster(free_port(), password, folder, bin_dir, user)
    data = folder / "data"
    started = False

    def step(command: list[str]) -> None:
        done = _as(user, command)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")

    try:
        step([str(bin_dir / "initdb"), "-D", str(data), "-U", ROLE, "--pwfile", str(folder / "pwfile"),
              "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions"])
        options = f"-p {cluster.port} -k {folder} -c listen_addresses=127.0.0.1"
        started = True
        step([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "postgres.log"),
              "-w", "-t", str(START_SECONDS), "start"])
        cluster.query("select 1", database="postgres")  # the role logs in over TCP with its password
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(cluster.port), "-U", ROLE, DATABASE],
            env={**os.environ, "PGPASSWORD": password}, check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        yield cluster
    finally:
        if started:
            _as(user, [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
        shutil.rmtree(folder, ignore_errors=True)
